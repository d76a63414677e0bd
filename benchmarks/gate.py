"""The gate cold, the gate warm, and the project's own tests, timed in alternating runs against a base commit.

    python benchmarks/gate.py --base main --rounds 3 [--suite] [--gate-args "-m 'not throughput'"]

Each round runs, for the base commit (a git worktree made for it) and for this checkout, one after the
other and alternating which goes first: the gate with an empty compile cache (cold), the gate again on
that cache (warm; a base without a cache compiles again), and with ``--suite`` the project's test command
(``pytest -n auto --pin-workers``).
Beside each wall time it keeps the CPU seconds that the run and every process it started spent (user
and system: on a host of few cores a run's wall time is its CPU time over the cores it kept busy, and
the CPU time moves less with the load), and the load average at the run's start and end, since these
machines are shared: compare a pair of one round, never figures of two days. The figures go to stdout
as a table and to ``--json`` (default ``artifacts/bench_gate.json``).

The interpreter is this one (the venv of this checkout); each side imports its own package through
``PYTHONPATH``, so both use the same installed JAX.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _cpu_seconds() -> float:
    """User and system time of this process's children that have ended, with their own children's."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    before = os.getloadavg()[0]
    cpu = _cpu_seconds()
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    cpu = _cpu_seconds() - cpu
    tail = (proc.stdout.strip().splitlines() or [""])[-1]
    cache = next(
        (line for line in proc.stdout.splitlines() if "compile cache:" in line and "hits" in line), ""
    )
    return {"seconds": round(seconds, 1), "cpu": round(cpu, 1), "rc": proc.returncode,
            "load": [round(before, 2), round(os.getloadavg()[0], 2)], "last": tail[-160:],
            "cache": cache.strip()}  # fmt: skip


def _side(name: str, tree: Path, gate_args: list[str], suite: bool, scratch: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "INVARIANTS_CACHE_DIR": str(scratch / f"{name}-cache")}
    run_dir = scratch / f"{name}-run"
    run_dir.mkdir(exist_ok=True)
    gate = [sys.executable, "-m", "pytest", str(tree / "invariants" / "gate"), "-q", "-p", "no:cacheprovider",
            "--results-json", str(run_dir / "results.json"), *gate_args]  # fmt: skip
    out: dict[str, Any] = {"cold": _run(gate, run_dir, env), "warm": _run(gate, run_dir, env)}
    if suite:
        out["suite"] = _run([sys.executable, "-m", "pytest", "-n", "auto", "--pin-workers", "-q"], tree, env)
    return out


def table(rounds: list[dict[str, dict[str, Any]]]) -> str:
    """The rounds' figures as a Markdown table: per run, each pair's wall and CPU seconds and the median
    of the pairs' ratios, with the load at each run's start."""
    lines = [
        "| run | base (s) | current (s) | current / base | CPU s (base; current) | CPU current / base "
        "| load at start (base; current) |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in ("cold", "warm", "suite"):
        pairs = [(r["base"][run], r["current"][run]) for r in rounds if run in r["base"]]
        if not pairs:
            continue
        ratio = statistics.median(c["seconds"] / b["seconds"] for b, c in pairs)
        cpu_ratios = [c["cpu"] / b["cpu"] for b, c in pairs if b["cpu"] > 0]
        cpu_ratio = f"{statistics.median(cpu_ratios):.2f}" if cpu_ratios else "-"
        bases = ", ".join(str(b["seconds"]) for b, _ in pairs)
        current = ", ".join(str(c["seconds"]) for _, c in pairs)
        cpus = "; ".join(f"{b['cpu']}, {c['cpu']}" for b, c in pairs)
        loads = "; ".join(f"{b['load'][0]}, {c['load'][0]}" for b, c in pairs)
        lines.append(f"| {run} | {bases} | {current} | {ratio:.2f} (median of pairs) | {cpus} "
                     f"| {cpu_ratio} | {loads} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--base", required=True, help="the commit to compare with (e.g. main, before a change)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds (default 2)")
    parser.add_argument(
        "--suite",
        action="store_true",
        help="also time the project's test command (pytest -n auto --pin-workers)",
    )
    parser.add_argument("--gate-args", default="-m 'not throughput'", help="arguments of each gate run")
    parser.add_argument(
        "--json", default=str(ROOT / "artifacts" / "bench_gate.json"), help="where the figures go"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    gate_args = shlex.split(args.gate_args)
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        scratch = Path(tmp)
        base = scratch / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.base],
                       check=True, capture_output=True)  # fmt: skip
        try:
            rounds: list[dict[str, dict[str, Any]]] = []
            for i in range(args.rounds):
                order = [("base", base), ("current", ROOT)]
                order = order if i % 2 == 0 else order[::-1]
                figures = {}
                for name, tree in order:
                    # An empty cache each round: the cold run is cold.
                    subprocess.run(["rm", "-rf", str(scratch / f"{name}-cache")], check=True)
                    figures[name] = _side(name, tree, gate_args, args.suite, scratch)
                rounds.append(figures)
                print(f"round {i + 1}: " + json.dumps(figures), flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    print(table(rounds))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"base": args.base, "rounds": rounds}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
