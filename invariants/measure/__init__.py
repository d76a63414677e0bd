"""Measuring: a compile's record to every fact a verdict reads (no JAX).

- ``measurement``: :func:`~invariants.measure.measurement.measure`, the one way from a compile to a
  :class:`~invariants.measure.measurement.Measurement`;
- ``metrics``: the one registry of metric names a spec's ``assert`` may use.
"""
