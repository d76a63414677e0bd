"""The versus statistic: ``time(candidate) / time(baseline)`` with an interval that covers process bias.

Two worker processes of the same installation do not time alike: each pair has its own bias, which
interleaving inside the pair cannot cancel (docs/versus.md, "Design"). So the unit is a **round**, one fresh
pair of workers. A round's ratio is the median of its ABBA per-pair ratios; across rounds the estimate is
the geometric mean and the interval Student's t on the logs, so the spread between pairs sets its width.
After ``min_rounds`` a straddling interval gets more rounds, each look spending a share of the error rate
(:func:`invariants._stats.look_alpha`); a failure counts only when fresh rounds repeat it. On the device
clock a worker's start is libtpu's, so a fresh pair gives several rounds (blocks of the same two
processes): they are judged together with other pairs' only where the pairs agree (:func:`pairs_agree`),
else the pairs themselves are the rounds (:func:`pooled`).

Lost parallelism: pinned rounds give every kernel one thread on both sides, so an all-cores phase judges
the wall ratio (:data:`ALL_CORES`) against a wider threshold. Its witness is the **threads ratio**
(:data:`ALL_CORES_THREADS`): per pair, the candidate's CPU / wall over the baseline's, 1 for the same
installation. Its interval wholly below ``1 / parallel_threshold`` with the wall estimate above the threshold
also fails (:func:`all_cores_word`); a candidate on fewer threads but no slower passes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from .._errors import InvariantsError
from .._stats import look_alpha, robust_cv
from ..timing.paired import RatioResult, Verdict, decide_lower, decide_upper

CLOCKS = ("cpu", "wall")
DEVICE = "device"
# The all-cores phase's results: the wall ratio decides, the CPU ratio is only reported (unpinned, noisy).
ALL_CORES = "wall_all_cores"
ALL_CORES_CPU = "cpu_all_cores"
ALL_CORES_THREADS = "threads_ratio_all_cores"
THREADS = "threads"
FAILED = ("fail", "lost-parallelism")
MIN_ROUNDS_FOR_INTERVAL = 3  # a t interval on 2 rounds is wider than any threshold worth stating


@dataclasses.dataclass
class Round:
    """One worker pair's per-pair ratios (candidate / baseline) of one program, and per-call seconds."""

    calls: int
    ratios: dict[str, list[float]] = dataclasses.field(
        default_factory=lambda: {c: [] for c in (*CLOCKS, DEVICE, THREADS)}
    )
    per_call: dict[str, dict[str, list[float]]] = dataclasses.field(
        default_factory=lambda: {c: {"baseline": [], "candidate": []} for c in (*CLOCKS, DEVICE)}
    )
    # Each block's CPU time over its wall time: the threads it kept busy (spinning ones count).
    threads: dict[str, list[float]] = dataclasses.field(
        default_factory=lambda: {"baseline": [], "candidate": []}
    )
    seconds: float = 0.0

    def add(self, baseline: dict[str, float], candidate: dict[str, float]) -> None:
        """One pair: each side's ``{"wall": s, "cpu": s}`` for ``calls`` calls, and ``"device"`` if read."""
        for clock in (*CLOCKS, DEVICE):
            # A block shorter than the clock's resolution reads 0 s; such a pair says nothing.
            if baseline.get(clock, 0) > 0 and candidate.get(clock, 0) > 0:
                self.ratios[clock].append(candidate[clock] / baseline[clock])
        if min(baseline["cpu"], baseline["wall"], candidate["cpu"], candidate["wall"]) > 0:
            self.ratios[THREADS].append(
                (candidate["cpu"] / candidate["wall"]) / (baseline["cpu"] / baseline["wall"])
            )
        for side, block in (("baseline", baseline), ("candidate", candidate)):
            for clock, seconds in block.items():
                if clock in self.per_call:
                    self.per_call[clock][side].append(seconds / self.calls)
            if block["wall"] > 0:
                self.threads[side].append(block["cpu"] / block["wall"])

    def ratio(self, clock: str) -> float | None:
        return _median(self.ratios[clock])


def _median(values: Sequence[float]) -> float | None:
    return float(np.median(values)) if values else None


def rounds_interval(round_ratios: Sequence[float], confidence: float) -> tuple[float, float, float]:
    """``(estimate, low, high)``: the geometric mean of the round ratios and its t interval on the logs."""
    x = np.asarray(round_ratios, dtype=float)
    if x.size < MIN_ROUNDS_FOR_INTERVAL:
        raise InvariantsError(
            f"versus: {x.size} rounds cannot give an interval (need {MIN_ROUNDS_FOR_INTERVAL})"
        )
    if not np.all(x > 0):
        raise InvariantsError("versus: a round ratio is not positive")
    logs = np.log(x)
    mean = float(np.mean(logs))
    se = float(np.std(logs, ddof=1)) / math.sqrt(x.size)
    from scipy import stats  # here, not at import (see invariants._stats)

    half = float(stats.t.ppf(0.5 + confidence / 2.0, x.size - 1)) * se
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def pooled(rounds: Sequence[Round]) -> Round:
    """``rounds`` as one round: every pair of each, so its ratio is the median over them all."""
    out = Round(rounds[0].calls, seconds=sum(rd.seconds for rd in rounds))
    for rd in rounds:
        for clock, values in rd.ratios.items():
            out.ratios[clock] += values
        for clock, sides in rd.per_call.items():
            for side, values in sides.items():
                out.per_call[clock][side] += values
        for side, values in rd.threads.items():
            out.threads[side] += values
    return out


def pairs_agree(pairs: Sequence[Sequence[Round]], clock: str, confidence: float) -> bool:
    """Whether fresh worker pairs agree on ``clock``: the spread between the pairs' mean log ratios is within
    what the rounds inside each pair show (a one-way analysis of variance at ``confidence``; for two pairs,
    their difference inside its interval from the spread within them). Then the spread between processes
    is not seen beside one process's own, and the rounds of all the pairs can be judged together."""
    groups = [np.log([r for r in (rd.ratio(clock) for rd in pair) if r]) for pair in pairs]
    k, n = len(groups), sum(g.size for g in groups)
    grand = float(np.mean(np.concatenate(groups)))
    between = sum(g.size * (float(np.mean(g)) - grand) ** 2 for g in groups) / (k - 1)
    within = sum(float(np.sum((g - np.mean(g)) ** 2)) for g in groups) / (n - k)
    if within == 0:  # every round of each pair alike: only identical pairs agree
        return between == 0
    from scipy import stats  # here, not at import (see invariants._stats)

    return between / within <= float(stats.f.ppf(confidence, k - 1, n - k))


def threads_of(rounds: Sequence[Round]) -> dict[str, float | None]:
    """Per side, the median CPU time / wall time of its blocks (None without blocks)."""
    return {
        side: _median([t for rd in rounds for t in rd.threads[side]]) for side in ("baseline", "candidate")
    }


def _per_call(rounds: Sequence[Round], clock: str, side: str) -> float:
    median = _median([t for rd in rounds for t in rd.per_call[clock][side]])
    return math.nan if median is None else median


def judge_rounds(
    rounds: Sequence[Round],
    clock: str,
    threshold: float,
    confidence: float,
    look: int,
    *,
    floor: bool = False,
) -> RatioResult:
    """The clock's ratio over ``rounds`` (``a`` = candidate) at look ``look``, its verdict None while it
    straddles; ``floor``: ``threshold`` is a lower bound."""
    values = [r for r in (rd.ratio(clock) for rd in rounds) if r is not None]
    level = 1.0 - look_alpha(1.0 - confidence, look)
    estimate, low, high = rounds_interval(values, level)
    verdict: Verdict | None = (decide_lower if floor else decide_upper)(low, high, threshold)
    timed = clock if clock in (*CLOCKS, DEVICE) else "wall"
    host: tuple[float | None, float | None] = (None, None)
    if timed == DEVICE:  # beside a device-clock ratio, the host's share of the same calls
        host = (_per_call(rounds, "wall", "candidate"), _per_call(rounds, "wall", "baseline"))
    calls = int(np.median([rd.calls for rd in rounds]))
    return RatioResult(
        median=estimate,
        low=low,
        high=high,
        pairs=sum(len(rd.ratios[clock]) for rd in rounds),
        seconds=sum(rd.seconds for rd in rounds),
        confidence=confidence,
        threshold=threshold,
        verdict=verdict,
        t_a_median=_per_call(rounds, timed, "candidate"),
        t_b_median=_per_call(rounds, timed, "baseline"),
        cv=robust_cv(values),
        inner_a=calls,
        inner_b=calls,
        looks=look,
        ratios=tuple(values),
        clock=timed,
        wall_a_median=host[0],
        wall_b_median=host[1],
    )


@dataclasses.dataclass(frozen=True)
class ProgramVerdict:
    """One program's verdict (``pass``, ``fail``, ``lost-parallelism``, ``inconclusive``), its results per
    clock, each attempt's word, and the all-cores phase's :func:`threads_of`."""

    program: str
    clock: str
    verdict: str
    results: dict[str, RatioResult]
    attempts: list[str]
    threads: dict[str, float | None] | None = None
    # How the device clock's rounds were taken, e.g. "2 fresh worker pairs x 6 blocks each".
    sampling: str | None = None
    # The slowdown switch's (test-only) extra device time a call of this program met, by the side slowed:
    # what a run that measures detection power must expect to catch.
    slowed: dict[str, float] | None = None

    @property
    def failed(self) -> bool:
        return self.verdict in FAILED

    def to_dict(self) -> dict[str, object]:
        return {
            "program": self.program,
            "clock": self.clock,
            "verdict": self.verdict,
            "results": {c: {**r.to_dict(), "round_ratios": list(r.ratios)} for c, r in self.results.items()},
            "attempts": list(self.attempts),
            **({"threads_all_cores": dict(self.threads)} if self.threads is not None else {}),
            **({"sampling": self.sampling} if self.sampling is not None else {}),
            **({"slowed": dict(self.slowed)} if self.slowed else {}),
        }


def all_cores_word(wall: RatioResult, threads: RatioResult | None) -> Verdict | None:
    """``fail`` when the wall ratio fails, or the threads ratio fails and the wall estimate is above the
    threshold; ``pass`` when the wall ratio passes; None otherwise."""
    if wall.verdict == "fail":
        return "fail"
    bound = wall.threshold if wall.threshold is not None else math.inf
    if threads is not None and threads.verdict == "fail" and wall.median > bound:
        return "fail"
    return "pass" if wall.verdict == "pass" else None


def combine(program: str, clock: str, results: dict[str, RatioResult]) -> str:
    """One attempt's word: the verdict clock's, or ``lost-parallelism`` where the all-cores rounds failed
    beside a CPU time that did not (pinned rounds' wall clock decides nothing)."""
    main = results[clock].verdict or "inconclusive"
    if main == "fail":
        return "fail"
    cores = results.get(ALL_CORES)
    witness = results.get(ALL_CORES_THREADS)
    if clock == "cpu" and cores is not None and all_cores_word(cores, witness) == "fail":
        return "lost-parallelism"
    return main
