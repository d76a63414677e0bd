"""A profiler trace's XSpace protobuf split at the wire level, so that its events are decoded a run at a time.

A decoded trace takes many times its file (a loop's millions of op events are a message each, in jaxlib's
decoder as in protobuf's own), so the decoder is never given the whole file: :func:`split` walks the
serialized bytes only as deep as the events' lines (XSpace.planes, XPlane.lines, XLine.events: field numbers
1, 3 and 4 of ``xla/tsl/profiler/protobuf/xplane.proto`` in openxla/xla), and the decoder is then given
:meth:`Space.skeleton` (everything but the events) and :meth:`Space.runs` (one line's events, a run at a
time, under their plane's metadata). Everything else is passed to the decoder as it was written. A field
walked here that is not what that proto says (a cut varint, a length past its message, a wire type other than
a message's) is an :class:`XSpaceError` naming it and its byte.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

# The most bytes of events given to the decoder at once: its copy takes many times their bytes (a message
# an event), and holding one run at a time is what bounds a trace's memory to about its file.
RUN_BYTES = 1 << 19

# Planes, lines, their other fields and runs of events, at most: each is kept while the trace is read, and
# a profiler writes a few planes of tens of lines (a hostile file of a billion one-byte fields would not be).
MAX_PIECES = 100_000

_PLANES, _LINES, _EVENTS = 1, 3, 4  # XSpace.planes, XPlane.lines, XLine.events
_EVENTS_TAG = _EVENTS << 3 | 2  # one byte: field 4, length-delimited
_WHAT = {(0, _PLANES): "XSpace.planes", (1, _LINES): "XPlane.lines", (2, _EVENTS): "XLine.events"}

Span = tuple[int, int]


class XSpaceError(ValueError):
    """Bytes that are not an XSpace protobuf where it was walked."""


@dataclasses.dataclass(frozen=True)
class Line:
    head: tuple[Span, ...]  # its fields other than events, as written
    runs: tuple[Span, ...]  # its events, as runs of whole fields of at most RUN_BYTES (or one event)


@dataclasses.dataclass(frozen=True)
class Plane:
    head: tuple[Span, ...]  # its fields other than lines (its name, event and stat metadata), as written
    lines: tuple[Line, ...]


@dataclasses.dataclass(frozen=True)
class Space:
    data: bytes
    head: tuple[Span, ...]  # its fields other than planes
    planes: tuple[Plane, ...]

    def skeleton(self) -> bytes:
        """The XSpace without its events: every plane, with its metadata and lines (their names)."""
        out = [self._join(self.head)]
        for p in self.planes:
            lines = b"".join(_message(_LINES, self._join(line.head)) for line in p.lines)
            out.append(_message(_PLANES, self._join(p.head) + lines))
        return b"".join(out)

    def runs(self, plane: int, line: int) -> Iterator[bytes]:
        """An XSpace per run of events of the ``line``-th line of the ``plane``-th plane (counted as in the
        skeleton): that plane's own fields, and that line's with this run of its events."""
        p = self.planes[plane]
        head, line_head = self._join(p.head), self._join(p.lines[line].head)
        view = memoryview(self.data)
        for start, end in p.lines[line].runs:
            events = view[start:end]
            line_key = _key(_LINES, len(line_head) + len(events))
            plane_key = _key(_PLANES, len(head) + len(line_key) + len(line_head) + len(events))
            yield b"".join((plane_key, head, line_key, line_head, events))  # the run's one copy

    def _join(self, spans: tuple[Span, ...]) -> bytes:
        view = memoryview(self.data)
        return b"".join(view[a:b] for a, b in spans)


def split(data: bytes) -> Space:
    """``data``'s planes, lines and runs of events; raises :class:`XSpaceError` where the walk fails."""
    head: list[Span] = []
    planes: list[Plane] = []
    pieces = 0
    for field, _, start, value, end in _fields(data, 0, len(data), 0):
        pieces += 1
        if pieces > MAX_PIECES:
            raise _too_many()
        if field != _PLANES:
            head.append((start, end))
            continue
        plane_head: list[Span] = []
        lines: list[Line] = []
        for f, _, s, v, e in _fields(data, value, end, 1):
            pieces += 1
            if pieces > MAX_PIECES:
                raise _too_many()
            if f == _LINES:
                lines.append(line := _line(data, v, e, MAX_PIECES - pieces))
                pieces += len(line.head) + len(line.runs)
            else:
                plane_head.append((s, e))
        planes.append(Plane(tuple(plane_head), tuple(lines)))
    return Space(data, tuple(head), tuple(planes))


def _line(data: bytes, pos: int, end: int, room: int) -> Line:
    """A line's fields, its events walked inline: they are millions, and a call each would cost seconds. At
    most ``room`` pieces (fields and runs of events)."""
    head: list[Span] = []
    runs: list[Span] = []
    run = -1  # where the current run of events starts
    while pos < end:
        if data[pos] == _EVENTS_TAG:
            value = pos + 1
            n = data[value] if value < end else 0x80
            if n < 0x80:
                value += 1
            else:
                n, value = _varint(data, value, end)
            after = value + n
            if after > end:
                raise XSpaceError(f"XLine.events at byte {pos} ends past its line (byte {end})")
        else:
            ((field, _, _, _, after),) = _fields(data, pos, end, 2, once=True)
            if field != _EVENTS:
                if run >= 0:
                    runs.append((run, pos))
                    run = -1
                head.append((pos, after))
                if len(head) + len(runs) > room:
                    raise _too_many()
                pos = after
                continue
        if run < 0:
            run = pos
        elif after - run > RUN_BYTES:
            runs.append((run, pos))
            run = pos
            if len(head) + len(runs) > room:
                raise _too_many()
        pos = after
    if run >= 0:
        runs.append((run, pos))
    return Line(tuple(head), tuple(runs))


def _too_many() -> XSpaceError:
    return XSpaceError(
        f"more than {MAX_PIECES} planes, lines, other fields and runs of events: more than a profiler writes"
    )


def _fields(
    data: bytes, pos: int, end: int, level: int, once: bool = False
) -> Iterator[tuple[int, int, int, int, int]]:
    """(field, wire type, start, value's start, end) of each field in ``data[pos:end]`` (the first only if
    ``once``); the walked field of this level (planes, lines or events) must be length-delimited."""
    while pos < end:
        start = pos
        key, pos = _varint(data, pos, end)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise XSpaceError(f"a field numbered 0 at byte {start}")
        what = _WHAT.get((level, field))
        if what and wire != 2:
            raise XSpaceError(f"{what} at byte {start} has wire type {wire}, not a message's (2)")
        value = pos
        if wire == 0:
            _, pos = _varint(data, pos, end)
        elif wire == 1:
            pos += 8
        elif wire == 2:
            n, value = _varint(data, pos, end)
            pos = value + n
        elif wire == 5:
            pos += 4
        else:  # 3 and 4 are proto2's groups, which xplane.proto has none of; 6 and 7 are no wire type
            raise XSpaceError(
                f"field {field} at byte {start} has wire type {wire}, which no XSpace field has"
            )
        if pos > end:
            raise XSpaceError(
                f"{what or f'field {field}'} at byte {start} ends past its message (byte {end})"
            )
        yield field, wire, start, value, pos
        if once:
            return


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    result = shift = 0
    start = pos
    while pos < end:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift == 70:
            raise XSpaceError(f"a varint at byte {start} is longer than ten bytes")
    raise XSpaceError(f"a varint at byte {start} is cut short")


def _message(field: int, body: bytes) -> bytes:
    return _key(field, len(body)) + body


def _key(field: int, length: int) -> bytes:
    """The key and length that start a length-delimited ``field`` of ``length`` bytes."""
    out = bytearray((field << 3 | 2,))
    while length >= 0x80:
        out.append(length & 0x7F | 0x80)
        length >>= 7
    out.append(length)
    return bytes(out)
