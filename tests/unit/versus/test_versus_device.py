"""versus on the device clock: one side's worker at a time (a TPU chip belongs to one process), each call's
device seconds from its trace, rounds judged like the host clocks'."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from invariants._errors import InvariantsError
from invariants.timing.device import DeviceRecorder
from invariants.timing.trace import DeviceTrace, Event
from invariants.versus import command as versus
from invariants.versus.command import Settings, device_round, measure
from invariants.versus.sides import Side, one_process_per_chip
from invariants.versus.worker import Worker

ROOT = Path(__file__).resolve().parents[3]
SIDES = [
    Side("baseline", "current", Path(sys.executable)),
    Side("candidate", "current", Path(sys.executable)),
]
DEVICE = Settings(clock="device", min_rounds=3, max_rounds=6, round_seconds=0.0, min_pairs=8)


class Chip:
    """One chip: a worker may hold it only while no other does. Each traced call costs its program's device
    seconds times the side's factor, with a small per-process bias and per-call noise; the host's round
    trip is the same for every call (600 us), whatever the chip did."""

    def __init__(self, factor: float, seed: int = 0, noise: float = 0.002) -> None:
        self.factor, self.noise = factor, noise
        self.rng = np.random.default_rng(seed)
        self.holder: object | None = None
        self.starts: list[str] = []

    def start(self, sides: Any, cpus: Any = None) -> list[Any]:
        assert cpus is None
        return [ChipWorker(self, side) for side in sides]


class ChipWorker:
    def __init__(self, chip: Chip, side: Side) -> None:
        assert chip.holder is None, "two workers hold the chip at once"
        chip.holder, self.chip, self.side = self, chip, side
        chip.starts.append(side.role)
        self.bias = float(np.exp(chip.rng.normal(0, 0.001)))
        self.hello = {"platform": "tpu", "versions": {}}

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        assert self.chip.holder is self
        if op == "prepare":
            return {"per_call": {f"{p}/{c}": 600e-6 for p, c in fields["programs"]}}
        assert op == "trace", op
        factor = self.chip.factor if self.side.role == "candidate" else 1.0
        base = 45.7e-6 * factor * self.bias
        device = [
            base * float(np.exp(self.chip.rng.normal(0, self.chip.noise))) for _ in range(fields["calls"])
        ]
        wall = 600e-6 * fields["calls"]
        return {"device": device, "wall": wall, "cpu": wall}

    def close(self) -> None:
        self.chip.holder = None


def test_a_round_runs_one_side_at_a_time_and_swaps_the_order():
    chip = Chip(1.0)
    device_round(SIDES, {"take": "f32"}, DEVICE, 1, chip.start)
    device_round(SIDES, {"take": "f32"}, DEVICE, 2, chip.start)
    assert chip.starts == ["baseline", "candidate", "candidate", "baseline"]


def test_a_round_pairs_calls_in_order_on_the_device_clock():
    rd = device_round(SIDES, {"take": "f32"}, DEVICE, 1, Chip(2.0, noise=0.0).start)["take"]
    assert len(rd.ratios["device"]) == 2 * DEVICE.min_pairs
    assert rd.ratio("device") == pytest.approx(2.0, rel=0.01)
    assert rd.ratio("wall") == pytest.approx(1.0)  # the host's round trip sees nothing of it
    assert np.median(rd.per_call["device"]["baseline"]) == pytest.approx(45.7e-6, rel=0.01)  # device seconds


@pytest.mark.parametrize(("factor", "word"), [(1.0, "pass"), (1.05, "fail"), (1.02, "pass")])
def test_the_device_clock_decides_the_verdict(factor: float, word: str):
    done = measure(SIDES, ["take"], DEVICE, lambda _: None, "measure", Chip(factor).start)
    results = done["take"].results
    assert set(results) == {"device", "wall"}
    assert done["take"].word == word
    assert results["device"].median == pytest.approx(factor, rel=0.005)
    assert results["wall"].median == pytest.approx(1.0)


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
            w.request = lambda op, **f: {"items": {}, "targets": {}}  # type: ignore[method-assign]
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
    """A recorder whose trace holds one module event per call made while tracing: 90 us each."""

    def __init__(self) -> None:
        self.calls = 0
        self.tracing = False

    @contextmanager
    def tracer(self, folder: str) -> Iterator[None]:
        self.tracing, self.calls = True, 0
        (Path(folder) / "t.xplane.pb").write_bytes(b"")
        try:
            yield
        finally:
            self.tracing = False

    def reader(self, path: object) -> DeviceTrace:
        events = tuple(Event("jit_eqx(1)", i * 200e3, 90e3) for i in range(self.calls))
        return DeviceTrace(str(path), "/device:TPU:0", events, ())

    def call(self) -> Callable[[], None]:
        def run() -> None:
            if self.tracing:
                self.calls += 1

        return run


def test_the_worker_answers_each_calls_device_seconds():
    chip = StandInChip()
    worker = Worker(recorder=DeviceRecorder(chip.tracer, chip.reader))
    worker.calls["eqx/f32"] = chip.call()
    got = worker.trace("eqx/f32", 5)
    assert got["device"] == pytest.approx([90e-6] * 5) and got["wall"] >= 0 and "cpu" in got
    with pytest.raises(InvariantsError, match="not prepared"):
        worker.trace("take/f32", 5)


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
