"""The spec files, read strictly and without JAX.

- ``reader``: the TOML spec files: invariants, correctness checks, declared programs, scopes and ratchets;
- ``asserts``: an assert's typed tree, parsed and type-checked once; :mod:`invariants.verdict` evaluates
  it, the throughput tier reads its timed ratio, versus lists the metrics it reads.
"""
