"""One selection grammar: the same ``--targets`` and ``--programs`` words
select the same targets and programs in the gate, versus, selfcheck, bisect and matrix, a near miss is
named (did-you-mean) by each, and an empty selection is one line in each.

Each command is asked through its own parsing entry point: the gate's plugin reads its options with
``select_targets`` and ``Programs.select`` (:mod:`invariants.plugin.suite`); versus, selfcheck and
matrix through ``python -m invariants`` in this process (each fails before any worker, child or install);
bisect and matrix hand ``--programs`` (and bisect ``--targets``) to a collection of the gate in a child,
before any release is installed (here that collection runs in this process: ``collections_in_process``).
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gatekit import InProcess

from invariants.__main__ import main as cli_main
from invariants._errors import InvariantsError
from invariants.catalog.registry import Programs, get_program
from invariants.compile.child import gate_command
from invariants.releases import bisect as _bisect
from invariants.releases import matrix as _matrix
from invariants.scope.placement import configs_for
from invariants.scope.targets import all_targets, select_targets
from invariants.selfcheck import command as _selfcheck
from invariants.selfcheck import registry
from invariants.versus import command as _versus

# ---------------------------------------------------------------------------------------------------------
# What each command selects for a --targets value, beside what the gate's selection of it says it should.


def _gate_targets(value: str) -> set[str]:
    return {t.name for t in select_targets(value)}


def _versus_targets(value: str) -> set[str]:
    """The targets versus compares structures on, for a program that compiles in f32 on every
    single-device target."""
    return {t for _, _, t in _versus.structure_keys(["naive"], value)}


def _versus_of_gate(names: set[str]) -> set[str]:
    program, targets = get_program("naive"), all_targets()
    return {n for n in names if _versus.CONFIG in configs_for(targets[n], program)}


def _selfcheck_targets(value: str) -> set[str]:
    return {i.name for i in _selfcheck.restrict_targets(registry.INJECTIONS, value) if not i.is_baseline}


def _selfcheck_of_gate(names: set[str]) -> set[str]:
    return {i.name for i in registry.INJECTIONS if not i.is_baseline and set(i.targets.split(",")) <= names}


def _matrix_targets(value: str) -> set[str]:
    """The GPU targets matrix compiles (it always runs the CPU, and tpu-v5e unless --no-tpu)."""
    gpus = _matrix.matrix_gpus(value)
    return _gate_targets(gpus) if gpus else set()


def _matrix_of_gate(names: set[str]) -> set[str]:
    return {n for n in names if n.startswith("gpu-")}


TARGET_COMMANDS: dict[str, tuple[Callable[[str], set[str]], Callable[[set[str]], set[str]]]] = {
    "versus": (_versus_targets, _versus_of_gate),
    "selfcheck": (_selfcheck_targets, _selfcheck_of_gate),
    "matrix": (_matrix_targets, _matrix_of_gate),
}

# Names, families, `all`, `runtime` (the CPU here, and in versus's controller), spaces and repeats.
TARGET_WORDS = ["cpu", "runtime", "all", "tpu", "gpu", "tpu-v5e,gpu-a100", " cpu , gpu-l4 ", "gpu,gpu-h100"]


@pytest.mark.parametrize("value", TARGET_WORDS)
@pytest.mark.parametrize("command", list(TARGET_COMMANDS))
def test_the_same_target_words_select_the_same_targets_in_every_command(command: str, value: str) -> None:
    selects, of_gate = TARGET_COMMANDS[command]
    gate = _gate_targets(value)
    assert gate, value
    assert selects(value) == of_gate(gate), f"{command} --targets {value!r}"


# Exact names (the gate's order, not the words'), patterns, kind: and tag:, spaces, and a mixture.
PROGRAM_WORDS = ["take,naive", "vmap_*", "kind:backward", "tag:core", " grad_* , kind:train ",
                 "*take,tag:core"]  # fmt: skip


@pytest.mark.parametrize("value", PROGRAM_WORDS)
def test_versus_selects_the_programs_the_gate_selects(value: str) -> None:
    """versus selects what the gate selects, sharded programs too (compared on structure), in its order."""
    assert _versus.select_programs(value) == Programs().select(value)


@pytest.mark.parametrize("value", PROGRAM_WORDS)
@pytest.mark.parametrize("command", ["bisect", "matrix"])
def test_bisect_and_matrix_hand_the_program_words_to_the_gate_untouched(
    command: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bisect and matrix select programs by the gate's own --programs (a collection of the gate here, then
    each release's run): the words go there as written, not split or narrowed to exact names."""
    seen: list[list[str]] = []

    def collect(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        seen.append(list(cmd))
        item = (
            "g/test_structure.py::cpu::take-f32"
            if command == "matrix"
            else "g/test_invariants.py::cpu::s.toml::i::take-f32"
        )
        return subprocess.CompletedProcess(cmd, 0, item + "\n", "")

    monkeypatch.setattr(subprocess, "run", collect)
    if command == "bisect":
        assert _bisect.check_selection("test_invariant", "cpu", value) == 1
    else:
        assert _bisect.check_selection(_matrix.MATRIX_K, "cpu", value, _matrix.MATRIX_CONFIG,
                                       tests="test_structure.py", kinds=("structure",)) == 1  # fmt: skip
    (cmd,) = seen
    assert cmd[cmd.index("--programs") + 1] == value
    suite = gate_command(
        _bisect.suite_run(Path(sys.executable), "k", "cpu", value, Path("r.json"), Path("d"))
    )
    assert suite[suite.index("--programs") + 1] == value


# ---------------------------------------------------------------------------------------------------------
# A near miss and an empty selection: one line, the gate's, from each command's entry point.


@pytest.fixture
def commands_start_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case is decided before a worker starts, a release is asked for, or a child runs an injection;
    and ``python -m invariants``'s process-wide settings are put back."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the command went past its command line")

    monkeypatch.setattr(_versus, "start_pair", refuse)
    monkeypatch.setattr(_versus, "resolve", refuse)
    monkeypatch.setattr(_bisect, "check_index", refuse)
    monkeypatch.setattr(_matrix, "check_index", refuse)
    monkeypatch.setattr(_selfcheck, "run_all", refuse)
    monkeypatch.setattr(sys, "dont_write_bytecode", sys.dont_write_bytecode)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")


def _said(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The one line ``python -m invariants ARGV`` says, with exit 2."""
    status = cli_main(list(argv))
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0].removeprefix("ERROR: ")


def _gate_says(select: Callable[[str], object], value: str) -> str:
    with pytest.raises(InvariantsError) as err:
        select(value)
    return str(err.value)


TARGETS_ARGV: dict[str, list[str]] = {
    "versus": ["versus", "--baseline", "current", "--candidate", "current"],
    "selfcheck": ["selfcheck", "--list"],
    "matrix": ["matrix", "--versions", "0.10.2"],
    "bisect": ["bisect", "--good", "0.4.30", "--bad", "0.10.2"],  # the gate collects its --targets
}


# A bad selection: what the gate says of it, in its words (a near miss names the nearest; an empty one says
# so), and each command must say exactly that.
BAD_TARGETS = {
    "gpu-a10": "--targets: unknown target 'gpu-a10' (did you mean ",
    "tpu-v5": "--targets: unknown target 'tpu-v5' (did you mean ",
    "": "--targets: empty selection; ",
    " , ": "--targets: empty selection; ",
}


PROGRAMS_ARGV: dict[str, list[str]] = {
    "versus": ["versus", "--baseline", "current", "--candidate", "current"],
    "matrix": ["matrix", "--versions", "0.10.2"],  # the gate collects its --programs, in a child
    "bisect": ["bisect", "--good", "0.4.30", "--bad", "0.10.2"],
}


BAD_PROGRAMS = {
    "nave": "--programs: unknown program 'nave' (did you mean 'naive'?)",
    "": "--programs: empty selection; ",
    " , ": "--programs: empty selection; ",
}


# option -> (the gate's reading of it, the commands that take it, the bad selections).
BAD_SELECTIONS = {
    "--targets": (select_targets, TARGETS_ARGV, BAD_TARGETS),
    "--programs": (Programs().select, PROGRAMS_ARGV, BAD_PROGRAMS),
}


@pytest.fixture
def collections_in_process(gate_pytester: InProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    """bisect's and matrix's collection of the gate, in this process: the command line they give their
    child (``python -m pytest GATE ... --collect-only``) is run here by pytester, and what it printed is
    handed back as the child's. What is tested is the selection's words and the line they come back as;
    the child process itself is tested where those commands refuse a selection (test_bisect.py,
    test_matrix.py)."""
    real = subprocess.run

    def run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if cmd[1:3] != ["-m", "pytest"]:
            return real(cmd, **kwargs)
        # pytester writes what the run printed to this process's streams too: the child's are its own.
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return gate_pytester.pytest(*cmd[3:], quick=False)

    monkeypatch.setattr(_bisect.subprocess, "run", run)


@pytest.mark.usefixtures("commands_start_nothing", "collections_in_process")
@pytest.mark.parametrize(
    ("option", "command", "value"),
    [(o, c, v) for o, (_, argv, bad) in BAD_SELECTIONS.items() for c in argv for v in bad],
)
def test_a_bad_selection_is_the_gates_one_line(
    option: str, command: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    gate_reads, argv, bad = BAD_SELECTIONS[option]
    gate = _gate_says(gate_reads, value)
    assert gate.startswith(bad[value]), gate
    assert _said(capsys, *argv[command], option, value) == gate
