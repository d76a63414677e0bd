"""Helpers for child pytest runs of the gate on scratch copies of the project (``pythonpath`` has this
folder, so the integration tests import it as ``gatekit``; the shared runs are fixtures in conftest.py)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
# Two targets (the runtime and one ahead-of-time TPU) and four programs: forward and backward of the
# per-row loop the gate exists for, and of take. Enough for every tier, a ratchet and a ratio.
SELECTION = ("--targets", "cpu,tpu-v5e", "--programs", "naive,take,grad_vmap_naive,grad_vmap_take")
# A throughput verdict is not what these runs test: keep each ratio short.
QUICK = {"INVARIANTS_RATIO_MAX_SECONDS": "1"}


def make_project(folder: Path, targets: tuple[str, ...] = ("cpu", "tpu-v5e")) -> Path:
    """A scratch project root: the gate's tests, and the committed snapshots of ``targets``. ``pytest``
    with no path collects ``tests/gate`` (as ``pytest`` from the root collects every tier)."""
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy(ROOT / name, folder / name)
    pyproject = folder / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('testpaths = ["tests"]', 'testpaths = ["tests/gate"]'))
    shutil.copytree(ROOT / "tests" / "gate", folder / "tests" / "gate")
    for target in targets:
        shutil.copytree(ROOT / "snapshots" / target, folder / "snapshots" / target)
    return folder


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


@dataclasses.dataclass
class Run:
    project: Path
    proc: subprocess.CompletedProcess[str]
    results: Path
    before: dict[str, bytes]
    after: dict[str, bytes]

    @property
    def out(self) -> str:
        return self.proc.stdout + self.proc.stderr


# Planted before both shared runs: files of a program that left the catalog, on a target that runs
# (cpu), on one that runs but is not the runtime (tpu-v5e), and on one that is not selected (tpu-v4); and
# a snapshot of a target this host has never heard of.
OBSOLETE = ("snapshots/cpu/gone.f32.txt", "snapshots/tpu-v5e/gone.f32.txt", "snapshots/tpu-v4/gone.f32.txt")
FOREIGN = "snapshots/tpu-v9x/naive.f32.txt"


def plant(project: Path) -> None:
    for rel in (*OBSOLETE, FOREIGN):
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("planted\n")


def shared_run(folder: Path, *args: str, stale: str | None = None) -> Run:
    """A run of :data:`SELECTION` as from the root (no path), after :func:`plant` (and making ``stale``
    a stale snapshot)."""
    project = make_project(folder)
    if stale:
        (project / stale).write_text("stale\n")
    plant(project)
    before = snapshot_bytes(project)
    results = project / "results.json"
    proc = run(project, *SELECTION, "--results-json", str(results), *args, env=QUICK)
    return Run(project, proc, results, before, snapshot_bytes(project))
