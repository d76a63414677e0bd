"""The versus statistic: ``time(candidate) / time(baseline)`` with an interval that covers process bias.

Two worker processes of the *same* installation, timed against each other in interleaved blocks, do not
give a ratio of 1: each process pair has its own bias (memory placement, thread pools), and interleaving
inside one pair cannot cancel it (docs/versus.md, "Design"). So the unit of this statistic is a **round**:
one fresh pair of workers.

1. Inside a round, the controller alternates blocks of calls between the two workers (ABBA...) and keeps
   each pair's ratio ``t_candidate / t_baseline``, for the wall clock and for the CPU time alike. The
   round's ratio is the median of its per-pair ratios: the in-run method of :mod:`invariants.timing.paired`.
2. Across rounds, the log of each round's ratio is one observation of the true log ratio plus that round's
   process bias plus its sampling error. The estimate is their mean (the geometric mean of the round
   ratios) and the interval is Student's t on the logs with ``rounds - 1`` degrees of freedom, so the
   spread *between* process pairs, not only within them, sets its width: per-pair intervals that ignore
   the between-round part under-cover (docs/versus.md, "Design").
3. Adaptive length: after ``min_rounds`` the interval is judged against the threshold; a program whose
   interval straddles it gets more rounds, up to ``max_rounds``. Each look spends a shrinking share of
   ``1 - confidence`` (:func:`invariants._stats.look_alpha`), so looking again does not inflate the
   false-failure rate.
4. A failure must repeat: the controller measures a failing program again in fresh rounds and keeps the
   failure only if the second measurement fails too (the rule of :func:`invariants.timing.paired.confirmed`).

A verdict uses :func:`invariants.timing.paired.decide_upper`: ``fail`` only when the whole interval is above
the threshold.

Lost parallelism. On the CPU backend both workers of a round share one core (``Settings.pin`` in
:mod:`invariants.versus.command`), which keeps the CPU ratio tight but gives every kernel one thread on both
sides: a candidate whose kernels run on one thread instead of all of them times alike there. So a second phase
times fresh pairs with every core (one worker at a time, as always) and judges their wall-clock ratio
(:data:`ALL_CORES`) against its own, wider threshold. :func:`combine` names a failure of that ratio beside a
CPU time that did not fail ``lost-parallelism``.

The threads witness. Unpinned rounds spread too widely for the wall ratio alone to decide. What lost
parallelism changes first is how many threads a block keeps busy: each pair's ``(cpu / wall of the
candidate's block) / (cpu / wall of the baseline's)``, the **threads ratio** (:data:`ALL_CORES_THREADS`; 1
for the same installation). Its interval wholly below ``1 / parallel_threshold`` is the evidence that
parallelism was lost; the wall ratio's estimate above the threshold is its cost. Both must hold
(:func:`all_cores_word`), and repeat in fresh rounds: a candidate that runs on fewer threads but
no slower passes.
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
DEVICE = "device"  # the chip's own clock: rounds of one side at a time (see versus.command.device_round)
# The result keys of the all-cores phase: its wall-clock ratio (what lost parallelism fails) and its CPU
# ratio (for the report: unpinned CPU time is noisy, and decides nothing).
ALL_CORES = "wall_all_cores"
ALL_CORES_CPU = "cpu_all_cores"
# The threads ratio of the all-cores rounds (see the module docstring): the witness of lost parallelism.
ALL_CORES_THREADS = "threads_ratio_all_cores"
THREADS = "threads"  # its per-pair ratios in a Round, beside the clocks
MIN_ROUNDS_FOR_INTERVAL = 3  # a t interval on 2 rounds is wider than any threshold worth stating


@dataclasses.dataclass
class Round:
    """One worker pair's per-pair ratios (candidate / baseline) of one program, and each side's per-call
    seconds of its blocks (for reports), both per clock."""

    calls: int
    ratios: dict[str, list[float]] = dataclasses.field(
        default_factory=lambda: {c: [] for c in (*CLOCKS, DEVICE, THREADS)}
    )
    per_call: dict[str, dict[str, list[float]]] = dataclasses.field(
        default_factory=lambda: {c: {"baseline": [], "candidate": []} for c in (*CLOCKS, DEVICE)}
    )
    # Each block's CPU time over its wall time, per side: the threads it kept busy (spinning ones count).
    threads: dict[str, list[float]] = dataclasses.field(
        default_factory=lambda: {"baseline": [], "candidate": []}
    )
    seconds: float = 0.0

    def add(self, baseline: dict[str, float], candidate: dict[str, float]) -> None:
        """One pair: the two sides' ``{"wall": s, "cpu": s}`` for ``calls`` calls each, and ``"device"``
        where the device clock read them."""
        for clock in (*CLOCKS, DEVICE):
            if clock not in baseline or clock not in candidate:
                continue
            # A block shorter than the clock's resolution reads 0 s; such a pair says nothing.
            if baseline[clock] > 0 and candidate[clock] > 0:
                self.ratios[clock].append(candidate[clock] / baseline[clock])
        if min(baseline["cpu"], baseline["wall"], candidate["cpu"], candidate["wall"]) > 0:
            self.ratios[THREADS].append(
                (candidate["cpu"] / candidate["wall"]) / (baseline["cpu"] / baseline["wall"])
            )
        for side, block in (("baseline", baseline), ("candidate", candidate)):
            for clock, seconds in block.items():
                if clock in self.per_call:
                    self.per_call[clock][side].append(seconds / self.calls)
        for side, block in (("baseline", baseline), ("candidate", candidate)):
            if block["wall"] > 0:
                self.threads[side].append(block["cpu"] / block["wall"])

    def ratio(self, clock: str) -> float | None:
        """The median of the per-pair ratios, or None when the round has none."""
        r = self.ratios[clock]
        return float(np.median(r)) if r else None


def rounds_interval(round_ratios: Sequence[float], confidence: float) -> tuple[float, float, float]:
    """``(estimate, low, high)``: the geometric mean of the round ratios and its t interval on the logs.

    Raises:
        InvariantsError: with fewer than :data:`MIN_ROUNDS_FOR_INTERVAL` rounds, or a ratio that
            is not positive.
    """
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


def threads_of(rounds: Sequence[Round]) -> dict[str, float | None]:
    """Per side, the median over all blocks of CPU time / wall time: about 1 for a program on one thread,
    up to the core count for one that keeps every core busy (None without blocks)."""
    out: dict[str, float | None] = {}
    for side in ("baseline", "candidate"):
        values = [t for rd in rounds for t in rd.threads[side]]
        out[side] = float(np.median(values)) if values else None
    return out


def _per_call(rounds: Sequence[Round], clock: str, side: str) -> float:
    """The median per-call seconds of ``side``'s blocks over ``rounds`` on ``clock`` (NaN without blocks)."""
    values = [t for rd in rounds for t in rd.per_call[clock][side]]
    return float(np.median(values)) if values else math.nan


def judge_rounds(
    rounds: Sequence[Round],
    clock: str,
    threshold: float,
    confidence: float,
    look: int,
    *,
    floor: bool = False,
) -> RatioResult:
    """The clock's ratio over ``rounds`` as a :class:`~invariants.timing.paired.RatioResult` (``a`` =
    candidate, ``b`` = baseline), its interval at look ``look`` (1-based) and its verdict (None while it
    straddles: the caller decides whether to take more rounds or call it inconclusive). ``clock`` may be
    :data:`THREADS`; ``floor``: ``threshold`` is a lower bound (it fails when the whole interval is below)."""
    values = [r for r in (rd.ratio(clock) for rd in rounds) if r is not None]
    level = 1.0 - look_alpha(1.0 - confidence, look)
    estimate, low, high = rounds_interval(values, level)
    verdict: Verdict | None = (decide_lower if floor else decide_upper)(low, high, threshold)
    timed = clock if clock in (*CLOCKS, DEVICE) else "wall"
    wall = timed == DEVICE  # beside a device-clock ratio, the host's share of the same calls
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
        inner_a=int(np.median([rd.calls for rd in rounds])),
        inner_b=int(np.median([rd.calls for rd in rounds])),
        looks=look,
        ratios=tuple(values),
        clock=timed,
        wall_a_median=_per_call(rounds, "wall", "candidate") if wall else None,
        wall_b_median=_per_call(rounds, "wall", "baseline") if wall else None,
    )


@dataclasses.dataclass(frozen=True)
class ProgramVerdict:
    """The decision on one program: the verdict clock's result, the other clock's, and the attempts.

    ``verdict`` is ``pass``, ``fail``, ``lost-parallelism`` (the all-cores wall clock failed and the CPU
    time did not: the same work on fewer threads) or ``inconclusive``. ``results`` holds ``cpu`` and
    ``wall`` (the rounds that decided the verdict clock) and, where the all-cores phase ran,
    :data:`ALL_CORES` and :data:`ALL_CORES_CPU`.
    """

    program: str
    clock: str
    verdict: str
    results: dict[str, RatioResult]
    attempts: list[str]  # each measurement's word; a failure counts only when the second one repeats it
    # The all-cores phase's threads_of (the last measurement's), where it ran: the parallelism each side
    # showed, so a reader sees whether the baseline had any to lose (none when other load held the cores).
    threads: dict[str, float | None] | None = None

    @property
    def failed(self) -> bool:
        return self.verdict in ("fail", "lost-parallelism")

    def to_dict(self) -> dict[str, object]:
        return {
            "program": self.program,
            "clock": self.clock,
            "verdict": self.verdict,
            "results": {c: {**r.to_dict(), "round_ratios": list(r.ratios)} for c, r in self.results.items()},
            "attempts": list(self.attempts),
            **({"threads_all_cores": dict(self.threads)} if self.threads is not None else {}),
        }


def all_cores_word(wall: RatioResult, threads: RatioResult | None) -> Verdict | None:
    """The all-cores rounds' word: ``fail`` when the wall ratio's whole interval is above its threshold, or
    when the threads ratio's whole interval is below its floor (fewer threads kept busy, beyond the noise)
    and the wall ratio's estimate is above the threshold (it cost time); ``pass`` when the wall ratio's
    whole interval is at or below the threshold; None while neither holds (more rounds, or inconclusive)."""
    if wall.verdict == "fail":
        return "fail"
    bound = wall.threshold if wall.threshold is not None else math.inf
    if threads is not None and threads.verdict == "fail" and wall.median > bound:
        return "fail"
    return "pass" if wall.verdict == "pass" else None


def combine(program: str, clock: str, results: dict[str, RatioResult]) -> str:
    """One attempt's word from its results: the verdict clock decides; on the CPU backend an all-cores
    failure (:func:`all_cores_word` on :data:`ALL_CORES` and :data:`ALL_CORES_THREADS`) beside a CPU time
    that did not fail is lost parallelism. The wall clock of pinned rounds decides nothing: with one core
    per round, neither side can run threads in parallel there."""
    main = results[clock].verdict or "inconclusive"
    if main == "fail":
        return "fail"
    cores = results.get(ALL_CORES)
    witness = results.get(ALL_CORES_THREADS)
    if clock == "cpu" and cores is not None and all_cores_word(cores, witness) == "fail":
        return "lost-parallelism"
    return main
