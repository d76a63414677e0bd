"""Which items share a pytest-xdist worker: every item of one target, whatever its tier.

A target's programs compile once per process. Items spread over workers would each compile what they
read, so one key would compile on every worker that reads it: on two workers the gate cost 225 s of CPU
against 132 s in one process (pytest 9.2, pytest-xdist 3.8). The timed items read the runtime target's
executables, and the correctness items keep each reference program's outputs in their process
(``invariants.verdict.checks``): both sit below the runtime target's collector, so they share its unit.

xdist's own ``--dist loadgroup`` cannot carry this on pytest 9.2: it marks an item's group by rewriting
its node id, which pytest 9.2 no longer reads, so every group silently falls apart (pytest-xdist#1386).
The unit comes from the node id's tree instead (:mod:`invariants.plugin.tree`): every gate item sits below
its target's collector, the second part of its id (``test_structure.py::tpu-v5e::take-f32``). Node ids
that still carry xdist's ``@group`` suffix (older pytest) keep that group; any other item is its own unit,
as under ``--dist load``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def worker_group(nodeid: str, targets: Iterable[str]) -> str:
    """The unit of work ``nodeid`` belongs to: the target whose collector holds it, an ``@group`` suffix,
    or the node id itself (an item any worker may run)."""
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.rsplit("@", 1)[1]
    parts = nodeid.split("::")
    if len(parts) > 2 and parts[1] in targets:
        return parts[1]
    return nodeid


def scheduler(config: Any, log: Any, targets: Iterable[str]) -> Any:
    """An xdist scheduler that hands out the units of :func:`worker_group`, largest first."""
    from xdist.scheduler import LoadScopeScheduling

    names = frozenset(targets)

    class TargetScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid, names)

    return TargetScheduling(config, log)
