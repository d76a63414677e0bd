"""Which items share a pytest-xdist worker: every item of one target, whatever its tier.

A target's programs compile once per process, so items of one target spread over workers would compile
each key on every worker that reads it. The unit is the second part of a gate item's node id, its target's
collector (``test_structure.py::tpu-v5e::take-f32``), since xdist's ``loadgroup`` rewrites node ids that
newer pytest no longer reads. An ``@group`` suffix keeps its group; any other item is its own unit.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def worker_group(nodeid: str, targets: Iterable[str]) -> str:
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.rsplit("@", 1)[1]
    parts = nodeid.split("::")
    if len(parts) > 2 and parts[1] in targets:
        return parts[1]
    return nodeid


def scheduler(config: Any, log: Any, targets: Iterable[str]) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    names = frozenset(targets)

    class TargetScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid, names)

    return TargetScheduling(config, log)
