"""Unit tests of ``versus``: its worker protocol, its statistic (with fake workers and fake clocks), its
sides, its record and report, and its command line as a user runs it.

The statistic is driven by fake worker pairs whose block times follow a model with a known truth: a true
ratio, a per-process bias drawn for each fresh worker (what interleaving inside one pair cannot cancel),
and per-block noise. So every verdict below is deterministic and says what the method does with that
truth: a same-installation run never fails, a 20% slowdown fails (and is confirmed), a wall-only slowdown
is lost parallelism.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from invariants.__main__ import main as cli_main
from invariants._errors import InvariantsError
from invariants.versus.command import (
    Settings,
    calls_per_block,
    look_at,
    measure,
    measure_confirmed,
    select_programs,
    structure_keys,
    time_round,
)
from invariants.versus.protocol import (
    SLOWDOWN_ENV,
    VERSION,
    ProtocolError,
    decode_hello,
    decode_reply,
    decode_request,
    encode,
)
from invariants.versus.report import (
    Record,
    SideRecord,
    as_items,
    invariant_changes,
    load_record,
    make_record,
    plot,
    render_markdown,
    write_json,
)
from invariants.versus.sides import Side, parse_env, resolve, worker_env
from invariants.versus.stats import (
    ALL_CORES,
    ALL_CORES_CPU,
    ALL_CORES_THREADS,
    Round,
    all_cores_word,
    combine,
    judge_rounds,
    rounds_interval,
)
from invariants.versus.worker import serve

ROOT = Path(__file__).resolve().parents[3]

# ----------------------------------------------------------------------------------------------- protocol


def test_request_round_trip() -> None:
    line = encode({"op": "time", "key": "naive/f32", "calls": 3})
    assert line.endswith("\n") and json.loads(line)["v"] == VERSION
    assert decode_request(line) == {"op": "time", "key": "naive/f32", "calls": 3, "warm": 0}
    warm = encode({"op": "time", "key": "naive/f32", "calls": 3, "warm": 1})
    assert decode_request(warm)["warm"] == 1
    assert decode_request(encode({"op": "prepare", "programs": [["naive", "f32"]]}))["programs"] == [
        ("naive", "f32")
    ]
    assert decode_request(encode({"op": "structure", "keys": [["naive", "f32", "cpu"]]}))["keys"] == [
        ("naive", "f32", "cpu")
    ]


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("not json", "not a JSON line"),
        ("[1, 2]", "must be a JSON object"),
        ('{"v": 99, "op": "quit"}', "protocol version 99"),
        ('{"op": "quit"}', "protocol version None"),
        ('{"v": 1, "op": "fly"}', "unknown op 'fly'"),
        ('{"v": 1, "op": "time", "key": "naive/f32"}', "lacks 'calls'"),
        ('{"v": 1, "op": "time", "key": "naive/f32", "calls": "3"}', "'calls' has the wrong type"),
        ('{"v": 1, "op": "time", "key": "naive/f32", "calls": true}', "'calls' has the wrong type"),
        ('{"v": 1, "op": "time", "key": "naive/f32", "calls": 0}', "'calls' must be >= 1"),
        ('{"v": 1, "op": "time", "key": "naive/f32", "calls": 1, "warm": -1}', "'warm' must be >= 0"),
        ('{"v": 1, "op": "time", "key": "naive/f32", "calls": 1, "warm": 0.5}', "'warm' has the wrong type"),
        ('{"v": 1, "op": "prepare", "programs": [["naive"]]}', "list of 2 strings"),
        ('{"v": 1, "op": "structure", "keys": [["a", "b", 3]]}', "list of 3 strings"),
    ],
)
def test_request_strict(line: str, says: str) -> None:
    with pytest.raises(ProtocolError, match=says) as err:
        decode_request(line)
    assert "\n" not in str(err.value)


def test_reply_strict() -> None:
    assert decode_reply(encode({"ok": True, "wall": 0.1, "cpu": 0.2}), "time", "w")["cpu"] == 0.2
    with pytest.raises(ProtocolError, match=r"^candidate: boom$"):
        decode_reply(encode({"ok": False, "error": "boom"}), "time", "candidate")
    with pytest.raises(ProtocolError, match="needs 'ok'"):
        decode_reply(encode({"wall": 0.1}), "time", "w")
    with pytest.raises(ProtocolError, match="non-negative 'cpu'"):
        decode_reply(encode({"ok": True, "wall": 0.1}), "time", "w")
    with pytest.raises(ProtocolError, match="positive"):
        decode_reply(encode({"ok": True, "per_call": {"naive/f32": 0}}), "prepare", "w")
    with pytest.raises(ProtocolError, match="lacks 'items'"):
        decode_reply(encode({"ok": True, "targets": {}}), "structure", "w")
    hello = encode({"event": "hello", "versions": {"jax": "0.10.2"}, "platform": "cpu"})
    assert decode_hello(hello, "w")["platform"] == "cpu"
    with pytest.raises(ProtocolError, match="w: worker: cannot import jax"):
        decode_hello(encode({"ok": False, "error": "worker: cannot import jax"}), "w")


class _FakeWorkerState:
    """Stands in for the JAX side of a worker: serve() is tested without compiling anything."""

    slowdown = 0.0

    def prepare(self, programs: Any, pads: Any = None) -> dict[str, Any]:
        return {"per_call": {f"{p}/{c}": 1e-3 for p, c in programs}}

    def time(self, key: str, calls: int, warm: int = 0) -> dict[str, Any]:
        if key != "naive/f32":
            raise ProtocolError(f"worker: {key!r} was not prepared")
        return {"wall": calls * 1e-3, "cpu": calls * 2e-3}

    def structure(self, keys: Any) -> dict[str, Any]:
        return {"items": {}, "targets": {}}


def _serve(*requests: str) -> tuple[int, list[dict[str, Any]]]:
    out = io.StringIO()
    status = serve(io.StringIO("".join(requests)), out, _FakeWorkerState())  # type: ignore[arg-type]
    return status, [json.loads(line) for line in out.getvalue().splitlines()]


def test_worker_serves_requests_in_order() -> None:
    status, lines = _serve(
        encode({"op": "prepare", "programs": [["naive", "f32"]]}),
        encode({"op": "time", "key": "naive/f32", "calls": 4}),
        encode({"op": "time", "key": "take/f32", "calls": 4}),
        encode({"op": "quit"}),
        encode({"op": "time", "key": "naive/f32", "calls": 4}),  # after quit: never answered
    )
    assert status == 0
    assert lines[0]["event"] == "hello" and lines[0]["v"] == VERSION and "jax" in lines[0]["versions"]
    assert lines[1] == {"v": VERSION, "ok": True, "per_call": {"naive/f32": 1e-3}}
    assert lines[2] == {"v": VERSION, "ok": True, "wall": 4e-3, "cpu": 8e-3}
    assert lines[3]["ok"] is False and "'take/f32' was not prepared" in lines[3]["error"]
    assert len(lines) == 4


def test_worker_stops_at_a_line_it_does_not_understand() -> None:
    status, lines = _serve(encode({"op": "time", "key": "naive/f32", "calls": 1}), "garbage\n",
                           encode({"op": "quit"}))  # fmt: skip
    assert status == 2
    assert lines[-1]["ok"] is False and "not a JSON line" in lines[-1]["error"]
    assert len(lines) == 3


# ----------------------------------------------------------------------------------------------- statistic


def test_rounds_interval_is_t_on_logs() -> None:
    ratios = [1.0, 1.02, 0.98, 1.01, 0.99, 1.0]
    est, low, high = rounds_interval(ratios, 0.95)
    logs = np.log(ratios)
    half = 2.5706 * np.std(logs, ddof=1) / math.sqrt(6)  # t(0.975, 5)
    assert est == pytest.approx(math.exp(logs.mean()))
    assert (low, high) == pytest.approx(
        (math.exp(logs.mean() - half), math.exp(logs.mean() + half)), rel=1e-4
    )
    with pytest.raises(InvariantsError, match="2 rounds cannot give an interval"):
        rounds_interval([1.0, 1.1], 0.95)
    with pytest.raises(InvariantsError, match="not positive"):
        rounds_interval([1.0, 0.0, 1.0], 0.95)


def test_round_keeps_the_median_of_pair_ratios_and_skips_unresolved_pairs() -> None:
    rd = Round(calls=2)
    rd.add({"wall": 1.0, "cpu": 1.0}, {"wall": 1.1, "cpu": 1.2})
    rd.add({"wall": 1.0, "cpu": 1.0}, {"wall": 1.3, "cpu": 9.0})  # a preempted block: the median ignores it
    rd.add({"wall": 1.0, "cpu": 0.0}, {"wall": 1.2, "cpu": 1.0})  # cpu below resolution: no cpu pair
    assert rd.ratio("wall") == pytest.approx(1.2)
    assert rd.ratios["cpu"] == [1.2, 9.0]
    assert Round(calls=1).ratio("cpu") is None


def test_look_schedule() -> None:
    assert look_at(6, 14) == [6, 9, 14]
    assert look_at(3, 3) == [3]
    assert look_at(4, 5) == [4, 5]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeWorker:
    """A worker of the model: block seconds = calls * per_call * side factor * process bias * noise.

    ``bias`` is drawn once per process (the per-process-pair bias of docs/versus.md); ``noise`` per block.
    Every block advances the shared fake clock by its wall time. ``factor`` holds the side's ``cpu`` and
    ``wall`` factors with one core, and its ``wall_all_cores`` factor when started unpinned (``cores``
    None): a candidate that lost its threads is ``{"cpu": 1, "wall": 1, "wall_all_cores": 1.8}``.
    """

    def __init__(self, factor: dict[str, float], bias: float, rng: np.random.Generator, clock: FakeClock,
                 noise: float, cores: Any = None, wall_bias: float = 1.0) -> None:  # fmt: skip
        self.factor, self.bias, self.rng, self.clock, self.noise = factor, bias, rng, clock, noise
        # Unpinned, a process's wall clock has a bias of its own (which cores its pool threads got, and
        # when): its CPU time does not share it. ``cpu_all_cores`` is the CPU factor there (a one-thread
        # candidate spins less, so its CPU time drops).
        self.wall_bias = wall_bias
        self.cores = cores
        self.hello = {"platform": "cpu", "versions": {}}
        self.closed = False
        self.log: list[str] = []
        self.requests: list[dict[str, Any]] = []

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        self.send(op, **fields)
        return self.receive(op)

    def send(self, op: str, **fields: Any) -> None:
        self.pending = (op, fields)
        self.requests.append(fields)

    def receive(self, op: str, timeout: float = 0) -> dict[str, Any]:
        op, fields = self.pending
        if op == "prepare":
            return {"per_call": {f"{p}/{c}": 1e-3 for p, c in fields["programs"]}}
        self.log.append(fields["key"])
        base = fields["calls"] * 1e-3 * self.bias * float(np.exp(self.rng.normal(0, self.noise)))
        unpinned = not self.cores and "wall_all_cores" in self.factor
        wall = base * self.factor["wall_all_cores" if unpinned else "wall"]
        wall *= self.wall_bias if unpinned else 1.0
        cpu = base * self.factor["cpu_all_cores" if unpinned and "cpu_all_cores" in self.factor else "cpu"]
        self.clock.now += wall
        return {"wall": wall, "cpu": cpu}

    def close(self) -> None:
        self.closed = True


def fake_pairs(candidate: dict[str, float], seed: int, bias_sd: float = 0.03, noise: float = 0.1,
               cores_bias_sd: float | None = None, baseline: dict[str, float] | None = None,
               wall_bias_sd: float = 0.0):  # fmt: skip
    """A starter of fake worker pairs, and the pairs it started. Unpinned pairs (all cores) draw their
    process bias with ``cores_bias_sd`` (default ``bias_sd``): unpinned rounds spread more; and their wall
    clock a bias of its own, with ``wall_bias_sd``."""
    base_factor = baseline or {"wall": 1.0, "cpu": 1.0}
    rng = np.random.default_rng(seed)
    clock = FakeClock()
    started: list[list[FakeWorker]] = []

    def start(sides: Any, cpus: Any = None) -> list[FakeWorker]:
        sd = bias_sd if cpus or cores_bias_sd is None else cores_bias_sd

        def wall_bias() -> float:
            return 1.0 if cpus else float(np.exp(rng.normal(0, wall_bias_sd)))

        pair = [
            FakeWorker(base_factor, float(np.exp(rng.normal(0, sd))), rng, clock, noise, cpus, wall_bias()),
            FakeWorker(candidate, float(np.exp(rng.normal(0, sd))), rng, clock, noise, cpus, wall_bias()),
        ]
        started.append(pair)
        return pair

    return start, started


SETTINGS = Settings(round_seconds=0.0, min_pairs=30)
SIDES = [
    Side("baseline", "current", Path(sys.executable)),
    Side("candidate", "current", Path(sys.executable)),
]


def test_time_round_alternates_abba_one_side_at_a_time() -> None:
    order: list[str] = []
    clock = FakeClock()

    class Logged(FakeWorker):
        def receive(self, op: str, timeout: float = 0) -> dict[str, Any]:
            order.append(self.name)
            return super().receive(op)

    rng = np.random.default_rng(0)
    a = Logged({"wall": 1, "cpu": 1}, 1.0, rng, clock, 0.0)
    b = Logged({"wall": 1, "cpu": 1}, 1.0, rng, clock, 0.0)
    a.name, b.name = "A", "B"
    rd = time_round([a, b], "naive/f32", 3, Settings(round_seconds=0.0, min_pairs=4), first=0, clock=clock)
    assert "".join(order) == "ABBAABBA"
    assert len(rd.ratios["cpu"]) == 4 and rd.calls == 3
    order.clear()
    time_round([a, b], "naive/f32", 3, Settings(round_seconds=0.0, min_pairs=2), first=1, clock=clock)
    assert "".join(order) == "BAAB"
    # round_seconds by the clock: blocks of 3 ms each, pairs until 30 ms have passed, then an even count
    rd = time_round([a, b], "naive/f32", 3, Settings(round_seconds=0.03, min_pairs=1), first=0, clock=clock)
    assert len(rd.ratios["wall"]) == 6 and rd.seconds == pytest.approx(0.036)
    # The all-cores phase's blocks: a quarter of their calls untimed first (the fake clock counts them).
    a.requests.clear()
    time_round([a, b], "naive/f32", 8, Settings(round_seconds=0.0, min_pairs=2).all_cores(), first=0,
               clock=clock)  # fmt: skip
    assert len(a.requests) == 2 and all(f["warm"] == 2 and f["calls"] == 8 for f in a.requests)
    assert all(f["warm"] == 0 for f in b.requests[:-2])  # the pinned rounds before: no warm calls


@pytest.mark.parametrize("seed", range(8))
def test_same_installation_never_fails(seed: int) -> None:
    start, started = fake_pairs({"wall": 1.0, "cpu": 1.0}, seed)
    out = measure(SIDES, ["naive", "take"], SETTINGS, lambda _: None, "measure", start)
    for p in ("naive", "take"):
        res = out[p].results["cpu"]
        assert out[p].word in ("pass", "inconclusive")
        assert 0.9 < res.median < 1.1 and res.low < SETTINGS.threshold
    assert all(w.closed for pair in started for w in pair)  # every worker pair is closed after its round


def test_process_bias_needs_rounds_as_the_unit() -> None:
    """With a large per-process bias and little block noise, one round's pair interval is narrow and
    wrong; the interval over rounds covers 1 (a 95 % interval: in 18 of 20 seeded runs at least)."""
    covered = 0
    for seed in range(20):
        start, _ = fake_pairs({"wall": 1.0, "cpu": 1.0}, seed=seed, bias_sd=0.08, noise=0.02)
        out = measure(SIDES, ["naive"], Settings(round_seconds=0.0, min_pairs=30, max_rounds=6),
                      lambda _: None, "measure", start)  # fmt: skip
        res = out["naive"].results["cpu"]
        covered += res.low < 1.0 < res.high
        assert max(res.ratios) / min(res.ratios) > 1.05  # the rounds really disagree
    assert covered >= 18


def test_slowdown_fails_and_is_confirmed() -> None:
    start, started = fake_pairs({"wall": 1.2, "cpu": 1.2}, seed=1)
    verdicts = measure_confirmed(SIDES, ["naive", "take"], SETTINGS, lambda _: None, start)
    assert [v.verdict for v in verdicts] == ["fail", "fail"]
    assert all(v.attempts == ["fail", "fail"] for v in verdicts)
    assert verdicts[0].results["cpu"].low > SETTINGS.threshold
    assert len(started) == 2 * SETTINGS.min_rounds  # decided at the first look, twice


def test_a_failure_that_does_not_repeat_is_not_one() -> None:
    calls = {"n": 0}
    real_start, _ = fake_pairs({"wall": 1.2, "cpu": 1.2}, seed=2)
    same_start, _ = fake_pairs({"wall": 1.0, "cpu": 1.0}, seed=2)

    def start(sides: Any, cpus: Any = None) -> list[FakeWorker]:
        calls["n"] += 1  # a burst during the first measurement only
        return real_start(sides) if calls["n"] <= SETTINGS.min_rounds else same_start(sides)

    (v,) = measure_confirmed(SIDES, ["naive"], SETTINGS, lambda _: None, start)
    assert v.attempts[0] == "fail" and v.verdict != "fail"


def test_wall_only_slowdown_is_lost_parallelism() -> None:
    """--no-pin: the rounds are unpinned, so their own wall clock is judged for lost parallelism, against
    the parallel threshold (1.10)."""
    start, _ = fake_pairs({"wall": 1.3, "cpu": 1.0}, seed=4)
    (v,) = measure_confirmed(SIDES, ["naive"], SETTINGS, lambda _: None, start)
    assert v.verdict == "lost-parallelism" and v.failed
    assert v.results["cpu"].verdict in ("pass", "inconclusive") and v.results[ALL_CORES].verdict == "fail"
    assert v.results[ALL_CORES].threshold == SETTINGS.parallel_threshold
    assert v.attempts == ["lost-parallelism", "lost-parallelism"]  # confirmed, in fresh unpinned rounds


PINNED = dataclasses.replace(SETTINGS, pin=True)
# The same work (CPU time 1) on two threads (wall 0.55 with all cores) and on one (wall 1 everywhere).
TWO_THREADS = {"wall": 1.0, "cpu": 1.0, "wall_all_cores": 0.55}
LOST_THREADS = {"wall": 1.0, "cpu": 1.0, "wall_all_cores": 1.0}


def _recording(start: Any) -> tuple[Any, list[Any]]:
    """``start``, recording the cores each pair was given (None: all of them)."""
    seen: list[Any] = []

    def recorded(sides: Any, cpus: Any = None) -> Any:
        seen.append(cpus)
        return start(sides, cpus)

    return recorded, seen


def test_pinned_rounds_cannot_see_lost_threads_the_all_cores_phase_does() -> None:
    """Lost threads: one core per round gives both sides one thread, so the candidate that lost its
    second thread times alike there (CPU and wall ratio 1); the all-cores phase sees its wall clock fail,
    a second all-cores measurement repeats it, and the verdict is lost parallelism (exit 1)."""
    start, seen = _recording(fake_pairs(LOST_THREADS, seed=6, cores_bias_sd=0.06, baseline=TWO_THREADS)[0])
    (v,) = measure_confirmed(SIDES, ["naive"], PINNED, lambda _: None, start)
    assert v.results["cpu"].verdict in ("pass", "inconclusive") and v.results["wall"].verdict != "fail"
    assert 0.95 < v.results["wall"].median < 1.05  # what pinned rounds alone reported: exit 0
    cores = v.results[ALL_CORES]
    assert cores.verdict == "fail" and cores.low > PINNED.parallel_threshold and 1.6 < cores.median < 2.0
    assert cores.threshold == PINNED.parallel_threshold and ALL_CORES_CPU in v.results
    assert v.verdict == "lost-parallelism" and v.failed
    assert v.attempts[1:] == ["all cores: fail", "all cores: fail"]
    assert v.threads is not None  # the baseline kept two threads busy, the candidate one
    assert v.threads["baseline"] == pytest.approx(1.8, rel=0.1) and v.threads["candidate"] == pytest.approx(
        1.0
    )
    low, high = PINNED.all_cores().min_rounds, PINNED.all_cores().max_rounds
    pinned = [c for c in seen if c is not None]
    assert len(pinned) in look_at(PINNED.min_rounds, PINNED.max_rounds) and all(len(c) == 1 for c in pinned)
    assert seen[: len(pinned)] == pinned and seen[len(pinned) :] == [None] * (2 * low)  # measure + confirm
    assert (low, high) == (4, 9)
    side = SideRecord("current", sys.executable)
    record = make_record(side, side, dataclasses.asdict(PINNED), [v.to_dict()], [], {}, 1.0)
    assert record.exit == 1
    (reason,) = record.reasons
    assert reason.startswith("naive: lost-parallelism: wall ratio with all cores 1.")
    assert "did not fail" in reason
    text = render_markdown(record)
    assert "| wall, all cores |" in text and "| naive | **lost-parallelism** |" in text
    assert "; threads 1.8 → 1.0, ratio 0.55" in text


def test_without_the_all_cores_phase_lost_threads_pass() -> None:
    """--no-parallel: pinned rounds alone, the failing state before the all-cores phase existed."""
    start, seen = _recording(fake_pairs(LOST_THREADS, seed=6, baseline=TWO_THREADS)[0])
    settings = dataclasses.replace(PINNED, parallel=False)
    (v,) = measure_confirmed(SIDES, ["naive"], settings, lambda _: None, start)
    assert v.verdict in ("pass", "inconclusive") and not v.failed
    assert ALL_CORES not in v.results and None not in seen


def test_with_one_core_the_all_cores_phase_says_it_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    from invariants.versus import command as _versus

    monkeypatch.setattr(_versus, "freed", lambda: [0])
    start, seen = _recording(fake_pairs(LOST_THREADS, seed=6, baseline=TWO_THREADS)[0])
    lines: list[str] = []
    (v,) = measure_confirmed(SIDES, ["naive"], PINNED, lines.append, start)
    assert None not in seen and ALL_CORES not in v.results
    assert any("lost parallelism cannot show: the phase is left out" in ln for ln in lines)


def test_all_cores_rounds_on_taken_cores_stop_inconclusive() -> None:
    """Under two busy loops the workers kept 0.5-0.8 threads busy and the all-cores round ratios ran from
    0.2 to 3: the wall clock measured the others' load. A baseline below 0.9 threads stops the phase at its
    first look, inconclusive and saying why, even where the ratio would have failed."""
    crowded = {"wall": 1.0, "cpu": 1.0, "wall_all_cores": 1.6}  # 0.62 of a core
    start, seen = _recording(fake_pairs({**crowded, "wall_all_cores": 2.2}, seed=9, baseline=crowded)[0])
    (v,) = measure_confirmed(SIDES, ["naive"], PINNED, lambda _: None, start)
    assert v.results[ALL_CORES].median > 1.3 and v.results[ALL_CORES].verdict == "inconclusive"
    assert v.verdict != "lost-parallelism" and not v.failed
    assert v.attempts[-1] == "all cores: inconclusive (crowded: baseline threads 0.62)"
    assert seen.count(None) == PINNED.all_cores().min_rounds  # stopped at the first look, no confirmation


@pytest.mark.parametrize("seed", range(6))
def test_same_installation_is_never_lost_parallelism(seed: int) -> None:
    """Both sides alike, with the wider spread of unpinned rounds: the all-cores ratio covers 1 and never
    fails (its threshold, 1.10, is far above the spread), and the CPU verdict is the word."""
    start, _ = fake_pairs(TWO_THREADS, seed=40 + seed, cores_bias_sd=0.06, baseline=TWO_THREADS)
    for v in measure_confirmed(SIDES, ["naive", "take"], PINNED, lambda _: None, start):
        assert v.verdict in ("pass", "inconclusive") and v.results[ALL_CORES].verdict != "fail"
        assert v.results[ALL_CORES].low < 1.0 < v.results[ALL_CORES].high
        assert v.attempts[-1].startswith("all cores: ")


def test_a_baseline_on_one_thread_has_no_parallelism_to_lose() -> None:
    """Measured at load 5: the baseline's blocks kept 1.00 threads busy (its second thread never got a
    core). A one-thread candidate with the same CPU time is then at most 1.00x slower: the phase stops at
    its first look, inconclusive, whatever its noisy wall ratio says."""
    start, seen = _recording(fake_pairs({**LOST_THREADS, "wall_all_cores": 1.5}, seed=10)[0])
    (v,) = measure_confirmed(SIDES, ["naive"], PINNED, lambda _: None, start)
    assert v.attempts[-1] == "all cores: inconclusive (no parallelism to lose: baseline threads 1.00)"
    assert not v.failed and seen.count(None) == PINNED.all_cores().min_rounds


# The lost-threads candidate as measured on the quiet machine (docs/versus.md): the baseline
# kept 1.7 threads busy with all cores, the candidate 1.1, and its CPU time there fell to 0.85 (less
# spinning), so its wall ratio was 1.22; unpinned rounds spread 15 % (a wall-clock bias per process that
# the CPU time does not share).
MEASURED_BASE = {"wall": 1.0, "cpu": 1.0, "wall_all_cores": 0.59, "cpu_all_cores": 1.0}
MEASURED_LOST = {"wall": 1.0, "cpu": 1.0, "wall_all_cores": 0.72, "cpu_all_cores": 0.80}
NOISY_UNPINNED = {"cores_bias_sd": 0.05, "wall_bias_sd": 0.11}


@pytest.mark.parametrize("seed", [3, 11])
def test_the_threads_witness_catches_a_loss_the_wall_interval_straddles(seed: int) -> None:
    """The measured case: 9 all-cores rounds leave the wall ratio's interval across 1.10 (what the phase
    said before the witness: inconclusive, exit 0); the threads ratio's whole interval is far below
    1 / 1.10 and the wall estimate above 1.10, so it is lost parallelism, confirmed in fresh rounds."""
    start, _ = fake_pairs(MEASURED_LOST, seed=seed, baseline=MEASURED_BASE, **NOISY_UNPINNED)
    (v,) = measure_confirmed(SIDES, ["naive"], PINNED, lambda _: None, start)
    wall, threads = v.results[ALL_CORES], v.results[ALL_CORES_THREADS]
    assert wall.low <= PINNED.parallel_threshold < wall.median  # the wall interval alone decides nothing
    assert wall.verdict == "inconclusive"
    assert threads.high < 1 / PINNED.parallel_threshold and threads.verdict == "fail"
    assert threads.median == pytest.approx(0.65, rel=0.15)
    assert v.verdict == "lost-parallelism" and v.attempts[1:] == ["all cores: fail", "all cores: fail"]
    side = SideRecord("current", sys.executable)
    record = make_record(side, side, dataclasses.asdict(PINNED), [v.to_dict()], [], {}, 1.0)
    (reason,) = record.reasons
    assert reason.startswith("naive: lost-parallelism: threads ratio with all cores 0.")
    assert "< 0.909 (fewer threads busy), wall ratio 1." in reason and "estimate above 1.1" in reason
    assert record.exit == 1


@pytest.mark.parametrize("seed", range(8))
def test_same_installation_with_noisy_unpinned_rounds_is_never_lost_parallelism(seed: int) -> None:
    start, _ = fake_pairs(MEASURED_BASE, seed=60 + seed, baseline=MEASURED_BASE, **NOISY_UNPINNED)
    for v in measure_confirmed(SIDES, ["naive", "take"], PINNED, lambda _: None, start):
        assert v.verdict in ("pass", "inconclusive"), (v.attempts, v.results[ALL_CORES_THREADS])
        assert v.results[ALL_CORES_THREADS].low < 1.0 < v.results[ALL_CORES_THREADS].high


def test_fewer_threads_that_cost_no_time_pass() -> None:
    """grad_take's two partitions gain nothing at the seed size: its one-thread candidate kept fewer
    threads busy and ran 0.9x. Fewer threads, and the wall ratio passes: not a regression."""
    base = {"wall": 1.0, "cpu": 1.0, "wall_all_cores": 0.77, "cpu_all_cores": 1.0}
    fewer = {"wall": 1.0, "cpu": 1.0, "wall_all_cores": 0.70, "cpu_all_cores": 0.62}
    start, _ = fake_pairs(fewer, seed=5, baseline=base, **NOISY_UNPINNED)
    (v,) = measure_confirmed(SIDES, ["grad_take"], PINNED, lambda _: None, start)
    assert v.results[ALL_CORES_THREADS].verdict == "fail" and v.results[ALL_CORES].median < 1.0
    assert not v.failed and v.attempts[-1] in ("all cores: pass", "all cores: inconclusive")


def test_all_cores_word() -> None:
    def r(verdict: Any, median: float, threshold: float) -> Any:
        return judge_stub(verdict, median, threshold)

    bound = 1.1
    assert all_cores_word(r("fail", 1.3, bound), None) == "fail"
    assert all_cores_word(r("pass", 1.0, bound), r("fail", 0.6, 1 / bound)) == "pass"
    assert all_cores_word(r(None, 1.2, bound), r("fail", 0.6, 1 / bound)) == "fail"
    assert all_cores_word(r(None, 1.05, bound), r("fail", 0.6, 1 / bound)) is None  # no cost shown
    assert all_cores_word(r(None, 1.2, bound), r(None, 0.8, 1 / bound)) is None
    assert all_cores_word(r(None, 1.2, bound), r("pass", 1.0, 1 / bound)) is None
    assert all_cores_word(r(None, 1.2, bound), None) is None


def judge_stub(verdict: Any, median: float, threshold: float) -> Any:
    import types

    return types.SimpleNamespace(verdict=verdict, median=median, threshold=threshold)


def test_an_all_cores_failure_that_does_not_repeat_is_not_lost_parallelism() -> None:
    lost, _ = fake_pairs(LOST_THREADS, seed=7, baseline=TWO_THREADS)
    same, _ = fake_pairs({"wall": 1.0, "cpu": 1.0}, seed=7)
    unpinned = {"n": 0}

    def start(sides: Any, cpus: Any = None) -> list[FakeWorker]:
        if cpus is None:
            unpinned["n"] += 1  # a burst during the first all-cores measurement only
            return lost(sides, cpus) if unpinned["n"] <= PINNED.all_cores().min_rounds else same(sides, cpus)
        return same(sides, cpus)

    (v,) = measure_confirmed(SIDES, ["naive"], PINNED, lambda _: None, start)
    assert v.attempts[1:2] == ["all cores: fail"] and v.attempts[2] != "all cores: fail"
    assert v.verdict != "lost-parallelism" and not v.failed


def test_a_cpu_failure_skips_the_all_cores_phase() -> None:
    start, seen = _recording(fake_pairs({"wall": 1.2, "cpu": 1.2}, seed=8)[0])
    (v,) = measure_confirmed(SIDES, ["naive"], PINNED, lambda _: None, start)
    assert v.verdict == "fail" and v.attempts == ["fail", "fail"] and None not in seen


def test_all_cores_settings() -> None:
    cores = Settings(pin=True).all_cores()
    assert (cores.pin, cores.clock, cores.threshold) == (False, "wall", 1.10)
    assert (cores.min_rounds, cores.max_rounds, cores.block_seconds) == (4, 9, 20e-3)
    assert (cores.min_threads, Settings().min_threads) == (0.9, 0.0)
    small = Settings(pin=True, min_rounds=3, max_rounds=3).all_cores()
    assert (small.min_rounds, small.max_rounds) == (3, 3)  # never more rounds than the main phase


def test_calls_per_block_is_measured_alone_not_taken_from_prepare() -> None:
    """prepare's estimate is made beside the other side's compiles (naive's read 20 ms a call, against
    0.15 ms): the block length is measured on the baseline worker alone, and only a program slower than
    SLOW_CALL is taken at its word (one call, nothing spent on measuring it)."""
    clock = FakeClock()
    w = FakeWorker({"wall": 0.15, "cpu": 0.15}, 1.0, np.random.default_rng(0), clock, 0.0)  # 0.15 ms a call
    assert calls_per_block(w, "naive/f32", 20e-3, 2e-3) == 13  # 2 ms / 0.15 ms
    assert calls_per_block(w, "naive/f32", 20e-3, 20e-3) == 133
    w.log.clear()
    assert calls_per_block(w, "slow/f32", 0.3, 2e-3) == 1 and w.log == []


def test_combine() -> None:
    def r(verdict: str | None, median: float = 1.0, threshold: float = 1.1) -> Any:
        return judge_stub(verdict, median, threshold)

    assert combine("p", "cpu", {"cpu": r("fail"), "wall": r("pass")}) == "fail"
    # The wall clock of pinned rounds decides nothing (one core: no side runs threads in parallel there);
    # the all-cores wall ratio failing beside a CPU time that did not is lost parallelism.
    assert combine("p", "cpu", {"cpu": r("pass"), "wall": r("fail")}) == "pass"
    assert (
        combine("p", "cpu", {"cpu": r("pass"), "wall": r("pass"), ALL_CORES: r("fail")}) == "lost-parallelism"
    )
    assert (
        combine("p", "cpu", {"cpu": r(None), "wall": r("pass"), ALL_CORES: r("fail")}) == "lost-parallelism"
    )
    assert combine("p", "cpu", {"cpu": r("fail"), "wall": r("pass"), ALL_CORES: r("fail")}) == "fail"
    assert combine("p", "cpu", {"cpu": r(None), "wall": r("pass"), ALL_CORES: r("pass")}) == "inconclusive"
    assert combine("p", "wall", {"cpu": r("pass"), "wall": r("pass")}) == "pass"
    assert combine("p", "wall", {"cpu": r("fail"), "wall": r("pass")}) == "pass"  # wall decides on a device
    # The threads witness: fewer threads beyond the noise, and a wall estimate above the bound.
    lost = {"cpu": r(None), "wall": r("pass"), ALL_CORES: r(None, 1.2), ALL_CORES_THREADS: r("fail", 0.7)}
    assert combine("p", "cpu", lost) == "lost-parallelism"
    assert combine("p", "cpu", {**lost, ALL_CORES: r(None, 1.05)}) == "inconclusive"
    assert combine("p", "cpu", {**lost, ALL_CORES_THREADS: r(None, 0.7)}) == "inconclusive"


def test_false_failure_rate_stays_below_alpha() -> None:
    """Over many simulated same-installation measurements (adaptive looks included), the first attempt
    fails at most at the rate the spent alpha allows."""
    fails = 0
    for seed in range(60):
        start, _ = fake_pairs({"wall": 1.0, "cpu": 1.0}, 100 + seed, bias_sd=0.04)
        out = measure(SIDES, ["naive"], Settings(round_seconds=0.0, min_pairs=10, threshold=1.0001),
                      lambda _: None, "measure", start)  # fmt: skip
        fails += out["naive"].word == "fail"
    assert fails <= 3  # one-sided error at threshold ~1: alpha/2 = 2.5% of 60 = 1.5 expected


def test_judge_reports_rounds() -> None:
    rounds = []
    for f in (1.0, 1.01, 0.99, 1.02):
        rd = Round(calls=5)
        rd.add({"wall": 1.0, "cpu": 1.0}, {"wall": f, "cpu": f})
        rounds.append(rd)
    r = judge_rounds(rounds, "cpu", 1.03, 0.95, look=1)
    assert r.ratios == (1.0, 1.01, 0.99, 1.02) and r.pairs == 4 and r.inner_a == 5 and r.looks == 1


# ----------------------------------------------------------------------------------------------- sides


def test_parse_env() -> None:
    assert parse_env(["XLA_FLAGS=--a=b c", "X="], "--candidate-env") == {"XLA_FLAGS": "--a=b c", "X": ""}
    with pytest.raises(InvariantsError, match=r"^--baseline-env 'NOVALUE': expected NAME=VALUE$"):
        parse_env(["NOVALUE"], "--baseline-env")


def test_resolve_specs(tmp_path: Path) -> None:
    def no_build(v: Any, flag: str) -> Path:
        raise AssertionError("no build for a path")

    me = Path(sys.executable)
    assert resolve("baseline", "current", {}, me, no_build).python == me
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(me)
    assert resolve("candidate", str(venv), {}, me, no_build).python == venv / "bin" / "python"
    with pytest.raises(InvariantsError, match="no such interpreter"):
        resolve("candidate", str(tmp_path / "nope"), {}, me, no_build)
    with pytest.raises(InvariantsError, match="not a virtual environment"):
        resolve("candidate", str(tmp_path), {}, me, no_build)
    with pytest.raises(InvariantsError, match="not 'current', a jax version"):
        resolve("candidate", "latest", {}, me, no_build)
    built = resolve("baseline", "0.6.0", {}, me, lambda v, flag: Path(f"/envs/{v}/{flag}"))
    assert built.python == Path("/envs/0.6.0/--baseline")


def test_worker_env_reaches_one_side_only() -> None:
    base = {"XLA_FLAGS": "--leak", "VIRTUAL_ENV": "/x", SLOWDOWN_ENV: "0.5", "HOME": "/root"}
    plain = worker_env(Side("baseline", "current", Path("p")), base)
    assert "XLA_FLAGS" not in plain and "VIRTUAL_ENV" not in plain and SLOWDOWN_ENV not in plain
    assert plain["HOME"] == "/root"
    assert (Path(plain["PYTHONPATH"]) / "invariants" / "versus" / "worker.py").exists()
    side = Side("candidate", "current", Path("p"), {"XLA_FLAGS": "--xla_disable_hlo_passes=fusion"})
    assert worker_env(side, base)["XLA_FLAGS"] == "--xla_disable_hlo_passes=fusion"


def test_a_worker_pins_a_small_staging_buffer_unless_told_otherwise() -> None:
    # libtpu's default pins several GiB at start and unpins them at exit: most of a worker's start and close.
    side = Side("baseline", "current", Path("p"))
    assert int(worker_env(side, {})["TPU_PREMAPPED_BUFFER_SIZE"]) == 256 << 20
    assert worker_env(side, {"TPU_PREMAPPED_BUFFER_SIZE": "0"})["TPU_PREMAPPED_BUFFER_SIZE"] == "0"
    told = Side("baseline", "current", Path("p"), {"TPU_PREMAPPED_BUFFER_SIZE": "4096"})
    assert worker_env(told, {})["TPU_PREMAPPED_BUFFER_SIZE"] == "4096"


def test_the_current_side_keeps_the_path_its_jax_is_found_on() -> None:
    base = {"PYTHONPATH": "/opt/site"}
    current = worker_env(Side("baseline", "current", Path("p")), base)["PYTHONPATH"].split(os.pathsep)
    assert (Path(current[0]) / "invariants").is_dir() and current[1:] == ["/opt/site"]
    other = worker_env(Side("baseline", "0.10.1", Path("venv/bin/python")), base)["PYTHONPATH"]
    assert "/opt/site" not in other  # another installation never sees the controller's packages


def test_structure_keys() -> None:
    keys = structure_keys(["naive", "grad_take"], "cpu,tpu-v5e")
    assert ("naive", "f32", "cpu") in keys and ("grad_take", "f32", "tpu-v5e") in keys
    with pytest.raises(InvariantsError, match="unknown target 'tpu-v9'"):
        structure_keys(["naive"], "tpu-v9")
    # The GPU generations of the kernel-code invariants are targets here too, and a near miss is named.
    assert structure_keys(["grad_take"], "gpu-a100,gpu-l4") == [
        ("grad_take", "f32", "gpu-a100"), ("grad_take", "f32", "gpu-l4")]  # fmt: skip
    with pytest.raises(InvariantsError) as err:
        structure_keys(["grad_take"], "gpu-a10")
    assert str(err.value).startswith("--targets: unknown target 'gpu-a10' (did you mean 'gpu-a100'")
    assert "\n" not in str(err.value)
    # The gate's grammar (invariants.scope.targets.select_targets), without starting JAX in the controller:
    # an
    # empty selection is one line, never nothing compared in silence; the words mean what they mean there.
    with pytest.raises(InvariantsError, match=r"^--targets: empty selection"):
        structure_keys(["naive"], " , ")
    assert structure_keys(["naive"], "runtime") == [("naive", "f32", "cpu")]
    assert {t for _, _, t in structure_keys(["naive"], "tpu")} >= {"tpu-v5e", "tpu-v4", "tpu-v6e"}


_KERNEL_SPEC = """
[spec]
targets = ["cpu", "tpu-v5e"]

[[invariant]]
id = "no_cas"
programs = ["grad_take"]
configs = ["f32"]
assert = "cas_atomics == 0"
why = "a kernel metric: LLVM IR on the CPU, no kernel code on a TPU"

[[invariant]]
id = "vectorized"
programs = ["grad_take"]
configs = ["f32"]
assert = "vector_width >= 128"
ratchet = { reason = "known", issue = "https://example.invalid/1" }

[[invariant]]
id = "no_while"
programs = ["grad_take"]
configs = ["f32"]
assert = "while_loops == 0"
"""


def test_worker_evaluates_kernel_metrics_and_says_what_it_cannot(tmp_path: Path, monkeypatch) -> None:
    """The worker's verdicts read each key's compiled kernel code: a kernel invariant is evaluated where
    the target has code (CPU LLVM IR), and is "not evaluated" with the reason where it has none (a TPU
    compile), never a failure; each key answers its kernel and compiler metrics as numbers or null."""
    from invariants.specfile.reader import load_spec
    from invariants.versus import worker
    from invariants.versus.worker import structure_of_keys

    (tmp_path / "k.toml").write_text(_KERNEL_SPEC)
    monkeypatch.setattr(worker, "load_specs", lambda *dirs: [load_spec(tmp_path / "k.toml")])
    got = structure_of_keys([("grad_take", "f32", "cpu"), ("grad_take", "f32", "tpu-v5e")])
    cpu, tpu = got["items"]["grad_take/f32/cpu"], got["items"]["grad_take/f32/tpu-v5e"]
    verdicts = {i["id"]: i for i in cpu["invariants"]}
    assert verdicts["no_cas"]["holds"] is True
    assert "measured cas_atomics = 0" in verdicts["no_cas"]["describe"]
    assert verdicts["vectorized"]["holds"] is True, verdicts["vectorized"]
    assert verdicts["vectorized"]["ratchet"] == {"reason": "known", "issue": "https://example.invalid/1"}
    assert cpu["kernel_metrics"]["vector_width"] >= 128 and cpu["kernel_metrics"]["cas_atomics"] == 0
    assert "    code llvm: " not in cpu["snapshot"]  # host-tuned code: metrics, not snapshot lines
    on_tpu = {i["id"]: i for i in tpu["invariants"]}
    assert on_tpu["no_while"]["holds"] is True  # a structural metric is evaluated everywhere
    assert on_tpu["no_cas"]["holds"] is None
    assert on_tpu["no_cas"]["not_evaluated"] == (
        "cas_atomics of grad_take on tpu-v5e: tpu-v5e: the TPU compiler writes no kernel code (libtpu dumps "
        "no LLO)"
    )
    assert set(tpu["kernel_metrics"].values()) == {None}
    assert isinstance(tpu["compiler_metrics"]["estimated_cycles"], int)
    # Paired as the controller pairs them: not evaluated on both sides is neither a failure nor a change.
    changes = {c["id"]: c for c in invariant_changes(tpu["invariants"], tpu["invariants"])}
    assert changes["no_cas"]["change"] == "not evaluated: " + on_tpu["no_cas"]["not_evaluated"]
    assert changes["no_while"]["change"] == "holds on both"


# ----------------------------------------------------------------------------------------------- record


def _structure_entry(base_holds: bool, cand_holds: bool) -> dict[str, Any]:
    inv = [{"id": "no_while", "where": "invariants/cpu.toml:3", "holds": base_holds, "describe": "b"}]
    cinv = [{"id": "no_while", "where": "invariants/cpu.toml:3", "holds": cand_holds, "describe": "c"}]
    return {"key": "grad_take/f32/cpu", "baseline": {"snapshot": "a\n", "invariants": inv},
            "candidate": {"snapshot": "b\n", "invariants": cinv}, "diff": "-a\n+b",
            "invariants": invariant_changes(inv, cinv)}  # fmt: skip


def _record(timing: list[dict[str, Any]], structure: list[dict[str, Any]]) -> Record:
    side = {"spec": "current", "python": sys.executable, "versions": {"jax": "0.10.2"}, "env": {}}
    settings = {"threshold": 1.03, "confidence": 0.95, "clock": "cpu"}
    return make_record(SideRecord(**side), SideRecord(**{**side, "env": {"X": "1"}}), settings, timing,
                       structure, {"cpu": {"baseline": None, "candidate": None}}, 12.0)  # fmt: skip


def _timing(word: str) -> dict[str, Any]:
    start, _ = fake_pairs({"wall": 1.2, "cpu": 1.2} if word == "fail" else {"wall": 1.0, "cpu": 1.0}, 5)
    (v,) = measure_confirmed(SIDES, ["naive"], SETTINGS, lambda _: None, start)
    assert v.verdict == word or (word == "pass" and v.verdict == "inconclusive")
    return v.to_dict()


def test_invariant_changes() -> None:
    assert [c["change"] for c in _structure_entry(True, False)["invariants"]] == ["regressed"]
    assert [c["change"] for c in _structure_entry(False, True)["invariants"]] == ["improved"]
    only = invariant_changes([], [{"id": "x", "where": "w", "holds": True, "describe": ""}])
    assert only[0]["change"] == "only on the candidate"
    held = {"id": "k", "where": "w", "holds": True, "describe": ""}
    unknown = {"id": "k", "where": "w", "holds": None, "not_evaluated": "cas_atomics of p on t: none"}
    assert invariant_changes([held], [unknown])[0]["change"] == (
        "not evaluated: on the candidate: cas_atomics of p on t: none"
    )
    both = invariant_changes([unknown], [unknown])
    assert both[0]["change"] == "not evaluated: cas_atomics of p on t: none"


# What the A100's grad_take f32 renders to in jaxlib 0.10.1 (tests/data/snapshots) and 0.10.2: the HLO
# lines equal, the code not.
_A100_BEFORE = (
    Path(__file__).parents[2] / "data" / "snapshots" / "a100-grad-take" / "gpu-a100.0.10.1.txt"
).read_text()
_A100_AFTER = _A100_BEFORE.replace(
    "atomics atom.add.f32×4; loops 0", "atomics atom.cas.b32×4 (CAS retry loops 4); loops 4"
)
_KERNEL_METRICS = ("cas_atomics", "cas_loops", "float_atomics", "local_bytes", "code_loops",
                   "code_instructions", "vector_width")  # fmt: skip


def _a100_side(cas: int, snapshot: str, ratchet_holds: bool) -> dict[str, Any]:
    metrics = dict(zip(_KERNEL_METRICS, (cas, cas, 4 - cas, 0, cas, 46 + 5 * cas, 128), strict=True))
    inv = [{"id": "grad_native_float_atomics_sm8x", "where": "invariants/gpu.toml:188",
            "holds": ratchet_holds, "describe": f"assert cas_atomics == 0: measured cas_atomics = {cas}",
            "ratchet": {"reason": "r", "issue": "https://github.com/openxla/xla/issues/46225"}},
           {"id": "flops_bounded", "where": "x.toml:1", "holds": None,
            "not_evaluated": "flops of grad_take on gpu-a100: no cost analysis"}]  # fmt: skip
    return {"snapshot": snapshot, "invariants": inv, "kernel_metrics": metrics,
            "compiler_metrics": {"temp_bytes": 0, "estimated_cycles": None}}  # fmt: skip


def test_report_shows_code_generation_behind_equal_hlo(tmp_path: Path) -> None:
    """A ratchet that holds on the baseline and fails on the candidate is a regression (exit 1, said to be a
    known one); the snapshot diff is named code lines only with the equal summary line; the kernel metrics
    stand side by side with the differing rows marked; an invariant neither side can evaluate is said once
    and fails nothing."""
    from invariants.releases.bisect import structural_diff, what_changed
    from invariants.versus.report import metric_rows

    b, c = _a100_side(0, _A100_BEFORE, True), _a100_side(4, _A100_AFTER, False)
    entry = {"key": "grad_take/f32/gpu-a100", "baseline": b, "candidate": c,
             "diff": structural_diff(b["snapshot"], c["snapshot"], "baseline", "candidate"),
             "changed": what_changed(b["snapshot"], c["snapshot"]), "metrics": metric_rows(b, c),
             "invariants": invariant_changes(b["invariants"], c["invariants"])}  # fmt: skip
    record = load_record(_write(tmp_path / "v.json", _record([], [entry])))
    assert record.exit == 1
    assert record.reasons == [
        "grad_take/f32/gpu-a100: invariant grad_native_float_atomics_sm8x holds on the baseline, fails on "
        "the candidate (a ratchet in the specs: https://github.com/openxla/xla/issues/46225)"
    ]
    lines = render_markdown(record).splitlines()
    assert "- invariant `flops_bounded` (x.toml:1): not evaluated: flops of grad_take on gpu-a100: no cost " \
        "analysis" in lines  # fmt: skip
    assert (
        "- snapshot: code lines only (1 changed: fusion kInput {add, scatter, select} -> f32[8192,32]{1,0}); "
        "the HLO lines are equal (summary: kernels 2; "
        "entry fusions 2 (kInput 1, kLoop 1); while loops 0; dynamic launches 2)" in lines
    )
    assert "| cas_atomics | kernel | 0 | 4 | **differs** |" in lines
    assert "| float_atomics | kernel | 4 | 0 | **differs** |" in lines
    assert "| vector_width | kernel | 128 | 128 |  |" in lines
    assert "| temp_bytes | compiler | 0 | 0 |  |" in lines
    assert not any(ln.startswith("| estimated_cycles") for ln in lines), "null on both sides: no row"
    assert "-      code ptx: atomics atom.add.f32×4; loops 0; vector 128 bits" in lines
    assert "+      code ptx: atomics atom.cas.b32×4 (CAS retry loops 4); loops 4; vector 128 bits" in lines
    # The same key with equal code on both sides: identical, its not-evaluated invariant one line.
    same = {**entry, "candidate": b, "diff": None, "changed": None, "metrics": metric_rows(b, b),
            "invariants": invariant_changes(b["invariants"], b["invariants"])}  # fmt: skip
    clean = _record([], [same])
    text = render_markdown(clean)
    assert clean.exit == 0 and "- identical on both sides: grad_take/f32/gpu-a100" in text
    assert "- grad_take/f32/gpu-a100: invariant `flops_bounded` not evaluated: flops of" in text
    assert "#### " not in text


def test_record_exit_and_report(tmp_path: Path) -> None:
    # The real writer's output, read back by the real reader, then rendered and plotted.
    clean = _record([_timing("pass")], [_structure_entry(True, True)])
    assert clean.exit == 0 and clean.reasons == []
    bad = _record([_timing("fail")], [_structure_entry(True, False), _structure_entry(False, False)])
    assert bad.exit == 1
    assert any(r.startswith("naive: fail: cpu ratio 1.") for r in bad.reasons)
    assert (
        "grad_take/f32/cpu: invariant no_while holds on the baseline, fails on the candidate" in bad.reasons
    )
    assert len(bad.reasons) == 2  # failing on both sides is not a regression of the candidate
    write_json(bad, tmp_path / "v.json")
    loaded = load_record(tmp_path / "v.json")
    text = render_markdown(loaded)
    assert "**REGRESSED**" in text and "| naive | **fail** |" in text and "fail → fail" in text
    assert "invariant `no_while` (invariants/cpu.toml:3): **regressed**" in text and "```diff" in text
    assert "env `X=1`" in text
    plot(loaded, tmp_path / "v.png")
    assert (tmp_path / "v.png").stat().st_size > 1000
    assert "no regression" in render_markdown(load_record(_write(tmp_path / "c.json", clean)))


def _write(path: Path, record: Record) -> Path:
    write_json(record, path)
    return path


def test_load_record_rejects_other_files(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text('{"items": []}')
    with pytest.raises(InvariantsError, match="not a versus record"):
        load_record(tmp_path / "r.json")
    with pytest.raises(InvariantsError, match="cannot read"):
        load_record(tmp_path / "missing.json")
    # A record of this format with a field gone, or a side not as the writer writes it: one line each.
    whole = _record([], []).to_json()
    (tmp_path / "cut.json").write_text(json.dumps({k: v for k, v in whole.items() if k != "exit"}))
    with pytest.raises(InvariantsError, match=r"cut.json: the versus record has no exit$"):
        load_record(tmp_path / "cut.json")
    (tmp_path / "side.json").write_text(json.dumps({**whole, "baseline": {"spec": "0.10.1", "jax": "?"}}))
    with pytest.raises(InvariantsError, match=r"side.json: a side of the versus record is not"):
        load_record(tmp_path / "side.json")


# ----------------------------------------------------------------------------------------------- command


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "invariants", "versus", *args], cwd=ROOT,
                          capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip


def _cli_here(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``python -m invariants versus ARGS`` through the same entry point, in this process (cheaper)."""
    status = cli_main(["versus", *args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["--baseline", "/no/such/python", "--candidate", "current"],
            "--baseline /no/such/python: no such interpreter",
        ),
        (
            ["--baseline", "current", "--candidate", "newest"],
            "--candidate newest: not 'current', a jax version",
        ),
        (
            ["--baseline", "current", "--candidate", "current", "--programs", "nave"],
            "--programs: unknown program 'nave' (did you mean 'naive'?)",
        ),
        (
            ["--baseline", "current", "--candidate", "current", "--candidate-env", "XLA"],
            "expected NAME=VALUE",
        ),
        (
            ["--baseline", "current", "--candidate", "current", "--targets", "tpu-v9"],
            "unknown target 'tpu-v9'",
        ),
        (
            ["--baseline", "current", "--candidate", "current", "--no-timing", "--no-structure"],
            "versus: --no-timing and --no-structure leave nothing to compare; drop one of them",
        ),
        (
            [
                "--baseline",
                "current",
                "--candidate",
                "current",
                "--programs",
                "take_clip",
                "--targets",
                "tpu-v4",
            ],
            "versus: no program of --programs take_clip compiles on --targets tpu-v4 in f32",
        ),
        (
            [
                "--baseline",
                "current",
                "--candidate",
                "current",
                "--programs",
                "kind:sharded",
                "--no-structure",
            ],
            "versus --no-structure: --programs kind:sharded are sharded (",
        ),
        (
            ["--baseline", "current", "--candidate", "current", "--programs", "kind:sharded", "--no-timing"],
            "versus: no program of --programs kind:sharded compiles on the targets cpu,tpu-v5e,gpu-h100 in "
            "f32: no structure to compare (choose other targets)",
        ),
        (
            ["--baseline", "current", "--candidate", "current", "--programs", "naive,tag:cor"],
            "--programs: unknown program 'tag:cor'",
        ),
        (
            ["--baseline", "current", "--candidate", "current", "--parallel-threshold", "0.9"],
            "--parallel-threshold 0.9: must be above 1",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Through the command's own entry point, in this process: each case fails before any worker starts.
    # (One case also runs as a real process, below: what a user's shell sees.)
    status, _, err = _cli_here(capsys, *args)
    assert status == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in err


def test_programs_take_the_gates_selection_words() -> None:
    """--programs selects as the gate's option does (one function: invariants.plugin.hooks's), sharded
    programs among them (compared on structure, never timed); an unknown word or nothing selected is one
    line."""
    from invariants.versus.command import DEFAULT_PROGRAMS

    assert select_programs(None) == list(DEFAULT_PROGRAMS)
    assert select_programs("vmap_*") == ["vmap_naive", "vmap_take"]
    assert select_programs("take,naive") == ["naive", "take"]  # catalog order, as the gate
    core = select_programs("tag:core")
    assert {"naive", "grad_take", "train_take"} <= set(core)
    backward = select_programs("kind:backward")
    assert "grad_take" in backward and "naive" not in backward
    assert select_programs("naive,sharded_columns_take") == ["naive", "sharded_columns_take"]
    with pytest.raises(InvariantsError, match=r"^--programs: unknown program 'grad_tak' \(did you mean"):
        select_programs("grad_tak")
    with pytest.raises(InvariantsError, match=r"^--programs: empty selection"):
        select_programs(" , ")


@pytest.fixture
def no_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any worker start fails the test: what it covers must be decided before one."""
    from invariants.versus import command as _versus

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a worker started")

    monkeypatch.setattr(_versus, "start_pair", refuse)
    monkeypatch.setattr(_versus, "resolve", refuse)


@pytest.mark.usefixtures("no_workers")
def test_output_paths_are_checked_before_any_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("x")
    base = ["--baseline", "current", "--candidate", "current", "--no-structure"]
    for flag, path, says in (
        ("--json", tmp_path, f"--json {tmp_path}: a directory; give a file path"),
        (
            "--out",
            tmp_path / "file" / "v.md",
            f"--out {tmp_path / 'file' / 'v.md'}: {tmp_path / 'file'} is a file",
        ),
        ("--plot", Path("/proc/v.png"), "--plot /proc/v.png: cannot write in its folder /proc"),
    ):
        status, _, err = _cli_here(capsys, *base, flag, str(path))
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert status == 2 and len(lines) == 1 and lines[0].startswith(says), err


def test_the_record_is_written_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = _record([_timing("pass")], [])
    path = tmp_path / "v.json"
    write_json(record, path, "--json")
    before = path.read_text()

    def full_disk(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(
        InvariantsError, match=r"^--json .*v\.json: cannot write \(No space left on device\)$"
    ):
        write_json(dataclasses.replace(record, exit=1), path, "--json")
    assert path.read_text() == before and sorted(p.name for p in tmp_path.iterdir()) == ["v.json"]


def test_invariant_paths_name_the_repository_not_the_staged_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from invariants.compile.child import stage
    from invariants.versus.report import repository_paths

    monkeypatch.chdir(ROOT)
    staged = stage() / "invariants" / "gpu.toml"
    reply = {"items": {"k": {"invariants": [{"where": f"{staged}:212", "describe": "d", "holds": True}],
                             "error": f"{staged}:3: bad"}}, "targets": {"gpu-a100": None}}  # fmt: skip
    fixed = repository_paths(reply)
    assert fixed["items"]["k"]["invariants"][0] == {"where": "invariants/gpu.toml:212", "describe": "d",
                                                    "holds": True}  # fmt: skip
    assert fixed["items"]["k"]["error"] == "invariants/gpu.toml:3: bad"
    assert fixed["targets"] == {"gpu-a100": None}
    # Values only: a key is the worker's name for its item, kept as sent.
    assert list(repository_paths({f"{staged}": 1})) == [f"{staged}"]
    monkeypatch.chdir(tmp_path)  # outside the checkout: the absolute path
    assert repository_paths(f"{staged}:1") == f"{ROOT / 'invariants' / 'gpu.toml'}:1"


def test_a_block_is_calls_back_to_back_until_both_bounds() -> None:
    from invariants.versus.worker import _repeat

    now = [0.0]

    def call() -> None:
        now[0] += 1e-3

    assert _repeat(call, 3, 5e-3, lambda: now[0]) == (5, pytest.approx(5e-3))
    assert _repeat(call, 3, 1e-4, lambda: now[0]) == (3, pytest.approx(3e-3))


@pytest.mark.e2e
def test_bad_input_from_the_shell_is_one_line_and_exit_2() -> None:
    proc = _cli("--baseline", "/no/such/python", "--candidate", "current")
    assert proc.returncode == 2, proc.stderr
    last = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1]
    assert "--baseline /no/such/python: no such interpreter" in last and "Traceback" not in proc.stderr


def test_help_promises(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli_main(["versus", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    for word in ("--baseline", "--candidate", "--candidate-env", "--json", "--out", "--plot", "--threshold",
                 "current", "Exit status"):  # fmt: skip
        assert word in text


# ----------------------------------------------------------------------------------------------- wiring


def test_nightly_versus_baseline_is_the_pin() -> None:
    import re
    import tomllib

    pin = next(d for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
               if d.startswith("jax=="))  # fmt: skip
    tox = (ROOT / "tox.ini").read_text()
    assert re.search(r"VERSUS_BASELINE = \{env:VERSUS_BASELINE:" + re.escape(pin.split("==")[1]) + r"\}", tox)
    assert "python -m invariants versus --baseline {env:VERSUS_BASELINE:current} --candidate current" in tox


def test_selfcheck_versus_injections_reach_the_candidate_only(tmp_path: Path) -> None:
    from invariants.selfcheck import children, judge, registry

    inj = next(i for i in registry.INJECTIONS if i.name == "versus_no_fusion")
    cmd = children.child_command(inj, tmp_path / "r.json", tmp_path / "hlo")
    assert cmd[1:4] == ["-m", "invariants", "versus"]
    assert "--candidate-env=XLA_FLAGS=--xla_disable_hlo_passes=fusion" in cmd
    assert not any(a.startswith("--baseline-env") for a in cmd)
    # The real record writer's output, judged the way run_injection judges it.
    caught = _record([_timing("fail")], [_structure_entry(True, False)])
    caught.structure[0]["invariants"][0]["id"] = "one_kernel"
    outcome = judge.outcome_of(inj, 1, as_items(caught), 1.0)
    assert outcome.caught and outcome.missing == []
    clean = _record([_timing("pass")], [_structure_entry(True, True)])
    outcome = judge.outcome_of(inj, 0, as_items(clean), 1.0)
    assert not outcome.caught and outcome.missing == ["versus-invariant:one_kernel", "versus-timing"]


def test_the_slowdown_switch_costs_exactly_its_fraction_of_each_call() -> None:
    from invariants.versus.worker import slowed

    now = [0.0]
    ticks: list[float] = []

    def clock() -> float:
        now[0] += 1e-4  # reading the clock costs a little, as a real one does
        ticks.append(now[0])
        return now[0]

    def call() -> None:
        now[0] += 0.010  # the call itself: 10 ms of CPU

    start = clock()
    slowed(call, 0.1, clock)()
    spent = now[0] - start
    assert 0.0110 <= spent <= 0.0113, spent  # the call plus a tenth of it, give or take the clock reads
    assert len(ticks) > 3  # it spun: the wait is work, not a sleep


def test_pinned_rounds_put_both_workers_on_one_core_and_rotate() -> None:
    import dataclasses

    from invariants._cores import usable

    seen: list[Any] = []
    inner, _ = fake_pairs({"wall": 1.0, "cpu": 1.0}, seed=3)

    def start(sides: Any, cpus: Any = None) -> list[FakeWorker]:
        seen.append(cpus)
        return inner(sides)

    measure(SIDES, ["naive"], dataclasses.replace(SETTINGS, pin=True), lambda _: None, "m", start)
    cores = usable()
    assert seen and all(c is not None and len(c) == 1 for c in seen)
    assert [min(c) for c in seen] == [cores[i % len(cores)] for i in range(len(seen))]
    seen.clear()
    measure(SIDES, ["naive"], SETTINGS, lambda _: None, "m", start)
    assert seen and all(c is None for c in seen)  # unpinned: the scheduler places them


def test_the_cpu_backend_pins_unless_told_not_to() -> None:
    from invariants.versus.command import _parser, _settings

    base = ["--baseline", "current", "--candidate", "current"]
    assert _settings(_parser().parse_args(base), "cpu").pin
    assert not _settings(_parser().parse_args([*base, "--no-pin"]), "cpu").pin
    assert not _settings(_parser().parse_args(base), "gpu").pin  # the wall clock decides there


@pytest.mark.e2e
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="core affinity is Linux-only")
def test_a_pinned_worker_runs_on_its_core_only() -> None:
    from invariants._cores import usable
    from invariants.versus.sides import WorkerProcess

    core = usable()[-1]
    w = WorkerProcess(SIDES[0], cpus=frozenset({core}))
    try:
        assert w.start()["cpus"] == [core]
    finally:
        w.close()


@pytest.mark.e2e
def test_a_worker_told_cores_it_cannot_have_says_so_in_one_line() -> None:
    from invariants.versus.protocol import CPUS_ENV
    from invariants.versus.sides import WorkerProcess

    w = WorkerProcess(Side("candidate", "current", Path(sys.executable), {CPUS_ENV: "seven"}))
    try:
        with pytest.raises(
            ProtocolError, match=r"^candidate \(current\): worker: INVARIANTS_VERSUS_CPUS='seven'"
        ):
            w.start()
    finally:
        w.kill()


def test_a_sharded_project_left_nothing_to_compare_names_only_the_options_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sharded programs are compared on structure, never timed: with --no-structure a project of them alone
    has nothing to compare, and the one line names --no-structure, the option given, and no other."""
    (tmp_path / "model.py").write_text("def lookup(table, ids):\n    return table[ids]\n")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "s.toml").write_text(
        '[spec]\ntargets = ["cpu-8dev"]\n\n[[program]]\nname = "lookup8"\nfunction = "model:lookup"\n'
        'kind = "forward"\nmesh = { data = 2, tensor = 4 }\ntable_sharding = ["tensor", ""]\n'
        'index_sharding = ["data"]\n'
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    args = ["--baseline", "current", "--candidate", "current", "--spec-dir", "specs", "--no-catalog"]
    status, _, err = _cli_here(capsys, *args, "--no-structure")
    assert status == 2 and err.strip() == (
        "versus --no-structure: the project's programs are sharded (lookup8), and versus times single-device "
        "programs: nothing to compare; drop --no-structure to compare their structure"
    )


def test_a_record_names_the_chip_and_the_date_of_its_figures(tmp_path: Path) -> None:
    side = SideRecord("current", sys.executable, {"jax": "0.10.2"}, {}, "TPU v5 lite")
    made = make_record(
        side, side, {"threshold": 1.01, "confidence": 0.95, "clock": "device"}, [], [], {}, 1.0
    )
    record = load_record(_write(tmp_path / "v.json", made))
    assert record.baseline.device == "TPU v5 lite" and record.date == made.date != ""
    lines = render_markdown(record).splitlines()
    assert "- **baseline** `current` on TPU v5 lite: jax 0.10.2" in lines
    assert f"- **date** {made.date} (UTC)" in lines
    # A record written before the chip and the date were kept still loads, and says neither.
    older = made.to_json()
    del older["date"]
    for role in ("baseline", "candidate"):
        del older[role]["device"]
    (tmp_path / "old.json").write_text(json.dumps(older))
    old = load_record(tmp_path / "old.json")
    assert old.date == "" and not any(ln.startswith("- **date**") for ln in render_markdown(old).splitlines())


# ------------------------------------------------------------------------------------ targets not compared

_NO_LIBTPU = "tpu-v5e: libtpu is not installed; pip install ..."


def _hello_and_structure(baseline_tpu: str | None) -> Any:
    """``hello_and_structure`` of two sides that compile ``take`` alike; the baseline's tpu-v5e reason."""

    def answer(sides: Any, keys: Any, exclusive: bool) -> tuple[list[Any], list[Any]]:
        hellos = [{"versions": {"jax": "0.10.2"}, "platform": "cpu", "device": "cpu"} for _ in sides]
        item = {"snapshot": "summary: kernels 1", "invariants": []}
        replies = [
            {"items": {"/".join(k): item for k in keys if k[2] == "cpu" or why is None},
             "targets": {"cpu": None, "tpu-v5e": why}}
            for why in (baseline_tpu, None)
        ]  # fmt: skip
        return hellos, replies

    return answer


@pytest.mark.parametrize("targets", ["cpu,tpu-v5e", None])
def test_a_target_asked_for_and_not_compared_exits_4(
    targets: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A target named by --targets that a side cannot compile is never "no regression": exit 4, the reason
    in the last line on stderr, in the JSON and at the top of the markdown. The default targets were not
    asked for: one that a side cannot compile is listed under the structure, and the run exits 0."""
    from invariants.versus import command

    monkeypatch.setattr(command, "hello_and_structure", _hello_and_structure(_NO_LIBTPU))
    chosen = ["--targets", targets] if targets else []
    args = ["--baseline", "current", "--candidate", "current", "--no-timing", "--programs", "take", *chosen]
    status, out, err = _cli_here(capsys, *args, "--json", str(tmp_path / "v.json"))
    record = load_record(tmp_path / "v.json")
    line = f"target tpu-v5e not compared (baseline: {_NO_LIBTPU})"
    if targets is None:
        assert status == 0 and record.exit == 0 and record.not_compared == []
        assert "no regression" in out and f"- {line}" in out
        return
    assert status == 4 and record.exit == 4
    assert record.not_compared == [line]
    assert err.strip().splitlines()[-1] == f"versus: {line}"
    assert "**NOT COMPARED**" in out.splitlines()[0] and "no regression" not in out
    assert out.count(line) == 1  # at the top, not again under the structure


def _lacking_answer(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What a worker answers for a key its release cannot compile for want of ``jax.sharding.AxisType``
    (removed here, as a release before it lacks it): the worker's own answer, through the compile cache."""
    import jax

    from invariants.catalog.programs import Program
    from invariants.catalog.registry import Programs
    from invariants.compile import compat
    from invariants.versus.worker import structure_of_keys

    def on_a_mesh(W: Any, x: Any) -> Any:
        compat.axis_types("auto", 1)  # what a pod program's mesh needs
        return W[x]

    monkeypatch.delattr(jax.sharding, "AxisType")
    programs = Programs(catalog={"fsdp_take": Program("fsdp_take", "forward", on_a_mesh, "W[x] on a mesh")})
    answer = structure_of_keys([("fsdp_take", "f32", "cpu")], [], programs)["items"]["fsdp_take/f32/cpu"]
    monkeypatch.undo()
    return dict(answer)


@pytest.mark.parametrize("lacking", ["baseline", "candidate"])
def test_a_key_whose_release_lacks_an_api_is_not_compared(
    lacking: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A side whose release lacks an API the tool needs for a program: that key is "not compared", with the
    worker's one line naming the API and the release and saying it is the tool's limit (never the
    program's); never a regression nor "no regression": exit 4, in the JSON, the markdown and the last line
    on stderr. The other programs are compared."""
    from invariants.versus import command

    answer = _lacking_answer(monkeypatch)
    said = answer["error"]
    assert answer["lacks"] == "jax.sharding.AxisType" and "snapshot" not in answer
    assert said.startswith("cpu/fsdp_take[f32]: jax ") and " has no jax.sharding.AxisType, " in said
    assert said.endswith(": a limit of the tool on this release, not of the program")

    def answered(sides: Any, keys: Any, exclusive: bool) -> tuple[list[Any], list[Any]]:
        hellos = [{"versions": {"jax": "0.10.2"}, "platform": "cpu", "device": "cpu"} for _ in sides]
        compiled = {"snapshot": "summary: kernels 1", "invariants": []}
        replies = [
            {"items": {"/".join(k): answer if k[0] == "fsdp_take" and role == lacking else compiled
                       for k in keys},
             "targets": {"cpu": None}}
            for role in ("baseline", "candidate")
        ]  # fmt: skip
        return hellos, replies

    monkeypatch.setattr(command, "hello_and_structure", answered)
    monkeypatch.setattr(command, "structure_keys", lambda programs, targets, known=None: [
        ("take", "f32", "cpu"), ("fsdp_take", "f32", "cpu")])  # fmt: skip
    args = ["--baseline", "current", "--candidate", "current", "--no-timing", "--programs", "take"]
    status, out, err = _cli_here(capsys, *args, "--targets", "cpu", "--json", str(tmp_path / "v.json"))
    record = load_record(tmp_path / "v.json")
    line = f"fsdp_take/f32/cpu not compared ({lacking}: {said})"
    assert status == 4 and record.exit == 4 and record.reasons == []
    assert record.not_compared == [line]
    assert err.strip().splitlines()[-1] == f"versus: {line}"
    assert "**NOT COMPARED**" in out.splitlines()[0] and "no regression" not in out
    assert f"- {line}" in out and "identical on both sides: take/f32/cpu" in out


def test_not_compared_is_exit_4_unless_something_regressed(tmp_path: Path) -> None:
    """A regression outranks a missing target (exit 1), and both are said; the record reads back."""
    side = SideRecord("current", sys.executable, {"jax": "0.10.2"})
    targets = {
        "cpu": {"baseline": None, "candidate": None},
        "tpu-v5e": {"baseline": _NO_LIBTPU, "candidate": None},
    }
    settings = {"threshold": 1.03, "confidence": 0.95, "clock": "cpu"}
    asked = make_record(side, side, settings, [], [], targets, 1.0, asked=["cpu", "tpu-v5e"])
    assert (
        asked.exit == 4 and load_record(_write(tmp_path / "a.json", asked)).not_compared == asked.not_compared
    )
    assert make_record(side, side, settings, [], [], targets, 1.0).exit == 0  # not asked for
    worse = make_record(
        side, side, settings, [], [_structure_entry(True, False)], targets, 1.0, asked=["tpu-v5e"]
    )
    assert worse.exit == 1 and worse.not_compared and worse.reasons
    text = render_markdown(worse)
    assert "**REGRESSED**" in text and "- target tpu-v5e not compared (baseline: " in text


def test_a_relation_that_holds_because_a_side_got_worse_fails_the_run(tmp_path: Path) -> None:
    """The record, markdown and exit of a relation that holds on the candidate only because its reference
    side regressed: exit 1, the side named, never "improved" nor "no regression"."""
    inv = {"id": "bf16_no_more_cas", "where": "x.toml:1", "worse": 1, "describe": "d"}
    b = [{**inv, "holds": False, "terms": {"cas_loops(x[bf16])": 10, "cas_loops(x[f32])": 0}}]
    c = [{**inv, "holds": True, "terms": {"cas_loops(x[bf16])": 10, "cas_loops(x[f32])": 10}}]
    entry = {"key": "x/bf16/gpu-a100", "baseline": {"snapshot": "a\n", "invariants": b},
             "candidate": {"snapshot": "a\n", "invariants": c}, "diff": None,
             "invariants": invariant_changes(b, c)}  # fmt: skip
    record = load_record(_write(tmp_path / "v.json", _record([], [entry])))
    assert record.exit == 1
    assert record.reasons == [
        "x/bf16/gpu-a100: invariant bf16_no_more_cas holds on the candidate only because a side of it got "
        "worse: cas_loops(x[f32]) 0 → 10"
    ]
    text = render_markdown(record)
    assert "**REGRESSED**" in text and "improved" not in text
    assert "**regressed** (holds only because a side got worse: cas_loops(x[f32]) 0 → 10)" in text
