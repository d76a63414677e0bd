"""Benchmark spec loading: one generated spec file of ``--invariants`` entries (20,000 by default, about
3.7 MB), loaded the way the gate loads a ``--spec-dir``.

Not a timed test (timings on a shared CI host are noise there); run it by hand after changing the loader::

    python benchmarks/spec_load.py                      # 20,000 invariants, budget 5 s
    python benchmarks/spec_load.py --invariants 2000    # a smaller file (e.g. against an old loader)

The file is written to a temporary folder, with the mix a large project writes: absolute invariants on
names, patterns and ``kind:`` selectors, relational ones, version scopes, ratchets, long ``why`` lines and
comments. It prints the file's size, the load time (``load_specs``: read, parse, validate) and the time to
check it against every target (``check_specs``, what collection does before any compile), and exits 1 when
the load is over ``--budget-s``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # as the gate does: the catalog's JAX starts on the CPU

_SHAPES = (
    'programs = ["naive", "take", "vmap_take"]\nconfigs = ["f32", "bf16"]\nassert = "kernels <= {n}"\n',
    'programs = ["kind:forward"]\nassert = "while_loops == 0"\nwhen = "jax >= 0.5"\n',
    'programs = ["grad_*"]\nconfigs = ["f32"]\nassert = "dynamic_kernel_launches <= {n} * 2 + 1"\n',
    'assert = "kernels(naive) <= kernels(take) + {n}"\n',
    'programs = ["take"]\nassert = "\'sort\' not in opcodes"\n'
    'ratchet = {{ reason = "known bad today, see the issue", issue = "https://example.org/issues/{n}" }}\n',
)


def generate(count: int) -> str:
    """A spec of ``count`` invariants on the CPU target, each about 185 bytes."""
    parts = ['# A generated spec: what a large project\'s file looks like.\n[spec]\ntargets = ["cpu"]\n']
    for i in range(count):
        shape = _SHAPES[i % len(_SHAPES)].format(n=i % 97 + 1)
        parts.append(
            f'\n[[invariant]]\nid = "inv_{i:05d}"\n{shape}'
            f'why = "generated {i}: a lookup is one gather, not a loop"\n'
        )
    return "".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--invariants", type=int, default=20_000, help="invariants in the file (default 20000)")
    ap.add_argument("--budget-s", type=float, default=5.0, help="load time allowed (default 5 s)")
    ap.add_argument("--no-check", action="store_true", help="time load_specs only (e.g. an old loader)")
    args = ap.parse_args()

    import invariants.catalog.registry  # noqa: F401  (JAX and the catalog start outside the timed part)
    from invariants.specfile.reader import load_specs

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.toml"
        path.write_text(generate(args.invariants))
        size = path.stat().st_size
        start = time.perf_counter()
        (spec,) = load_specs(Path(tmp))
        loaded = time.perf_counter() - start
    assert len(spec.invariants) == args.invariants
    line = f"{args.invariants} invariants, {size / 1e6:.2f} MB: load_specs {loaded:.2f} s"
    if not args.no_check:
        from invariants.scope.targets import all_targets
        from invariants.verdict.checks import check_specs

        targets = list(all_targets().values())
        start = time.perf_counter()
        check_specs([spec], targets)
        line += f", check_specs on {len(targets)} targets {time.perf_counter() - start:.2f} s"
    over = loaded > args.budget_s
    print(f"{line} (budget {args.budget_s:g} s{': OVER' if over else ''})")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
