"""The Action's step as its docs say to run it outside GitHub: every documented command line, run as written.

The folder has no spec folder, so the gate stops at once with its own one line: the command reached the gate
(the script took the interpreter the line gives it) and wrote the job summary, in seconds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
DOCS = ("docs/action.md", "docs/downstream.md")


def _documented_lines() -> list[tuple[str, str]]:
    """(doc, line) of each command line in a bash block of the docs that runs the action's script."""
    found = []
    for doc in DOCS:
        for block in re.findall(r"```bash\n(.*?)```", (ROOT / doc).read_text(), re.S):
            found += [(doc, line) for line in block.splitlines() if "action_gate.sh" in line]
    return found


def test_the_docs_show_the_scripts_command() -> None:
    assert {doc for doc, _ in _documented_lines()} == set(DOCS)


@pytest.mark.e2e
@pytest.mark.parametrize(("doc", "line"), _documented_lines())
def test_the_documented_command_runs_the_gate(tmp_path: Path, doc: str, line: str) -> None:
    # As a user types it, in a project folder with the gate's Python first on PATH; the checkout is CHECKOUT.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "GATE_", "PYTEST_"))}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", CHECKOUT=str(ROOT))
    command = re.sub(r"(?<![/\w])scripts/action_gate\.sh", str(ROOT / "scripts" / "action_gate.sh"), line)
    run = ["bash", "-c", command]
    proc = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=99, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-2000:]
    assert out.rstrip().splitlines()[-1] == "specs: spec folder not found", f"{doc}: {line}\n{out[-2000:]}"
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("## jax-embedding-invariants gate: failed (exit status 2)\n"), summary
