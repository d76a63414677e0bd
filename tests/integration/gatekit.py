"""Helpers for gate runs on scratch copies of the project, in this process (:class:`InProcess`, the
``gate_pytester`` fixture, and :func:`command`) or in a child (:func:`run`) where the subject needs a process
of its own (``pythonpath`` has this folder, so every test imports it as ``gatekit``; the shared runs are
fixtures in conftest.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import io
import os
import pickle
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

ROOT = Path(__file__).parents[2]
T = TypeVar("T")
# Two targets (the runtime and one ahead-of-time TPU), four programs (forward and backward of the per-row
# loop the gate exists for, and of take), in the seed's configuration (the other configurations' snapshots
# stay in the copies, deselected). Enough for every tier, a ratchet and a ratio.
SELECTION = (
    "--targets", "cpu,tpu-v5e", "--programs", "naive,take,grad_vmap_naive,grad_vmap_take", "--configs", "f32"
)  # fmt: skip
# A throughput verdict is not what these runs test: keep each measurement short (a quarter second still
# takes dozens of pairs; its interval is wider, so more often inconclusive, which passes).
QUICK = {"INVARIANTS_RATIO_MAX_SECONDS": "0.25"}


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], T]) -> T:
    """``make(folder)``, once per session: under xdist (the README's ``pytest -n auto``) the first worker
    to ask makes it under a file lock in the folder every worker's temporary folder sits in, and the others
    wait for that lock and read what it left (pytest-xdist's recipe for a session fixture made once).
    ``make`` returns something picklable; ``folder`` is its own, shared by every worker."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    # An xdist worker's temporary folder sits in the session's; without xdist the session's is its own.
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    made = folder / "made.pickle"
    with FileLock(str(folder / "made.lock")):
        if not made.exists():
            made.write_bytes(pickle.dumps(make(folder)))
        value: T = pickle.loads(made.read_bytes())
    return value


def make_project(folder: Path, targets: tuple[str, ...] = ("cpu", "tpu-v5e")) -> Path:
    """A scratch project root: the gate's tests, and the committed snapshots of ``targets``. ``pytest``
    with no path collects ``tests/gate`` (as ``pytest invariants/gate`` does in a checkout): a copy of the
    gate modules the package ships in ``invariants/gate``, run as plain test files."""
    for name in ("conftest.py", "pyproject.toml"):
        shutil.copy(ROOT / name, folder / name)
    pyproject = folder / "pyproject.toml"
    pyproject.write_text(re.sub(r"testpaths = \[.*\]", 'testpaths = ["tests/gate"]', pyproject.read_text()))
    gate = shutil.ignore_patterns("__init__.py", "__pycache__")
    shutil.copytree(ROOT / "invariants" / "gate", folder / "tests" / "gate", ignore=gate, dirs_exist_ok=True)
    for target in targets:
        shutil.copytree(ROOT / "snapshots" / target, folder / "snapshots" / target, dirs_exist_ok=True)
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


def shared_project(folder: Path, stale: str | None = None, plant_files: bool = True) -> Path:
    """A fresh copy of the project for a shared run, after :func:`plant` and making ``stale`` a stale
    snapshot."""
    folder.mkdir(parents=True, exist_ok=True)
    project = make_project(folder)
    if stale:
        (project / stale).write_text("stale\n")
    if plant_files:
        plant(project)
    return project


def run_shared(
    gate_pytester: InProcess, folder: Path, *args: str, stale: str | None = None, plant_files: bool = True
) -> Run:
    """A run of :data:`SELECTION` in this process, in a :func:`shared_project`."""
    project = shared_project(folder, stale, plant_files)
    before = snapshot_bytes(project)
    results = project / "results.json"
    proc = gate_pytester.pytest(*SELECTION, "--results-json", str(results), *args, cwd=project)
    return Run(project, proc, results, before, snapshot_bytes(project))


# --------------------------------------------------------------------------------------------------------
# In-process runs: the gate's plugin (and ``python -m invariants``) run in this test's own process, through
# pytest's ``pytester``, as syrupy and pytest-benchmark test their plugins. No interpreter starts, JAX is
# up already, and what the session's compile cache holds is read, not compiled: a run costs a second or
# two where a child costs several. A child process stays where the subject needs one (a signal, a hang,
# an exit of the process, a fresh environment, JAX started another way, xdist's workers).

# Imported before the first pytester of a process: pytester forgets the modules a test imported, and
# numpy's extension modules (which scipy.stats loads for the throughput tier) cannot be loaded twice in one
# process.
PRELOADED = ("scipy.stats", "xdist", "syrupy", "invariants.plugin.session", "invariants.plugin.command")


# What a run in this process says that a child's never would: the packages of the session's plugins were
# imported before its own assertion-rewriting hook was installed, and whether one of them counts as not
# rewritten depends on what ran before in the process. (``python -m invariants gate`` rewrites nothing:
# ``--assert=plain``, invariants.compile.child.pytest_args.)
IN_PROCESS = ("-W", "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning")


def preload() -> None:
    for name in PRELOADED:
        importlib.import_module(name)


class InProcess:
    """The ``gate_pytester`` fixture: gate runs in this process, in ``pytester``'s folder (its ``path``).

    :meth:`pytest` is ``pytest ARGS`` there, :meth:`command` is ``python -m invariants ARGV``
    (:func:`command`); both return a :class:`subprocess.CompletedProcess` (the exit status, stdout and
    stderr), as a child's run would. Each run gets the environment a child run gets (:func:`environment`).
    """

    def __init__(self, pytester: Any) -> None:
        self.pytester = pytester
        self.path: Path = pytester.path

    def project(self, targets: tuple[str, ...] = ("cpu", "tpu-v5e")) -> Path:
        """:func:`make_project` in this run's folder."""
        return make_project(self.path, targets)

    def pytest(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        quick: bool = True,
        plugins: tuple[Any, ...] = (),
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """``pytest -p no:cacheprovider -q ARGS`` in :attr:`path`, as :func:`start` runs it in a child
        (``-q`` only where ``args`` say nothing of it; ``quick``: each ratio measured briefly, :data:`QUICK`).
        ``plugins``: plugin objects for the run, as ``-p NAME`` would load them; ``cwd``: where it runs
        (default :attr:`path`)."""
        quiet = [] if "-q" in args else ["-q"]
        with environment(env, quick) as mp:
            if cwd is not None:
                mp.chdir(cwd)
            # pytester restores sys.modules to what it was, which keeps a module of the project's name that
            # another test of this process imported (a scratch project's model.py): gone for the run.
            for name in _own_modules(cwd or self.path):
                mp.delitem(sys.modules, name, raising=False)
            # Exit status 2 is the gate's bad input, not an interrupt to pass on.
            result = self.pytester.runpytest(
                "-p", "no:cacheprovider", *IN_PROCESS, *quiet, *args, plugins=list(plugins),
                no_reraise_ctrlc=True,
            )  # fmt: skip
        return subprocess.CompletedProcess(
            ["pytest", *args], int(result.ret), "\n".join(result.outlines) + "\n",
            "\n".join(result.errlines) + "\n",
        )  # fmt: skip

    def command(
        self, *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None, quick: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """:func:`command` in ``cwd`` (default :attr:`path`)."""
        return command(*argv, cwd=cwd or self.path, env=env, quick=quick)


def command(
    *argv: str, cwd: Path, env: dict[str, str] | None = None, quick: bool = True
) -> subprocess.CompletedProcess[str]:
    """``python -m invariants ARGV`` in this process, in ``cwd``, whose modules it imports as a user's
    project (as with ``PYTHONPATH`` naming it), forgotten again after the run. pytester's own capture,
    for a command that is not pytest: what Python writes to stdout and stderr."""
    from invariants.__main__ import main

    folder = cwd.resolve()
    out, err = io.StringIO(), io.StringIO()
    with environment(env, quick) as mp, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        mp.chdir(folder)
        mp.syspath_prepend(str(folder))
        mp.setattr(sys, "dont_write_bytecode", sys.dont_write_bytecode)
        # The project's own modules are imported afresh: a module of the same name another test of this
        # process imported (a scratch project's model.py) would stand in for the project's.
        for name in _own_modules(folder):
            mp.delitem(sys.modules, name, raising=False)
        before = set(sys.modules)
        try:
            status = main(list(argv))
        except SystemExit as end:  # pytest.exit() before pytest's session runs
            status = end.code if isinstance(end.code, int) else 1
        finally:
            _forget_modules(before, folder)
    return subprocess.CompletedProcess(["python", "-m", "invariants", *argv], status, out.getvalue(),
                                       err.getvalue())  # fmt: skip


@contextlib.contextmanager
def environment(env: dict[str, str] | None = None, quick: bool = True) -> Iterator[Any]:
    """The environment of a gate run in this process, as a child run gets it: no xdist worker's variables
    (with them syrupy takes itself for a worker and prints no snapshot report), :data:`QUICK` when
    ``quick``, ``env`` on top. After it this process is as it was: its variables (``python -m invariants``
    sets some for itself), and its core affinity (a gate run gives an xdist worker pinned to a core every
    core back). Yields the :class:`pytest.MonkeyPatch` that undoes it all."""
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    # The run's session ends with pytest's full collections (its unraisable-exception check): what the
    # test made before the run is frozen too, as the process's heap is (tests/conftest.py), so that they
    # scan only what the run made. The test's end unfreezes it all.
    gc.freeze()
    with pytest.MonkeyPatch.context() as mp:
        for name in [k for k in os.environ if k.startswith("PYTEST_XDIST_")]:
            mp.delenv(name)
        for name in ("JAX_PLATFORMS", "PYTHONDONTWRITEBYTECODE"):
            if name in os.environ:
                mp.setenv(name, os.environ[name])
            else:
                mp.delenv(name, raising=False)
        for name, value in {**(QUICK if quick else {}), **(env or {})}.items():
            mp.setenv(name, value)
        try:
            yield mp
        finally:
            if cores is not None:
                os.sched_setaffinity(0, cores)


def _own_modules(folder: Path) -> list[str]:
    """The top-level modules and packages ``folder`` holds: what ``import NAME`` finds there first."""
    return [p.stem for p in folder.glob("*.py")] + [p.parent.name for p in folder.glob("*/__init__.py")]


def _forget_modules(before: set[str], folder: Path) -> None:
    """Drop the modules a run imported from ``folder`` (a project's own) or from the gate's test modules:
    the next run in this process imports its own. Libraries it imported stay (see :data:`PRELOADED`)."""
    gate = ROOT / "invariants" / "gate"
    for name in set(sys.modules) - before:
        file = getattr(sys.modules[name], "__file__", None) or ""
        if file and (Path(file).is_relative_to(folder) or Path(file).is_relative_to(gate)):
            del sys.modules[name]
