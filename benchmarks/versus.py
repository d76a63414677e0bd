"""The measurement studies behind ``python -m invariants versus`` (docs/versus.md), one command each.

    python benchmarks/versus.py same      --runs 10   # current vs current, one busy loop per core
    python benchmarks/versus.py slowdown  --runs 20   # each candidate call costs a tenth more CPU
    python benchmarks/versus.py fusion    --runs 10   # candidate: --xla_disable_hlo_passes=fusion
    python benchmarks/versus.py threads   --runs 5    # candidate's loop kernels on one thread
    python benchmarks/versus.py releases              # --baseline 0.6.0 --candidate 0.5.3, grad programs
    python benchmarks/versus.py budget                # the default versus on this machine, timed

Each run is the real command in a subprocess; its JSON record is kept under ``--out`` (default
``artifacts/versus-studies/<study>``) and a summary table is printed and written beside them. ``--load N``
starts N busy loops for the whole study (default: one per core for same/slowdown/fusion, none otherwise):
the studies' stated load, on top of whatever else the machine runs (say so when quoting a figure). The
load average before and after each run is kept in ``runs.jsonl`` beside the records and shown in the
summary. ``--nice N`` runs each versus at that niceness (the busy loops stay at 0): the heavy studies at
low priority on a shared machine. Not for ``threads``: a second thread at low priority gets a core only
when nothing else wants it, so the baseline's parallelism, what that study takes away, would be gone too.

``threads`` gives the candidate ``XLA_FLAGS=--xla_disable_hlo_passes=cpu-parallel-task-assigner``: XLA:CPU
then splits no loop fusion over the intra-op threads (its HLO equal but for the backend config's
``outer_dimension_partitions``), so naive's gather runs on one thread instead of two. Pinned rounds see
nothing (one core: one thread on both sides); the all-cores phase sees the wall clock, and the verdict is
``lost-parallelism``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from invariants.versus.report import Record, load_record

ROOT = Path(__file__).resolve().parent.parent
LOADED = ("same", "slowdown", "fusion")
# The candidate flag of the threads study: no loop fusion split over threads (see the docstring).
LOST_THREADS = "XLA_FLAGS=--xla_disable_hlo_passes=cpu-parallel-task-assigner"


def _versus(args: list[str], record: Path, log: Path, nice: int = 0) -> tuple[int, float]:
    start = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "invariants", "versus", *args, "--json", str(record)],
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=(lambda: os.nice(nice)) if nice else None)  # fmt: skip
        try:
            rc = proc.wait()
        finally:
            if proc.poll() is None:  # stopped: the command closes its workers on SIGTERM's exit
                proc.terminate()
                proc.wait()
    return rc, time.perf_counter() - start


def _loads(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def _cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else math.nan


CLOCKS = (("cpu", "cpu"), ("wall", "wall"), ("wall_all_cores", "wall, all cores"))


def summarize(
    study: str, records: list[Record], exits: list[int], seconds: list[float],
    loads: list[dict[str, Any]] | None = None,
) -> str:  # fmt: skip
    programs = list(dict.fromkeys(t["program"] for r in records for t in r.timing))
    clocks = [(c, name) for c, name in CLOCKS if any(c in t["results"] for r in records for t in r.timing)]
    lines = [f"## {study}: {len(records)} runs, exit codes {exits}, {statistics.median(seconds):.0f} s a run "
             f"(min {min(seconds):.0f}, max {max(seconds):.0f})", ""]  # fmt: skip
    if loads:
        before = [x["load_before"] for x in loads]
        after = [x["load_after"] for x in loads]
        lines += [f"load average (1 min) before each run {min(before):.1f}-{max(before):.1f}, after "
                  f"{min(after):.1f}-{max(after):.1f}; versus at niceness {loads[0].get('nice', 0)}, "
                  f"{loads[0].get('busy_loops', 0)} busy loops", ""]  # fmt: skip
    head = " | ".join(f"{n} ratio median [min, max] | {n} CV" for _, n in clocks)
    lines += [f"| program | verdicts | {head} |", "|---|---|" + "---|---|" * len(clocks)]
    for p in programs:
        rows = [t for r in records for t in r.timing if t["program"] == p]
        counts: dict[str, int] = {}
        for t in rows:
            counts[t["verdict"]] = counts.get(t["verdict"], 0) + 1
        cells = []
        for clock, _ in clocks:
            v = [t["results"][clock]["median"] for t in rows if clock in t["results"]]
            cells.append(f"{statistics.median(v):.3f} [{min(v):.3f}, {max(v):.3f}]" if v else "—")
            cells.append(f"{_cv(v):.1%}" if v else "—")
        verdicts = ", ".join(f"{k} {n}" for k, n in sorted(counts.items()))
        lines.append(f"| {p} | {verdicts} | " + " | ".join(cells) + " |")
    reasons = [reason for r in records for reason in r.reasons]
    lines += ["", f"reasons for exit 1 across runs ({len(reasons)}):"] + [f"- {x}" for x in reasons[:40]]
    return "\n".join(lines) + "\n"


def _brief(t: dict[str, Any]) -> str:
    """``naive 1.003 (all cores 1.012) pass``: one program of one run."""
    cores = t["results"].get("wall_all_cores")
    also = f" (all cores {cores['median']:.3f})" if cores else ""
    return f"{t['program']} {t['results'][t['clock']]['median']:.3f}{also} {t['verdict']}"


def _loads_of(out: Path) -> list[dict[str, Any]]:
    path = out / "runs.jsonl"
    return (
        [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("study", choices=("same", "slowdown", "fusion", "threads", "releases", "budget"))
    p.add_argument("--runs", type=int, help="runs (default: 10; 20 for slowdown; 1 for releases and budget)")
    p.add_argument(
        "--load", type=int, help="busy loops beside the runs (default: one per core for same/slowdown/fusion)"
    )
    p.add_argument(
        "--out", type=Path, help="folder for the records (default: artifacts/versus-studies/STUDY)"
    )
    p.add_argument(
        "--programs", default="naive,take,grad_take", help="for same/slowdown/fusion (default: %(default)s)"
    )
    p.add_argument(
        "--fraction",
        type=float,
        default=0.1,
        help="slowdown: INVARIANTS_VERSUS_SLOWDOWN, the fraction of its own CPU time each candidate call "
        "spends again in a busy wait (default: %(default)s, a 10%% slowdown)",
    )
    p.add_argument("--nice", type=int, default=0, help="run each versus at this niceness (default: 0)")
    p.add_argument("--summarize", action="store_true", help="only summarize the records already in --out")
    p.add_argument("extra", nargs="*", help="more versus arguments, after --")
    args = p.parse_args()
    runs = args.runs or {"slowdown": 20, "releases": 1, "budget": 1}.get(args.study, 10)
    load = args.load if args.load is not None else (os.cpu_count() or 1) * (args.study in LOADED)
    out = args.out or ROOT / "artifacts" / "versus-studies" / args.study
    out.mkdir(parents=True, exist_ok=True)
    if args.summarize:
        kept = [load_record(f) for f in sorted(out.glob("run-*.json"))]
        print(summarize(args.study, kept, [r.exit for r in kept], [r.seconds for r in kept],
                        _loads_of(out)))  # fmt: skip
        return 0
    if args.study == "threads" and args.nice:
        p.error("--nice with threads: a low-priority second thread gets no core, on either side")
    (out / "runs.jsonl").unlink(missing_ok=True)
    # A forward, the fill-mode take, a backward: three programs keep a run near a minute on a quiet machine.
    common = [
        "--baseline",
        "current",
        "--candidate",
        "current",
        "--no-structure",
        "--programs",
        args.programs,
    ]
    versus_args = {
        "same": common,
        "slowdown": [*common, "--candidate-env", f"INVARIANTS_VERSUS_SLOWDOWN={args.fraction}"],
        "fusion": [*common, "--candidate-env", "XLA_FLAGS=--xla_disable_hlo_passes=fusion"],
        "threads": [*common, "--candidate-env", LOST_THREADS],
        "releases": ["--baseline", "0.6.0", "--candidate", "0.5.3", "--programs", "grad_naive,grad_take",
                     "--targets", "cpu", "--out", str(out / "report.md"), "--plot", str(out / "report.png")],
        "budget": ["--baseline", "current", "--candidate", "current", "--out", str(out / "report.md")],
    }[args.study] + args.extra  # fmt: skip
    print(f"{args.study}: {runs} runs of versus {' '.join(versus_args)}; {load} busy loops (niceness "
          f"{os.nice(0)}); versus at niceness {os.nice(0) + args.nice}; load average "
          f"{os.getloadavg()[0]:.1f} before", flush=True)  # fmt: skip
    hogs = _loads(load)
    # Stopped with SIGTERM: still end the busy loops (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    records: list[Record] = []
    exits, seconds = [], []
    try:
        for i in range(runs):
            record = out / f"run-{i:02d}.json"
            before = os.getloadavg()[0]
            rc, s = _versus(versus_args, record, out / f"run-{i:02d}.log", args.nice)
            after = os.getloadavg()[0]
            with (out / "runs.jsonl").open("a") as f:
                f.write(json.dumps({"run": i, "exit": rc, "seconds": s, "load_before": before,
                                    "load_after": after, "nice": os.nice(0) + args.nice, "busy_loops": load,
                                    "at": time.strftime("%H:%M:%S")}) + "\n")  # fmt: skip
            exits.append(rc)
            seconds.append(s)
            if record.exists():
                records.append(load_record(record))
            verdicts = ", ".join(_brief(t) for t in records[-1].timing) if record.exists() else "no record"
            print(f"  run {i}: exit {rc} in {s:.0f} s (load {before:.1f} before, {after:.1f} after): "
                  f"{verdicts}", flush=True)  # fmt: skip
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    text = summarize(args.study, records, exits, seconds, _loads_of(out)) if records else "no records\n"
    (out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
