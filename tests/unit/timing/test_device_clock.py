"""The device clock: traces read as the chip's own time, and the paired timer on it.

Real traces recorded on a TPU v5e stand in for the chip (tests/data/traces/README.md); the paired timer
is driven by a recorder whose "trace" holds the device time each call was given, while the host's clock
sees every call cost the same: the round trip a blocking host timer measures on a TPU host.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from invariants.timing import trace as trace_module
from invariants.timing.device import DeviceRecorder
from invariants.timing.paired import (
    DeviceClockFallback,
    clock_sampling,
    measure_efficiency,
    measure_ratio,
    runtime_clock,
)
from invariants.timing.trace import DeviceTrace, Event, TraceError, find_traces, read_trace, stats

DATA = Path(__file__).parents[2] / "data" / "traces"
CHIP = DATA / "tpu-v5e"
RECORDED = json.loads((CHIP / "device-times-seed-configs.json").read_text())


def _recorded_median_us(program: str) -> float:
    return next(r["device_us_median"] for r in RECORDED if r["program"] == program and r["config"] == "f32")


@pytest.mark.parametrize("program", ["take", "eqx_embedding", "grad_take", "onehot_matmul"])
def test_a_chip_trace_reads_as_each_calls_device_time(program):
    trace = read_trace(CHIP / f"{program}.f32.tpu-v5e.xplane.pb")
    assert trace.plane == "/device:TPU:0"
    (module,) = stats(trace)
    assert module.calls == 20
    assert module.min_s <= module.median_s <= module.max_s
    # The same session's figures, taken from the same kind of trace by other code.
    assert module.median_s * 1e6 == pytest.approx(_recorded_median_us(program), rel=0.01)


def test_the_ops_of_a_call_add_up_to_its_module_and_the_costliest_comes_first():
    (module,) = stats(read_trace(CHIP / "eqx_embedding.f32.tpu-v5e.xplane.pb"))
    ops = module.ops
    assert ops[0].name == "gather_fusion"  # the vmapped lookup's kCustom gather: most of the call
    assert ops[0].per_call_s > 0.8 * module.median_s
    assert [o.total_s for o in ops] == sorted((o.total_s for o in ops), reverse=True)
    assert sum(o.per_call_s for o in ops) <= module.median_s * 1.001


def test_an_op_in_two_overlapping_executions_counts_once_for_the_earlier():
    modules = (Event("a", 0, 100), Event("b", 50, 100))
    ops = (
        Event("%x = f32[] add()", 10, 5),
        Event("%y = f32[] mul()", 60, 5),
        Event("%z = f32[] sub()", 120, 5),
    )
    by_module = {
        m.name: [o.name for o in m.ops] for m in stats(DeviceTrace("t", "/device:TPU:0", modules, ops))
    }
    assert by_module == {"a": ["x", "y"], "b": ["z"]}


def test_a_cpu_trace_has_no_device_clock_and_says_so_in_one_line():
    with pytest.raises(
        TraceError, match=r"no device plane with 'XLA Modules' events \(planes: .*host:CPU"
    ) as err:
        read_trace(DATA / "cpu" / "take.xplane.pb")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("content", [b"not a trace at all", b"\x08\x96\x01garbage\xff\xff"])
def test_a_file_that_is_not_a_trace_is_one_line(tmp_path, content):
    path = tmp_path / "x.xplane.pb"
    path.write_bytes(content)
    with pytest.raises(TraceError) as err:
        read_trace(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_a_named_pipe_is_refused_not_read(tmp_path):
    import os

    fifo = tmp_path / "pipe.xplane.pb"
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match="not a regular file"):
        read_trace(fifo)


def test_a_folder_without_traces_is_one_line(tmp_path):
    with pytest.raises(TraceError, match=r"no \*\.xplane\.pb under this folder"):
        find_traces(tmp_path)


# ------------------------------------------------------------------------------------ the paired timer


class ChipStandIn:
    """A recorder whose trace gives each call the device seconds of the callable that made it; the host
    clock moves by the same round trip for every call, whatever the device did."""

    def __init__(self, device_seconds: dict[str, float], round_trip: float = 600e-6) -> None:
        self.device_seconds = device_seconds
        self.round_trip = round_trip
        self.now = 0.0
        self.log: list[str] = []
        self.tracing = False

    def clock(self) -> float:
        return self.now

    def call(self, name: str) -> Callable[[], None]:
        def run() -> None:
            self.now += self.round_trip
            if self.tracing:
                self.log.append(name)

        return run

    @contextmanager
    def tracer(self, folder: str) -> Iterator[None]:
        self.tracing, self.log = True, []
        (Path(folder) / "t.xplane.pb").write_bytes(b"")
        try:
            yield
        finally:
            self.tracing = False

    def reader(self, path: object) -> DeviceTrace:
        events = []
        t = 0.0
        for name in self.log:
            ns = self.device_seconds[name] * 1e9
            events.append(Event(f"jit_{name}(1)", t, ns))
            t += ns + 1000
        return DeviceTrace(str(path), "/device:TPU:0", tuple(events), ())

    def recorder(self) -> DeviceRecorder:
        return DeviceRecorder(self.tracer, self.reader)


def test_on_the_device_clock_a_ratio_is_the_chips_not_the_round_trips():
    chip = ChipStandIn({"eqx_embedding": 90.0e-6, "take": 45.7e-6})
    a, b = chip.call("eqx_embedding"), chip.call("take")
    on_device = measure_ratio(a, b, threshold=1.10, **clock_sampling("device", chip.clock, chip.recorder()))
    assert on_device.clock == "device"
    assert on_device.median == pytest.approx(90.0 / 45.7, rel=1e-9)
    assert on_device.verdict == "fail"
    assert on_device.t_a_median == pytest.approx(90.0e-6)
    # The host's share, beside: every call cost the same round trip on the host.
    assert on_device.wall_a_median == pytest.approx(600e-6) and on_device.wall_b_median == pytest.approx(
        600e-6
    )
    assert "device clock" in on_device.summary() and "us wall" in on_device.summary()
    # The host's clock alone reads the round trips: 1.0, a pass that the chip contradicts.
    on_wall = measure_ratio(a, b, threshold=1.10, clock=chip.clock)
    assert on_wall.median == pytest.approx(1.0) and on_wall.verdict == "pass"
    assert on_wall.clock == "wall" and on_wall.wall_a_median is None


def test_every_call_of_a_pair_is_matched_to_its_own_device_event():
    # Alternating order (ABBA): a recorder that mismatched calls would swap sides in every other pair.
    chip = ChipStandIn({"a": 3e-6, "b": 1e-6})
    r = measure_ratio(chip.call("a"), chip.call("b"), **clock_sampling("device", chip.clock, chip.recorder()))
    assert r.ratios == pytest.approx([3.0] * len(r.ratios))
    assert chip.log[:4] == ["a", "b", "b", "a"]


def test_efficiency_on_the_device_clock():
    chip = ChipStandIn({"copy": 10e-6, "program": 40e-6})
    r = measure_efficiency(
        chip.call("program"), chip.call("copy"), **clock_sampling("device", chip.clock, chip.recorder())
    )
    assert r.clock == "device" and r.median == pytest.approx(0.25)


def test_a_trace_without_device_events_falls_back_to_the_wall_clock_whole_in_one_line():
    chip = ChipStandIn({"a": 2e-6, "b": 1e-6})

    def no_device(path: object) -> DeviceTrace:
        raise TraceError("t.xplane.pb: no device plane with 'XLA Modules' events (planes: /host:CPU)")

    recorder = DeviceRecorder(chip.tracer, no_device)
    with pytest.warns(DeviceClockFallback) as caught:
        r = measure_ratio(chip.call("a"), chip.call("b"), **clock_sampling("device", chip.clock, recorder))
    assert r.clock == "wall" and r.median == pytest.approx(1.0)  # all of it on the wall clock
    (warning,) = caught
    assert "\n" not in str(warning.message) and "wall clock" in str(warning.message)


def test_a_trace_with_a_call_missing_is_not_matched_by_position():
    chip = ChipStandIn({"a": 2e-6, "b": 1e-6})
    reader = chip.reader

    def one_short(path: object) -> DeviceTrace:
        full = reader(path)
        return DeviceTrace(full.path, full.plane, full.modules[:-1], ())

    with pytest.warns(DeviceClockFallback, match="module executions for"):
        r = measure_ratio(
            chip.call("a"),
            chip.call("b"),
            **clock_sampling("device", chip.clock, DeviceRecorder(chip.tracer, one_short)),
        )
    assert r.clock == "wall"


def test_the_real_profiler_on_the_cpu_backend_falls_back_in_one_line():
    import jax
    import jax.numpy as jnp

    f = jax.jit(lambda v: v + 1.0).lower(jnp.ones(8)).compile()
    x = jnp.ones(8)

    def call() -> None:
        jax.block_until_ready(f(x))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = measure_ratio(call, call, min_pairs=20, min_seconds=0.0, max_seconds=1.0,
                          **clock_sampling("device", runtime_clock("tpu")[1]))  # fmt: skip
    assert r.clock == "wall"
    (warning,) = [w for w in caught if w.category is DeviceClockFallback]
    assert "no device plane" in str(warning.message)


def test_the_clock_by_backend_and_by_choice():
    assert runtime_clock("cpu")[0] == "cpu"
    assert runtime_clock("tpu")[0] == "device"
    assert runtime_clock("gpu")[0] == "device"
    assert runtime_clock("tpu", "wall")[0] == "wall"
    with pytest.raises(trace_module.InvariantsError, match="device clock reads an accelerator"):
        runtime_clock("cpu", "device", "INVARIANTS_CLOCK")
    assert clock_sampling("wall", runtime_clock("tpu", "wall")[1])["device"] is None


def test_a_slow_program_is_traced_for_fewer_pairs_never_fewer_than_the_interval_needs():
    from invariants._stats import min_pairs_for

    fast = ChipStandIn({"a": 90e-6, "b": 45e-6}, round_trip=600e-6)
    r_fast = measure_ratio(
        fast.call("a"), fast.call("b"), **clock_sampling("device", fast.clock, fast.recorder())
    )
    slow = ChipStandIn({"a": 28e-3, "b": 120e-6}, round_trip=28.5e-3)
    r_slow = measure_ratio(
        slow.call("a"), slow.call("b"), **clock_sampling("device", slow.clock, slow.recorder())
    )
    assert r_fast.pairs == 30
    assert min_pairs_for(0.95) < r_slow.pairs < 10
    assert r_slow.median == pytest.approx(28e-3 / 120e-6)
