"""A profiler trace written by hand: an XSpace protobuf (tsl/profiler/protobuf/xplane.proto) with one device
plane, its ``XLA Modules`` and ``XLA Ops`` lines, in protobuf's wire format. For tests that need a trace no
chip recorded: hostile names, impossible durations, millions of events."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

# An event: (name, offset in picoseconds from the line's start, duration in picoseconds).
Event = tuple[str, int, int]


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # an int64 below zero is its two's complement, ten bytes
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _line(line_id: int, name: str, events: Iterable[Event], ids: dict[str, int]) -> bytes:
    body = [_field(1, line_id), _field(2, name.encode()), _field(3, 0)]
    for event_name, offset_ps, duration_ps in events:
        metadata = ids.setdefault(event_name, len(ids) + 1)
        body.append(_field(4, _field(1, metadata) + _field(2, offset_ps) + _field(3, duration_ps)))
    return b"".join(body)


def xspace(modules: Sequence[Event], ops: Iterable[Event] = (), plane: str = "/device:TPU:0") -> bytes:
    """The serialized XSpace of one device plane with these module and op events."""
    ids: dict[str, int] = {}
    lines = [_line(1, "XLA Modules", modules, ids), _line(2, "XLA Ops", ops, ids)]
    metadata = [
        _field(4, _field(1, i) + _field(2, _field(1, i) + _field(2, name.encode())))
        for name, i in ids.items()
    ]
    body = _field(1, 1) + _field(2, plane.encode()) + b"".join(_field(3, x) for x in lines)
    return _field(1, body + b"".join(metadata))
