"""The two sides of ``versus``: which interpreter each one is, and its worker processes.

A SPEC names a side: ``current``, a path (a virtual environment or an interpreter), or a jax release (the
environment ``bisect`` builds). Every worker runs this package, staged alone on its ``PYTHONPATH``, with the
controller's environment minus ``XLA_FLAGS`` and any other virtual environment, plus its side's own
variables: a flag or an injection reaches one side only.
"""

from __future__ import annotations

import dataclasses
import os
import selectors
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from packaging.version import InvalidVersion, Version

from .._errors import InvariantsError
from ..catalog.project import Project
from ..compile.child import stage
from .protocol import CPUS_ENV, SLOWDOWN_ENV, Json, decode_hello, decode_reply, encode

# Variables a worker never inherits from the controller: each side sets its own.
_NOT_INHERITED = (
    "XLA_FLAGS",
    "LIBTPU_INIT_ARGS",
    "TPU_LIBRARY_PATH",  # this process's libtpu, which JAX names once it has started: each side loads its own
    "VIRTUAL_ENV",
    "PYTHONHOME",
    SLOWDOWN_ENV,
    CPUS_ENV,
    *Project(spec_dirs=(Path("."),)).environment(),
)
_START_TIMEOUT, _REPLY_TIMEOUT = 300.0, 600.0
PREMAPPED_BYTES = 256 << 20  # libtpu's host staging buffer in a worker (see worker_env)


@dataclasses.dataclass(frozen=True)
class Side:
    """One installation: its role, SPEC, interpreter, its workers' own variables, and the project they run."""

    role: str
    spec: str
    python: Path
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    project: Project = dataclasses.field(default_factory=Project)


def parse_env(pairs: Sequence[str], flag: str) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip() or any(c.isspace() for c in name):
            raise InvariantsError(f"{flag} {pair!r}: expected NAME=VALUE")
        out[name] = value
    return out


def interpreter_of(spec: str, flag: str) -> Path | None:
    """The interpreter a path SPEC names, or None when SPEC does not look like a path (a folder named
    ``0.10.2`` never stands for the release)."""
    if not (os.sep in spec or "/" in spec or spec.startswith((".", "~"))):
        return None
    # Absolute, not resolved: a virtual environment's bin/python is a link out of it, and must stay its own.
    path = Path(os.path.abspath(Path(spec).expanduser()))
    if path.is_dir():
        python = path / "bin" / "python"
        if not python.exists():
            raise InvariantsError(f"{flag} {spec}: a folder but not a virtual environment (no bin/python)")
        return python
    if not path.exists():
        raise InvariantsError(f"{flag} {spec}: no such interpreter or virtual environment")
    if not os.access(path, os.X_OK):
        raise InvariantsError(f"{flag} {spec}: not an executable interpreter")
    return path


def resolve(
    role: str,
    spec: str,
    env: Mapping[str, str],
    current: Path,
    build: Callable[[Version, str], Path],
    project: Project | None = None,
) -> Side:
    flag = f"--{role}"
    python = current if spec == "current" else interpreter_of(spec, flag)
    if python is None:
        try:
            version = Version(spec)
        except InvalidVersion:
            raise InvariantsError(
                f"{flag} {spec}: not 'current', a jax version, or the path of an interpreter or a virtual "
                f"environment (a path has a /: ./{spec})"
            ) from None
        python = build(version, flag)
    return Side(role, spec, python, dict(env), project or Project())


def worker_env(side: Side, base: Mapping[str, str], cpus: frozenset[int] | None = None) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k not in _NOT_INHERITED}
    if cpus:
        env[CPUS_ENV] = ",".join(map(str, sorted(cpus)))
    # The staged checkout first; the controller's own interpreter keeps the rest of its path (a host whose
    # jax is found through PYTHONPATH), which another installation must not see.
    inherited = base.get("PYTHONPATH", "") if side.spec == "current" else ""
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(stage()), inherited) if p)
    env.setdefault("JAX_PLATFORMS", "cpu")
    # Older libtpu asks the GCE metadata server for its topology and waits on it off GCE.
    env.setdefault("TPU_SKIP_MDS_QUERY", "1")
    # Both sides load libtpu to compile ahead of time; without this the second finds the first's lock file.
    env.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    # libtpu pins a host staging buffer of several GiB at start and unpins it at exit, page by page where the
    # host lacks transparent hugepages: most of a worker's start and close. A worker moves its arguments to
    # the chip once, so a small one serves, and the device's own times are the same.
    env.setdefault("TPU_PREMAPPED_BUFFER_SIZE", str(PREMAPPED_BYTES))
    env.update(side.project.environment())
    env.update(side.env)
    return env


class WorkerProcess:
    """One running worker: send a request, read its one reply line."""

    def __init__(self, side: Side, cpus: frozenset[int] | None = None) -> None:
        self.name = f"{side.role} ({side.spec})"
        self._log: IO[str] = tempfile.TemporaryFile("w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            # In the staged folder: `-m` puts the working directory first on sys.path, and an installed
            # package's parent is this environment's site-packages, which another interpreter must not see.
            [str(side.python), "-m", "invariants.versus.worker"],
            cwd=stage(),
            env=worker_env(side, os.environ, cpus),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
        )
        self.hello: Json = {}

    def start(self) -> Json:
        self.hello = decode_hello(self._readline(_START_TIMEOUT), self.name)
        return self.hello

    def request(self, op: str, **fields: object) -> Json:
        self.send(op, **fields)
        return self.receive(op)

    def send(self, op: str, **fields: object) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(encode({"op": op, **fields}))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise InvariantsError(f"{self.name}: worker exited ({self._last_words()})") from None

    def receive(self, op: str) -> Json:
        return decode_reply(self._readline(_REPLY_TIMEOUT), op, self.name)

    def _readline(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                self.kill()
                raise InvariantsError(f"{self.name}: worker did not answer in {timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise InvariantsError(f"{self.name}: worker exited {self.proc.returncode} ({self._last_words()})")
        return line

    def _last_words(self) -> str:
        self._log.seek(0)
        lines = [ln.strip() for ln in self._log.read().splitlines() if ln.strip()]
        return lines[-1][:300] if lines else "no output"

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(encode({"op": "quit"}))
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        self._log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def one_process_per_chip(sides: Sequence[Side]) -> bool:
    """Whether the sides' workers run on a TPU, whose chip belongs to the one process that opened it."""
    return any(worker_env(s, os.environ)["JAX_PLATFORMS"].split(",")[0].strip() == "tpu" for s in sides)


def start_pair(sides: Sequence[Side], cpus: frozenset[int] | None = None) -> list[WorkerProcess]:
    """One worker per side, started at once (their imports overlap), past their hellos."""
    workers = [WorkerProcess(s, cpus=cpus) for s in sides]
    try:
        for w in workers:
            w.start()
    except InvariantsError:  # a ProtocolError among them
        for w in workers:
            w.kill()
        raise
    return workers
