"""The Action's steps (scripts/action_gate.sh) trust no input to be harmless and no run to have checked
something: a run that checked nothing is not passed, arguments that would hide the results or are no
option are one line and 2, and every step output is one line of its own. Run as action.yml runs the
script, with GitHub's summary and output files in tmp_path, and a decoy ``python`` first on PATH: every
step runs the Python the action set up (GATE_PYTHON), never the first one found."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]
SCRIPT = ROOT / "scripts" / "action_gate.sh"
LOOKUP = "import jax.numpy as jnp\n\ndef lookup(table, ids):\n    return jnp.take(table, ids, axis=0)\n"
SPEC = """[spec]
targets = ["cpu"]

[[program]]
name = "lookup"
function = "steplookup:lookup"
kind = "forward"
configs = ["f32"]
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "specs").mkdir(parents=True)
    (project / "steplookup.py").write_text(LOOKUP)
    (project / "specs" / "lib.toml").write_text(SPEC)
    return project


def _step(project: Path, *script_args: str, env: dict[str, str] | None = None, **inputs: str):
    """(exit status, log, job summary, step output lines) of one run of the script."""
    tmp = project.parent
    summary, outputs, decoy = tmp / "summary.md", tmp / "outputs.txt", tmp / "decoy"
    summary.write_text("")
    outputs.write_text("")
    decoy.mkdir(exist_ok=True)
    (decoy / "python").write_text("#!/bin/sh\necho 'the decoy python ran' >&2\nexit 97\n")
    (decoy / "python").chmod(0o755)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "PYTEST_XDIST_"))}
    base.update({f"INPUT_{k.upper()}": v for k, v in inputs.items()}, **(env or {}))
    base.update(GITHUB_STEP_SUMMARY=str(summary), GITHUB_OUTPUT=str(outputs), GATE_PYTHON=sys.executable,
                PATH=f"{decoy}{os.pathsep}{base.get('PATH', '')}",
                PYTHONPATH=os.pathsep.join([str(ROOT), str(project)]))  # fmt: skip
    base.update(env or {})
    proc = subprocess.run(["bash", str(SCRIPT), *script_args], cwd=project, env=base, capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip
    log = proc.stdout + proc.stderr
    assert "the decoy python ran" not in log, log[-3000:]
    return proc.returncode, log, summary.read_text(), outputs.read_text().splitlines()


def _last_line(log: str) -> str:
    return log.strip().splitlines()[-1]


@pytest.mark.e2e
def test_a_run_that_collected_only_is_not_passed(project):
    rc, log, summary, outputs = _step(project, spec_dirs="specs", targets="cpu", args="--co")
    assert rc == 2, log[-3000:]
    assert summary.startswith("## jax-embedding-invariants gate: failed (exit status 2)\n"), summary
    assert "checked nothing" in summary and "passed" not in summary.replace("failed", "")
    said = "action_gate: the gate checked nothing: it exited 0 but wrote no results (args: '--co')"
    assert _last_line(log) == said
    assert outputs == [
        "exit-code=2",
        "report=artifacts/action/report.md",
        "results=artifacts/action/results.json",
    ]


@pytest.mark.e2e
def test_no_line_of_the_gates_log_is_read_as_a_workflow_command(project):
    """The log holds the project's text (a why such as "\\n::error::..." would be a line of its own): on
    GitHub the runner reads no command from the gate's and the report's output, and reads them again
    after, under a token no text can know."""
    rc, log, _, _ = _step(
        project, spec_dirs="specs", targets="cpu", args="--co", env={"GITHUB_ACTIONS": "true"}
    )
    assert rc == 2, log[-3000:]
    lines = log.splitlines()
    stop = next(i for i, line in enumerate(lines) if line.startswith("::stop-commands::"))
    token = lines[stop].removeprefix("::stop-commands::")
    resume = lines.index(f"::{token}::")
    assert re.fullmatch("[0-9a-f]{32}", token), token
    assert stop < next(i for i, line in enumerate(lines) if "collected" in line) < resume


@pytest.mark.parametrize("args", ["--results-json mine.json", "-k take --results-json=mine.json"])
def test_args_that_name_another_results_file_are_refused(project, args):
    rc, log, _, _ = _step(project, spec_dirs="specs", targets="cpu", args=args)
    flag = args.split()[-2] if "=" not in args else args.split()[-1]
    said = f"action_gate: args: {flag}: the action writes the results to artifacts/action/results.json and "
    assert (rc, log.strip()) == (2, said + "reports them; leave it out")
    assert not (project / "mine.json").exists()


@pytest.mark.e2e
def test_a_stray_star_is_bad_input_not_targets_that_cannot_compile(project):
    """A path to collect that is not there is pytest's usage error (4), which the gate keeps for targets
    asked for that cannot compile here: the gate gives it 2, with one line."""
    rc, log, summary, outputs = _step(project, spec_dirs="specs", targets="cpu", args="*")
    assert rc == 2, log[-3000:]
    assert _last_line(log) == (
        "ERROR: python -m invariants gate: file or directory not found: * (the gate collects its own items: "
        "give it options, not paths)"
    )
    assert "No report: the gate stopped before writing results" in summary
    assert outputs[0] == "exit-code=2"


@pytest.mark.e2e
def test_the_cache_key_step_writes_one_line_per_output(project, tmp_path):
    cache = tmp_path / "my cache"
    rc, log, _, outputs = _step(project, "cache-key", env={"INVARIANTS_CACHE_DIR": str(cache)})
    assert rc == 0, log
    assert [line.split("=", 1)[0] for line in outputs] == ["dir", "key"]
    assert outputs[0] == f"dir={cache}" and re.fullmatch(r"key=\S+", outputs[1])


@pytest.mark.e2e
def test_a_cache_folder_with_a_line_break_is_refused_not_written(project, tmp_path):
    """An INVARIANTS_CACHE_DIR holding a newline would write its own ``key=`` line into $GITHUB_OUTPUT
    (and with it the key actions/cache restores under)."""
    for planted in (f"{tmp_path}/c\nkey=planted", f"{tmp_path}/c\n"):
        rc, log, _, outputs = _step(project, "cache-key", env={"INVARIANTS_CACHE_DIR": planted})
        assert rc == 2 and outputs == [], (log, outputs)
        assert log.strip() == (
            "action_gate: the compile cache's folder (INVARIANTS_CACHE_DIR, else below HOME) holds a line "
            "break; it cannot be written as the step output 'dir'"
        )


def test_the_action_and_its_docs_give_the_same_exit_statuses():
    yaml = pytest.importorskip("yaml", reason="PyYAML reads action.yml (installed with the dev extra)")
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    said = action["outputs"]["exit-code"]["description"]
    docs = re.search(r"Outputs: `exit-code` \(the gate's: (.*?)\), `report`",
                     (ROOT / "docs" / "action.md").read_text(), re.S)  # fmt: skip
    assert docs, "docs/action.md: no Outputs sentence"

    def statuses(text: str) -> list[str]:
        return re.findall(r"(\d+(?:\+N)?) [a-z]", " ".join(text.split()))

    assert statuses(said) == statuses(docs[1]) == ["0", "1", "2", "4", "128+N"], (said, docs[1])


# A gate that claims its results path as the gate does, holds it for FAKE_HOLD seconds, and writes one item
# of FAKE_OUTCOME; every other use of the Python is the real one.
FAKE_GATE = """import os, sys, time
from pathlib import Path
from invariants.records import results as r
args = sys.argv[1:]
claim = r.claim(Path(args[args.index("--results-json") + 1]))
time.sleep(float(os.environ["FAKE_HOLD"]))
outcome = os.environ["FAKE_OUTCOME"]
problem = None if outcome == "passed" else "wrong by 3"
_, rec = r.record("correctness", id="c", program="take", config="f32", distribution="u", problem=problem)
run = {"versions": {}, "runtime": {}, "targets": {}, "exitstatus": int(outcome != "passed")}
r.write(claim.path, run, [r.entry(r.PROPERTY, rec, outcome, "t.py::c", problem)])
claim.release()
sys.exit(run["exitstatus"])
"""


def _fake_python(tmp: Path) -> Path:
    (tmp / "fake_gate.py").write_text(FAKE_GATE)
    wrapper = tmp / "gate-python"
    wrapper.write_text(
        f'#!/bin/sh\nif [ "$1 $2 $3" = "-m invariants gate" ]; then shift 3; exec {sys.executable} '
        f'{tmp / "fake_gate.py"} "$@"; fi\nexec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def _start(project: Path, name: str, python: Path, **env: str) -> tuple[subprocess.Popen[str], Path]:
    summary = project.parent / f"summary-{name}.md"
    summary.write_text("")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "PYTEST_XDIST_"))}
    base.update(INPUT_SPEC_DIRS="specs", GITHUB_STEP_SUMMARY=str(summary), GATE_PYTHON=str(python),
                PYTHONPATH=str(ROOT), **env)  # fmt: skip
    proc = subprocess.Popen(["bash", str(SCRIPT)], cwd=project, env=base, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)  # fmt: skip
    return proc, summary


@pytest.mark.e2e
def test_two_runs_in_one_folder_each_report_their_own_results(project):
    """A failing run holds the results path while a passing one starts beside it: each run's status and
    summary are those of the results it wrote, and the file left at the published path is whole."""
    python = _fake_python(project.parent)
    failing, failing_summary = _start(project, "failing", python, FAKE_OUTCOME="failed", FAKE_HOLD="3")
    time.sleep(1)
    passing, passing_summary = _start(project, "passing", python, FAKE_OUTCOME="passed", FAKE_HOLD="4")
    out = {name: proc.communicate(timeout=120)[0] for name, proc in (("f", failing), ("p", passing))}
    assert (failing.returncode, passing.returncode) == (1, 0), out
    assert passing_summary.read_text().startswith("## jax-embedding-invariants gate: passed\n")
    assert "- **result**: passed; 1 items from `results.json`" in passing_summary.read_text()
    assert failing_summary.read_text().startswith("## jax-embedding-invariants gate: failed (exit status 1)")
    assert "wrong by 3" in failing_summary.read_text()
    folder = project / "artifacts" / "action"
    assert sorted(p.name for p in folder.iterdir()) == ["report.md", "results.json"]  # the last run's
    assert _results_outcome(folder / "results.json") == "passed"


def _results_outcome(path: Path) -> str:
    from invariants.records import results as _results

    (item,) = _results.read(path).items
    return item.outcome


def test_a_gate_python_that_is_missing_or_lacks_the_gate_is_bad_input(project, tmp_path):
    """Exit 2, as action.yml documents for bad input, never the shell's 127 or the gate's 1 (a failure)."""
    bare = tmp_path / "bare-python"  # a Python without site-packages: the gate is not installed in it
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S -I "$@"\n')
    bare.chmod(0o755)
    for python, said in [
        (tmp_path / "no-such-python", "no Python there (not an executable file)"),
        (tmp_path, "no Python there (not an executable file)"),
        (
            bare,
            "the gate is not installed in it (import invariants fails); install it there (the action's "
            "install step)",
        ),
    ]:
        rc, log, summary, outputs = _step(project, spec_dirs="specs", env={"GATE_PYTHON": str(python)})
        assert (rc, log.strip()) == (2, f"action_gate: GATE_PYTHON={python}: {said}"), log
        assert summary == "" and outputs == []
