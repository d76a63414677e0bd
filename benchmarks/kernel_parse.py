"""Benchmark the kernel-code parsers: the parse cost per kernel over every recorded fixture.

Not a timed test (timings on a shared CI host are noise there); run it by hand after changing a parser::

    python benchmarks/kernel_parse.py                  # tests/data/kernels
    python benchmarks/kernel_parse.py DUMP_DIR ...     # any xla_dump_to folders (.ptx, .ll)

For each language it parses every file ``--repeat`` times, keeps the fastest run of each file, and prints the
cost per kernel (that run's time over the file's kernels): the mean, the worst file, and whether the worst
is within the budget (``--budget-ms``, 5 ms a kernel). Exits 1 when a file is over budget.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from invariants.kernels.llvm_ir import parse_llvm_ir  # noqa: E402
from invariants.kernels.ptx import parse_ptx  # noqa: E402

PARSERS = {".ptx": ("ptx", parse_ptx), ".ll": ("llvm", parse_llvm_ir)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "folders",
        nargs="*",
        type=Path,
        default=[ROOT / "tests" / "data" / "kernels"],
        help="folders of .ptx/.ll files (default: tests/data/kernels)",
    )
    ap.add_argument(
        "--repeat", type=int, default=20, help="parses of each file; the fastest counts (default 20)"
    )
    ap.add_argument("--budget-ms", type=float, default=5.0, help="cost allowed per kernel (default 5 ms)")
    ns = ap.parse_args()
    files = sorted(p for f in ns.folders for p in f.rglob("*") if p.is_file() and p.suffix in PARSERS)
    stats: dict[str, list[tuple[float, int, Path]]] = {"ptx": [], "llvm": []}
    for path in files:
        language, parse = PARSERS[path.suffix]
        text = path.read_text()
        best = float("inf")
        kernels = 0
        for _ in range(ns.repeat):
            start = time.perf_counter()
            kernels = len(parse(text, path.name))
            best = min(best, time.perf_counter() - start)
        if kernels:
            stats[language].append((best, kernels, path))
    over = False
    header = ("language", "files", "kernels", "mean ms/kernel", "worst ms/kernel")
    print("{:8} {:>5} {:>7} {:>14} {:>15}  worst file".format(*header))
    for language, rows in stats.items():
        if not rows:
            continue
        kernels = sum(k for _, k, _ in rows)
        mean = sum(t for t, _, _ in rows) / kernels * 1e3
        worst_t, worst_k, worst_path = max(rows, key=lambda r: r[0] / r[1])
        worst = worst_t / worst_k * 1e3
        over |= worst > ns.budget_ms
        print(f"{language:8} {len(rows):5} {kernels:7} {mean:14.3f} {worst:15.3f}  {worst_path.name}")
    print(f"budget {ns.budget_ms} ms a kernel: {'EXCEEDED' if over else 'met'}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
