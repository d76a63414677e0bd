"""The two sides of ``versus``: which interpreter each one is, and its worker processes.

A side is named by a SPEC:

* ``current``: the interpreter running the command;
* a path (with a ``/``, or starting with ``.`` or ``~``): a virtual environment (its ``bin/python``) or a
  Python interpreter;
* a jax release (``0.6.0``): the environment ``bisect`` builds and caches for it
  (:func:`invariants.releases.environments.ensure_env`, with ``uv`` from ``--index-url``).

Every worker runs this package (``PYTHONPATH`` = :func:`invariants.compile.child.stage`: a link to this
package and nothing else of this environment) under its side's interpreter, with the controller's environment
minus ``XLA_FLAGS`` and anything of another virtual environment, plus the side's own ``--baseline-env`` /
``--candidate-env`` variables: a flag or an injection reaches one side only.
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
from .protocol import CPUS_ENV, SLOWDOWN_ENV, Json, ProtocolError, decode_hello, decode_reply, encode

# Variables a worker never inherits from the controller: each side sets its own.
_NOT_INHERITED = (
    "XLA_FLAGS",
    "LIBTPU_INIT_ARGS",
    "VIRTUAL_ENV",
    "PYTHONHOME",
    SLOWDOWN_ENV,
    CPUS_ENV,
    *Project(spec_dirs=(Path("."),)).environment(),
)
_START_TIMEOUT = 300.0


@dataclasses.dataclass(frozen=True)
class Side:
    """One installation: a name for reports (``baseline``/``candidate``), the SPEC as given, the interpreter,
    the environment variables only its workers get, and the project whose programs its workers run beside
    the catalog's (the same on both sides)."""

    role: str
    spec: str
    python: Path
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    project: Project = dataclasses.field(default_factory=Project)


def parse_env(pairs: Sequence[str], flag: str) -> dict[str, str]:
    """``["K=V", ...]`` as a dict; anything without ``=`` or with an empty name is one line."""
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip() or any(c.isspace() for c in name):
            raise InvariantsError(f"{flag} {pair!r}: expected NAME=VALUE")
        out[name] = value
    return out


def interpreter_of(spec: str, flag: str) -> Path | None:
    """The interpreter a path SPEC names (absolute, against the working directory now), or None when SPEC
    is not a path. A path looks like one (a ``/``, or a leading ``.`` or ``~``): a folder that happens to be
    named ``0.10.2`` never stands for the release. A bad path is one line."""
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
    """The :class:`Side` for ``spec``; ``build(version, flag)`` returns the interpreter of a release."""
    flag = f"--{role}"
    project = project or Project()
    if spec == "current":
        return Side(role, spec, current, dict(env), project)
    python = interpreter_of(spec, flag)
    if python is not None:
        return Side(role, spec, python, dict(env), project)
    try:
        version = Version(spec)
    except InvalidVersion:
        raise InvariantsError(
            f"{flag} {spec}: not 'current', a jax version, or the path of an interpreter or a virtual "
            f"environment (a path has a /: ./{spec})"
        ) from None
    return Side(role, spec, build(version, flag), dict(env), project)


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
    # Both sides load libtpu to compile ahead of time; without this the second one finds the first's
    # lock file (and so would any other run of the suite on the host).
    env.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    env.update(side.project.environment())
    env.update(side.env)
    return env


class WorkerProcess:
    """One running worker: send a request, read its one reply line (protocol of ``versus.protocol``)."""

    def __init__(
        self, side: Side, timeout: float = _START_TIMEOUT, cpus: frozenset[int] | None = None
    ) -> None:
        self.side = side
        self.name = f"{side.role} ({side.spec})"
        # The worker's stderr, for its last line on failure; closed in close().
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
        self._timeout = timeout

    def start(self) -> Json:
        """Wait for the hello; one line (naming the side) when the worker cannot start."""
        self.hello = decode_hello(self._readline(self._timeout), self.name)
        return self.hello

    def request(self, op: str, timeout: float = 600.0, **fields: object) -> Json:
        """Send one request and read its reply."""
        self.send(op, **fields)
        return self.receive(op, timeout)

    def send(self, op: str, **fields: object) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(encode({"op": op, **fields}))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise InvariantsError(f"{self.name}: worker exited ({self._last_words()})") from None

    def receive(self, op: str, timeout: float = 600.0) -> Json:
        return decode_reply(self._readline(timeout), op, self.name)

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
        """Ask the worker to quit; kill it if it does not."""
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
    """Whether the sides' workers run on a TPU (the first backend of their ``JAX_PLATFORMS``): its chip
    belongs to the one process that opened it, so their workers must run one at a time."""
    for side in sides:
        platforms = worker_env(side, os.environ)["JAX_PLATFORMS"].split(",")
        if platforms[0].strip() == "tpu":
            return True
    return False


def start_pair(sides: Sequence[Side], cpus: frozenset[int] | None = None) -> list[WorkerProcess]:
    """Start one worker per side at once (their imports overlap) and wait for both hellos; with ``cpus``,
    both run on those cores only."""
    workers = [WorkerProcess(s, cpus=cpus) for s in sides]
    try:
        for w in workers:
            w.start()
    except (InvariantsError, ProtocolError):
        for w in workers:
            w.kill()
        raise
    return workers
