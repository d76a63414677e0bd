"""The device clock: each call's time on the accelerator itself, read from a JAX profiler trace.

:class:`DeviceRecorder` runs a batch of calls inside ``jax.profiler.trace`` and returns the device seconds
of each, in the order they were made (:mod:`invariants.timing.trace` reads the trace). The paired timer
(:mod:`invariants.timing.paired`) uses it on an accelerator: the same alternating pairs and statistics,
now on the chip's seconds, with the host's wall time kept beside them.

A trace without device events (the CPU backend, a plugin or release that records none) raises
:class:`~invariants.timing.trace.TraceError`; the timer then measures the whole ratio again on the wall
clock, says so in one line and records ``clock = wall``: one ratio never mixes two clocks.
"""

from __future__ import annotations

import contextlib
import functools
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager as ContextManager

from .trace import DeviceTrace, durations_in_order, expect_calls, find_traces, read_trace

__all__ = ["DeviceRecorder", "profiler_trace"]

Tracer = Callable[[str], ContextManager[object]]
"""Starts a trace into a folder for the duration of a ``with`` block (``jax.profiler.trace``)."""


def profiler_trace(folder: str) -> ContextManager[object]:
    import jax  # on the timing path only, after the backend is chosen

    return jax.profiler.trace(folder)


_MODULES_ONLY = functools.partial(read_trace, ops=False)


class DeviceRecorder:
    """Device seconds of the calls a batch makes.

    ``tracer`` and ``reader`` are JAX's profiler and :func:`~invariants.timing.trace.read_trace` unless a
    test stands recorded traces in for a chip."""

    def __init__(
        self,
        tracer: Tracer = profiler_trace,
        reader: Callable[..., DeviceTrace] = _MODULES_ONLY,
    ) -> None:
        self._tracer = tracer
        self._reader = reader

    def record(self, batch: Callable[[], int]) -> list[float]:
        """Run ``batch`` (it makes the calls and returns how many it made) under a trace; each call's
        device seconds, in call order.

        Raises:
            TraceError: the trace holds no device events, or not one execution per call.
        """
        calls = 0

        def counted() -> int:
            nonlocal calls
            calls = batch()
            return calls

        traces = self.record_traces(counted)
        return expect_calls(durations_in_order(traces), calls, "device clock")

    def record_traces(self, batch: Callable[[], object]) -> list[DeviceTrace]:
        """Run ``batch`` under a trace; the device plane of each trace file it wrote."""
        with self._folder() as folder:
            with self._tracer(folder):
                batch()
            return [self._reader(path) for path in find_traces(folder)]

    @staticmethod
    @contextlib.contextmanager
    def _folder() -> Iterator[str]:
        with tempfile.TemporaryDirectory(prefix="invariants-trace-") as folder:
            yield folder
