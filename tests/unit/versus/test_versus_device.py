"""versus on the device clock: one side's worker at a time (a TPU chip belongs to one process), each call's
device seconds from its trace; a fresh worker pair traces several blocks a side, block k of one side paired
with block k of the other, and its rounds are pooled with other pairs' only where the pairs agree."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from invariants.__main__ import main as cli_main
from invariants._errors import InvariantsError
from invariants.timing.device import DeviceRecorder
from invariants.timing.trace import DeviceTrace, Event, TraceError
from invariants.versus import command as versus
from invariants.versus.command import (
    DEVICE_CALLS,
    DEVICE_TRACE_SECONDS,
    Settings,
    device_pair,
    device_share,
    measure,
    measure_confirmed,
)
from invariants.versus.protocol import ProtocolError, decode_reply, decode_request, encode
from invariants.versus.report import load_record
from invariants.versus.sides import Side, one_process_per_chip
from invariants.versus.worker import Worker, device_medians, device_slowed, pad_size, serve, sizing_calls

ROOT = Path(__file__).resolve().parents[3]
SIDES = [
    Side("baseline", "current", Path(sys.executable)),
    Side("candidate", "current", Path(sys.executable)),
]
DEVICE = Settings(clock="device", round_seconds=0.0, min_pairs=8, threshold=1.01)


class Chip:
    """One chip: a worker may hold it only while no other does. Each traced call costs its program's device
    seconds times the side's factor, with a per-process bias (sd ``bias``), per-call noise, and a drift
    shared by both sides' k-th block (``drift`` a block); the host's round trip is the same for every call
    (600 us), whatever the chip did."""

    def __init__(
        self, factor: float, seed: int = 0, noise: float = 0.002, bias: float = 0.0002, drift: float = 0.0
    ) -> None:
        self.factor, self.noise, self.bias, self.drift = factor, noise, bias, drift
        self.rng = np.random.default_rng(seed)
        self.holder: object | None = None
        self.starts: list[str] = []
        self.traces: list[int] = []  # each worker's trace requests
        self.untils: list[dict[str, int]] = []  # each trace request's blocks a program takes part in
        self.sizes = True  # whether the candidate's workers size a slowdown pass (the switch is on)
        self.pads: list[
            tuple[str, Any]
        ] = []  # each prepare request's side and the slowdown passes it was given

    def start(self, sides: Any, cpus: Any = None) -> list[Any]:
        assert cpus is None
        return [ChipWorker(self, side) for side in sides]


class ChipWorker:
    def __init__(self, chip: Chip, side: Side) -> None:
        assert chip.holder is None, "two workers hold the chip at once"
        chip.holder, self.chip, self.side = self, chip, side
        chip.starts.append(side.role)
        chip.traces.append(0)
        self.bias = float(np.exp(chip.rng.normal(0, chip.bias)))
        self.hello = {"platform": "tpu", "versions": {}}

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        assert self.chip.holder is self
        if op == "prepare":
            seconds = {"slow": 30e-3, "very_slow": 10.0}
            keys = [f"{p}/{c}" for p, c in fields["programs"]]
            self.chip.pads.append((self.side.role, fields.get("pads")))
            slowed = self.side.role == "candidate" and self.chip.sizes
            sized = {k: {"size": 4096, "reached": 0.01} for k in keys if slowed}
            return {"per_call": {k: seconds.get(k.split("/")[0], 600e-6) for k in keys}, "pads": sized}
        assert op == "trace", op
        factor = self.chip.factor if self.side.role == "candidate" else 1.0
        self.chip.traces[-1] += 1
        out = []
        blocks, until = fields.get("blocks", 1), fields.get("until", {})
        self.chip.untils.append(until)
        for k in range(blocks):
            calls = {key: n for key, n in fields["calls"].items() if k < until.get(key, blocks)}
            base = 45.7e-6 * factor * self.bias * (1 + self.chip.drift * k)
            noise = self.chip.rng.normal(0, self.chip.noise, size=sum(calls.values()))
            device, at = {}, 0
            for key, n in calls.items():
                device[key] = [base * float(np.exp(e)) for e in noise[at : at + n]]
                at += n
            wall = {key: 600e-6 * n for key, n in calls.items()}
            out.append({"device": device, "wall": wall, "cpu": wall})
        return {"blocks": out, "traces": 1}

    def close(self) -> None:
        self.chip.holder = None


def test_a_pair_runs_one_side_at_a_time_and_swaps_the_order():
    chip = Chip(1.0)
    device_pair(SIDES, {"take": "f32"}, DEVICE, 1, chip.start)
    device_pair(SIDES, {"take": "f32"}, DEVICE, 2, chip.start)
    assert chip.starts == ["baseline", "candidate", "candidate", "baseline"]


def test_a_fresh_pair_gives_a_round_per_block_paired_block_by_block():
    # Both sides' k-th block runs 3 % slower than their (k-1)-th: paired block by block, every round reads
    # the sides' true ratio; paired any other way, the drift would show in the rounds.
    chip = Chip(2.0, noise=0.0, bias=0.0, drift=0.03)
    got = device_pair(SIDES, {"take": "f32", "naive": "f32"}, DEVICE, 1, chip.start)
    assert chip.traces == [1, 1]  # one trace a worker: its stop costs more than the calls
    for p in ("take", "naive"):
        assert len(got[p]) == DEVICE.device_blocks
        assert [rd.ratio("device") for rd in got[p]] == pytest.approx([2.0] * DEVICE.device_blocks)
        calls = min(DEVICE_CALLS, round(DEVICE_TRACE_SECONDS / DEVICE.device_blocks / 600e-6))
        assert all(len(rd.ratios["device"]) == calls for rd in got[p])
        assert got[p][0].ratio("wall") == pytest.approx(1.0)  # the host's round trip sees nothing of it
        assert np.median(got[p][0].per_call["device"]["baseline"]) == pytest.approx(45.7e-6)  # device seconds


def test_a_programs_calls_in_a_workers_trace_last_about_the_traces_seconds():
    # A program of many tiny kernels fills the profiler's buffer fastest, and its events cost the trace's
    # stop: its calls are bounded by time, a slow one's to one call in fewer blocks, two at least.
    chip = Chip(1.0)
    got = device_pair(SIDES, {"slow": "f32", "take": "f32"}, DEVICE, 1, chip.start)
    blocks = round(DEVICE_TRACE_SECONDS / 30e-3)
    assert 2 <= blocks < DEVICE.device_blocks
    assert blocks * 30e-3 == pytest.approx(DEVICE_TRACE_SECONDS, rel=0.25)
    assert [len(rd.ratios["device"]) for rd in got["slow"]] == [1] * blocks
    assert chip.untils == [{"slow/f32": blocks}] * 2  # the same share on both sides: paired block by block
    calls = round(DEVICE_TRACE_SECONDS / DEVICE.device_blocks / 600e-6)
    assert calls * DEVICE.device_blocks * 600e-6 == pytest.approx(DEVICE_TRACE_SECONDS, rel=0.25)
    assert [len(rd.ratios["device"]) for rd in got["take"]] == [calls] * DEVICE.device_blocks


def test_a_program_slower_than_the_traces_seconds_still_gets_the_rounds_an_interval_needs():
    assert device_share(10.0, 6) == (1, 2)  # ten seconds a call: two blocks, one call each
    assert device_share(1e-9, 6) == (DEVICE_CALLS, 6)
    chip = Chip(1.02, noise=0.0, bias=0.0)
    done = measure(SIDES, ["very_slow"], DEVICE, lambda _: None, "measure", chip.start)["very_slow"]
    assert done.word == "fail" and "(this program in 2: a slow call)" in (done.sampling or "")


def test_each_fresh_pairs_line_says_where_each_workers_time_went():
    lines: list[str] = []
    measure(SIDES, ["take"], DEVICE, lines.append, "measure", Chip(1.0).start)
    pairs = [line for line in lines if "fresh pair" in line]
    assert len(pairs) == 2
    for line in pairs:
        for role in ("baseline", "candidate"):
            assert re.search(
                rf"{role} start \d+\.\d s, prepare \d+\.\d s, trace \d+\.\d s \(1 trace\), close \d+\.\d s",
                line,
            ), line


def test_pairs_that_agree_are_judged_together_after_the_fewest_pairs():
    chip = Chip(1.0)
    done = measure(SIDES, ["take"], DEVICE, lambda _: None, "measure", chip.start)["take"]
    assert chip.starts == ["baseline", "candidate", "candidate", "baseline"]  # two fresh pairs, ABBA
    assert len(done.results["device"].ratios) == 2 * DEVICE.device_blocks  # every block a round
    assert done.sampling == "2 fresh worker pairs x 6 blocks each"


def test_pairs_that_disagree_get_another_fresh_pair_and_then_the_pairs_decide():
    # Each process 1 % off on its own, its blocks within 0.01 %: the pairs cannot be pooled.
    lines: list[str] = []
    chip = Chip(1.0, noise=0.0002, bias=0.01)
    done = measure(SIDES, ["take"], DEVICE, lines.append, "measure", chip.start)["take"]
    assert len(chip.starts) == 2 * DEVICE.device_max_pairs
    assert "the pairs disagree: another fresh pair" in lines[1]
    assert len(done.results["device"].ratios) == DEVICE.device_max_pairs  # one round a pair
    assert (
        done.sampling == "4 fresh worker pairs x 6 blocks each; the pairs disagree: interval over the 4 pairs"
    )


@pytest.mark.parametrize(
    ("factor", "word"), [(1.0, "pass"), (1.012, "fail"), (1.005, "pass"), (1.05, "fail")]
)
def test_the_device_clock_decides_the_verdict_at_its_default_bound(factor: float, word: str):
    # A narrow spread between processes (0.02 %), as measured on a v5e: a slowdown whose whole interval
    # clears the 1.01 bound fails, one below it passes, and identical sides pass.
    done = measure(SIDES, ["take"], DEVICE, lambda _: None, "measure", Chip(factor).start)
    results = done["take"].results
    assert set(results) == {"device", "wall"}
    assert done["take"].word == word
    assert results["device"].median == pytest.approx(factor, rel=0.002)
    assert results["wall"].median == pytest.approx(1.0)


def test_identical_sides_raise_no_false_alarm_over_many_runs():
    # Processes 0.1 % apart, and a chip whose every block runs 0.5 % slower than the one before on both
    # sides alike: paired block by block, the drift cancels.
    def word(seed: int) -> str:
        chip = Chip(1.0, seed=seed, bias=0.001, drift=0.005)
        return measure(SIDES, ["take"], DEVICE, lambda _: None, "measure", chip.start)["take"].word

    assert [word(seed) for seed in range(10)] == ["pass"] * 10


def test_the_record_and_the_progress_say_pairs_times_blocks(tmp_path: Path):
    from invariants.versus import report

    lines: list[str] = []
    (verdict,) = measure_confirmed(SIDES, ["take"], DEVICE, lines.append, Chip(1.0).start)
    assert any("measure fresh pair 2" in line and "6 blocks each side" in line for line in lines)
    side = report.SideRecord("current", sys.executable)
    entry = verdict.to_dict()
    record = report.make_record(side, side, {"threshold": 1.01, "clock": "device", "confidence": 0.95},
                                [entry], [], {}, 1.0)  # fmt: skip
    report.write_json(record, tmp_path / "v.json", "--json")
    (timed,) = report.load_record(tmp_path / "v.json").timing
    assert timed["sampling"] == "2 fresh worker pairs x 6 blocks each"
    assert timed["attempts"] == ["pass (2 fresh worker pairs x 6 blocks each)"]
    markdown = report.render_markdown(record)
    assert "pass (2 fresh worker pairs x 6 blocks each)" in markdown
    assert "a round is block k of each side" in markdown


def test_each_clocks_result_names_its_clock_and_times_per_call_on_it():
    results = measure(SIDES, ["take"], DEVICE, lambda _: None, "measure", Chip(1.0).start)["take"].results
    device, wall = results["device"], results["wall"]
    assert (device.clock, wall.clock) == ("device", "wall")
    assert device.t_b_median == pytest.approx(45.7e-6, rel=0.01)
    assert device.wall_b_median == wall.t_b_median == pytest.approx(600e-6)  # the host's share beside it
    assert wall.wall_b_median is None


def test_a_tpu_runs_its_workers_one_at_a_time(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    assert one_process_per_chip(SIDES)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert not one_process_per_chip(SIDES)
    on_tpu = Side("candidate", "current", Path(sys.executable), {"JAX_PLATFORMS": "tpu,cpu"})
    assert one_process_per_chip([SIDES[0], on_tpu])
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    assert not one_process_per_chip(SIDES)


def test_the_structure_phase_on_a_tpu_starts_one_worker_at_a_time(monkeypatch: pytest.MonkeyPatch):
    chip = Chip(1.0)

    def start_pair(sides: Any, cpus: Any = None) -> list[Any]:
        workers = chip.start(sides)
        for w in workers:
            w.request = lambda op, **f: {"items": {}, "targets": {}}
        return workers

    def both(workers: Any, op: str, **fields: Any) -> list[dict[str, Any]]:
        return [w.request(op, **fields) for w in workers]

    monkeypatch.setattr(versus, "start_pair", start_pair)
    monkeypatch.setattr(versus, "_both", both)
    hellos, replies = versus.hello_and_structure(SIDES, [("take", "f32", "tpu-v5e")], exclusive=True)
    assert [h["platform"] for h in hellos] == ["tpu", "tpu"] and len(replies) == 2
    assert chip.starts == ["baseline", "candidate"]
    with pytest.raises(AssertionError, match="two workers hold the chip"):
        versus.hello_and_structure(SIDES, [], exclusive=False)


def test_on_a_tpu_the_first_timed_pair_compares_the_structure_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    # A worker's start on a TPU is mostly libtpu's: no workers are started for the structure alone.
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    chip, asked = Chip(1.0, bias=0.0), []

    class Answering(ChipWorker):
        def request(self, op: str, **fields: Any) -> dict[str, Any]:
            if op != "structure":
                return super().request(op, **fields)
            asked.append(self.side.role)
            return {"items": {}, "targets": {"cpu": None}}

        def send(self, op: str, **fields: Any) -> None:  # as the structure's own workers are asked
            self.sent = (op, fields)

        def receive(self, op: str) -> dict[str, Any]:
            return self.request(op, **self.sent[1])

    monkeypatch.setattr(versus, "start_pair", lambda sides, cpus=None: [Answering(chip, s) for s in sides])
    cli_main(["versus", "--baseline", "current", "--candidate", "current", "--programs", "take",
              "--targets", "cpu", "--json", str(tmp_path / "v.json")])  # fmt: skip
    assert chip.starts == ["baseline", "candidate", "candidate", "baseline"]  # the two fresh pairs alone
    assert asked == ["baseline", "candidate"]
    record = load_record(tmp_path / "v.json")
    assert [s["key"] for s in record.structure] == ["take/f32/cpu"]
    assert record.timing[0]["sampling"] == "2 fresh worker pairs x 6 blocks each"
    err = capsys.readouterr().err
    assert "the first fresh pair of the timing also compares structure of 1 keys (cpu)" in err
    assert "device clock: 2 fresh worker pairs x 6 blocks each (up to 4 pairs)" in err


@pytest.mark.e2e
def test_the_wall_clock_on_a_tpu_is_one_line():
    env = {**os.environ, "JAX_PLATFORMS": "tpu"}
    run = subprocess.run(
        [sys.executable, "-m", "invariants", "versus", "--baseline", "current", "--candidate", "current",
         "--clock", "wall", "--no-structure", "--programs", "take"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2
    last = run.stderr.strip().splitlines()[-1]
    assert "--clock wall" in last and "one process" in last and "Traceback" not in run.stderr


class StandInChip:
    """A recorder whose trace holds one module event per call made while tracing, each lasting its
    program's device seconds."""

    def __init__(self, capacity: int = 1 << 30) -> None:
        self.made: list[float] = []
        self.tracing = False
        self.traces = 0
        self.capacity = capacity  # module events a trace keeps: the profiler's buffer is finite

    @contextmanager
    def tracer(self, folder: str) -> Iterator[None]:
        self.tracing, self.made = True, []
        self.traces += 1
        (Path(folder) / "t.xplane.pb").write_bytes(b"")
        try:
            yield
        finally:
            self.tracing = False

    def reader(self, path: object) -> DeviceTrace:
        events = tuple(Event("jit_fn(1)", i * 200e3, ns) for i, ns in enumerate(self.made[: self.capacity]))
        return DeviceTrace(str(path), "/device:TPU:0", events, ())

    def call(self, seconds: float) -> Callable[[], None]:
        def run() -> None:
            if self.tracing:
                self.made.append(seconds * 1e9)

        return run


def test_the_worker_traces_its_blocks_of_every_program_in_one_trace_and_splits_them_in_call_order():
    chip = StandInChip()
    worker = Worker(recorder=DeviceRecorder(chip.tracer, chip.reader))
    worker.calls["eqx/f32"], worker.calls["take/f32"] = chip.call(90e-6), chip.call(40e-6)
    request = encode({"op": "trace", "calls": {"eqx/f32": 5, "take/f32": 3}, "blocks": 2})
    out = io.StringIO()
    assert serve(io.StringIO(request), out, worker) == 0  # as the controller asks it
    got = decode_reply(out.getvalue().splitlines()[1], "trace", "worker")
    assert chip.traces == 1
    assert len(got["blocks"]) == 2
    for block in got["blocks"]:
        assert block["device"] == {
            "eqx/f32": pytest.approx([90e-6] * 5),
            "take/f32": pytest.approx([40e-6] * 3),
        }
        assert set(block["wall"]) == set(block["cpu"]) == {"eqx/f32", "take/f32"}
    assert got["traces"] == 1
    with pytest.raises(InvariantsError, match="not prepared"):
        worker.trace({"naive/f32": 5})


def test_blocks_a_long_trace_loses_events_of_are_traced_one_at_a_time():
    chip = StandInChip(capacity=10)  # two blocks of 8 calls: one trace would lose 6
    worker = Worker(recorder=DeviceRecorder(chip.tracer, chip.reader))
    worker.calls["eqx/f32"], worker.calls["take/f32"] = chip.call(90e-6), chip.call(40e-6)
    got = worker.trace({"eqx/f32": 5, "take/f32": 3}, blocks=2)
    assert (got["traces"], chip.traces) == (2, 3)
    for block in got["blocks"]:
        assert block["device"] == {
            "eqx/f32": pytest.approx([90e-6] * 5),
            "take/f32": pytest.approx([40e-6] * 3),
        }
    chip = StandInChip(capacity=11)  # a program in the first block only: the second holds the other's calls
    worker = Worker(recorder=DeviceRecorder(chip.tracer, chip.reader))
    worker.calls["eqx/f32"], worker.calls["take/f32"] = chip.call(90e-6), chip.call(40e-6)
    got = worker.trace({"eqx/f32": 5, "take/f32": 3}, blocks=2, until={"eqx/f32": 1})
    assert (got["traces"], chip.traces) == (1, 1)  # 11 calls: one trace holds them
    assert [block["device"] for block in got["blocks"]] == [
        {"eqx/f32": pytest.approx([90e-6] * 5), "take/f32": pytest.approx([40e-6] * 3)},
        {"take/f32": pytest.approx([40e-6] * 3)},
    ]
    assert set(got["blocks"][1]["wall"]) == {"take/f32"}
    chip = StandInChip(capacity=7)  # a block alone loses events: the device clock cannot read it
    worker = Worker(recorder=DeviceRecorder(chip.tracer, chip.reader))
    worker.calls["eqx/f32"], worker.calls["take/f32"] = chip.call(90e-6), chip.call(40e-6)
    with pytest.raises(TraceError, match="7 module executions for 8 calls"):
        worker.trace({"eqx/f32": 5, "take/f32": 3}, blocks=2)


def test_a_trace_request_maps_each_program_to_its_calls():
    calls = {"take/f32": 3, "naive/f32": 1}
    assert decode_request(encode({"op": "trace", "calls": calls})) == {
        "op": "trace",
        "calls": calls,
        "blocks": 1,
        "until": {},
    }
    asked = {"op": "trace", "calls": calls, "blocks": 6, "until": {"naive/f32": 2}}
    assert decode_request(encode(asked)) == asked
    for bad in ({"other/f32": 2}, {"naive/f32": 7}, {"naive/f32": 0}, {"naive/f32": True}):
        with pytest.raises(ProtocolError, match=r"trace's 'until' must map keys of 'calls' to 1\.\.6"):
            decode_request(encode({**asked, "until": bad}))
    for bad in ({}, {"take/f32": 0}, {"take/f32": True}, {"take/f32": "3"}):
        with pytest.raises(ProtocolError, match="trace's 'calls' must map each key to calls >= 1"):
            decode_request(encode({"op": "trace", "calls": bad}))
    with pytest.raises(ProtocolError, match="'calls' has the wrong type"):
        decode_request(encode({"op": "trace", "key": "take/f32", "calls": 3}))
    with pytest.raises(ProtocolError, match="'blocks' must be >= 1"):
        decode_request(encode({"op": "trace", "calls": calls, "blocks": 0}))
    with pytest.raises(ProtocolError, match="lacks 'blocks'"):
        decode_reply(encode({"ok": True, "device": {}, "wall": {}, "cpu": {}}), "trace", "worker")
    with pytest.raises(ProtocolError, match="lacks 'device'"):
        decode_reply(encode({"ok": True, "blocks": [{"wall": {}, "cpu": {}}]}), "trace", "worker")


def test_the_device_clocks_default_bound_is_tighter_than_the_hosts():
    def settings(platform: str, *argv: str) -> Settings:
        args = versus._parser().parse_args(["--baseline", "current", "--candidate", "current", *argv])
        return versus._settings(args, platform)

    assert settings("tpu").clock == "device" and settings("tpu").threshold == versus.DEVICE_THRESHOLD == 1.01
    assert settings("cpu").clock == "cpu" and settings("cpu").threshold == 1.03
    assert settings("tpu", "--threshold", "1.05").threshold == 1.05
    assert settings("cuda", "--clock", "wall").threshold == 1.03


def test_the_plot_draws_the_device_clock_that_decided(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    from invariants.versus import report

    done = measure(SIDES, ["take"], DEVICE, lambda _: None, "measure", Chip(1.0).start)["take"]
    verdict = versus.ProgramVerdict("take", "device", done.word, done.results, [done.word])
    side = report.SideRecord("current", sys.executable)
    record = report.make_record(side, side, {"threshold": 1.01}, [verdict.to_dict()], [], {}, 1.0)
    drawn: list[str] = []
    monkeypatch.setattr(
        report, "save_figure", lambda fig, *_: drawn.extend(fig.axes[0].get_legend_handles_labels()[1])
    )
    report.plot(record, tmp_path / "v.png")
    assert {"device", "wall"} <= set(drawn)


def test_the_slowdowns_medians_share_a_trace_or_take_one_each_where_it_loses_events():
    chip = StandInChip()
    fns = [chip.call(90e-6), chip.call(40e-6), chip.call(10e-6)]
    recorder = DeviceRecorder(chip.tracer, chip.reader)
    assert device_medians(recorder, fns) == pytest.approx([90e-6, 40e-6, 10e-6])
    assert chip.traces == 1
    chip.capacity, chip.traces = 20, 0  # one program's calls fit a trace, three do not
    assert device_medians(recorder, fns) == pytest.approx([90e-6, 40e-6, 10e-6])
    assert chip.traces == 4


def test_the_slowdowns_pass_is_sized_off_the_extra_time_measured_at_a_few_sizes():
    sizes = (4096, 32768, 262144, 2097152)
    extras = [1e-7, 2e-7, 1e-6, 6e-6]  # seconds a call, for each size
    assert pad_size(sizes, extras, 6e-7) == 147456  # halfway between 32768 and 262144, in 1024s
    assert pad_size(sizes, extras, 1.2e-5) == 2 * 2097152  # past the largest: in proportion
    assert pad_size(sizes, extras, 1e-8) == 4096  # below the first: the smallest tried
    # Noise that makes a larger pass look cheaper never sends the size below a smaller pass's.
    assert pad_size(sizes, [3e-7, 2e-7, 1e-6, 6e-6], 2.5e-7) == 4096
    # Past the dip, the size is read off the extras made non-decreasing: between 262144 and 2097152.
    assert pad_size(sizes, [1e-7, 3e-7, 2e-7, 6e-6], 4e-7) == 293888
    assert pad_size(sizes, [0.0, 0.0, 0.0, 0.0], 1e-7) == 8 * 2097152  # nothing measurable yet: far larger


def test_the_slowdowns_sizing_traces_fewer_calls_of_a_slow_program():
    # a call of many tiny kernels (tens of ms on a v5e) costs the trace's stop seconds: two calls a size
    assert sizing_calls(600e-6) == 20 and sizing_calls(30e-3) == 2 and sizing_calls(10e-3) == 5


def test_a_sides_later_workers_reuse_the_slowdown_passes_its_first_worker_sized():
    # Each worker sizing its own pass would slow each pair differently, and its sizing costs traces.
    chip = Chip(1.0)
    measure(SIDES, ["take"], DEVICE, lambda _: None, "measure", chip.start)
    first = {"take/f32": {"size": 4096, "reached": 0.01}}
    assert chip.pads == [("baseline", {}), ("candidate", {}), ("candidate", first), ("baseline", {})]


def test_a_failure_is_confirmed_under_the_slowdown_it_met():
    # The confirmation's fresh workers sizing the pass again would meet another slowdown (and spend the
    # traces of a sizing): the candidate's first worker's pass serves all of them.
    chip = Chip(1.05)
    said: list[str] = []
    (verdict,) = measure_confirmed(SIDES, ["take"], DEVICE, said.append, chip.start)
    assert [a.split()[0] for a in verdict.attempts] == ["fail", "fail"], verdict
    first = {"take/f32": {"size": 4096, "reached": 0.01}}
    given = [pads for role, pads in chip.pads if role == "candidate"]
    assert given[0] == {} and given[1:] == [first] * (len(given) - 1) and len(given) >= 4, chip.pads
    # What the slowdown reached is what a run measuring detection power must expect: in the record, and
    # said once, when it was sized.
    assert verdict.slowed == {"candidate": 0.01} and verdict.to_dict()["slowed"] == {"candidate": 0.01}
    reached = [line for line in said if "slowdown switch's passes reached" in line]
    assert len(reached) == 1 and reached[0].endswith("reached candidate take +1.00%"), said


def test_a_run_without_the_slowdown_switch_records_no_slowdown():
    chip = Chip(1.0)
    chip.sizes = False
    (verdict,) = measure_confirmed(SIDES, ["take"], DEVICE, lambda _: None, chip.start)
    assert verdict.slowed is None and "slowed" not in verdict.to_dict()


def test_a_slowdown_pass_given_is_compiled_as_given_without_a_trace():
    import jax.numpy as jnp

    chip = StandInChip()
    x = jnp.ones(8)
    slower, pad = device_slowed(
        lambda a: a * 2,
        [x],
        lambda: None,
        0.01,
        DeviceRecorder(chip.tracer, chip.reader),
        {"size": 2048, "reached": 0.0102},
    )
    slower()
    assert pad == {"size": 2048, "reached": 0.0102} and chip.traces == 0
