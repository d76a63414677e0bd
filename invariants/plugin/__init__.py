"""The pytest gate: the plugin's hooks, its session, and what its items record.

- ``hooks``: options, the session's compile cache and item generation;
- ``outcomes``: what a gate item says when it decides, and the diagnosis of a failure;
- ``xdist``: which items share a pytest-xdist worker;
- ``results``: the one owner of the results file's records (no JAX; the report reads them);
- ``command``: ``python -m invariants gate``, the gate on a downstream project's own programs.
"""
