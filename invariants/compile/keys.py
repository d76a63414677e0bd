"""The key of the persistent compile cache (:mod:`invariants.records.cache`), and one session's use of it.

A stale hit would hide the very regression the gate exists for, so the key is the design. It is made from
the lowered module, after tracing and lowering at every lookup, hit or not: a trace may read anything (a
data file, an environment variable, a module imported only where present), and the lowered module holds
whatever they changed, which is why JAX's own persistent cache keys on it too. Only a miss compiles.

The key hashes the module's text without source locations, the abstract arguments with their mesh's device
order, and a :class:`Fingerprint`: the compiler (its distributions' versions, the size and mtime of their
shared objects), the distributions whose code the trace ran, the environment, JAX's configuration, the
target and the host CPU. Nothing else installed is in it (:mod:`invariants.scope.installed`). A target
compiled in a child is keyed in that child, in the environment it compiles in.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

import jax

from ..records.cache import Outcome, Store, Tally, digest
from ..records.compiled import Compiled, Key
from ..scope.installed import Installed, compiler_files, library_identity
from ..scope.targets import _GPU_CONFIG_DIR, Target
from .compat import module_text

if TYPE_CHECKING:
    from jax.extend.core import ClosedJaxpr, Jaxpr, JaxprEqn

# Environment variables that change what XLA, libtpu, the CUDA plugin or JAX's lowering produce.
_XLA_ENV = ("XLA_", "JAX_", "TPU_", "LIBTPU", "TF_", "PJRT_", "MEGASCALE", "ENABLE_PJRT")
_ENV_PREFIXES = (*_XLA_ENV, "CUDA", "NVIDIA_", "NCCL_", "PTXAS", "LD_LIBRARY_PATH")
_TPU_LIBRARY = "TPU_LIBRARY_PATH"
Traced = Mapping[str, object]  # a compile's own jaxpr and primitives, which a shared record does not hold
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


class Fingerprint:
    """What a compile for a target depends on besides its module, as JSON-able data. What cannot change
    under a running process is read once; the environment and JAX's configuration at each call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read = Installed()
        self._installed: dict[str, object] | None = None
        self._targets: dict[str, dict[str, object]] = {}

    def installed(self) -> dict[str, object]:
        with self._lock:
            if self._installed is None:
                self._installed = {
                    "python": sys.version,
                    "platform": [sys.platform, platform.machine()],
                    "compiler": self._read.compiler(),
                    "compiler_files": compiler_files(),
                }
            return self._installed

    def of(self, target: Target, code: Iterable[str] = ()) -> dict[str, object]:
        """The fingerprint of a compile for ``target`` of a trace that ran the module files ``code``."""
        return {
            **self.installed(),
            "code": self._read.of_files(code),
            "env": _compiling_environment(),
            "jax_config": {k: _ADDRESS.sub("", repr(v)) for k, v in sorted(jax.config.values.items())},
            "target": self._target(target),
        }

    def _target(self, target: Target) -> dict[str, object]:
        name = json.dumps(target_fields(target), sort_keys=True)
        with self._lock:
            known = self._targets.get(name)
        if known is None:
            known = target_identity(target)
            with self._lock:
                self._targets[name] = known
        return known


def traced_files(closed: ClosedJaxpr, outside: Iterable[tuple[str, int]]) -> set[str]:
    """The files of the code a trace ran: each equation's stack, nested ones included, without the frames
    ``outside`` it (``(file, first line)`` of the functions that started the trace and their callers,
    which differ with the thread that compiles)."""
    out: set[str] = set()
    skip = set(outside)
    for eqn in _equations(closed.jaxpr):
        traceback = getattr(eqn.source_info, "traceback", None)
        for frame in traceback.frames if traceback is not None else ():
            if (frame.file_name, frame.function_start_line) not in skip:
                out.add(frame.file_name)
    return out


def _equations(jaxpr: Jaxpr) -> Iterator[JaxprEqn]:
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple | list) else (value,):
                inner = getattr(sub, "jaxpr", sub)  # a closed jaxpr's, or a jaxpr
                if hasattr(inner, "eqns"):
                    yield from _equations(cast("Jaxpr", inner))


def _callers(frame: object) -> list[tuple[str, int]]:
    """``(file, first line)`` of ``frame``'s function and each caller's."""
    out = []
    while frame is not None:
        code = frame.f_code  # type: ignore[attr-defined]
        out.append((code.co_filename, code.co_firstlineno))
        frame = frame.f_back  # type: ignore[attr-defined]
    return out


def _compiling_environment() -> dict[str, str]:
    """The variables that change compiles; a read that meets pytest's thread changing another is retried.
    A library's path is the library it names, not where this environment keeps it."""
    for _ in range(100):
        try:
            env = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)}
        except (KeyError, RuntimeError):
            continue
        if _TPU_LIBRARY in env:
            env[_TPU_LIBRARY] = library_identity(env[_TPU_LIBRARY])
        return env
    raise RuntimeError("the environment kept changing while the compile cache read it")


def target_fields(target: Target) -> dict[str, object]:
    return {f.name: repr(getattr(target, f.name)) for f in dataclasses.fields(target)}


def target_identity(target: Target) -> dict[str, object]:
    out = target_fields(target)
    out["keeps_kernel_code"] = target.keeps_kernel_code
    if target.family == "gpu" and target.mode == "aot" and target.topology:
        path = _GPU_CONFIG_DIR / f"{target.topology}.txtpb"
        out["description"] = digest(path.read_text(encoding="utf-8")) if path.exists() else "missing"
    if target.mode != "aot":
        device = target.devices()[0]
        version = str(getattr(device.client, "platform_version", ""))
        out["device"] = [device.platform, device.device_kind, version]
    if target.family == "cpu":
        out["host_cpu"] = host_cpu()
    return out


def host_cpu() -> list[str]:
    """The host CPU's model and feature flags, which XLA:CPU compiles for."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return [platform.processor(), platform.machine()]
    first = text.split("\n\n", 1)[0]
    fields = dict(line.split(":", 1) for line in first.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    return [fields.get("model name", ""), fields.get("flags", fields.get("Features", ""))]


def _arguments(args: Sequence[object]) -> list[str]:
    out = []
    for a in args:
        sharding = getattr(a, "sharding", None)
        mesh = getattr(sharding, "mesh", None)
        ids = getattr(mesh, "device_ids", None)
        where = [
            repr(getattr(sharding, "spec", sharding)),
            repr(getattr(mesh, "shape", None)),
            ids.tolist() if ids is not None else None,
        ]
        shape, dtype = str(getattr(a, "shape", "")), str(getattr(a, "dtype", ""))
        out.append(json.dumps([shape, dtype, where], default=str))
    return out


class Persistent:
    """One session's use of a store (None: ``--no-cache``): the key of each lowered module, its lookup and
    what each key's compile was."""

    def __init__(self, store: Store | None) -> None:
        self.store = store
        self.fingerprint = Fingerprint()
        self.tally = Tally()
        self._lock = threading.Lock()
        self.outcomes: dict[Key, Outcome] = {}

    def count(self, key: Key, outcome: Outcome) -> None:
        with self._lock:
            self.outcomes[key] = outcome
            self.tally.add(outcome)

    def kept(self, key: Key, result: str | None, compiled: Compiled) -> None:
        if result is not None and self.store is not None:
            self.store.put(result, compiled.to_json())
        self.count(key, "miss" if result is not None else "off")

    def served(
        self,
        key: Key,
        lowered: jax.stages.Lowered,
        target: Target,
        args: Sequence[object],
        traced: Traced,
        closed: ClosedJaxpr,
    ) -> tuple[str | None, Compiled | None]:
        """The cache's key of ``lowered``, traced as ``closed`` by the caller (None without a store), and a
        hit there as ``key``'s with its own trace, counted."""
        if self.store is None:
            return None, None
        text = module_text(lowered)
        code = traced_files(closed, _callers(sys._getframe(1)))
        result = digest("result", text, self.fingerprint.of(target, code), _arguments(args))
        record = self.store.result(result)
        hit = _named(record, key, traced) if record is not None else None
        if hit is not None:
            self.count(key, "hit")
        return result, hit

    def summary(self) -> str | None:
        return self.tally.line(self.store.folder if self.store is not None else None)


def _named(record: Mapping[str, object], key: Key, traced: Traced) -> Compiled | None:
    """A stored record as this key's (programs that lower to one module share it); unreadable: a miss."""
    try:
        return Compiled.from_json(
            {**record, "program": key.program, "config": key.config, "target": key.target, **traced}
        )
    except (TypeError, KeyError, ValueError):
        return None
