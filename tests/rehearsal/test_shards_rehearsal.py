"""The sharded gate's workflow (.github/workflows/gate-shards.yml), rehearsed: its own steps, run here as
GitHub runs them. The ``plan`` step's script turns ``shards`` into the matrix; each matrix job's gate step
(scripts/action_gate.sh with ``INPUT_SHARD``, as action.yml runs it) writes its shard's results file and
summary; the files land where download-artifact puts them; the ``report`` job's merge step writes one
summary and its exit status. Then a missing shard: the merge fails in one line. actionlint checks the
workflow itself (tests/unit/test_workflows.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "gate-shards.yml"
N = 6  # more shards than the project has units: one at least has nothing to do
LIB = """import jax.numpy as jnp

def lib_take(table, ids):
    return jnp.take(table, ids, axis=0)

def lib_take_clip(table, ids):
    return jnp.take(table, ids, axis=0, mode="clip")

def lib_gather(table, ids):
    return table[ids]
"""
SPEC = """[spec]
targets = ["cpu"]
{programs}
[[invariant]]
id = "no_while"
programs = ["lib_take", "lib_take_clip", "lib_gather"]
assert = "while_loops == 0"
why = "a lookup is one gather"
"""
PROGRAM = '\n[[program]]\nname = "{0}"\nfunction = "lib:{0}"\nkind = "forward"\nconfigs = ["f32"]\n'


def _steps() -> dict[str, dict]:
    yaml = pytest.importorskip("yaml", reason="PyYAML reads the workflow (installed with the libs extra)")
    jobs = yaml.safe_load(WORKFLOW.read_text())["jobs"]
    return {
        "plan": next(s for s in jobs["plan"]["steps"] if s.get("id") == "plan"),
        "merge": next(s for s in jobs["report"]["steps"] if s.get("name") == "one report of every shard"),
    }


def _env(tmp_path: Path, name: str, **more: str) -> tuple[dict[str, str], Path, Path]:
    summary, outputs = tmp_path / f"{name}.summary.md", tmp_path / f"{name}.outputs"
    summary.write_text("")
    outputs.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "PYTEST_XDIST_"))}
    env.update(GITHUB_STEP_SUMMARY=str(summary), GITHUB_OUTPUT=str(outputs), GATE_PYTHON=sys.executable)
    return {**env, **more}, summary, outputs


def _run(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900, check=False)  # fmt: skip


def test_the_plan_step_makes_the_matrix(tmp_path):
    plan = _steps()["plan"]
    env, _, outputs = _env(tmp_path, "plan", SHARDS="3")
    assert _run(plan["run"], tmp_path, env).returncode == 0
    assert outputs.read_text() == 'shards=["1/3","2/3","3/3"]\n'
    for bad in ("0", "", "two"):
        env, _, _ = _env(tmp_path, "bad", SHARDS=bad)
        proc = _run(plan["run"], tmp_path, env)
        assert proc.returncode == 2
        assert proc.stderr.strip() == f"shards: '{bad}' is not a number of jobs, 1 or more"


def test_the_shards_and_the_merge_job_as_the_workflow_runs_them(tmp_path):
    project = tmp_path / "project"
    (project / "specs").mkdir(parents=True)
    (project / "lib.py").write_text(LIB)
    programs = "".join(PROGRAM.format(n) for n in ("lib_take", "lib_take_clip", "lib_gather"))
    (project / "specs" / "lib.toml").write_text(SPEC.format(programs=programs))
    shards = tmp_path / "report-job" / "shards"
    idle = []
    for k in range(1, N + 1):
        env, summary, outputs = _env(
            tmp_path, f"shard{k}", INPUT_SPEC_DIRS="specs", INPUT_TARGETS="cpu", INPUT_SHARD=f"{k}/{N}",
            INPUT_ARGS="--snapshot-update -p no:cacheprovider",
        )  # fmt: skip
        proc = _run(f'bash "{ROOT}/scripts/action_gate.sh"', project, env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        said = summary.read_text()
        assert said.startswith(f"## jax-embedding-invariants gate, shard {k}/{N}: passed\n"), said
        assert "the merge job reports the whole run" in said
        idle += [k] if "had nothing to do" in said else []
        assert "results=artifacts/action/results.json" in outputs.read_text()
        # upload-artifact of artifacts/action/ as gate-shard-<job index>, then download-artifact
        shutil.copytree(project / "artifacts" / "action", shards / f"gate-shard-{k - 1}")
    assert idle  # pytest's 5 for a shard with nothing to do: the step passed it
    # The report job runs in the gate's checkout: its scripts, and the downloaded shards.
    job = shards.parent
    (job / "scripts").symlink_to(ROOT / "scripts")
    merge = _steps()["merge"]["run"]
    env, summary, _ = _env(tmp_path, "merge")
    proc = _run(merge, job, env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    said = summary.read_text()
    assert said.startswith(f"## jax-embedding-invariants gate, {N} shards: passed\n"), said
    assert "- **result**: passed;" in said
    assert all(f"| `{p}` | f32 |" in said for p in ("lib_take", "lib_take_clip", "lib_gather")), said
    assert (job / "merged-report.md").is_file()

    shutil.rmtree(shards / "gate-shard-1")  # a shard whose job left no results
    env, summary, _ = _env(tmp_path, "missing")
    proc = _run(merge, job, env)
    assert proc.returncode == 2
    said = rf".*: shard 2/{N} missing; a split run is reported whole, from every shard's results file"
    assert re.fullmatch(said, proc.stderr.strip().splitlines()[-1])
    assert summary.read_text().startswith(
        f"## jax-embedding-invariants gate, {N - 1} shards: failed (exit status 2)"
    )
