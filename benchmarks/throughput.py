"""Run the throughput tier N times, optionally beside a CPU hog and with an injected slowdown.

Each run is a child ``pytest invariants/gate/test_throughput.py --targets cpu`` (ratios and efficiencies
against their baselines). The script then prints a markdown table with one row per ratio or efficiency:

- the median of its medians over the runs;
- the coefficient of variation (CV) of those medians across runs;
- the widest interval seen;
- its verdicts (pass / inconclusive / fail);
- false failures: a ``fail`` on a ratio that is not a ratchet and has no injection.

Ratchets are expected to fail. With ``--inject-slowdown`` the child loads
``invariants.selfcheck.inject`` and ``naive`` does its lookup twice (about 1.7x the work). Every run must
then fail ``naive_not_slower_than_take``, and the table counts those detections (that study runs the ratios
only; the plain one covers the efficiency items too).

``--hog`` starts one busy-looping process per core (``--hog-procs`` to change) for the whole study, so that
every timing competes for the cores, which is the worst case of a shared 2-core CI machine.

Usage::

    python benchmarks/throughput.py --runs 10 --hog
    python benchmarks/throughput.py --runs 10 --hog --inject-slowdown
    python benchmarks/throughput.py --runs 10 -k 'grad_equal or grad_zipf'   # the duplicate-heavy relations
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from invariants.records import results as _results  # noqa: E402

INJECTED = "naive_not_slower_than_take"


def _spin(stop: float) -> None:
    x = 0
    while time.time() < stop:
        x += 1


def run_once(out: Path, inject: bool, select: str | None = None) -> tuple[int, list[dict]]:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    args = [sys.executable, "-m", "pytest", "invariants/gate/test_throughput.py", "--targets",
            "cpu", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", f"--benchmark-json={out}",
            f"--results-json={out.with_suffix('.results.json')}"]  # fmt: skip
    if inject:
        # The injected slowdown is judged by the ratios; the plain study covers the efficiency items.
        args += ["-p", "invariants.selfcheck.inject", "-m", "ratio"]
        env["INVARIANTS_INJECT"] = "naive=invariants.selfcheck.inject:naive_twice"
    if select:
        args += ["-k", select]
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    path = out.with_suffix(".results.json")
    items = _results.read(path).items if path.exists() else []
    # The throughput tier's records (invariants/records/results.py): ratios and efficiencies, as the file
    # holds them.
    return proc.returncode, [_results.to_json(r) for r in items if r.kind in ("ratio", "efficiency")]


def _row_name(item: dict) -> str:
    if item["kind"] == "efficiency":
        return f"efficiency {item['program']}[{item['config']}]"
    # One invariant may hold ratios in several configurations: each is its own row.
    return f"{item['id']}[{item['config']}]"


def _value(item: dict) -> float:
    return float(item["median"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of the throughput tier (default 10)")
    parser.add_argument("--hog", action="store_true", help="busy-loop processes beside every run")
    parser.add_argument(
        "--hog-procs", type=int, default=os.cpu_count() or 1, help="busy loops (default: one per core)"
    )
    parser.add_argument("--inject-slowdown", action="store_true", help="naive does its work twice")
    parser.add_argument("-k", dest="select", help="only the items pytest -k selects, e.g. 'grad_equal'")
    args = parser.parse_args(argv)

    hogs: list[mp.Process] = []
    if args.hog:
        ctx = mp.get_context("spawn")
        hogs = [
            ctx.Process(target=_spin, args=(time.time() + 3600,), daemon=True) for _ in range(args.hog_procs)
        ]
        for h in hogs:
            h.start()
    rows: dict[str, list[dict]] = {}
    started = time.time()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.runs):
                rc, items = run_once(Path(tmp) / f"run{i}.json", args.inject_slowdown, args.select)
                for item in items:
                    rows.setdefault(_row_name(item), []).append(item)
                fails = [_row_name(it) for it in items if it["verdict"] == "fail"]
                failed = ", ".join(fails) or "none"
                line = f"run {i + 1}/{args.runs}: exit {rc}, {len(items)} items, fail: {failed}"
                print(line, file=sys.stderr)
                for it in items:
                    if it["verdict"] != "pass" or len(it.get("attempts", [])) > 1:
                        print(f"    {_row_name(it)}: {_value(it):.3f} [{it['low']:.3f}, {it['high']:.3f}] "
                              f"{it['verdict']} attempts={it.get('attempts')}", file=sys.stderr)  # fmt: skip
    finally:
        for h in hogs:
            h.terminate()

    title = (
        f"{args.runs} runs"
        + (", CPU hog" if args.hog else "")
        + (", naive x2 injected" if args.inject_slowdown else "")
    )
    print(f"\n### Throughput tier: {title} ({time.time() - started:.0f} s)\n")
    print("| ratio | bound | median of medians | CV across runs | widest interval | s/item | "
          "pass / inconcl. / fail | re-measured | false fails | detections |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for ratio_id, items in sorted(rows.items()):
        medians = [_value(it) for it in items]
        cv = statistics.pstdev(medians) / statistics.fmean(medians)
        widest = max(items, key=lambda it: it["high"] - it["low"])
        counts = [sum(it["verdict"] == v for it in items) for v in ("pass", "inconclusive", "fail")]
        ratchet = ratio_id.startswith("bf16_")
        injected = args.inject_slowdown and ratio_id.startswith(f"{INJECTED}[")
        false_fails = "-" if ratchet or injected else str(counts[2])
        detections = f"{counts[2]}/{len(items)}" if injected else "-"
        seconds = statistics.fmean(it["seconds"] for it in items)
        counts_text = "/".join(map(str, counts))
        confirmations = sum(len(it.get("attempts", [])) > 1 for it in items)
        bound = items[0].get("threshold")
        bound_text = f"{bound:.3g}" if bound else "-"
        print(f"| {ratio_id} | {bound_text} | {statistics.median(medians):.3f} | {cv:.1%} | "
              f"[{widest['low']:.3f}, {widest['high']:.3f}] | {seconds:.2f} | {counts_text} | "
              f"{confirmations} | {false_fails} | {detections} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
