"""The pytest gate: the plugin's hooks, its session, and what its items record.

- ``hooks``: the plugin pytest loads (options, markers, hooks, fixtures), each handing the work to the
  session; it imports no JAX;
- ``session``: ``GateSession``, one per run on ``config.stash``: the selection, the compile cache and what
  is parsed from it, the run's start and end;
- ``generate``: which items a session has, and what it compiles ahead of them;
- ``anchors``: the gate's anchor modules (:mod:`invariants.gate`) as pytest collects them; ``tree``: their
  collection tree (a collector per target, spec file and table) and the node ids it gives; ``items`` and
  ``timed``: the items, each deciding in its ``check``;
- ``snapshots``: where a session's snapshots live, and the obsolete ones;
- ``recorder``: what the items recorded, and the results file it is written to;
- ``outcomes``: what a gate item says when it decides, and the diagnosis of a failure;
- ``xdist``: which items share a pytest-xdist worker;
- ``results``: the one owner of the results file's records (no JAX; the report reads them);
- ``command``: ``python -m invariants gate``, the gate on a downstream project's own programs.
"""
