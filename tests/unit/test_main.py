"""`python -m invariants`: the command-line face (dispatch, help, a reader that stops early)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from invariants.__main__ import COMMANDS

ROOT = Path(__file__).parents[2]


def _child(*args: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invariants", *args], cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE,
        text=True, check=False, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def test_a_reader_that_stops_early_ends_it_quietly():
    """`python -m invariants -h | head -2`: the reader is gone before the writer; exit 0, no traceback."""
    read, write = os.pipe()
    os.close(read)  # the reader has already stopped reading
    try:
        proc = _child("-h", stdout=write)
    finally:
        os.close(write)
    assert proc.returncode == 0
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_is_plain_text(command: str):
    """--help is read in a terminal: no reStructuredText marks from the docstrings."""
    proc = _child(*([command] if command else []), "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
    assert not re.search(r"``|:(func|class|mod|data|meth):`", proc.stdout), proc.stdout
