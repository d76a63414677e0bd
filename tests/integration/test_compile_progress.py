"""A run says what it is compiling while an item waits, in lines the terminal shows under ``-q`` and from
xdist workers (``--compile-progress``), as a user runs the gate."""

from __future__ import annotations

from pathlib import Path

import pytest
from gatekit import make_project, run

# The gate in a child, as a user starts it: end to end (tests/conftest.py: -m e2e).
pytestmark = pytest.mark.e2e

SELECTION = (
    "--targets",
    "cpu",
    "--programs",
    "take",
    "--configs",
    "f32",
    "-m",
    "not throughput",
    "--no-cache",
)


# Compiles ahead of the items (the default without xdist) may all be done before an item asks: with none
# ahead, the first item waits for its own.
@pytest.mark.parametrize("workers", [("--compile-threads", "0"), ("-n", "2")], ids=["quiet", "xdist"])
def test_each_compile_waited_for_is_told_under_quiet_and_xdist(tmp_path: Path, workers: tuple[str, ...]):
    project = make_project(tmp_path, targets=("cpu",))
    proc = run(project, *SELECTION, "--compile-progress", "0.01", *workers)  # run adds -q
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    told = [line for line in proc.stdout.splitlines() if line.startswith("invariants: compiling ")]
    assert told, proc.stdout[-2000:]
    assert all(line.startswith("invariants: compiling take [f32] for cpu (1 of 1), ") for line in told), told
    assert "warnings summary" not in proc.stdout and "Progress" not in proc.stdout


def test_a_bad_compile_bound_is_one_line(tmp_path: Path):
    project = make_project(tmp_path, targets=("cpu",))
    proc = run(project, *SELECTION, "--compile-timeout", "soon")
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .endswith("--compile-timeout 'soon': takes a positive number of seconds (0: no bound)")
    ), proc.stderr[-1000:]
