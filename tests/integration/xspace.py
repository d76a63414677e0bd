"""A profiler trace written by hand: an XSpace protobuf (tsl/profiler/protobuf/xplane.proto) with one device
plane, its ``XLA Modules`` and ``XLA Ops`` lines, in protobuf's wire format. For tests that need a trace no
chip recorded: hostile names, impossible durations, millions of events."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

# An event: (name, offset in picoseconds from the line's start, duration in picoseconds).
Event = tuple[str, int, int]


@functools.lru_cache(
    maxsize=1 << 12
)  # keys, ids, lengths and durations recur; a big trace is written in half the time
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # an int64 below zero is its two's complement, ten bytes
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, value: int | bytes) -> bytes:
    """One field: a varint for an int, length-delimited for bytes (a message, a string)."""
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _line(line_id: int, name: str, events: Iterable[Event], ids: dict[str, int]) -> bytes:
    body = [field(1, line_id), field(2, name.encode()), field(3, 0)]
    for event_name, offset_ps, duration_ps in events:
        metadata = ids.setdefault(event_name, len(ids) + 1)
        body.append(field(4, field(1, metadata) + field(2, offset_ps) + field(3, duration_ps)))
    return b"".join(body)


def xspace(modules: Sequence[Event], ops: Iterable[Event] = (), plane: str = "/device:TPU:0") -> bytes:
    """The serialized XSpace of one device plane with these module and op events."""
    ids: dict[str, int] = {}
    lines = [_line(1, "XLA Modules", modules, ids), _line(2, "XLA Ops", ops, ids)]
    metadata = [
        field(4, field(1, i) + field(2, field(1, i) + field(2, name.encode()))) for name, i in ids.items()
    ]
    body = field(1, 1) + field(2, plane.encode()) + b"".join(field(3, x) for x in lines)
    return field(1, body + b"".join(metadata))
