"""Run the gate in a child process, the one way the self-check and bisect/matrix start it; and the one
protocol for a child that works on compile keys (:func:`keys_child`).

A child is how an experiment that sets ``XLA_FLAGS`` (some flags abort the process) or runs another JAX
release stays out of this process. It runs the gate modules this package ships in a folder of its own,
where it writes a results file and its HLO dumps. Another interpreter imports this package, and nothing
else of this environment, from a folder that links to it alone (:func:`stage`).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import _config
from .._errors import InvariantsError
from .._paths import PACKAGE_DIR
from .._trust import foreign
from ..catalog.project import Project
from ..records import results as _results

# Set in every child: the slow self-check test skips itself there, so a child never starts children.
CHILD_ENV = _config.name("INVARIANTS_SELFCHECK_CHILD")
# Never inherited: an experiment's flags are its own, and another interpreter must not see this one's.
_DROPPED = ("XLA_FLAGS", _config.name("INVARIANTS_INJECT"), "VIRTUAL_ENV", "PYTHONHOME")

GATE_DIR = PACKAGE_DIR / "gate"
PLUGIN = "invariants.plugin.hooks"


def catalog_snapshot_dir() -> Path:
    """The catalog's snapshots: package data in a wheel, the root's ``snapshots/`` in a checkout."""
    shipped = PACKAGE_DIR / "snapshots"
    return shipped if shipped.is_dir() else PACKAGE_DIR.parent / "snapshots"


def pytest_args(
    *,
    spec_dirs: list[Path] | None = None,
    snapshot_dir: Path | None = None,
    catalog: bool = True,
    rootdir: Path | None = None,
    gate_command: str | None = None,
    tests: str = "",
    gate_dir: Path = GATE_DIR,
) -> list[str]:
    """The pytest command line that runs the packaged gate modules (``tests``: one of them; empty: all) in
    ``rootdir``, independent of any checkout and of the project's pytest configuration."""
    root = str((rootdir or Path.cwd()).resolve())
    snapshots = snapshot_dir if snapshot_dir is not None else catalog_snapshot_dir()
    args = [str(gate_dir / tests) if tests else str(gate_dir), "-p", PLUGIN, "-c", os.devnull]
    # pytest expands $NAME in --rootdir: a root with a $ is given as ".", the folder pytest runs in.
    args += ["--rootdir", "." if "$" in root else root, "--import-mode=importlib"]
    # The gate's items assert nothing with `assert`, while pytest rewrites every module of a distribution with
    # a pytest plugin (this one and jaxtyping's, which equinox imports), parsing each again in each run where
    # no bytecode is written. (The user's modules, imported before pytest starts, could not be rewritten.)
    args.append("--assert=plain")
    args += ["--catalog-snapshot-dir", str(catalog_snapshot_dir()), "--snapshot-dir", str(snapshots)]
    if spec_dirs is not None:
        for d in [PACKAGE_DIR, *spec_dirs] if catalog else spec_dirs:
            args += ["--spec-dir", str(d)]
    if not catalog:
        args.append("--no-catalog")
    return args + (["--gate-command", gate_command] if gate_command else [])


@functools.cache
def stage() -> Path:
    """The folder another interpreter gets as ``PYTHONPATH``: a link to this package and nothing else, one
    per package location and user, cached so that every path a worker reports below it is recognised.

    The temporary folder is shared with every other user: what is found there is used only when it is
    exactly what this function makes (:func:`_verified`); else a fresh owner-only folder is made.
    """
    tag = hashlib.sha1(str(PACKAGE_DIR).encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"invariants-package-{os.getuid()}-{tag}"
    with contextlib.suppress(FileExistsError, OSError):
        folder.mkdir(mode=0o700)
        (folder / "invariants").symlink_to(PACKAGE_DIR, target_is_directory=True)
    if _verified(folder):
        return folder
    fresh = Path(tempfile.mkdtemp(prefix=f"invariants-package-{tag}-"))
    (fresh / "invariants").symlink_to(PACKAGE_DIR, target_is_directory=True)
    atexit.register(shutil.rmtree, fresh, ignore_errors=True)  # removes the link, never what it names
    return fresh


def _verified(folder: Path) -> bool:
    """Whether ``folder`` is this user's own (not a link, writable by no one else), holding exactly one
    entry, ``invariants``, a link to this package."""
    try:  # readlink raises for anything but a link
        owned = foreign(folder.lstat()) is None and os.listdir(folder) == ["invariants"]
        return owned and os.readlink(folder / "invariants") == str(PACKAGE_DIR)
    except OSError:
        return False


@contextlib.contextmanager
def scratch(env: Mapping[str, str], under: Path | None = None) -> Iterator[dict[str, str]]:
    """``env`` with a ``TMPDIR`` of the child's own, removed when the block ends however it ends, so that
    what a killed child leaves there goes with it."""
    folder = tempfile.mkdtemp(prefix="invariants-tmp-", dir=under)
    try:
        yield {**env, "TMPDIR": folder}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@dataclasses.dataclass(frozen=True)
class ChildRun:
    """What one child run of the gate did. ``results`` is None when it wrote no results file."""

    returncode: int
    results: _results.Results | None
    seconds: float
    log: Path
    timed_out: bool = False


@dataclasses.dataclass(frozen=True)
class GateRun:
    """One child run of the gate: what it selects, where it writes (``results``' folder is its rootdir), and
    what runs it (``staged``: the gate as another interpreter imports it)."""

    targets: str
    results: Path
    dump_dir: Path
    python: str | Path = sys.executable
    tests: str = ""
    programs: Sequence[str] | str | None = None
    configs: str | None = None
    timed: bool = False  # the throughput tier too (the paired timings); else the structure and invariants
    k: str | None = None
    plugins: Sequence[str] = ()
    raw_invariants: bool = False
    staged: bool = False
    project: Project = dataclasses.field(default_factory=Project)


def _selection(run: GateRun) -> list[str]:
    """The options of ``run``'s selection; an empty one goes to the gate, which refuses it in one line."""
    programs = run.programs
    cmd = []
    if isinstance(programs, str) or programs:
        cmd += ["--programs", programs if isinstance(programs, str) else ",".join(programs)]
    if run.configs is not None:
        cmd += ["--configs", run.configs]
    return cmd + (["-k", run.k] if run.k else [])


def gate_command(run: GateRun) -> list[str]:
    gate_dir = stage() / "invariants" / "gate" if run.staged else GATE_DIR
    project = run.project
    gate, *options = pytest_args(
        rootdir=Path(run.results).parent,
        tests=run.tests,
        gate_dir=gate_dir,
        spec_dirs=list(project.spec_dirs) if project.own else None,
        catalog=project.catalog,
    )
    cmd = [str(run.python), "-m", "pytest", gate, "-q", "-p", "no:cacheprovider"]
    for plugin in run.plugins:
        cmd += ["-p", plugin]
    cmd += ([] if run.timed else ["-m", "not throughput"]) + ["--targets", run.targets]
    cmd += _selection(run)
    cmd += ["--results-json", str(run.results), "--hlo-dump-dir", str(run.dump_dir), *options]
    if run.raw_invariants:
        cmd.append("--raw-invariants")
    return cmd


# Where JAX found libtpu: JAX sets it in the process that started it, and a child inherits it.
_TPU_LIBRARY = "TPU_LIBRARY_PATH"


def gate_env(
    extra: Mapping[str, str] | None = None, *, pythonpath: bool = False, project: Project | None = None
) -> dict[str, str]:
    """This process's environment for a child: no inherited experiment flags, the CPU runtime, no bytecode;
    ``extra`` on top. ``pythonpath``: this package alone (:func:`stage`), for another interpreter; else this
    package first."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    if pythonpath:  # another installation loads its own libtpu, not the one JAX found for this process
        env.pop(_TPU_LIBRARY, None)
    env.update({"JAX_PLATFORMS": "cpu", CHILD_ENV: "1", "PYTHONDONTWRITEBYTECODE": "1"})
    path = [str(stage())] if pythonpath else [str(PACKAGE_DIR.parent), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, path))
    if project is not None and project.own:
        env[_config.name("INVARIANTS_PROJECT_DIR")] = str(project.root or Path.cwd())
    env.update(extra or {})
    return env


def run_gate(command: Sequence[str], *, env: Mapping[str, str], folder: Path, timeout: float) -> ChildRun:
    """Run ``command`` in ``folder``, its output saved to ``folder/pytest.txt``, and read its results file."""
    folder.mkdir(parents=True, exist_ok=True)
    results = Path(command[list(command).index("--results-json") + 1])
    results.unlink(missing_ok=True)
    log = folder / "pytest.txt"
    start = time.perf_counter()
    try:
        with scratch(env, folder) as child_env:
            proc = subprocess.run(
                list(command),
                cwd=folder,
                env=child_env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
    except subprocess.TimeoutExpired as err:
        out = err.stdout if isinstance(err.stdout, str) else (err.stdout or b"").decode(errors="replace")
        log.write_text(out)
        return ChildRun(-1, None, time.perf_counter() - start, log, timed_out=True)
    seconds = time.perf_counter() - start
    log.write_text(proc.stdout + proc.stderr)
    loaded = _results.read(results) if results.exists() else None
    return ChildRun(proc.returncode, loaded, seconds, log)


def last_line(log: Path) -> str:
    lines = [ln for ln in log.read_text().splitlines() if ln.strip()] if log.exists() else []
    return lines[-1].strip()[:200] if lines else "no output"


# What a compile child writes to stderr as it starts its key of that index: how its parent follows it.
STARTED = "invariants-child: compiling key "


class KeyTimedOut(InvariantsError):
    """A child's key ran past the parent's bound; the child was ended. ``index``: that key's."""

    def __init__(self, line: str, index: int) -> None:
        super().__init__(line)
        self.index = index


def keys_child(
    module: str,
    keys: Sequence[Sequence[str]],
    *,
    env: Mapping[str, str],
    what: str,
    python: str | Path = sys.executable,
    args: Sequence[str] = (),
    timeout: float = 600,
    cwd: Path | None = None,
    started: Callable[[int], None] | None = None,
    key_timeout: float | None = None,
) -> Any:
    """Run ``python -m MODULE ARGS`` with ``[[program, config, target], ...]`` as JSON on stdin; return the
    JSON it prints. A child that fails is one line with ``what`` and its last line. ``started`` hears the
    index of each key as the child starts it (its :data:`STARTED` lines); one key running past
    ``key_timeout`` seconds ends the child (:class:`KeyTimedOut`); else the whole child is bounded by
    ``timeout``."""
    with scratch(env) as child_env:
        proc = subprocess.Popen(
            [str(python), "-m", module, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd or PACKAGE_DIR.parent,
            env=child_env,
            text=True,
        )
        follow = _Follow(proc, started)
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # a child that died at once: its exit says why
            proc.stdin.write(json.dumps([list(k) for k in keys]))
            proc.stdin.close()
        stopped = follow.wait(timeout, key_timeout)
    if stopped is not None:
        index, seconds = stopped
        if index is None:
            raise InvariantsError(f"{what}: child did not finish in {seconds:.0f} s") from None
        raise KeyTimedOut(f"{what}: key {index} still compiling after {seconds:.0f} s", index)
    if proc.returncode != 0:
        lines = follow.stderr.strip().splitlines() or follow.stdout.strip().splitlines() or ["no output"]
        raise InvariantsError(f"{what}: child exited {proc.returncode}: {lines[-1].strip()[:200]}")
    return json.loads(follow.stdout)


class _Follow:
    """A child's output read as it comes: stdout whole, stderr's :data:`STARTED` lines heard."""

    def __init__(self, proc: subprocess.Popen[str], started: Callable[[int], None] | None) -> None:
        self.proc, self.started = proc, started
        self.stdout, self.stderr = "", ""
        self.current: tuple[int, float] | None = None  # the key being compiled, since when
        self._readers = [threading.Thread(target=f, daemon=True) for f in (self._out, self._err)]
        for reader in self._readers:
            reader.start()

    def _out(self) -> None:
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout.read()

    def _err(self) -> None:
        assert self.proc.stderr is not None
        kept = []
        for line in self.proc.stderr:
            index = line.removeprefix(STARTED).strip()
            if line.startswith(STARTED) and index.isdigit():
                self.current = (int(index), time.monotonic())
                if self.started is not None:
                    self.started(int(index))
            else:
                kept.append(line)
        self.stderr = "".join(kept)

    def wait(self, timeout: float, key_timeout: float | None) -> tuple[int | None, float] | None:
        """None when the child ended; else, having ended it, the key that ran too long (None: the whole
        child did) and for how long."""
        start = time.monotonic()
        while self.proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(0.25)
            index, since = self.current if key_timeout is not None and self.current else (None, start)
            limit = key_timeout if key_timeout is not None else timeout
            if time.monotonic() - since > limit and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
                return index, time.monotonic() - since
        for reader in self._readers:
            reader.join()
        return None
