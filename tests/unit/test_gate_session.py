"""The gate as users run it, in child pytest processes on a scratch copy of the project.

Covers: snapshot update safety (syrupy must never delete or rewrite another target's snapshots, or those
of deselected items), a missing snapshot's message, bad names and an absent backend as one line each, and
identical verdicts under pytest-xdist.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A scratch project root: the gate's tests and the committed snapshots of two targets."""
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "tests" / "gate", tmp_path / "tests" / "gate")
    for target in ("cpu", "tpu-v5e"):
        shutil.copytree(ROOT / "snapshots" / target, tmp_path / "snapshots" / target)
    return tmp_path


def run(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=project, capture_output=True, text=True, env=full_env, check=False, timeout=600,
    )  # fmt: skip


def snapshot_bytes(project: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(project)): p.read_bytes() for p in (project / "snapshots").rglob("*") if p.is_file()
    }


def test_update_leaves_other_targets_and_deselected_items_byte_identical(project):
    planted = project / "snapshots" / "tpu-v9x" / "naive.f32.txt"  # a target this host has never heard of
    planted.parent.mkdir(parents=True)
    planted.write_text("planted by a TPU host\n")
    stale = project / "snapshots" / "cpu" / "naive.f32.txt"
    stale.write_text("stale\n")
    before = snapshot_bytes(project)

    proc = run(project, "tests/gate/test_structure.py", "--targets", "cpu", "--programs", "naive",
               "--snapshot-update")  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:]
    after = snapshot_bytes(project)

    assert after.pop("snapshots/cpu/naive.f32.txt") != before.pop("snapshots/cpu/naive.f32.txt")  # updated
    assert set(after) == set(before)  # nothing deleted, nothing added
    assert after == before  # every other target and every deselected program: byte-identical


def test_full_update_on_cpu_keeps_every_other_target(project):
    """An unfiltered update of the CPU target: TPU snapshots (a target not selected) stay byte-identical."""
    before = {k: v for k, v in snapshot_bytes(project).items() if not k.startswith("snapshots/cpu/")}
    proc = run(project, "tests/gate/test_structure.py", "--targets", "cpu", "--snapshot-update")
    assert proc.returncode == 0, proc.stdout[-2000:]
    after = {k: v for k, v in snapshot_bytes(project).items() if not k.startswith("snapshots/cpu/")}
    assert after == before


def test_missing_snapshot_names_the_update_command(project):
    (project / "snapshots" / "cpu" / "take.f32.txt").unlink()
    proc = run(project, "tests/gate/test_structure.py", "--targets", "cpu", "--programs", "take")
    assert proc.returncode == 1
    assert (
        "no snapshot for take[f32] on cpu; record it with: pytest tests/gate/test_structure.py "
        "--targets cpu --programs take --snapshot-update" in proc.stdout
    )


@pytest.mark.parametrize(
    ("args", "env", "line"),
    [
        (["--programs", "nave"], {}, "ERROR: nave: unknown program (did you mean 'naive'"),
        (["--targets", "tpu-v5x"], {}, "ERROR: --targets: unknown target 'tpu-v5x' (did you mean"),
        ([], {"JAX_PLATFORMS": "tpu"}, "ERROR: JAX_PLATFORMS=tpu: backend not available on this host"),
    ],
)
def test_bad_input_is_one_line(project, args, env, line):
    proc = run(project, "tests/gate", "--collect-only", *args, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert line in out, out[-2000:]
    assert "Traceback" not in out


def outcomes(project: Path, *args: str) -> dict[str, str]:
    results = project / "results.json"
    proc = run(project, "tests/gate/test_structure.py", "tests/gate/test_invariants.py", "--targets", "cpu",
               "--results-json", str(results), *args)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:]
    return {item["nodeid"]: item["outcome"] for item in json.loads(results.read_text())["items"]}


def test_xdist_gives_the_same_verdicts_and_snapshots(project):
    pytest.importorskip("xdist")
    before = snapshot_bytes(project)
    serial = outcomes(project)
    parallel = outcomes(project, "-n", "2")
    assert serial == parallel and len(serial) > 100
    assert snapshot_bytes(project) == before


def test_raw_invariants_drop_scopes_and_ratchets(project):
    """What bisect relies on: with --raw-invariants a ratchet is a plain invariant, so known-bad fails."""
    args = ("tests/gate/test_invariants.py", "--targets", "tpu-v5e", "--programs", "grad_vmap_naive",
            "-k", "f32-grad_no_while_vmap and not large and not i8 and not 2d")  # fmt: skip
    scoped = run(project, *args)
    assert scoped.returncode == 0 and "1 xfailed" in scoped.stdout, scoped.stdout[-1500:]
    raw = run(project, *args, "--raw-invariants")
    assert raw.returncode == 1 and "grad_no_while_vmap failed on tpu-v5e grad_vmap_naive [f32]" in raw.stdout


def test_plain_run_does_not_call_baselines_unused(project):
    """With no paths given (as `pytest` from the root runs), syrupy scans each snapshot folder whole; the
    efficiency baselines beside the snapshots must not be reported unused (that fails the run)."""
    assert list((project / "snapshots" / "cpu" / "efficiency").glob("*.json"))
    before = snapshot_bytes(project)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('testpaths = ["tests"]', 'testpaths = ["tests/gate"]'))
    # No path and no -k, as `pytest` from the root runs; one target, nothing else filtered.
    proc = run(project, "--targets", "cpu", env={"INVARIANTS_RATIO_MAX_SECONDS": "1"})
    assert "unused" not in proc.stdout, proc.stdout[-1500:]
    assert proc.returncode == 0, proc.stdout[-1500:]
    assert snapshot_bytes(project) == before


def test_a_metric_the_target_does_not_provide_fails_in_one_line(project):
    """Run as a user would: an invariant on flops for the H100 (no cost_analysis() ahead of time) and on
    estimated_cycles for the CPU (no cycle estimates) fails, each with one line saying why; the same
    invariant on tpu-v5e, which provides both, passes."""
    specs = project / "specs"
    specs.mkdir()
    (specs / "s.toml").write_text(
        '[spec]\ntargets = ["gpu-h100", "tpu-v5e", "cpu"]\n\n'
        '[[invariant]]\nid = "predicted"\nprograms = ["naive"]\nconfigs = ["f32"]\n'
        'assert = "flops + estimated_cycles >= 0"\n'
    )
    proc = run(project, "tests/gate/test_invariants.py", "--spec-dir", str(specs), "-k", "predicted",
               "--targets", "cpu,tpu-v5e,gpu-h100", "--programs", "naive", "-rA")  # fmt: skip
    out = proc.stdout
    assert "1 passed" in out and "2 failed" in out, out[-3000:]
    gpu = next(line for line in out.splitlines() if "failed on gpu-h100" in line)
    assert gpu.endswith("flops of naive on gpu-h100: this target's compiler gives no cost_analysis() 'flops'")
    cpu = next(line for line in out.splitlines() if "failed on cpu" in line)
    assert cpu.endswith(
        "estimated_cycles of naive on cpu: "
        "no kernel carries estimated_cycles (only the TPU compiler writes them)"
    )
