"""Paired timing: the ratio of two programs' times, measured in one run, with a verdict.

- ``paired``: interleaved measurement, intervals and verdicts (no absolute time is ever asserted);
- ``calls``: the JAX callables timed (a compiled program with its arguments, the memory stream);
- ``baselines``: the recorded efficiency baselines and their rules;
- ``device``, ``trace``: the device clock, read from a profiler trace (``xspace`` splits one at the wire
  level, so that its events are decoded a run at a time).
"""
