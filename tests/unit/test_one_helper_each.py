"""One helper for one job, where copies would behave differently: the one clock choice
(``runtime_clock``: the throughput items and versus), the one reading of ``JAX_PLATFORMS``
(``_config.requested_platforms``: the gate's backend guard and versus), and the one display of a path
(``_paths.shown``: spec files and the gate's summary lines)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from invariants import _config, _paths
from invariants._errors import InvariantsError
from invariants.specfile.reader import load_specs
from invariants.timing.paired import runtime_clock
from invariants.versus import command as versus

PACKAGE = Path(_paths.__file__).parent


# ---------------------------------------------------------------------------------------------------------
# One clock choice.


def _versus_clock(platform: str, choice: str | None) -> str:
    argv = ["--baseline", "current", "--candidate", "current", *(["--clock", choice] if choice else [])]
    return versus._settings(versus._parser().parse_args(argv), platform).clock


@pytest.mark.parametrize("choice", [None, "cpu", "wall"])
@pytest.mark.parametrize("platform", ["cpu", "tpu", "gpu"])
def test_versus_chooses_the_clock_the_timing_chooses(platform: str, choice: str | None) -> None:
    """The same clock, or the same refusal (the option's name first: INVARIANTS_CLOCK's 'timing', versus's
    '--clock'), for each backend and request."""
    try:
        timing = runtime_clock(platform, choice)[0]
    except InvariantsError as err:
        timing_said = str(err).removeprefix("timing: ")
        with pytest.raises(InvariantsError) as versus_err:
            _versus_clock(platform, choice)
        assert str(versus_err.value) == f"--clock: {timing_said}"
        return
    assert _versus_clock(platform, choice) == timing


# ---------------------------------------------------------------------------------------------------------
# One reading of JAX_PLATFORMS.


@pytest.mark.parametrize(
    ("value", "backend"),
    [(None, "cpu"), ("", "cpu"), ("cpu", "cpu"), ("tpu", "tpu"), ("cuda", "cuda"), (" cuda , cpu", "cuda"),
     (",cuda", "cuda"), (" , tpu", "tpu")],
)  # fmt: skip
def test_versus_builds_for_the_backend_jax_platforms_asks_for(
    monkeypatch: pytest.MonkeyPatch, value: str | None, backend: str
) -> None:
    """versus builds a version SPEC's environment for the backend the gate's guard holds JAX to: the first
    backend JAX_PLATFORMS names (unset: the CPU; set but empty: JAX chooses, and versus builds CPU jax)."""
    from invariants.releases import environments

    if value is None:
        monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    else:
        monkeypatch.setenv("JAX_PLATFORMS", value)
    assert (_config.requested_platforms() or ["cpu"])[0] == backend

    class Pinned(Exception):
        pass

    tpu: list[bool] = []

    def pins(version: str, jaxlibs: object, **kwargs: bool) -> None:
        tpu.append(kwargs.get("tpu", False))
        raise Pinned

    stand_ins = {"check_index": lambda url: None, "list_releases": lambda name, url: [],
                 "resolve_version": lambda version, releases, flag: version, "choose_pins": pins}  # fmt: skip
    for name, stand_in in stand_ins.items():  # where versus looks them up: its own names, or the module's
        monkeypatch.setattr(environments, name, stand_in)
        if hasattr(versus, name):
            monkeypatch.setattr(versus, name, stand_in)
    args = argparse.Namespace(targets="cpu", index_url="https://example.invalid/simple", cache_dir=Path("c"))
    build = versus._Builder(args, lambda line: None)
    if backend == "cuda":
        refused = r"^--baseline 0\.10\.2: a version SPEC builds CPU \(or TPU\) jax; on a cuda host"
        with pytest.raises(InvariantsError, match=refused):
            build("0.10.2", "--baseline")
        return
    with pytest.raises(Pinned):
        build("0.10.2", "--baseline")
    assert tpu == [backend == "tpu"]


# ---------------------------------------------------------------------------------------------------------
# One display of a path.


def test_a_spec_file_is_named_as_shown_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the working directory: relative (what a reader clicks); elsewhere: as given."""
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    inside = project / "specs"
    assert _paths.shown(inside / "lib.toml") == "specs/lib.toml"
    with pytest.raises(InvariantsError, match=r"^specs: spec folder not found$"):
        load_specs(inside)
    outside = tmp_path / "elsewhere"
    assert _paths.shown(outside) == str(outside)
    with pytest.raises(InvariantsError) as err:
        load_specs(outside)
    assert str(err.value) == f"{_paths.shown(outside)}: spec folder not found"


def _own_path_display(path: Path) -> bool:
    """Whether a module makes a path relative to the working directory itself."""
    return re.search(r"relative_to\(\s*Path\.cwd\(\)", path.read_text(encoding="utf-8")) is not None


def test_no_module_keeps_its_own_path_display() -> None:
    """A path is made relative to the working directory in one place only: every message names a file
    through ``_paths.shown``."""
    copies = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "_paths.py" and _own_path_display(path)
    ]
    assert copies == []
