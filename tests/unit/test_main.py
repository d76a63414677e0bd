"""`python -m invariants`: the command-line face (dispatch, help, a reader that stops early). The command
started as a user starts it, in a child, is an ``e2e`` test (tests/conftest.py); its parsers called here
are not."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from invariants.__main__ import COMMANDS
from invariants._errors import InvariantsError

ROOT = Path(__file__).parents[2]


def _child(*args: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invariants", *args], cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE,
        text=True, check=False, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


@pytest.mark.e2e
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


@pytest.mark.e2e
@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_is_plain_text(command: str):
    """--help is read in a terminal: no reStructuredText marks from the docstrings."""
    proc = _child(*([command] if command else []), "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()
    assert not re.search(r"``|:(func|class|mod|data|meth):`", proc.stdout), proc.stdout


PM = "python -m invariants"


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("argv", "said"),
    [
        *[([command, "--badflag"], "") for command in COMMANDS],
        (["selfcheck", "--jobs", "x"], f"{PM} selfcheck: argument --jobs: invalid int value: 'x'"),
        (["selfcheck", "--jobs", "0"], "--jobs: must be at least 1, got 0"),
        (["versus", "--baseline", "current", "--candidate", "current", "--threshold", "x"],
         f"{PM} versus: argument --threshold: invalid float value: 'x'"),
        (["bisect", "--good", "0.4.30"], f"{PM} bisect: the following arguments are required: --bad"),
        (["gate", "--snapshot-dir"], f"{PM} gate: argument --snapshot-dir: expected one argument"),
        (["gate", "--targets", "cpu", "--badflag"], f"{PM} gate: unrecognized arguments: --badflag"),
        (["report", "--compare", "a.json"], "report: argument --compare: expected 2 arguments"),
        (["hlo-stats"], "hlo-stats: the following arguments are required: FILE"),
        (["matrix", "--versions", ","], "--versions: empty selection"),
        (["nosuch"], "invariants: unknown command 'nosuch'"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, argv: list[str], said: str):
    """The README's one exit status for bad input, for every command: argparse's usage block (exit 2, 3 to
    14 lines) and pytest's (exit 4, 4 lines) are one line now."""
    proc = subprocess.run(
        [sys.executable, "-m", "invariants", *argv], cwd=tmp_path, capture_output=True, text=True,
        check=False, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "usage:" not in proc.stderr, proc.stderr
    assert lines[0].removeprefix("ERROR: ").startswith(said), lines[0]


@pytest.mark.parametrize(
    ("command", "argv"),
    [*[(command, ["--badflag"]) for command in COMMANDS if command != "gate"],
     ("gate", ["--spec-dir"]), ("gate", ["--results-json"])],
)  # fmt: skip
def test_each_commands_parser_raises_the_one_line_itself(monkeypatch, command: str, argv: list[str]):
    """Called as a library calls it, outside ``python -m invariants``: a command's own parser turns a
    mistake into the one line; a plain ``argparse.ArgumentParser`` would print its usage and exit."""
    monkeypatch.setattr(sys, "dont_write_bytecode", sys.dont_write_bytecode)  # the gate's main sets it
    module = importlib.import_module(COMMANDS[command][0])
    entry = getattr(module, "main_" + command.replace("-", "_"), None) or module.main
    with pytest.raises(InvariantsError) as caught:
        entry(argv)
    assert "\n" not in str(caught.value) and "--help)" in str(caught.value), caught.value


# What each command's --help may start: none starts JAX (it starts in the environment compile.process sets,
# when a command runs); the gate's options are pytest's, and versus reads its numbers with numpy.
_HELP_STARTS = {"gate": {"pytest", "syrupy"}, "versus": {"numpy"}}
_HEAVY = ("jax", "pytest", "syrupy", "numpy", "scipy", "matplotlib")


@pytest.mark.e2e
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_commands_help_starts_no_more_than_it_needs(command):
    """``--help`` answers in a fraction of a second, without the test extra where it is not needed."""
    code = (
        "import contextlib, io, runpy, sys\n"
        f"sys.argv = ['invariants', {command!r}, '--help']\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "    runpy.run_module('invariants', run_name='__main__')\n"
        f"print(','.join(m for m in {_HEAVY!r} if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    started = set(filter(None, proc.stdout.strip().split(",")))
    assert started <= _HELP_STARTS.get(command, set()), (command, started)
