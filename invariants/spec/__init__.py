"""What must hold: spec files and their checks.

- ``file``: the TOML spec files, read strictly (no JAX): invariants, correctness checks, declared
  programs, scopes and ratchets;
- ``asserts``: an assert's typed tree (no JAX), parsed and type-checked once; the checks evaluate it,
  the throughput tier reads its timed ratio, versus lists the metrics it reads;
- ``checks``: spec entries expanded into one case per (invariant, target, program) and decided from
  structures alone;
- ``correctness``: the ``[[correctness]]`` checks, which run programs (JAX) and compare values.
"""
