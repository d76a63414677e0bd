"""The benchmarks under benchmarks/: each one file with one entry point whose ``--help`` works (nothing
runs them in CI: they time things), each listed in benchmarks/README.md."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
BENCHMARKS = sorted((ROOT / "benchmarks").glob("*.py"))


def test_there_are_benchmarks() -> None:
    assert len(BENCHMARKS) >= 7, BENCHMARKS


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_help_works(path: Path) -> None:
    proc = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage: "), proc.stdout[:500]


@pytest.mark.parametrize("path", BENCHMARKS, ids=lambda p: p.name)
def test_listed_in_the_index(path: Path) -> None:
    assert f"python benchmarks/{path.name}" in (ROOT / "benchmarks" / "README.md").read_text()


def test_fresh_runs_reads_the_readme_test_command() -> None:
    spec = importlib.util.spec_from_file_location("fresh_runs", ROOT / "benchmarks" / "fresh_runs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.test_command(ROOT / "README.md") == "pytest -n auto --pin-workers"
