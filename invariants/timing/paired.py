"""Paired throughput measurement: the ratio of two programs' times, measured in one run, with a verdict.

Nothing here asserts an absolute time. A check states a *ratio* (``t_a / t_b <= threshold``) or an
*efficiency* (``t_copy / t_program >= floor``), both measured in the same process, interleaved call by call,
so that whatever slows the machine down slows both sides alike.

Method:

1. warm up both callables, then choose each side's ``inner`` (calls per sample) so that a sample lasts about
   ``sample_seconds``: long samples average out dispatch jitter, and equal sample *durations* give both
   sides the same chance of being preempted;
2. time pairs of samples in ABBA order (cancelling drift and first-in-pair effects) and keep the per-pair
   ratio ``t_a / t_b``: slow phases of the machine cancel within a pair;
3. estimate the median of the per-pair ratios with a distribution-free order-statistic interval;
4. while the interval straddles the threshold and budget is left, take more pairs and look again, each look
   spending a shrinking part of ``1 - confidence`` (:func:`invariants._stats.look_alpha`).

A verdict is ``"fail"`` only when the *whole* interval lies beyond the threshold; one still straddling it
when the budget is spent is ``"inconclusive"``, not a failure. Every :data:`Timed` callable must block until
its work is done, so the clock measures device work and not only the dispatch.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, NamedTuple, TypeVar

import numpy as np

from invariants._errors import InvariantsError
from invariants._stats import look_alpha, median_interval, min_pairs_for, robust_cv
from invariants.timing.device import DeviceRecorder
from invariants.timing.trace import TraceError

Timed = Callable[[], object]
Clock = Callable[[], float]

Verdict = Literal["pass", "fail", "inconclusive"]
_T = TypeVar("_T")

_MAX_INNER = 100_000
# The device clock's pairs per measurement, and the device seconds one trace may hold (see _device_pairs).
DEVICE_PAIRS = 30
DEVICE_TRACE_SECONDS = 0.25
_GROWTH = 1.5  # each extra look happens once the number of pairs has grown by this factor


# ``at_most`` bounds a slowdown (``time(a) / time(b) <= threshold``), ``at_least`` is a floor (efficiency).
Direction = Literal["at_most", "at_least"]


@dataclass(frozen=True)
class RatioResult:
    """The ratio ``t_a / t_b`` by paired interleaving, its interval ``[low, high]`` for the median per-pair
    ratio, and its verdict against ``threshold`` in ``direction``: a time ratio and an efficiency
    (``a`` = the memory copy, ``b`` = the program, ``at_least``) alike.

    ``t_a_median`` and ``t_b_median`` are per-call seconds on ``clock`` (``device``, ``wall`` or ``cpu``), for
    reports only; ``wall_a_median`` and ``wall_b_median`` are the host's beside a device-clock measurement.
    ``ratios``, ``samples_a`` and ``samples_b`` are the raw per-pair values, left out of :meth:`to_dict`.
    """

    median: float
    low: float
    high: float
    pairs: int
    seconds: float
    confidence: float
    threshold: float | None
    verdict: Verdict | None
    t_a_median: float
    t_b_median: float
    cv: float
    inner_a: int
    inner_b: int
    looks: int
    ratios: tuple[float, ...] = field(default=(), repr=False, compare=False)
    samples_a: tuple[float, ...] = field(default=(), repr=False, compare=False)
    samples_b: tuple[float, ...] = field(default=(), repr=False, compare=False)
    direction: Direction = "at_most"
    name: str = "ratio"
    clock: str = "wall"
    wall_a_median: float | None = None
    wall_b_median: float | None = None

    @property
    def failed(self) -> bool:
        return self.verdict == "fail"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for raw in ("ratios", "samples_a", "samples_b"):
            del d[raw]
        return d

    def _host_share(self) -> str:
        if self.wall_a_median is None or self.wall_b_median is None or not self.wall_b_median:
            return ""
        return (
            f"; per call {self.t_a_median * 1e6:.1f} / {self.t_b_median * 1e6:.1f} us on the device, "
            f"{self.wall_a_median * 1e6:.0f} / {self.wall_b_median * 1e6:.0f} us wall "
            f"(wall ratio {self.wall_a_median / self.wall_b_median:.3f})"
        )

    def summary(self) -> str:
        sign = "<=" if self.direction == "at_most" else ">="
        return (
            f"{self.name} {self.median:.3f} [{self.low:.3f}, {self.high:.3f}] "
            f"({self.confidence:.0%}, {self.pairs} pairs, {self.seconds:.2f} s, cv {self.cv:.1%}, "
            f"{self.clock} clock{self._host_share()})"
            + (f" vs {sign} {self.threshold:g}: {self.verdict}" if self.threshold is not None else "")
        )


def _sample(fn: Timed, inner: int, clock: Clock) -> float:
    t0 = clock()
    for _ in range(inner):
        fn()
    return clock() - t0


def _calibrate(
    a: Timed, b: Timed, warmup: int, sample_seconds: float, clock: Clock
) -> tuple[tuple[int, int], tuple[float, float]]:
    """Each side's ``inner`` so that a sample lasts ``sample_seconds``, and its seconds per call."""
    probes = [(_sample(a, 1, clock), _sample(b, 1, clock)) for _ in range(max(warmup, 1))]
    # The first calls may include one-off costs (allocation, caches); the later half is the steady state.
    per_a, per_b = np.median(probes[len(probes) // 2 :], axis=0)
    per_call = float(per_a), float(per_b)

    def inner_for(per: float) -> int:
        if per <= 0.0:
            return _MAX_INNER
        return int(min(_MAX_INNER, max(1, round(sample_seconds / per))))

    return (inner_for(per_call[0]), inner_for(per_call[1])), per_call


class _Sides(NamedTuple):
    a: Timed
    b: Timed
    inner: tuple[int, int]
    clock: Clock
    device: DeviceRecorder | None = None


def _in_order(a_first: bool, a: _T, b: _T) -> tuple[_T, _T]:
    return (a, b) if a_first else (b, a)


def decide_upper(low: float, high: float, threshold: float) -> Verdict | None:
    """``ratio <= threshold``, decided only when the interval is wholly on one side (else None)."""
    if high <= threshold:
        return "pass"
    if low > threshold:
        return "fail"
    return None


def decide_lower(low: float, high: float, floor: float) -> Verdict | None:
    if low >= floor:
        return "pass"
    if high < floor:
        return "fail"
    return None


def _device_pairs(min_pairs: int, floor: int, per_pair: float) -> int:
    """Pairs to take on the device clock: fewer for slow programs, whose calls each add their ops to the trace
    (a per-row loop: thousands of events per call, which the profiler takes seconds to export)."""
    return max(floor + 2, min(min_pairs, DEVICE_PAIRS, math.ceil(DEVICE_TRACE_SECONDS / max(per_pair, 1e-9))))


def _checked(s: Sampling, decides: bool) -> tuple[float, int]:
    """The error rate ``s`` allows and the fewest pairs its first look needs."""
    if not 0.5 < s.confidence < 1.0:
        raise InvariantsError(f"timing: confidence must be in (0.5, 1), got {s.confidence}")
    alpha = 1.0 - s.confidence
    floor = min_pairs_for(1.0 - (look_alpha(alpha, 1) if decides else alpha))
    if s.min_pairs < floor:
        raise InvariantsError(
            f"timing: min_pairs={s.min_pairs} is too few for a {s.confidence:.0%} interval (need >= {floor})"
        )
    if s.max_seconds <= 0:
        raise InvariantsError(f"timing: max_seconds must be positive, got {s.max_seconds}")
    if s.inner is not None and s.inner < 1:
        raise InvariantsError(f"timing: inner must be >= 1, got {s.inner}")
    return alpha, floor


class _Sample:
    """The pairs taken so far: per-call seconds by the verdict clock, and by the host's beside it."""

    def __init__(self, sides: _Sides, deadline: float) -> None:
        self.sides, self.deadline = sides, deadline
        self.t_a: list[float] = []
        self.t_b: list[float] = []
        self.wall_a: list[float] = []
        self.wall_b: list[float] = []

    def more(self, count: int, floor: int) -> None:
        """``count`` more ABBA pairs, ending past the deadline once ``floor`` pairs exist."""
        a, b, (inner_a, inner_b), clock, device = self.sides
        start = len(self.t_a)
        a_first: list[bool] = []

        def batch() -> int:
            for i in range(start, start + count):
                if i >= floor and clock() >= self.deadline:
                    break
                a_first.append(i % 2 == 0)
                sides = _in_order(a_first[-1], (a, inner_a, self.wall_a), (b, inner_b, self.wall_b))
                for fn, inner, out in sides:
                    out.append(_sample(fn, inner, clock) / inner)
            return len(a_first) * (inner_a + inner_b)

        if device is None:  # the host's clock is the verdict's
            batch()
            self.t_a, self.t_b = list(self.wall_a), list(self.wall_b)
            return
        seconds = iter(device.record(batch))

        def take(inner: int) -> float:
            return sum(next(seconds) for _ in range(inner)) / inner

        for first in a_first:
            for inner, out in _in_order(first, (inner_a, self.t_a), (inner_b, self.t_b)):
                out.append(take(inner))


def _first_look(a: Timed, b: Timed, s: Sampling, floor: int, start: float) -> _Sample:
    # min_seconds is a floor on precision for the host's clocks; the chip's repeats to a fraction of 1%.
    min_seconds = 0.0 if s.device is not None else s.min_seconds
    calibrated, per_call = _calibrate(a, b, s.warmup, s.sample_seconds, s.clock)
    # On the device clock every call is its own event, timed to the nanosecond by the chip: one call
    # per sample leaves nothing to average and keeps the trace small.
    n_inner = (s.inner, s.inner) if s.inner is not None else (1, 1) if s.device else calibrated
    min_pairs = _device_pairs(s.min_pairs, floor, sum(per_call)) if s.device is not None else s.min_pairs
    deadline = start + s.max_seconds
    sides = _Sides(a, b, n_inner, s.clock, s.device)
    sample = _Sample(sides, deadline)
    sample.more(min_pairs, floor)
    while s.clock() - start < min(min_seconds, s.max_seconds):
        sample.more(max(2, len(sample.t_a) // 4), floor)
    return sample


def _looks(
    sample: _Sample, decide: Callable[[float, float], Verdict | None] | None, alpha: float, clock: Clock
) -> tuple[np.ndarray, float, float, Verdict | None, int]:
    """The ratios, interval, verdict (None: undecided) and looks, once it decides or the budget ends."""
    look = 1
    while True:
        ratios = np.asarray(sample.t_a) / np.asarray(sample.t_b)
        alpha_now = look_alpha(alpha, look) if decide is not None else alpha
        low, high = median_interval(ratios, 1.0 - alpha_now)
        verdict = decide(low, high) if decide is not None else None
        if decide is None or verdict is not None or clock() >= sample.deadline:
            return ratios, low, high, verdict, look
        n = len(sample.t_a)
        look += 1
        sample.more(
            max(n + 2, math.ceil(n * _GROWTH)) - n, max(min_pairs_for(1.0 - look_alpha(alpha, look)), n + 1)
        )


@dataclass(frozen=True)
class _Run:
    sample: _Sample
    ratios: np.ndarray
    low: float
    high: float
    verdict: Verdict | None
    seconds: float
    looks: int


def _run(
    a: Timed, b: Timed, decide: Callable[[float, float], Verdict | None] | None, sampling: Sampling
) -> _Run:
    alpha, floor = _checked(sampling, decide is not None)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection inside one sample of a pair would land on one side only
    try:
        start = sampling.clock()
        sample = _first_look(a, b, sampling, floor, start)
        ratios, low, high, verdict, look = _looks(sample, decide, alpha, sampling.clock)
        seconds = sampling.clock() - start
    finally:
        if gc_was_enabled:
            gc.enable()
    if decide is not None and verdict is None:
        verdict = "inconclusive"
    return _Run(sample, ratios, low, high, verdict, seconds, look)


@dataclass(frozen=True)
class Sampling:
    """How a paired measurement samples (a keyword of :func:`measure_ratio` replaces one).

    ``min_seconds``: keep taking pairs before the first look until this much time has passed. ``max_seconds``:
    the budget, from the first warm-up call, overshot by at most one pair. ``inner``: calls per sample for
    both sides (None: calibrated per side). ``clock_name``: what ``clock`` is called in a result; with
    ``device`` set, the chip's own clock decides and ``clock`` only paces the budget.
    """

    min_pairs: int = 100
    min_seconds: float = 0.5
    max_seconds: float = 6.0
    confidence: float = 0.95
    warmup: int = 6
    inner: int | None = None
    sample_seconds: float = 2e-3
    clock: Clock = time.perf_counter
    clock_name: str = "wall"
    device: DeviceRecorder | None = None


def measure_ratio(a: Timed, b: Timed, *, threshold: float | None = None, **sampling: Any) -> RatioResult:
    """``t_a / t_b`` judged against ``threshold`` (None: measured only); ``sampling``: Sampling fields."""
    return measure_paired(a, b, bound=threshold, direction="at_most", sampling=Sampling(**sampling))


def measure_efficiency(
    program: Timed, copy: Timed, *, min_efficiency: float | None = None, **sampling: Any
) -> RatioResult:
    """``t_copy / t_program`` (efficiency against a memory-copy roofline) judged against a floor."""
    return measure_paired(
        copy,
        program,
        bound=min_efficiency,
        direction="at_least",
        name="efficiency",
        sampling=Sampling(**sampling),
    )


def measure_paired(
    a: Timed,
    b: Timed,
    *,
    bound: float | None,
    direction: Direction,
    name: str = "ratio",
    sampling: Sampling = Sampling(),
) -> RatioResult:
    decide: Callable[[float, float], Verdict | None] | None = None
    if bound is not None:
        rule = decide_upper if direction == "at_most" else decide_lower
        decide = functools.partial(_decide_with, rule, bound)
    try:
        r = _run(a, b, decide, sampling)
    except TraceError as err:
        if sampling.device is None:
            raise
        # No device events: the whole ratio again on the host's clock, never half of one on each.
        warnings.warn(f"device clock unavailable, timing on the wall clock: {err}", DeviceClockFallback, 2)
        sampling = dataclasses.replace(sampling, device=None, clock_name="wall")
        r = _run(a, b, decide, sampling)
    return _result(r, sampling, bound, direction, name)


def _result(r: _Run, sampling: Sampling, bound: float | None, direction: Direction, name: str) -> RatioResult:
    device = sampling.device is not None
    s = r.sample
    return RatioResult(
        median=float(np.median(r.ratios)),
        low=r.low,
        high=r.high,
        pairs=int(r.ratios.size),
        seconds=r.seconds,
        confidence=sampling.confidence,
        threshold=bound,
        verdict=r.verdict,
        t_a_median=float(np.median(s.t_a)),
        t_b_median=float(np.median(s.t_b)),
        cv=robust_cv(r.ratios),
        inner_a=s.sides.inner[0],
        inner_b=s.sides.inner[1],
        looks=r.looks,
        ratios=tuple(r.ratios.tolist()),
        samples_a=tuple(s.t_a),
        samples_b=tuple(s.t_b),
        direction=direction,
        name=name,
        clock="device" if device else sampling.clock_name,
        wall_a_median=float(np.median(s.wall_a)) if device else None,
        wall_b_median=float(np.median(s.wall_b)) if device else None,
    )


class DeviceClockFallback(UserWarning):
    """A device-clock measurement that fell back to the wall clock."""


def _decide_with(
    rule: Callable[[float, float, float], Verdict | None], bound: float, low: float, high: float
) -> Verdict | None:
    return rule(low, high, bound)


def runtime_clock(platform: str, choice: str | None = None, where: str = "timing") -> tuple[str, Clock]:
    """The clock to time programs on ``platform`` with, by name, and the host clock that paces it; ``choice``
    (``device``, ``wall`` or ``cpu``) overrides and ``where`` names the setting in an error.

    On the CPU backend the device *is* this process, so its CPU time is the work a program costs, without the
    time spent waiting for a core another process holds. On an accelerator a blocking call's wall time is the
    host's round trip, many times the device time of a small lookup, so the profiler trace's device time is
    read (:mod:`invariants.timing.device`).
    """
    chosen = choice or ("cpu" if platform == "cpu" else "device")
    if chosen == "cpu" and platform != "cpu":
        raise InvariantsError(
            f"{where}: the cpu clock measures nothing on a {platform} device; use device or wall"
        )
    if chosen == "device" and platform == "cpu":
        raise InvariantsError(
            f"{where}: the device clock reads an accelerator's trace; on the cpu use cpu or wall"
        )
    if chosen not in ("cpu", "wall", "device"):
        raise InvariantsError(f"{where}: unknown clock {chosen!r}; use device, wall or cpu")
    return chosen, (time.process_time if chosen == "cpu" else time.perf_counter)


def clock_sampling(name: str, clock: Clock, recorder: DeviceRecorder | None = None) -> dict[str, Any]:
    """The :class:`Sampling` fields of a clock :func:`runtime_clock` chose."""
    device = (recorder or DeviceRecorder()) if name == "device" else None
    return {"clock": clock, "clock_name": name, "device": device}


def confirmed(
    measure: Callable[[], RatioResult], verdict: Verdict = "fail"
) -> tuple[RatioResult, list[RatioResult]]:
    """The deciding result and every attempt: a ``verdict`` counts only if a second measurement repeats it,
    as a regression does and a burst of load that hits one program harder rarely does."""
    first = measure()
    if first.verdict != verdict:
        return first, [first]
    second = measure()
    return (first if second.verdict == verdict else second), [first, second]
