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
    # The action passes the Python that setup-python installed the gate in: here, this one.
    env["GATE_PYTHON"] = sys.executable
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
    assert outputs == {
        "exit-code": "1",
        "report": "artifacts/action/report.md",
        "results": "artifacts/action/results.json",
    }
    assert summary.startswith("## jax-embedding-invariants gate: failed (exit status 1)\n")
    report = (project / "artifacts" / "action" / "report.md").read_text()
    assert report and report in summary
    failed = r"mylib\_no\_while failed on cpu mylib\_row\_loop \[f32\]: assert while\_loops == 0"
    assert failed in summary  # the reason as written, its markup escaped
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


LOCAL_PROJECT = """
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "locallib"
version = "0.0.1"
"""


def _install_step() -> str:
    """The run text of action.yml's install step, as GitHub runs it with bash."""
    yaml = pytest.importorskip("yaml", reason="PyYAML reads action.yml (installed with the libs extra)")
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    (step,) = [s for s in action["runs"]["steps"] if s.get("name") == "install the gate"]
    assert step["working-directory"] == "${{ inputs.working-directory }}"
    return step["run"]


@pytest.mark.slow
def test_the_package_input_installs_the_project_beside_the_gate(tmp_path):
    """``package`` is one pip argument per line: the project under test (``-e .``, from the working
    directory) and the gate as a direct reference with spaces (``name[test] @ file://...``), as a
    workflow pins it to a URL. The fresh environment borrows this one's packages (jax, pytest...) after its
    own, so that pip resolves the dependencies without downloading them."""
    import sysconfig

    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv, "uv is in the test extra: pip install -e '.[test]'"
    src = tmp_path / "gate-src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    noise = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
    for name in ("invariants", "snapshots"):
        shutil.copytree(ROOT / name, src / name, ignore=noise)
    build = subprocess.run([uv, "build", "-q", "--wheel", "-o", str(tmp_path / "dist"), str(src)],
                           capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    venv = tmp_path / "venv"
    made = subprocess.run([uv, "venv", "-q", "--seed", "--python", sys.executable, str(venv)],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    (Path(site) / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    project = tmp_path / "project"
    (project / "locallib").mkdir(parents=True)
    (project / "pyproject.toml").write_text(LOCAL_PROJECT)
    (project / "locallib" / "__init__.py").write_text("WHO = 'the project under test'\n")
    ours = ("INPUT_", "GITHUB_", "PYTHON", "VIRTUAL")  # this run's: none may reach the step
    env = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
    env["GATE_PYTHON"] = str(python)  # the action's setup-python output
    env["GITHUB_ACTION_PATH"] = str(tmp_path / "not-used")
    env["INPUT_PACKAGE"] = f"  -e .\n\njax-embedding-invariants[test] @ {wheel.as_uri()}\n"
    proc = subprocess.run(["bash", "-e", "-c", _install_step()], cwd=project, env=env, capture_output=True,
                          text=True, timeout=900, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    where = subprocess.run(
        [str(python), "-c", "import locallib, invariants; print(locallib.WHO); print(invariants.__file__)"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert where.returncode == 0, where.stderr[-2000:]
    who, package = where.stdout.strip().splitlines()
    assert who == "the project under test"
    assert Path(package).is_relative_to(venv), package  # the wheel's, not this checkout's
