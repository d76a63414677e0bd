#!/usr/bin/env python3
"""What a downstream project's gate costs, with and without the catalog.

It builds a scratch downstream project (four programs of its own, one relation to the catalog's ``take``:
``structure(bench_take) == structure(take)``), records its snapshots once (``--no-catalog
--snapshot-update``, not timed), then runs

    python -m invariants gate --spec-dir specs --snapshot-dir snapshots [--no-catalog] --targets TARGETS

in a subprocess, alternating ``--no-catalog`` and the catalog run ``--runs`` times each, and prints each
run's wall time, the compiles it made (the gate's ``invariants: compiled N programs`` line), its exit code
and the load average beside it, then the medians. Nothing here asserts a time: compare the two runs of one
invocation, on one machine.

Usage::

    python benchmarks/downstream.py [--runs 2] [--targets cpu,tpu-v5e,gpu-h100] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SPEC = """\
[spec]
targets = ["*"]

[[program]]
name = "bench_take"
function = "benchlib:take_lookup"
kind = "forward"
configs = ["f32", "bf16"]

[[program]]
name = "bench_index"
function = "benchlib:index_lookup"
kind = "forward"
configs = ["f32"]

[[program]]
name = "bench_clip"
function = "benchlib:clip_lookup"
kind = "forward"
configs = ["f32"]

[[program]]
name = "bench_take_grad"
function = "benchlib:take_lookup"
kind = "backward"

[[invariant]]
id = "bench_no_while"
programs = ["tag:user"]
assert = "while_loops == 0"

[[invariant]]
id = "bench_take_is_the_catalogs"
assert = "structure(bench_take) == structure(take)"
"""

MODULE = """\
import jax.numpy as jnp


def take_lookup(table, indices):
    return jnp.take(table, indices, axis=0)


def index_lookup(table, indices):
    return table[indices]


def clip_lookup(table, indices):
    return jnp.take(table, indices, axis=0, mode="clip")
"""

_COMPILED = re.compile(r"invariants: compiled (\d+) programs")


def make_project(folder: Path) -> Path:
    (folder / "specs").mkdir(parents=True, exist_ok=True)
    (folder / "specs" / "bench.toml").write_text(SPEC)
    (folder / "benchlib.py").write_text(MODULE)
    return folder


def gate(project: Path, targets: str, *args: str) -> tuple[float, int | None, int, str]:
    """One gate run: (wall seconds, compiles, exit code, the output's last line)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "INVARIANTS_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(project), str(ROOT)])
    cmd = [sys.executable, "-m", "invariants", "gate", "--spec-dir", "specs", "--snapshot-dir", "snapshots",
           "--targets", targets, *args, "-q", "-p", "no:cacheprovider"]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    out = proc.stdout + proc.stderr
    found = _COMPILED.search(out)
    last = next((ln for ln in reversed(out.splitlines()) if ln.strip()), "")
    return seconds, int(found[1]) if found else None, proc.returncode, last.strip()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=2, help="runs of each mode, alternating (default 2)")
    p.add_argument("--targets", default="cpu,tpu-v5e,gpu-h100", help="the gate's --targets")
    p.add_argument("--keep", type=Path, help="build the project here and keep it (default: a temp folder)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        project = make_project(args.keep or Path(tmp))
        seconds, compiles, rc, last = gate(project, args.targets, "--no-catalog", "--snapshot-update")
        print(f"record: {seconds:.1f} s, {compiles} compiles, exit {rc}: {last}", flush=True)
        modes = {"--no-catalog": ["--no-catalog"], "with catalog": []}
        times: dict[str, list[float]] = {m: [] for m in modes}
        for n in range(args.runs):
            for mode, extra in modes.items():
                load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
                seconds, compiles, rc, last = gate(project, args.targets, *extra)
                times[mode].append(seconds)
                print(f"run {n + 1} {mode}: {seconds:.1f} s, {compiles} compiles, exit {rc} "
                      f"(load before {' '.join(load)}): {last}", flush=True)  # fmt: skip
        for mode, values in times.items():
            print(f"median {mode}: {statistics.median(values):.1f} s over {len(values)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
