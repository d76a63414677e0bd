"""Stress the paired timing method: how often does it raise a false alarm, and does it catch a real 2x?

Runs a fixed set of jax lookup ratios ``--runs`` times in this process and prints a markdown table:
each ratio's median over runs, the CV of that median across runs, the verdicts, the false failures
(``fail`` where the true ratio is within the threshold) and the detections (``fail`` where a ~2x slowdown
was injected on purpose).

The table (W f32[8192,32], x int32[16384] in range):

=============  =======================================  =========  =============================
name           a / b                                    threshold  truth
=============  =======================================  =========  =============================
self           ``W[x]`` / ``W[x]``                      1.10       1.0: a fail is false
take           ``take(W, x, axis=0)`` / ``W[x]``        1.30       within (~1): a fail is false
twice          ``W[x] + W[(x+1) % V]`` / ``W[x]``       1.30       ~2x injected: a fail detects it
efficiency     ``copy(2 MiB)`` / ``W[x]``               none       reported only
=============  =======================================  =========  =============================

``--hog`` starts CPU hogs first: separate processes (``multiprocessing``, spawn) that busy-loop in pure
Python until the script ends. ``--hog-procs`` sets how many; the default is one per core
(``os.cpu_count()``), i.e. every core is contended, which is the worst case for a 2-core CI machine.

``--clock cpu`` measures with ``time.process_time`` (CPU time of all threads of this process) instead of
the wall clock. On the CPU backend the "device" is this process, so its CPU time excludes the time spent
waiting for a core that a hog holds; it is blind to lost parallelism and counts spin-waits, and it means
nothing for an accelerator. The default is the wall clock.

Usage::

    python scripts/false_alarm.py --runs 10 --hog
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

V, D, N = 8192, 32, 16384


def _burn() -> None:  # pragma: no cover - runs in a child process
    x = 0
    while True:
        x = (x + 1) % 1_000_003


@dataclass(frozen=True)
class Case:
    name: str
    a: str
    b: str
    threshold: float | None
    expect: str  # "within": a fail is a false failure; "beyond": a fail is a detection; "": report only


CASES = (
    Case("self", "naive", "naive", 1.10, "within"),
    Case("take", "take", "naive", 1.30, "within"),
    Case("twice", "twice", "naive", 1.30, "beyond"),
    Case("efficiency", "copy", "naive", None, ""),
)


def build() -> dict[str, object]:
    """Compile each program once; return Timed callables by name."""
    import jax
    import jax.numpy as jnp

    from invariants._timing import copy_callable, jax_callable

    w = jax.random.normal(jax.random.key(0), (V, D), jnp.float32)
    x = jax.random.randint(jax.random.key(1), (N,), 0, V, jnp.int32)
    programs = {
        "naive": lambda w, x: w[x],
        "take": lambda w, x: jnp.take(w, x, axis=0),
        "twice": lambda w, x: w[x] + w[(x + 1) % V],
    }
    timed: dict[str, object] = {
        name: jax_callable(jax.jit(f).lower(w, x).compile(), w, x) for name, f in programs.items()
    }
    timed["copy"] = copy_callable(N * D * 4)  # the bytes W[x] writes
    return timed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--hog", action="store_true", help="busy-loop processes during the runs")
    p.add_argument(
        "--hog-procs", type=int, default=os.cpu_count() or 1, help="hog processes (default: one per core)"
    )
    p.add_argument("--max-seconds", type=float, default=6.0)
    p.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall: time.perf_counter (default); cpu: time.process_time",
    )
    args = p.parse_args(argv)

    hogs: list[mp.process.BaseProcess] = []
    if args.hog:
        ctx = mp.get_context("spawn")
        hogs = [ctx.Process(target=_burn, daemon=True) for _ in range(args.hog_procs)]
        for h in hogs:
            h.start()
        time.sleep(0.5)
    try:
        from invariants._timing import measure_efficiency, measure_ratio

        clock = time.perf_counter if args.clock == "wall" else time.process_time
        timed = build()
        results: dict[str, list] = {c.name: [] for c in CASES}
        for run in range(args.runs):
            for c in CASES:
                if c.name == "efficiency":
                    r = measure_efficiency(
                        timed[c.b],
                        timed[c.a],
                        max_seconds=args.max_seconds,  # type: ignore[arg-type]
                        clock=clock,
                    )
                    results[c.name].append((r.efficiency, r.low, r.high, r.seconds, r.pairs, r.cv, r.verdict))
                else:
                    r = measure_ratio(
                        timed[c.a],
                        timed[c.b],
                        threshold=c.threshold,  # type: ignore[arg-type]
                        max_seconds=args.max_seconds,
                        clock=clock,
                    )
                    results[c.name].append((r.median, r.low, r.high, r.seconds, r.pairs, r.cv, r.verdict))
                print(f"run {run} {c.name}: {r.summary()}", file=sys.stderr)
    finally:
        for h in hogs:
            h.terminate()
        for h in hogs:
            h.join()

    hog = f"{args.hog_procs} hog process(es) on {os.cpu_count()} cores" if args.hog else "no hog"
    print(f"\n{args.runs} runs, {hog}, {args.clock} clock, confidence 0.95\n")
    print(
        "| ratio | threshold | median over runs | CV across runs | mean CI width "
        "| seconds/ratio (mean, max) | pairs (mean) | per-pair cv (median) "
        "| pass / inconcl. / fail | false failures | detections |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for c in CASES:
        rows = results[c.name]
        meds = [r[0] for r in rows]
        cv = statistics.pstdev(meds) / statistics.fmean(meds) if len(meds) > 1 else 0.0
        width = statistics.fmean(r[2] - r[1] for r in rows)
        secs = [r[3] for r in rows]
        verdicts = [r[6] for r in rows]
        fails = verdicts.count("fail")
        false_f = str(fails) if c.expect == "within" else "-"
        detect = f"{fails}/{len(rows)}" if c.expect == "beyond" else "-"
        thr = f"{c.threshold:.2f}" if c.threshold is not None else "-"
        vs = (
            f"{verdicts.count('pass')} / {verdicts.count('inconclusive')} / {fails}"
            if c.threshold is not None
            else "-"
        )
        print(
            f"| {c.name} | {thr} | {statistics.median(meds):.3f} | {cv:.2%} | {width:.3f} "
            f"| {statistics.fmean(secs):.2f}, {max(secs):.2f} | {statistics.fmean(r[4] for r in rows):.0f} "
            f"| {statistics.median(r[5] for r in rows):.1%} | {vs} | {false_f} | {detect} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
