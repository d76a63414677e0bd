"""Measuring: a compile's record to every fact a verdict reads (no JAX).

- ``measurement``: :func:`~invariants.measure.measurement.measure`, the one way from a
  :class:`~invariants.compile.record.Compiled` to a :class:`~invariants.measure.measurement.Measurement`
  (the parsed module, its structure, its kernels' code, every metric);
- ``metrics``: the one registry of metric names a spec's ``assert`` may use (a new metric goes here).

It stands above ``hlo`` (optimized HLO text -> structure, predicted cost) and ``kernels`` (kernel code ->
per-kernel facts), and below everything that compiles, snapshots, checks or reports.
"""
