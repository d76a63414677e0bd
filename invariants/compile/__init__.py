"""Compiling: a (program, configuration, target) to every artifact later stages read, once per session.

- ``process``: the process a gate runs in (JAX's platform set before JAX starts, the backend guard);
- ``placed``: where a compile's arguments live (shardings, mesh, donation), for every entry point alike;
- ``artifacts``: the compile itself, its cache and the :class:`~invariants.compile.artifacts.Compiled` record;
- ``child``: the one way to run the gate, or a compile, in a child process;
- ``keys``: the keys of the persistent compile cache (:mod:`invariants.records.cache`), and one session's
  use of it; ``cache_command``: ``python -m invariants cache``;
- ``compat``: the JAX APIs that differ across the supported releases, one function each.
"""
