"""The benchmarks under benchmarks/: each one file with one entry point whose ``--help`` works (nothing
runs them in CI: they time things), each listed in benchmarks/README.md."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[2]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))


def test_there_are_benchmarks() -> None:
    assert len(BENCHMARKS) >= 7, BENCHMARKS


@pytest.mark.e2e
@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_help_works(path: Path) -> None:
    proc = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage: "), proc.stdout[:500]


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_listed_in_the_index(path: Path) -> None:
    assert f"python benchmarks/{path.name}" in (ROOT / "benchmarks" / "README.md").read_text()


def _module(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fresh_runs_reads_the_readme_test_command() -> None:
    assert _module("fresh_runs").test_command(ROOT / "README.md") == "pytest -n auto --pin-workers"


def test_the_gate_benchmark_counts_the_cpu_of_every_process_a_run_started(tmp_path: Path) -> None:
    """A run's CPU seconds are its own and its children's: the test command's time is mostly in the
    processes its workers start. A grandchild that spins for a while says how much CPU it spent; the run
    that started it counts at least that much, and the table shows it beside the wall time."""
    gate = _module("gate")
    spin = (
        "import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.3:\n    pass\n"
        "print(time.process_time())"
    )
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {spin!r}], check=True)"
    run = gate._run([sys.executable, "-c", child], tmp_path, dict(os.environ))
    assert run["rc"] == 0, run
    assert run["cpu"] + 0.05 >= float(run["last"]), run  # rounded to a tenth
    table = gate.table([{side: {"cold": run, "warm": run} for side in ("base", "current")}])
    cold = next(line for line in table.splitlines() if line.startswith("| cold |"))
    assert f"| {run['cpu']}, {run['cpu']} | 1.00 |" in cold, table


def test_the_gate_benchmark_leaves_a_pair_with_no_base_cpu_out_of_the_cpu_ratio() -> None:
    gate = _module("gate")
    idle = {"seconds": 1.0, "cpu": 0.0, "load": [0.1, 0.1]}
    busy = {"seconds": 1.0, "cpu": 0.5, "load": [0.1, 0.1]}
    table = gate.table([{"base": {"cold": idle, "warm": idle}, "current": {"cold": busy, "warm": busy}}])
    cold = next(line for line in table.splitlines() if line.startswith("| cold |"))
    assert "| 0.0, 0.5 | - |" in cold, table
