"""The one way to run the gate in a child: its command line and its environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from invariants.compile.child import CHILD_ENV, GATE_DIR, GateRun, gate_command, gate_env, run_gate, stage


def test_gate_command_is_the_selection_it_is_given():
    cmd = gate_command(GateRun(targets="cpu", programs=("naive", "take"), configs="f32,bf16",
                               results=Path("r.json"), dump_dir=Path("d"),
                               plugins=("invariants.selfcheck.inject",), k="not ratio",
                               raw_invariants=True))  # fmt: skip
    # The gate modules the package ships, run in the results' folder, whatever the working directory.
    assert cmd[1:4] == ["-m", "pytest", str(GATE_DIR)]
    assert cmd[cmd.index("--rootdir") + 1] == str(Path("r.json").resolve().parent)
    assert cmd[cmd.index("--programs") + 1] == "naive,take" and cmd[cmd.index("-k") + 1] == "not ratio"
    assert cmd[cmd.index("--configs") + 1] == "f32,bf16"
    assert "--configs" not in gate_command(GateRun(targets="cpu", results=Path("r.json"), dump_dir=Path("d")))
    assert cmd[cmd.index("-m", 3) + 1] == "not throughput"
    assert "invariants.selfcheck.inject" in cmd and cmd[-1] == "--raw-invariants"


def test_gate_env_drops_inherited_experiments(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_disable_hlo_passes=fusion")
    monkeypatch.setenv("INVARIANTS_INJECT", "take=m:f")
    env = gate_env({"INVARIANTS_INJECT": "naive=m:g"}, pythonpath=True)
    assert "XLA_FLAGS" not in env and env["INVARIANTS_INJECT"] == "naive=m:g"
    assert env["JAX_PLATFORMS"] == "cpu" and env[CHILD_ENV] == "1" and env["PYTHONDONTWRITEBYTECODE"] == "1"
    # Another interpreter sees this package and nothing else of this environment.
    assert env["PYTHONPATH"] == str(stage()) and [p.name for p in stage().iterdir()] == ["invariants"]
    assert (stage() / "invariants" / "gate" / "test_structure.py").exists()
    staged = gate_command(GateRun(targets="cpu", results=Path("r.json"), dump_dir=Path("d"), staged=True))
    assert staged[3] == str(stage() / "invariants" / "gate")


def test_run_gate_reports_a_child_that_wrote_no_results(tmp_path: Path):
    import sys

    cmd = [sys.executable, "-c", "print('no gate here')", "--results-json", str(tmp_path / "r.json")]
    child = run_gate(cmd, env=gate_env(), folder=tmp_path / "c", timeout=60)
    assert child.returncode == 0 and child.results is None
    assert child.log.read_text().strip() == "no gate here"


def test_a_child_in_another_installation_loads_its_own_libtpu(monkeypatch):
    """JAX names the libtpu it found in TPU_LIBRARY_PATH of the process that started it: a release's child
    (another interpreter) that inherited it compiled with this installation's libtpu, not its own."""
    from invariants.compile.child import gate_env

    monkeypatch.setenv("TPU_LIBRARY_PATH", "/pin/site-packages/libtpu/libtpu.so")
    assert "TPU_LIBRARY_PATH" not in gate_env(pythonpath=True)
    assert gate_env()["TPU_LIBRARY_PATH"] == "/pin/site-packages/libtpu/libtpu.so"
