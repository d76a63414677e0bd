"""Paired timing: the ratio of two programs' times, measured in one run, with a verdict.

- ``paired``: interleaved measurement, intervals and verdicts (no absolute time is ever asserted);
- ``calls``: the JAX callables timed (a compiled program with its arguments, the memory stream);
- ``baselines``: the recorded efficiency baselines and their rules.
"""
