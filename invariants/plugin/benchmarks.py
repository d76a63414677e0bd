"""The throughput tier's items as pytest-benchmark records: each record's statistics are the seconds per
call the paired measurement took of the program its item judges, by the clock that judged them (the
process's CPU time or the wall clock on a host, the chip's own from a profiler trace on an accelerator).

pytest-benchmark has no public way to be handed samples taken elsewhere: it times what it runs, with the
timer its ``benchmark`` marker names. The gate's measurement cannot run under it (it interleaves two
programs call by call, on a clock of its own), so its documented surfaces are used as they are: the gate's
items carry ``pytest.mark.benchmark(timer=REPLAY)``, and :func:`record_samples` runs ``pedantic`` for one
round per sample, of nothing, which :data:`REPLAY` times as that sample's seconds. pytest-benchmark then
computes every statistic itself, and its table, its ``--benchmark-json``, ``pytest-benchmark compare`` and
any dashboard fed that JSON read the per-call times the verdict was made of.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["REPLAY", "Replay", "record_samples"]


class Replay:
    """A timer that gives each round of ``pedantic`` the next loaded sample as its duration: 0 when the
    round starts, the sample when it ends (pytest-benchmark reads a round as ``end - start``, and reads
    the timer nowhere else in ``pedantic``)."""

    __name__ = "replayed_samples"  # how pytest-benchmark's JSON names the timer (its ``options.timer``)

    def __init__(self) -> None:
        self._samples: Iterator[float] = iter(())
        self._started = False

    def load(self, samples: Sequence[float]) -> None:
        self._samples = iter(samples)
        self._started = False

    def __call__(self) -> float:
        self._started = not self._started
        return 0.0 if self._started else next(self._samples)


# The timer of every throughput item (its ``benchmark`` marker): one per process, loaded by the item that
# runs (items of one process run one at a time).
REPLAY = Replay()


def record_samples(benchmark: Any, samples: Sequence[float], **extra_info: Any) -> None:
    """Make ``benchmark``'s record (pytest-benchmark's fixture, its item marked with :data:`REPLAY`) the
    per-call ``samples``, and add ``extra_info`` to it. With ``--benchmark-disable`` it records nothing,
    as pytest-benchmark does."""
    benchmark.extra_info.update(extra_info)
    if not samples:
        return
    REPLAY.load(samples)
    benchmark.pedantic(_nothing, rounds=len(samples), iterations=1, warmup_rounds=0)


def _nothing() -> None:
    """What each replayed round runs: its time is the sample's, not this call's."""
