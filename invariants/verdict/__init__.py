"""What the spec files decide of compiled and running programs.

- ``checks``: spec entries expanded into one case per (invariant, target, program) and decided from
  structures alone;
- ``correctness``: the ``[[correctness]]`` checks, which run programs (JAX) and compare values.
"""
