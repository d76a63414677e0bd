"""Compiling: a (program, configuration, target) to every artifact later stages read, once per session.

- ``process``: the process a gate runs in (JAX's platform set before JAX starts, the backend guard);
- ``artifacts``: the compile itself, its cache and the :class:`~invariants.compile.artifacts.Compiled` record;
- ``child``: the one way to run the gate, or a compile, in a child process;
- ``store`` and ``keys``: the persistent compile cache across runs, and its keys (``cache_command``:
  ``python -m invariants cache``).
"""
