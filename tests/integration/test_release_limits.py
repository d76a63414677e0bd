"""Sharded programs on JAX releases that lack an API the tool needs, run as a user runs them: the gate and
``versus`` in the real jax 0.4.30 and 0.7.2 environments that ``.ci/run``'s release step builds (cached in
``~/.cache/jax-embedding-invariants/ci-releases``; a test skips, naming it, where that environment is not
built). One line names the API and the release and says it is the tool's limit, never the program's; that
program alone is left out (a skip, or "not compared", exit 4), the others compiled and compared.

jax 0.4.30 has no ``jax.sharding.AxisType``, which a pod program's mesh needs; jax 0.7.2 has
``jax.sharding.use_abstract_mesh``, but ``with_sharding_constraint`` finds no mesh in it, which a project's
sharded program is checked under."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
RELEASES = Path.home() / ".cache" / "jax-embedding-invariants" / "ci-releases"
LIMIT = ": a limit of the tool on this release, not of the program"


def _release(version: str) -> Path:
    env = RELEASES / f"jax-{version}"
    if not (env / ".installed").exists():
        pytest.skip(f"{env}: no jax {version} environment here; .ci/run's release step builds it")
    return env


def test_the_gate_on_a_release_without_an_api_skips_that_program_alone(tmp_path: Path) -> None:
    """jax 0.4.30 on the 8-device CPU target, whose programs compile in one child: the pod program skips
    with the line and records the API; the other sharded program compiles in the same child."""
    env = _release("0.4.30")
    results = tmp_path / "results.json"
    cmd = [str(env / "bin" / "python"), "-m", "pytest", "invariants/gate", "-m", "not throughput",
           "--targets", "cpu-8dev", "--programs", "fsdp_take,sharded_rows_batch_take", "--no-cache",
           "--results-json", str(results), "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
           "--basetemp", str(tmp_path / "bt")]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=600, check=False)  # fmt: skip
    out = proc.stdout + proc.stderr
    assert "child exited" not in out and results.exists(), out[-3000:]
    items = json.loads(results.read_text())["items"]
    skipped = [i for i in items if i["kind"] == "skipped" and "lacks" in i]
    line = (
        "cpu-8dev/fsdp_take[f32]: jax 0.4.30 has no jax.sharding.AxisType, which this tool needs to build a "
        f"mesh with axis types{LIMIT}"
    )
    assert skipped and all(i["reason"] == line and i["lacks"] == "jax.sharding.AxisType" for i in skipped)
    assert {i["program"] for i in skipped} == {"fsdp_take"}
    assert line in out
    compiled = [i for i in items if i["kind"] == "structure"]
    assert [i["program"] for i in compiled] == ["sharded_rows_batch_take"], out[-3000:]


def _versus(baseline: Path, cwd: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    record = cwd / "versus.json"
    cmd = [sys.executable, "-m", "invariants", "versus", "--baseline", str(baseline),
           "--candidate", "current", "--no-timing", "--json", str(record), *args]  # fmt: skip
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    assert record.exists(), proc.stderr[-3000:]
    return proc, json.loads(record.read_text())


def test_versus_against_a_release_without_an_api_leaves_that_program_not_compared(tmp_path: Path) -> None:
    env = _release("0.4.30")
    proc, record = _versus(env, tmp_path, "--programs", "fsdp_take,sharded_rows_batch_take",
                           "--targets", "cpu-8dev")  # fmt: skip
    line = (
        "fsdp_take/f32/cpu-8dev not compared (baseline: cpu-8dev/fsdp_take[f32]: jax 0.4.30 has no "
        f"jax.sharding.AxisType, which this tool needs to build a mesh with axis types{LIMIT})"
    )
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert record["not_compared"] == [line] and record["reasons"] == []
    assert proc.stderr.strip().splitlines()[-1] == f"versus: {line}"
    assert "**NOT COMPARED**" in proc.stdout and f"- {line}" in proc.stdout
    compared = {s["key"]: s for s in record["structure"]}
    assert "snapshot" in compared["sharded_rows_batch_take/f32/cpu-8dev"]["baseline"]


PROJECT = """
[spec]
targets = ["cpu-8dev"]

[[program]]
name = "constrained"
function = "embed:constrained"
kind = "forward"
mesh = { data = 8 }
index_sharding = ["data"]

[[program]]
name = "meshed"
function = "embed:plain"
kind = "forward"
mesh = { data = 8 }
index_sharding = ["data"]

[[invariant]]
id = "no_while"
programs = ["tag:user"]
assert = "while_loops == 0"
why = "a lookup needs no loop"
"""
EMBED = """
import jax
from jax.sharding import PartitionSpec


def constrained(table, ids):
    return jax.lax.with_sharding_constraint(table[ids], PartitionSpec("data"))


def plain(table, ids):
    return table[ids]
"""


def test_versus_never_blames_a_project_s_program_for_what_a_release_cannot_trace(tmp_path: Path) -> None:
    """jax 0.7.2 checks a project's sharded program on an abstract mesh, where its with_sharding_constraint
    finds none: that program is not compared, with the tool's line (before, the worker stopped, saying the
    program fails); the project's other program is compared."""
    env = _release("0.7.2")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "s.toml").write_text(PROJECT)
    (tmp_path / "embed.py").write_text(EMBED)
    proc, record = _versus(env, tmp_path, "--spec-dir", "specs")
    line = (
        "constrained/f32/cpu-8dev not compared (baseline: cpu-8dev/constrained[f32]: jax 0.7.2 has no mesh "
        "for jax.lax.with_sharding_constraint in jax.sharding.use_abstract_mesh, which this tool needs to "
        f"trace a program on a mesh without devices{LIMIT})"
    )
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert record["not_compared"] == [line]
    assert "identical on both sides: meshed/f32/cpu-8dev" in proc.stdout
    assert "fails on" not in proc.stdout + proc.stderr
