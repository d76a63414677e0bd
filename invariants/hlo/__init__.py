"""Reading what a program compiled to, as text and numbers (no JAX).

- ``parse``: optimized-HLO module text to a small model (:class:`~invariants.hlo.parse.HloModule`);
- ``structure``: kernels, fusions, loops, gathers and collectives of a module;
- ``cost``: what the compiler predicts a program will cost, and its memory.

The metric names a spec's ``assert`` may use are registered in :mod:`invariants.measure.metrics`.
"""
