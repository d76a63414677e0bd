"""Which items share a pytest-xdist worker: every item that compiles for one target, and every item that
checks values.

A target's programs compile once per process. Items spread over workers would each compile what they
read, so one key would compile on every worker that reads it: on two workers the gate cost 225 s of CPU
against 132 s in one process (pytest 9.2, pytest-xdist 3.8). The timed items read the runtime
target's executables, so they share its unit too: one worker, one timing at a time. The correctness items
keep each reference program's outputs in their process (``invariants.spec.checks``), so they share one unit.

xdist's own ``--dist loadgroup`` cannot carry this on pytest 9.2: it marks an item's group by rewriting
its node id, which pytest 9.2 no longer reads, so every group silently falls apart (pytest-xdist#1386).
The scheduler here finds the unit from the node id itself, which :mod:`invariants.plugin.generate` builds: a
compiled or timed item's parameter id starts with its target (``test_structure[tpu-v5e-take-f32]``). Node
ids that still carry xdist's ``@group`` suffix (older pytest) keep that group; any other item is its own
unit, as under ``--dist load``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .items import CORRECTNESS, EFFICIENCY, INVARIANT, RATIO, STRUCTURE

# The gate's item functions whose parameter id starts with a target. The correctness items share one unit,
# named after their function.
BY_TARGET = (STRUCTURE, INVARIANT, RATIO, EFFICIENCY)


def worker_group(nodeid: str, targets: Iterable[str]) -> str:
    """The unit of work ``nodeid`` belongs to: a target's name, :data:`CORRECTNESS`, an ``@group`` suffix,
    or the node id itself (an item any worker may run)."""
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.rsplit("@", 1)[1]
    function, _, param = nodeid.rsplit("::", 1)[-1].partition("[")
    if function == CORRECTNESS:
        return CORRECTNESS
    if function in BY_TARGET:
        # The longest name wins: tpu-v5e-2x4-take-f32 belongs to tpu-v5e-2x4, not to tpu-v5e.
        owners = [t for t in targets if param.startswith(f"{t}-")]
        if owners:
            return max(owners, key=len)
    return nodeid


def scheduler(config: Any, log: Any, targets: Iterable[str]) -> Any:
    """An xdist scheduler that hands out the units of :func:`worker_group`, largest first."""
    from xdist.scheduler import LoadScopeScheduling

    names = tuple(targets)

    class TargetScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid, names)

    return TargetScheduling(config, log)
