"""The device clock: each call's time on the accelerator itself, read from a JAX profiler trace.

A trace without device events raises :class:`~invariants.timing.trace.TraceError`; the timer then measures
the whole ratio again on the wall clock and says so: one ratio never mixes two clocks.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager

from .trace import DeviceTrace, TraceError, find_traces, read_trace

Tracer = Callable[[str], ContextManager[object]]


def profiler_trace(folder: str) -> ContextManager[object]:
    from ..compile.compat import device_trace  # it imports JAX: on the timing path only

    return device_trace(folder)


_MODULES_ONLY = functools.partial(read_trace, ops=False)


class DeviceRecorder:
    """Device seconds of the calls a batch makes (a test's ``tracer`` and ``reader`` stand in for a chip)."""

    def __init__(
        self, tracer: Tracer = profiler_trace, reader: Callable[..., DeviceTrace] = _MODULES_ONLY
    ) -> None:
        self._tracer = tracer
        self._reader = reader

    def record(self, batch: Callable[[], int]) -> list[float]:
        """Each call's device seconds, in order, of ``batch`` (which returns how many calls it made)."""
        made: list[int] = []
        seconds = [
            e.duration_ns * 1e-9 for t in self.record_traces(lambda: made.append(batch())) for e in t.modules
        ]
        if len(seconds) != made[0]:
            raise TraceError(
                f"device clock: the trace holds {len(seconds)} module executions for {made[0]} calls; "
                "the device clock cannot match them call by call"
            )
        return seconds

    def record_traces(self, batch: Callable[[], object]) -> list[DeviceTrace]:
        with tempfile.TemporaryDirectory(prefix="invariants-trace-") as folder:
            with self._tracer(folder):
                batch()
            return [self._reader(path) for path in find_traces(folder)]
