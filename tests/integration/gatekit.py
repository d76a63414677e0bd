"""Helpers for child pytest runs of the gate on scratch copies of the project (``pythonpath`` has this
folder, so the integration tests import it as ``gatekit``; the shared runs are fixtures in conftest.py)."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
# Two targets (the runtime and one ahead-of-time TPU), four programs (forward and backward of the per-row
# loop the gate exists for, and of take), in the seed's configuration (the other configurations' snapshots
# stay in the copies, deselected). Enough for every tier, a ratchet and a ratio.
SELECTION = (
    "--targets", "cpu,tpu-v5e", "--programs", "naive,take,grad_vmap_naive,grad_vmap_take", "--configs", "f32"
)  # fmt: skip
# A throughput verdict is not what these runs test: keep each measurement short (a quarter second still
# takes dozens of pairs; its interval is wider, so more often inconclusive, which passes).
QUICK = {"INVARIANTS_RATIO_MAX_SECONDS": "0.25"}


def make_project(folder: Path, targets: tuple[str, ...] = ("cpu", "tpu-v5e")) -> Path:
    """A scratch project root: the gate's tests, and the committed snapshots of ``targets``. ``pytest``
    with no path collects ``tests/gate`` (as ``pytest invariants/gate`` does in a checkout): a copy of the
    gate modules the package ships in ``invariants/gate``, run as plain test files."""
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy(ROOT / name, folder / name)
    pyproject = folder / "pyproject.toml"
    pyproject.write_text(re.sub(r"testpaths = \[.*\]", 'testpaths = ["tests/gate"]', pyproject.read_text()))
    gate = shutil.ignore_patterns("__init__.py", "__pycache__")
    shutil.copytree(ROOT / "invariants" / "gate", folder / "tests" / "gate", ignore=gate)
    for target in targets:
        shutil.copytree(ROOT / "snapshots" / target, folder / "snapshots" / target)
    return folder


def start(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``pytest ARGS`` in ``project`` (a child process); :func:`finish` waits for it. Starting the
    shared runs together lets them use both cores of a 2-core machine."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=project, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**_own_environ(), **(env or {})},
    )  # fmt: skip


def _own_environ() -> dict[str, str]:
    """This process's environment without an xdist worker's PYTEST_XDIST_* variables: with them, syrupy in
    the child takes itself for a worker and prints no snapshot report, and a check on it checks nothing."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}


def finish(child: subprocess.Popen[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def run(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return finish(start(project, *args, env=env))


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
        # In the snapshot format (its first line), so that an update could take it for its own.
        program, config = path.name.removesuffix(".txt").split(".", 1)
        path.write_text(f"# {program} [{config}] on {path.parent.name}\nplanted\n")


@dataclasses.dataclass
class Pending:
    """A started shared run: :meth:`result` waits for it."""

    project: Path
    child: subprocess.Popen[str]
    results: Path
    before: dict[str, bytes]

    def result(self) -> Run:
        proc = finish(self.child)
        return Run(self.project, proc, self.results, self.before, snapshot_bytes(self.project))


def start_shared(folder: Path, *args: str, stale: str | None = None, plant_files: bool = True) -> Pending:
    """Start a run of :data:`SELECTION` in a fresh copy of the project (as from the root, no path unless
    ``args`` name one), after :func:`plant` and making ``stale`` a stale snapshot."""
    folder.mkdir(parents=True, exist_ok=True)
    project = make_project(folder)
    if stale:
        (project / stale).write_text("stale\n")
    if plant_files:
        plant(project)
    before = snapshot_bytes(project)
    results = project / "results.json"
    child = start(project, *SELECTION, "--results-json", str(results), *args, env=QUICK)
    return Pending(project, child, results, before)
