"""The throughput tier's items as pytest-benchmark records of the per-call seconds the verdict was made of,
by the clock that judged them.

pytest-benchmark has no public way to be handed samples taken elsewhere, and the gate's measurement
(interleaving two programs call by call) cannot run under it. So the items carry
``pytest.mark.benchmark(timer=REPLAY)``, and :func:`record_samples` runs ``pedantic`` for one round per
sample, of nothing, which :data:`REPLAY` times as that sample's seconds: pytest-benchmark computes every
statistic itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any


class Replay:
    """A timer that gives each round of ``pedantic`` the next sample as its ``end - start``."""

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


# One per process, loaded by the item that runs.
REPLAY = Replay()


def record_samples(benchmark: Any, samples: Sequence[float], **extra_info: Any) -> None:
    """Make ``benchmark``'s record the per-call ``samples``, with ``extra_info``."""
    benchmark.extra_info.update(extra_info)
    if not samples:
        return
    REPLAY.load(samples)
    benchmark.pedantic(_nothing, rounds=len(samples), iterations=1, warmup_rounds=0)


def _nothing() -> None:
    """What each replayed round runs: its time is the sample's, not this call's."""
