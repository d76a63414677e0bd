"""The composite action's gate step (scripts/action_gate.sh), run locally as action.yml runs it.

The script gets the action's inputs as INPUT_* environment variables and GitHub's GITHUB_STEP_SUMMARY and
GITHUB_OUTPUT files; here they are files in tmp_path. What is checked: the summary holds the gate's report,
the exit status is the gate's (the worked example under examples/downstream fails on purpose, a project
that holds passes), and bad input is one line and 2. action.yml itself is checked in
tests/unit/test_workflows.py (its metadata, actionlint on its steps, shellcheck on this script).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# The action's step as GitHub runs it, the gate in a child: end to end (tests/conftest.py: -m e2e).
pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "scripts" / "action_gate.sh"
DOWNSTREAM = ROOT / "examples" / "downstream"


def _run_step(project: Path, tmp_path: Path, **inputs: str) -> tuple[int, str, str, dict[str, str]]:
    """(exit status, output, the job summary, the step outputs) of one run of the gate step."""
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs.txt"
    summary.write_text("")  # GitHub's summary file exists, empty, when a step starts
    outputs.write_text("")
    # Not an xdist worker's variables either: with them, syrupy in the gate would take itself for a worker.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "PYTEST_XDIST_"))}
    env.update({f"INPUT_{k.upper()}": v for k, v in inputs.items()})
    env.update(GITHUB_STEP_SUMMARY=str(summary), GITHUB_OUTPUT=str(outputs))
    # The action's setup-python puts the installed Python first on PATH: here, this one.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(
        ["bash", str(SCRIPT)], cwd=project, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    pairs = dict(line.split("=", 1) for line in outputs.read_text().splitlines() if "=" in line)
    return proc.returncode, proc.stdout + proc.stderr, summary.read_text(), pairs


@pytest.mark.slow
def test_the_failing_example_fails_the_step_with_the_gates_status_and_its_report(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(DOWNSTREAM, project)
    rc, out, summary, outputs = _run_step(
        project, tmp_path, spec_dirs="specs\n", targets="cpu", args="--snapshot-update"
    )
    assert rc == 1, out[-3000:]
    assert outputs == {"exit-code": "1", "report": "artifacts/action/report.md"}
    assert summary.startswith("## jax-embedding-invariants gate: failed (exit status 1)\n")
    report = (project / "artifacts" / "action" / "report.md").read_text()
    assert report and report in summary
    assert "mylib_no_while failed on cpu mylib_row_loop [f32]: assert while_loops == 0" in summary
    assert "| `mylib_take` | f32 |" in summary
    # The same gate, called directly on the project as the step left it: the same status.
    direct = subprocess.run(
        [sys.executable, "-m", "invariants", "gate", "--spec-dir", "specs", "--snapshot-dir", "snapshots",
         "--no-catalog", "--targets", "cpu", "--results-json", str(tmp_path / "direct.json")],
        cwd=project, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert direct.returncode == rc, direct.stdout[-2000:] + direct.stderr[-2000:]


LIB = """
import jax.numpy as jnp

def take(table, indices):
    return jnp.take(table, indices, axis=0)
"""
SPEC = """
[spec]
targets = ["cpu"]

[[program]]
name = "lib_take"
function = "lib:take"
kind = "forward"
configs = ["f32"]

[[invariant]]
id = "lib_no_while"
programs = ["lib_take"]
assert = "while_loops == 0"
why = "a lookup is one gather"
"""


@pytest.mark.slow
def test_a_project_that_holds_passes_the_step(tmp_path):
    project = tmp_path / "project"
    (project / "gate specs").mkdir(parents=True)  # a folder name with a space: one folder per line
    (project / "lib.py").write_text(LIB)
    (project / "gate specs" / "lib.toml").write_text(SPEC)
    rc, out, summary, outputs = _run_step(
        project, tmp_path, spec_dirs="  gate specs  \n\n", snapshot_dir="snaps", targets="cpu",
        args="--snapshot-update",
    )  # fmt: skip
    assert rc == 0, out[-3000:]
    assert outputs["exit-code"] == "0"
    assert summary.startswith("## jax-embedding-invariants gate: passed\n")
    assert "- **result**: passed;" in summary and "| `lib_take` | f32 |" in summary
    assert (project / "snaps" / "cpu" / "lib_take.f32.txt").is_file()


@pytest.mark.slow
def test_bad_input_is_one_line_and_2(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    rc, out, summary, outputs = _run_step(project, tmp_path, spec_dirs="specs", targets="cpu")
    assert rc == 2, out[-3000:]
    assert out.strip().splitlines()[-1] == "specs: spec folder not found"
    assert "No report: the gate stopped before writing results" in summary
    assert outputs["exit-code"] == "2"

    rc, out, summary, _ = _run_step(project, tmp_path, spec_dirs=" \n")
    said = "action_gate: spec-dirs: no folder given; name the project's spec folders, one per line"
    assert (rc, out.strip()) == (2, said)
    rc, out, _, _ = _run_step(project, tmp_path, spec_dirs="specs", catalog="yes")
    assert (rc, out.strip()) == (2, "action_gate: catalog: 'yes' is neither true nor false")
