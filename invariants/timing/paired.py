"""Paired throughput measurement: the ratio of two programs' times, measured in one run, with a verdict.

Nothing here asserts an absolute time. A check states a *ratio* (``t_a / t_b <= threshold``) or an
*efficiency* (``t_copy / t_program >= floor``), both measured in the same process, interleaved call by call,
so that whatever slows the machine down slows both sides alike.

Method (see :func:`measure_ratio`):

1. warm up both callables, then time single calls to choose ``inner`` for each side: the number of calls
   per sample, so that a sample of either side lasts about ``sample_seconds`` (2 ms by default, at least
   one call). Samples that long average out per-call dispatch jitter; equal sample *durations* matter
   under load, since the chance that a preemption hits a sample grows with its length;
2. time pairs of samples, alternating the order (ABBA) to cancel drift and first-in-pair effects, and keep
   the per-pair ratio ``t_a / t_b``: slow phases of the machine cancel within a pair;
3. estimate the median of the per-pair ratios (which ignores pairs where one side was preempted) with a
   distribution-free order-statistic confidence interval;
4. if a threshold is given and the interval straddles it, take more pairs and look again, each look
   spending a shrinking part of ``1 - confidence`` (:func:`invariants._stats.look_alpha`), until the
   interval is on one side or the time budget is spent.

A verdict is ``"fail"`` only when the *whole* interval lies beyond the threshold. An interval that still
straddles the threshold when the budget is spent is ``"inconclusive"``, which is not a failure.

Every :data:`Timed` callable must block until its work is done (for jax: ``jax.block_until_ready``), so the
clock measures device work and not only the dispatch.

The statistics live in :mod:`invariants._stats`, the cross-run efficiency baselines in
:mod:`invariants.timing.baselines`, and the JAX callables (a compiled program, the memory stream) in
:mod:`invariants.timing.calls`: this module measures, given callables and a clock.
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
from typing import Any, Literal, NamedTuple

import numpy as np

from invariants._errors import InvariantsError
from invariants._stats import look_alpha, median_interval, min_pairs_for, robust_cv
from invariants.timing.device import DeviceRecorder
from invariants.timing.trace import TraceError

Timed = Callable[[], object]
"""A zero-argument callable that runs the work once and returns only when the work is done."""

Clock = Callable[[], float]
"""A monotonic clock in seconds (``time.perf_counter`` unless a test injects a fake one)."""

Verdict = Literal["pass", "fail", "inconclusive"]

_MAX_INNER = 100_000
# The device clock's pairs per measurement, and the device seconds one trace may hold (see _device_pairs).
DEVICE_PAIRS = 30
DEVICE_TRACE_SECONDS = 0.25
_GROWTH = 1.5  # each extra look happens once the number of pairs has grown by this factor


# --------------------------------------------------------------------------------------------- results


# A bound's direction: ``at_most`` bounds a slowdown (``time(a) / time(b) <= threshold``), ``at_least`` is a
# floor (efficiency, ``t_copy / t_program >= floor``).
Direction = Literal["at_most", "at_least"]


@dataclass(frozen=True)
class RatioResult:
    """The ratio ``t_a / t_b`` of two programs' times, measured by paired interleaving, and its verdict
    against a bound with a direction. The one paired-ratio type: a time ratio (``direction="at_most"``)
    and an efficiency (``name="efficiency"``, ``a`` = the memory copy, ``b`` = the program,
    ``direction="at_least"``) alike.

    Attributes:
        median: median of the per-pair ratios ``t_a / t_b``.
        low, high: a distribution-free confidence interval for that median (order statistics). When
            ``looks > 1`` each look used a stricter level so that the interval finally reported still
            covers the true median with probability >= ``confidence`` (see :func:`measure_ratio`).
        pairs: number of (a, b) sample pairs.
        seconds: wall time spent sampling (warm-up and calibration included), by the measuring clock.
        confidence: the requested coverage of ``[low, high]``, e.g. 0.95.
        threshold: the bound on the ratio, or ``None`` when only measuring.
        verdict: ``"fail"`` when the whole interval is beyond the bound (above it ``at_most``, below it
            ``at_least``), ``"pass"`` when it is wholly within, ``"inconclusive"`` when it still straddles
            the bound when the budget ran out; ``None`` when no bound was given.
        t_a_median, t_b_median: median seconds per call of ``a`` and ``b`` (for reports only: absolute
            times on a shared machine are not comparable across runs).
        cv: robust coefficient of variation of the per-pair ratios, ``1.4826 * MAD / median``.
        inner_a, inner_b: calls per sample of ``a`` and of ``b``.
        looks: how many times the interval was examined (1 + number of adaptive extensions).
        ratios: the per-pair ratios, in sampling order (not in :meth:`to_dict`).
        samples_a, samples_b: each side's seconds per call in each pair, by ``clock``, in sampling order
            (not in :meth:`to_dict`; what a benchmark record's statistics are made of).
        direction: which side of ``threshold`` passes.
        name: what the ratio is called in a report line (``ratio``, ``efficiency``).
        clock: the clock of ``t_a_median``, ``t_b_median`` and the ratios: ``device`` (the chip's own,
            from a profiler trace), ``wall`` or ``cpu`` (this process's CPU time).
        wall_a_median, wall_b_median: median wall seconds per call of each side beside a device-clock
            measurement: the host's round trip, so that its share is visible; None on the other clocks.
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
        """True only when the whole interval lies beyond the bound."""
        return self.verdict == "fail"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serializable fields (e.g. for pytest-benchmark ``extra_info``); no raw ratios."""
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
        """One line for a report, e.g. ``ratio 1.012 [1.004, 1.019] (95%, 40 pairs, 0.3 s, cv 1.1%) pass``."""
        sign = "<=" if self.direction == "at_most" else ">="
        return (
            f"{self.name} {self.median:.3f} [{self.low:.3f}, {self.high:.3f}] "
            f"({self.confidence:.0%}, {self.pairs} pairs, {self.seconds:.2f} s, cv {self.cv:.1%}, "
            f"{self.clock} clock{self._host_share()})"
            + (f" vs {sign} {self.threshold:g}: {self.verdict}" if self.threshold is not None else "")
        )


# ------------------------------------------------------------------------------------------- sampling


def _sample(fn: Timed, inner: int, clock: Clock) -> float:
    t0 = clock()
    for _ in range(inner):
        fn()
    return clock() - t0


def _calibrate(
    a: Timed, b: Timed, warmup: int, sample_seconds: float, clock: Clock
) -> tuple[tuple[int, int], tuple[float, float]]:
    """Run each callable ``warmup`` times; pick each side's ``inner`` so a sample lasts ``sample_seconds``.
    Returns those and each side's seconds per call."""
    probes_a: list[float] = []
    probes_b: list[float] = []
    for _ in range(max(warmup, 1)):
        probes_a.append(_sample(a, 1, clock))
        probes_b.append(_sample(b, 1, clock))
    # The first calls may include one-off costs (allocation, caches); the later half is the steady state.
    half = len(probes_a) // 2
    per_call = float(np.median(probes_a[half:])), float(np.median(probes_b[half:]))

    def inner_for(per: float) -> int:
        if per <= 0.0:
            return _MAX_INNER
        return int(min(_MAX_INNER, max(1, round(sample_seconds / per))))

    return (inner_for(per_call[0]), inner_for(per_call[1])), per_call


class _Sides(NamedTuple):
    """What every pair is taken of: the two callables, their calls per sample, the clock, and the device
    recorder when the device's own clock times them."""

    a: Timed
    b: Timed
    inner: tuple[int, int]
    clock: Clock
    device: DeviceRecorder | None = None


class _Taken(NamedTuple):
    """Per-call seconds of A and B per pair by the verdict clock, and by the host's clock beside it."""

    t_a: list[float]
    t_b: list[float]
    wall_a: list[float]
    wall_b: list[float]


def _pairs(sides: _Sides, count: int, start: int, deadline: float | None, floor: int) -> _Taken:
    """``count`` more pairs of per-call times, in ABBA order from pair ``start``, stopping past ``deadline``
    once ``floor`` pairs exist; with a device recorder inside one trace, summing each call's device seconds.
    """
    a, b, (inner_a, inner_b), clock, device = sides
    wall_a: list[float] = []
    wall_b: list[float] = []
    a_first: list[bool] = []

    def batch() -> int:
        for i in range(start, start + count):
            if deadline is not None and i >= floor and clock() >= deadline:
                break
            a_first.append(i % 2 == 0)
            if i % 2 == 0:
                sa = _sample(a, inner_a, clock)
                sb = _sample(b, inner_b, clock)
            else:
                sb = _sample(b, inner_b, clock)
                sa = _sample(a, inner_a, clock)
            wall_a.append(sa / inner_a)
            wall_b.append(sb / inner_b)
        return len(a_first) * (inner_a + inner_b)

    if device is None:  # the host's clock is the verdict's: the same times, in lists of their own
        batch()
        return _Taken(wall_a, wall_b, list(wall_a), list(wall_b))
    seconds = iter(device.record(batch))
    t_a: list[float] = []
    t_b: list[float] = []

    def take(inner: int) -> float:
        return sum(next(seconds) for _ in range(inner)) / inner

    for first in a_first:
        if first:
            t_a.append(take(inner_a))
            t_b.append(take(inner_b))
        else:
            t_b.append(take(inner_b))
            t_a.append(take(inner_a))
    return _Taken(t_a, t_b, wall_a, wall_b)


def decide_upper(low: float, high: float, threshold: float) -> Verdict | None:
    """Bound ``ratio <= threshold``: decided only when the interval is wholly on one side."""
    if high <= threshold:
        return "pass"
    if low > threshold:
        return "fail"
    return None


def decide_lower(low: float, high: float, floor: float) -> Verdict | None:
    """Bound ``ratio >= floor``: decided only when the interval is wholly on one side."""
    if low >= floor:
        return "pass"
    if high < floor:
        return "fail"
    return None


def _device_pairs(min_pairs: int, floor: int, per_pair: float) -> int:
    """Pairs to take on the device clock: at most :data:`DEVICE_PAIRS`, and fewer for slow programs, whose
    calls each add their ops to the trace (a per-row loop: thousands of events per call, which the profiler
    takes seconds to export); never fewer than the interval needs. ``per_pair``: wall seconds of a pair,
    more than its device seconds."""
    return max(floor + 2, min(min_pairs, DEVICE_PAIRS, math.ceil(DEVICE_TRACE_SECONDS / max(per_pair, 1e-9))))


@dataclass(frozen=True)
class _Run:
    ratios: np.ndarray
    t_a: np.ndarray
    t_b: np.ndarray
    wall_a: np.ndarray
    wall_b: np.ndarray
    low: float
    high: float
    verdict: Verdict | None
    seconds: float
    inner: tuple[int, int]
    looks: int


def _checked(s: Sampling, decides: bool) -> tuple[float, int]:
    """The error rate ``s`` allows and the fewest pairs its first look needs; one line for a sampling that
    cannot give an interval."""
    if not 0.5 < s.confidence < 1.0:
        raise InvariantsError(f"timing: confidence must be in (0.5, 1), got {s.confidence}")
    alpha = 1.0 - s.confidence
    # With a threshold the first look already spends only part of alpha (see invariants._stats.look_alpha).
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
    """The pairs taken so far (per-call seconds by the verdict clock, and by the host's beside it), and how
    more are taken: ABBA from the count so far, up to the ``deadline``."""

    def __init__(self, sides: _Sides, deadline: float, taken: _Taken) -> None:
        self.sides, self.deadline = sides, deadline
        self.t_a, self.t_b, self.wall_a, self.wall_b = taken

    def more(self, count: int, floor: int) -> None:
        taken = _pairs(self.sides, count, len(self.t_a), self.deadline, floor)
        for have, new in zip((self.t_a, self.t_b, self.wall_a, self.wall_b), taken, strict=True):
            have.extend(new)


def _first_look(a: Timed, b: Timed, s: Sampling, floor: int, start: float) -> _Sample:
    """The pairs the first look reads: calibrated, then ``min_pairs`` of them, then more until
    ``min_seconds`` have passed since ``start``."""
    # min_seconds is a floor on precision for the host's clocks; the chip's repeats to a fraction of 1%.
    min_seconds = 0.0 if s.device is not None else s.min_seconds
    calibrated, per_call = _calibrate(a, b, s.warmup, s.sample_seconds, s.clock)
    # On the device clock every call is its own event, timed to the nanosecond by the chip: one call
    # per sample leaves nothing to average and keeps the trace small.
    n_inner = (s.inner, s.inner) if s.inner is not None else (1, 1) if s.device else calibrated
    min_pairs = _device_pairs(s.min_pairs, floor, sum(per_call)) if s.device is not None else s.min_pairs
    deadline = start + s.max_seconds
    sides = _Sides(a, b, n_inner, s.clock, s.device)
    sample = _Sample(sides, deadline, _pairs(sides, min_pairs, 0, deadline, floor))
    while s.clock() - start < min(min_seconds, s.max_seconds):
        sample.more(max(2, len(sample.t_a) // 4), floor)
    return sample


def _looks(
    sample: _Sample, decide: Callable[[float, float], Verdict | None] | None, alpha: float, clock: Clock
) -> tuple[np.ndarray, float, float, Verdict | None, int]:
    """Look at the interval until it decides or the budget ends: the ratios, the interval, the verdict
    (None: undecided) and how many looks it took."""
    look = 1
    while True:
        ratios = np.asarray(sample.t_a) / np.asarray(sample.t_b)
        alpha_now = look_alpha(alpha, look) if decide is not None else alpha
        low, high = median_interval(ratios, 1.0 - alpha_now)
        verdict = decide(low, high) if decide is not None else None
        if decide is None or verdict is not None or clock() >= sample.deadline:
            return ratios, low, high, verdict, look
        # Straddles and budget left: grow the sample geometrically, then look again with less alpha.
        n = len(sample.t_a)
        look += 1
        sample.more(
            max(n + 2, math.ceil(n * _GROWTH)) - n, max(min_pairs_for(1.0 - look_alpha(alpha, look)), n + 1)
        )


def _run(
    a: Timed,
    b: Timed,
    decide: Callable[[float, float], Verdict | None] | None,
    sampling: Sampling,
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
    t_a, t_b, walls = (
        np.asarray(sample.t_a),
        np.asarray(sample.t_b),
        (np.asarray(sample.wall_a), np.asarray(sample.wall_b)),
    )
    return _Run(ratios, t_a, t_b, *walls, low, high, verdict, seconds, sample.sides.inner, look)


# ----------------------------------------------------------------------------------------- public API


@dataclass(frozen=True)
class Sampling:
    """How a paired measurement samples: the parameters :func:`measure_ratio` documents, shared by every
    measurement (a keyword of :func:`measure_ratio` or :func:`measure_efficiency` replaces one)."""

    min_pairs: int = 100
    min_seconds: float = 0.5
    max_seconds: float = 6.0
    confidence: float = 0.95
    warmup: int = 6
    inner: int | None = None
    sample_seconds: float = 2e-3
    clock: Clock = time.perf_counter
    # What ``clock`` is called in a result; ``device`` set: the chip's own clock decides, ``clock`` only
    # paces the budget and measures the host's share beside it.
    clock_name: str = "wall"
    device: DeviceRecorder | None = None


def measure_ratio(a: Timed, b: Timed, *, threshold: float | None = None, **sampling: Any) -> RatioResult:
    """Measure ``t_a / t_b`` by paired, order-alternating interleaving; judge it against ``threshold``.

    Args:
        a, b: :data:`Timed` callables (each call runs the work once and blocks until done).
        threshold: the bound ``t_a / t_b <= threshold``. ``None`` measures only (``verdict`` is ``None``,
            no adaptive extension).
        sampling: fields of :class:`Sampling`, which default to its values:
        min_pairs: pairs taken before the first look.
        min_seconds: keep taking pairs before the first look until this much time (by ``clock``, warm-up
            included) has passed; a floor on precision that scales with the program's speed.
        max_seconds: budget by ``clock``, counted from the first warm-up call. Sampling stops at the first
            pair boundary past it (never below the few pairs an interval needs), so a run may overshoot by
            one pair.
        confidence: coverage of the reported interval for the median ratio.
        warmup: calls of each callable before timing; their times choose ``inner``.
        inner: calls per sample, for both sides; ``None`` calibrates each side separately so that its
            samples last about ``sample_seconds`` (at least one call).
        sample_seconds: the target sample duration for the automatic ``inner``.
        clock: monotonic seconds; tests inject a fake clock.

    Returns:
        A :class:`RatioResult`.

    Raises:
        InvariantsError: on invalid parameters (``min_pairs`` too small for ``confidence``, non-positive
            ``max_seconds`` or ``inner``, ``confidence`` outside (0.5, 1)).
    """
    return measure_paired(a, b, bound=threshold, direction="at_most", sampling=Sampling(**sampling))


def measure_efficiency(
    program: Timed, copy: Timed, *, min_efficiency: float | None = None, **sampling: Any
) -> RatioResult:
    """Measure ``t_copy / t_program`` (efficiency against a memory-copy roofline); judge it against a floor.

    Same pairing, statistic, adaptive extension and parameters as :func:`measure_ratio` with
    ``a = copy, b = program``. ``copy`` is typically :func:`copy_callable` of the bytes the program must move.

    Returns a :class:`RatioResult` named ``efficiency``, bounded ``at_least`` ``min_efficiency``.
    """
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
    """``t_a / t_b`` by paired interleaving (:func:`measure_ratio` says how), judged against ``bound`` in
    ``direction``: the one measurement behind a time ratio and an efficiency."""
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
    return RatioResult(
        median=float(np.median(r.ratios)),
        low=r.low,
        high=r.high,
        pairs=int(r.ratios.size),
        seconds=r.seconds,
        confidence=sampling.confidence,
        threshold=bound,
        verdict=r.verdict,
        t_a_median=float(np.median(r.t_a)),
        t_b_median=float(np.median(r.t_b)),
        cv=robust_cv(r.ratios),
        inner_a=r.inner[0],
        inner_b=r.inner[1],
        looks=r.looks,
        ratios=tuple(float(v) for v in r.ratios),
        samples_a=tuple(float(v) for v in r.t_a),
        samples_b=tuple(float(v) for v in r.t_b),
        direction=direction,
        name=name,
        clock="device" if device else sampling.clock_name,
        wall_a_median=float(np.median(r.wall_a)) if device else None,
        wall_b_median=float(np.median(r.wall_b)) if device else None,
    )


class DeviceClockFallback(UserWarning):
    """A device-clock measurement that fell back to the wall clock, in one line: why."""


def _decide_with(
    rule: Callable[[float, float, float], Verdict | None], bound: float, low: float, high: float
) -> Verdict | None:
    return rule(low, high, bound)


def runtime_clock(platform: str, choice: str | None = None, where: str = "timing") -> tuple[str, Clock]:
    """The clock to time programs on ``platform`` with, by name, and the host clock that paces it:
    ``("cpu", time.process_time)`` on the CPU backend, ``("device", time.perf_counter)`` on an
    accelerator. ``choice`` (``"device"``, ``"wall"`` or ``"cpu"``) overrides.

    Why CPU time on the CPU backend: there the device *is* this process, so the CPU time of its threads is
    the work a program costs, without the time spent waiting for a core another process holds. Its blind
    spot, a kernel that loses its threads but does the same work, is caught by ``INVARIANTS_CLOCK=wall`` on
    a quiet, dedicated machine.

    Why the device clock on an accelerator: a blocking call's wall time is the host's round trip, many times
    the device time of a small lookup, so wall ratios of two such programs sit near 1 whatever the chip
    does. The profiler's trace has the chip's own time of each call (:mod:`invariants.timing.device`).

    The one choice of a clock: the throughput items and ``versus`` alike (``where`` names the setting in
    an error: ``INVARIANTS_CLOCK``, ``--clock``).
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
    """The :class:`Sampling` fields of a clock :func:`runtime_clock` chose (``recorder``: a test's)."""
    device = (recorder or DeviceRecorder()) if name == "device" else None
    return {"clock": clock, "clock_name": name, "device": device}


def confirmed(
    measure: Callable[[], RatioResult], verdict: Verdict = "fail"
) -> tuple[RatioResult, list[RatioResult]]:
    """Run ``measure``; if its verdict is ``verdict``, run it once more and keep that verdict only if it
    repeats. Returns the deciding result and every attempt.

    Why: the interval covers the sampling error of one measurement under steady conditions; a burst of load
    that hits one program harder than the other (a 2-thread kernel waits for its slower thread) changes
    the quantity itself for a while. A regression repeats; a burst rarely does, so asking twice squares the
    chance of a false failure.
    """
    first = measure()
    if first.verdict != verdict:
        return first, [first]
    second = measure()
    return (first if second.verdict == verdict else second), [first, second]
