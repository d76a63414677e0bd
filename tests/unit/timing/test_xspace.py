"""A trace split at the wire level reads as the whole file decoded: every plane, line and event of the
recorded traces, and lines written in any field order; what the walk does not understand is one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from xspace import field, xspace

from invariants.timing import xspace as wire
from invariants.timing.trace import TraceError, _decoder, read_trace, stats

DATA = Path(__file__).parents[2] / "data" / "traces"
RECORDED = sorted(DATA.glob("*/*.xplane.pb"))


def _events(line):
    return [(e.name, e.start_ns, e.duration_ns, list(e.stats)) for e in line.events]


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_every_line_of_a_recorded_trace_decoded_run_by_run_is_the_file_decoded_whole(path, monkeypatch):
    """Runs of a few events each, so that every line with events is cut: the skeleton has every plane,
    its stats and lines, and the runs of each line hold its events, each once and in order."""
    monkeypatch.setattr(wire, "RUN_BYTES", 64)
    decode = _decoder().from_serialized_xspace
    data = path.read_bytes()
    whole, space = list(decode(data).planes), wire.split(data)
    skeleton = list(decode(space.skeleton()).planes)
    assert [(p.name, list(p.stats)) for p in skeleton] == [(p.name, list(p.stats)) for p in whole]
    cut = 0
    for k, plane in enumerate(whole):
        assert [line.name for line in skeleton[k].lines] == [line.name for line in plane.lines]
        for i, line in enumerate(plane.lines):
            runs = list(space.runs(k, i))
            cut += len(runs) > 1
            read = []
            for run in runs:
                ((one,),) = (p.lines for p in decode(run).planes)
                read += _events(one)
            assert read == _events(line), (plane.name, line.name)
    assert cut  # the recorded traces' lines are longer than a run


def _event(metadata: int, offset_ps: int, duration_ps: int) -> bytes:
    return field(4, field(1, metadata) + field(2, offset_ps) + field(3, duration_ps))


def test_a_line_whose_fields_come_between_its_events_reads_as_written_in_order(tmp_path, monkeypatch):
    """The proto's field order is the writer's choice: a line's name, id and start after or between its
    events are the line's, wherever the events are cut into runs."""
    monkeypatch.setattr(wire, "RUN_BYTES", 1)  # a run per event
    modules = [("jit_f", 0, 10_000_000), ("jit_f", 20_000_000, 10_000_000)]
    ops = [
        ("%a = f32[] add()", 1_000, 2_000),
        ("%m = f32[] mul()", 5_000, 3_000),
        ("%a = f32[] add()", 21_000, 2_000),
    ]
    canonical = tmp_path / "canonical.xplane.pb"
    canonical.write_bytes(xspace(modules, ops))
    metadata = b"".join(
        field(4, field(1, i) + field(2, field(1, i) + field(2, name.encode())))
        for name, i in [("jit_f", 1), ("%a = f32[] add()", 2), ("%m = f32[] mul()", 3)]
    )
    module_line = (
        _event(1, 0, 10_000_000) + field(2, b"XLA Modules") + field(1, 1) + _event(1, 20_000_000, 10_000_000)
    )
    op_line = (
        _event(2, 1_000, 2_000)
        + field(3, 0)
        + _event(3, 5_000, 3_000)
        + field(2, b"XLA Ops")
        + _event(2, 21_000, 2_000)
    )
    plane = field(3, op_line) + metadata + field(2, b"/device:TPU:0") + field(3, module_line) + field(1, 1)
    shuffled = tmp_path / "shuffled.xplane.pb"
    shuffled.write_bytes(field(1, plane))
    a, b = read_trace(canonical), read_trace(shuffled)
    assert (a.plane, a.modules, list(a.ops)) == (b.plane, b.modules, list(b.ops))
    assert len(list(b.ops)) == 3 and stats(a) == stats(b)


_PLANE = field(2, b"/device:TPU:0")


@pytest.mark.parametrize(
    "content, what",
    [
        (b"\x0a\xff", "a varint at byte 1 is cut short"),
        (b"\x10" + b"\xff" * 10 + b"\x01", "a varint at byte 1 is longer than ten bytes"),
        (b"\x0a\x05ab", "XSpace.planes at byte 0 ends past its message (byte 4)"),
        (b"\x02\x00", "a field numbered 0 at byte 0"),
        (b"\x13", "field 2 at byte 0 has wire type 3, which no XSpace field has"),
        (field(1, 5), "XSpace.planes at byte 0 has wire type 0, not a message's (2)"),
        (field(1, _PLANE + field(3, 5)), "XPlane.lines at byte 17 has wire type 0, not a message's (2)"),
        (
            field(1, _PLANE + field(3, field(4, 7))),
            "XLine.events at byte 19 has wire type 0, not a message's (2)",
        ),
        (field(1, _PLANE + field(3, b"\x22\x09ab")), "XLine.events at byte 19 ends past its line (byte 23)"),
        (field(1, _PLANE + field(3, field(2, b"XLA Ops") + b"\x22")), "a varint at byte 29 is cut short"),
    ],
)
def test_what_the_walk_does_not_understand_is_one_line_naming_it(tmp_path, content, what):
    path = tmp_path / "t.xplane.pb"
    path.write_bytes(content)
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert str(err.value) == f"{path}: not a profiler trace (an XSpace protobuf): {what}"


def test_an_op_event_the_decoder_refuses_is_one_line_when_the_ops_are_read(tmp_path):
    """The walk stops at an event's bounds; what is inside is the decoder's to read, run by run."""
    good = xspace([("jit_f", 0, 1_000_000)], [("%a = f32[] add()", 10, 10)])
    event, cut = _event(2, 10, 10), field(4, b"\x08" + b"\xff" * 5)  # a varint cut at the event's end
    assert len(event) == len(cut) and good.count(event) == 1
    path = tmp_path / "t.xplane.pb"
    path.write_bytes(good.replace(event, cut))
    trace = read_trace(path)
    with pytest.raises(TraceError, match=rf"^{path}: not a profiler trace \(an XSpace protobuf\): ") as err:
        stats(trace)
    assert "\n" not in str(err.value)


def test_more_pieces_than_a_profiler_writes_is_one_line(tmp_path, monkeypatch):
    """Each plane, line, field beside them and run of events is kept while the trace is read: a file of
    millions of tiny fields would take many times its size, so their number is bounded."""
    monkeypatch.setattr(wire, "MAX_PIECES", 8)
    line = b"".join(_event(1, k, 1) + field(1, k) for k in range(5))  # a field between each two events
    path = tmp_path / "t.xplane.pb"
    path.write_bytes(field(1, _PLANE + field(3, line)))
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert str(err.value) == (
        f"{path}: not a profiler trace (an XSpace protobuf): more than 8 planes, lines, other fields and "
        "runs of events: more than a profiler writes"
    )
    monkeypatch.setattr(wire, "MAX_PIECES", 12)  # 1 plane, its name, 1 line, 5 fields, 5 runs: 13
    with pytest.raises(TraceError, match="more than 12 planes"):
        read_trace(path)
    monkeypatch.setattr(wire, "MAX_PIECES", 13)
    assert wire.split(path.read_bytes()).planes[0].lines[0].runs
