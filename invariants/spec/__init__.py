"""What must hold: spec files and their checks.

- ``file``: the TOML spec files, read strictly (no JAX): invariants, correctness checks, declared
  programs, scopes and ratchets;
- ``checks``: spec entries expanded into one case per (invariant, target, program) and decided from
  structures alone;
- ``correctness``: the ``[[correctness]]`` checks, which run programs (JAX) and compare values.
"""
