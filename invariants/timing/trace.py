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
import itertools
import math
import os
import re
import stat
import statistics
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from jax.profiler import ProfileData

from invariants._errors import InvariantsError

from . import xspace

MODULES_LINE = "XLA Modules"
OPS_LINE = "XLA Ops"
DEVICE_PREFIX = "/device:"
# Larger is not a trace this tool wrote, nor a user's program of a few calls. Reading one takes about its size
# (its events are decoded a run at a time, :mod:`.xspace`), so this bounds what reading allocates too.
MAX_TRACE_BYTES = 1 << 30
# More distinct op names than a program has instructions is no trace of one (and each is kept while read).
MAX_OP_NAMES = 1_000_000
# The instruction's name in an op event's text: ``%name = shape opcode(...)`` (TPU) or the bare name.
_OP_NAME = re.compile(r"^%?([\w.\-]+) = ")


class TraceError(InvariantsError):
    """A file that is not a profiler trace, or one without the device events asked for."""


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    name: str
    start_ns: float
    duration_ns: float


@dataclasses.dataclass(frozen=True)
class DeviceTrace:
    """A trace's device plane: its module executions in start order, and its op executions (in the trace's
    order, decoded from the file a run at a time each time they are walked)."""

    path: str
    plane: str
    modules: tuple[Event, ...]
    ops: Iterable[Event]


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
        found = sorted(_traces_under(p))
        if not found:
            raise TraceError(
                f"{p}: no *.xplane.pb under this folder (jax.profiler.trace writes one per host)"
            )
        return found
    if not p.exists():
        raise TraceError(f"{p}: no such file or folder")
    return [p]


def _traces_under(folder: Path) -> Iterator[Path]:
    """The ``*.xplane.pb`` regular files under ``folder``, links not followed, walked without recursion (a
    folder a thousand levels deep is a folder, not a RecursionError)."""
    stack = [folder]
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif entry.name.endswith(".xplane.pb") and entry.is_file(follow_symlinks=False):
                        yield Path(entry.path)
        except OSError as err:
            raise TraceError(f"{here}: cannot read this folder: {err.strerror}") from None


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
        return f.read(info.st_size + 1)  # not MAX_TRACE_BYTES: Python allocates what it is asked for


class _TraceEvent(Protocol):
    name: str
    start_ns: float
    duration_ns: float


def _checked(path: Path, events: Iterable[_TraceEvent]) -> Iterator[Event]:
    """The events of a line as :class:`Event`, names shared (a loop's op is one name a million times); a
    duration below zero, or a time that is no number, is no clock's: refused in one line."""
    names: dict[str, str] = {}
    for e in events:
        name, start, duration = e.name, float(e.start_ns), float(e.duration_ns)  # each a call into jaxlib
        if not (duration >= 0 and math.isfinite(duration) and math.isfinite(start)):
            raise TraceError(
                f"{path}: event {name!r} starts at {start} ns and lasts {duration} ns: "
                "a duration below zero (or no number) is no clock's"
            )
        yield Event(names.setdefault(name, name), start, duration)


@dataclasses.dataclass(frozen=True)
class _LineEvents:
    """A line's events, decoded a run at a time each time they are walked, never all held: a trace's ops are
    millions, and decoded, or as Python objects, they would take many times the file."""

    path: Path
    space: xspace.Space
    plane: int
    line: int

    def __iter__(self) -> Iterator[Event]:
        # chained in C: a generator between the decoder and the check would cost a frame per event
        return _checked(self.path, itertools.chain.from_iterable(self._runs()))

    def _runs(self) -> Iterator[Iterable[_TraceEvent]]:
        for run in self.space.runs(self.plane, self.line):
            (plane,) = _decode(self.path, run).planes
            (line,) = plane.lines
            yield line.events
            del run, plane, line  # before the next run is decoded


def read_trace(path: str | os.PathLike[str], ops: bool = True) -> DeviceTrace:
    """The first device plane of the trace at ``path`` that holds module events; its op events too unless
    ``ops`` is False (a timer needs the modules only, and a loop's ops are thousands per call)."""
    p = Path(path)
    try:
        space = xspace.split(_read_bytes(p))
    except xspace.XSpaceError as err:
        raise TraceError(f"{p}: not a profiler trace (an XSpace protobuf): {err}") from None
    planes = [
        (plane.name, [line.name for line in plane.lines]) for plane in _decode(p, space.skeleton()).planes
    ]
    for k, (name, lines) in enumerate(planes):
        at = {line: i for i, line in enumerate(lines)}  # a name twice: its last line
        if not name.startswith(DEVICE_PREFIX) or MODULES_LINE not in at:
            continue
        modules = tuple(sorted(_LineEvents(p, space, k, at[MODULES_LINE]), key=lambda e: e.start_ns))
        if modules:
            op_events = _LineEvents(p, space, k, at[OPS_LINE]) if ops and OPS_LINE in at else ()
            return DeviceTrace(str(p), name, modules, op_events)
    names = ", ".join(name for name, _ in planes) or "none"
    raise TraceError(
        f"{p}: no device plane with '{MODULES_LINE}' events (planes: {names}); "
        "a trace of a CPU run, or of a plugin that records no device events, has no device clock"
    )


def _decode(path: Path, data: bytes) -> ProfileData:
    """jaxlib's decoding of ``data``, an XSpace; the trace at ``path`` is no profiler trace if it fails."""
    try:
        return _decoder().from_serialized_xspace(data)
    except Exception as err:  # the decoder raises RuntimeError today; its type is no API either
        raise TraceError(
            f"{path}: not a profiler trace (an XSpace protobuf): {str(err).splitlines()[0]}"
        ) from None


def _decoder() -> type[ProfileData]:
    """jaxlib's trace decoder, taken from jaxlib itself where it lives there: importing ``jax`` loads its
    plugins, and on a host without a GPU the CUDA plugin prints its warnings before the command's output."""
    try:
        from jaxlib._profile_data import ProfileData
    except ImportError:
        from jax.profiler import ProfileData
    return ProfileData


def op_name(text: str) -> str:
    """An op event's instruction name: ``%fusion.1 = s32[...] fusion(...)`` -> ``fusion.1``."""
    m = _OP_NAME.match(text)
    return m.group(1) if m else text


def _owners(modules: tuple[Event, ...]) -> tuple[list[float], list[tuple[float, int]]]:
    """Where each op belongs, by time (the trace tags no op with its module): to the first execution, in
    start order, whose span holds its start. As (start, (end, execution)) of the spans left to each
    execution once the earlier ones took theirs: those never overlap, so one bisection finds an op's."""
    starts: list[float] = []
    spans: list[tuple[float, int]] = []
    taken = -math.inf
    for k, m in enumerate(modules):
        start, end = max(m.start_ns, taken), m.start_ns + m.duration_ns
        taken = max(taken, end)
        if start < end:
            starts.append(start)
            spans.append((end, k))
    return starts, spans


def stats(trace: DeviceTrace, top: int | None = None) -> list[ModuleStats]:
    """Per module, in order of first call: its calls' device seconds, and its ``top`` costliest ops (an op
    in two overlapping executions counts once, for the earlier)."""
    calls: dict[str, list[float]] = {}
    for m in trace.modules:
        calls.setdefault(m.name, []).append(m.duration_ns * 1e-9)
    names = [m.name for m in trace.modules]
    starts, spans = _owners(trace.modules)
    totals: dict[str, dict[str, list[float]]] = {name: {} for name in calls}
    distinct = 0
    for op in trace.ops:
        at = bisect.bisect_right(starts, op.start_ns) - 1
        if at < 0 or op.start_ns >= spans[at][0]:
            continue
        per_op = totals[names[spans[at][1]]]
        t = per_op.get(op.name)
        if t is None:
            distinct += 1
            if distinct > MAX_OP_NAMES:
                raise TraceError(
                    f"{trace.path}: more than {MAX_OP_NAMES} distinct op names, more than a program has "
                    "instructions"
                )
            t = per_op[op.name] = [0, 0.0]
        t[0] += 1
        t[1] += op.duration_ns * 1e-9
    return [_module_stats(name, durations, totals[name], top) for name, durations in calls.items()]


def _module_stats(
    name: str, durations: list[float], totals: dict[str, list[float]], top: int | None
) -> ModuleStats:
    by_name: dict[str, list[float]] = {}
    for text, (count, seconds) in totals.items():  # names that differ only in their shape text are one op
        t = by_name.setdefault(op_name(text), [0, 0.0])
        t[0] += count
        t[1] += seconds
    ops = sorted(
        (OpStats(n, int(c), s, s / len(durations)) for n, (c, s) in by_name.items()), key=lambda o: -o.total_s
    )
    return ModuleStats(
        name,
        len(durations),
        statistics.median(durations),
        min(durations),
        max(durations),
        sum(durations),
        tuple(ops[:top] if top is not None else ops),
    )
