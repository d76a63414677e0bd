"""A profiler trace read as the device's own clock: what each call of each XLA module cost on the chip.

A device plane (``/device:TPU:0``) of a ``jax.profiler.trace`` file has one ``XLA Modules`` event per
execution of a compiled module and one ``XLA Ops`` event per HLO instruction executed. Those durations are
the chip's clock: a seed-size lookup runs for tens of microseconds there, while the host's round trip around
it costs hundreds. The format is no stable API, so it is read strictly: anything else is one
:class:`TraceError` line naming what was missing.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import re
import stat
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from jax.profiler import ProfileData

from invariants._errors import InvariantsError

MODULES_LINE = "XLA Modules"
OPS_LINE = "XLA Ops"
DEVICE_PREFIX = "/device:"
# Larger is not a trace this tool wrote, nor a user's program of a few calls.
MAX_TRACE_BYTES = 1 << 30
# The instruction's name in an op event's text: ``%name = shape opcode(...)`` (TPU) or the bare name.
_OP_NAME = re.compile(r"^%?([\w.\-]+) = ")


class TraceError(InvariantsError):
    """A file that is not a profiler trace, or one without the device events asked for."""


@dataclasses.dataclass(frozen=True)
class Event:
    name: str
    start_ns: float
    duration_ns: float


@dataclasses.dataclass(frozen=True)
class DeviceTrace:
    """A trace's device plane: its module executions and op executions, each in start order."""

    path: str
    plane: str
    modules: tuple[Event, ...]
    ops: tuple[Event, ...]


@dataclasses.dataclass(frozen=True)
class OpStats:
    name: str
    count: int
    total_s: float
    per_call_s: float


@dataclasses.dataclass(frozen=True)
class ModuleStats:
    name: str
    calls: int
    median_s: float
    min_s: float
    max_s: float
    total_s: float
    ops: tuple[OpStats, ...]

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def find_traces(path: str | os.PathLike[str]) -> list[Path]:
    """The ``*.xplane.pb`` files at ``path``: the file itself, or every one under a folder (sorted)."""
    p = Path(path)
    if p.is_dir():
        found = sorted(f for f in p.rglob("*.xplane.pb") if f.is_file() and not f.is_symlink())
        if not found:
            raise TraceError(
                f"{p}: no *.xplane.pb under this folder (jax.profiler.trace writes one per host)"
            )
        return found
    if not p.exists():
        raise TraceError(f"{p}: no such file or folder")
    return [p]


def _read_bytes(path: Path) -> bytes:
    """A regular file's bytes (a pipe or device would hang or never end), at most :data:`MAX_TRACE_BYTES`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as err:
        raise TraceError(f"{path}: cannot open: {err.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise TraceError(f"{path}: not a regular file, so not a profiler trace")
        if info.st_size > MAX_TRACE_BYTES:
            raise TraceError(
                f"{path}: {info.st_size} bytes, more than a trace this tool reads ({MAX_TRACE_BYTES})"
            )
        return f.read(MAX_TRACE_BYTES + 1)


class _TraceEvent(Protocol):
    name: str
    start_ns: float
    duration_ns: float


class _TraceLine(Protocol):
    """A line of a profiler trace's plane (``jax.profiler``'s, which it does not export)."""

    @property
    def events(self) -> Iterable[_TraceEvent]: ...


def _events(line: _TraceLine | None) -> tuple[Event, ...]:
    if line is None:
        return ()
    return tuple(
        sorted(
            (Event(e.name, float(e.start_ns), float(e.duration_ns)) for e in line.events),
            key=lambda e: e.start_ns,
        )
    )


def read_trace(path: str | os.PathLike[str], ops: bool = True) -> DeviceTrace:
    """The first device plane of the trace at ``path`` that holds module events; its op events too unless
    ``ops`` is False (a timer needs the modules only, and a loop's ops are thousands per call)."""
    p = Path(path)
    data = _read_bytes(p)
    from jax.profiler import ProfileData  # the decoder ships with jaxlib; only when a trace is read

    try:
        profile = ProfileData.from_serialized_xspace(data)
    except Exception as err:  # the decoder raises RuntimeError today; its type is no API either
        raise TraceError(
            f"{p}: not a profiler trace (an XSpace protobuf): {str(err).splitlines()[0]}"
        ) from None
    return _device_trace(p, profile, ops)


def _device_trace(p: Path, profile: ProfileData, ops: bool) -> DeviceTrace:
    for plane in profile.planes:
        lines = {line.name: line for line in plane.lines} if plane.name.startswith(DEVICE_PREFIX) else {}
        if modules := _events(lines.get(MODULES_LINE)):
            return DeviceTrace(str(p), plane.name, modules, _events(lines.get(OPS_LINE)) if ops else ())
    names = ", ".join(plane.name for plane in profile.planes) or "none"
    raise TraceError(
        f"{p}: no device plane with '{MODULES_LINE}' events (planes: {names}); "
        "a trace of a CPU run, or of a plugin that records no device events, has no device clock"
    )


def op_name(text: str) -> str:
    """An op event's instruction name: ``%fusion.1 = s32[...] fusion(...)`` -> ``fusion.1``."""
    m = _OP_NAME.match(text)
    return m.group(1) if m else text


def _by_module(trace: DeviceTrace) -> dict[str, list[tuple[Event, list[Event]]]]:
    """Each module execution with the op events inside it (by time: the trace tags no op with its module).
    An op belongs to one execution at most: where two overlap, to the earlier one."""
    out: dict[str, list[tuple[Event, list[Event]]]] = {}
    starts = [op.start_ns for op in trace.ops]
    end = 0
    for m in trace.modules:
        first = max(end, bisect.bisect_left(starts, m.start_ns))
        end = max(first, bisect.bisect_left(starts, m.start_ns + m.duration_ns))
        out.setdefault(m.name, []).append((m, list(trace.ops[first:end])))
    return out


def stats(trace: DeviceTrace, top: int | None = None) -> list[ModuleStats]:
    """Per module, in order of first call: its calls' device seconds, and its ``top`` costliest ops."""
    result: list[ModuleStats] = []
    for name, calls in _by_module(trace).items():
        durations = [m.duration_ns * 1e-9 for m, _ in calls]
        totals: dict[str, list[float]] = {}
        for _, inside in calls:
            for op in inside:
                t = totals.setdefault(op_name(op.name), [0, 0.0])
                t[0] += 1
                t[1] += op.duration_ns * 1e-9
        ops = sorted(
            (OpStats(n, int(c), s, s / len(calls)) for n, (c, s) in totals.items()), key=lambda o: -o.total_s
        )
        result.append(
            ModuleStats(
                name,
                len(durations),
                statistics.median(durations),
                min(durations),
                max(durations),
                sum(durations),
                tuple(ops[:top] if top is not None else ops),
            )
        )
    return result
