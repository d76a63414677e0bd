"""Every ``INVARIANTS_*`` environment variable the package reads, in one table (no JAX).

Two kinds. A *setting* is a user's: the default of a gate option (``INVARIANTS_TARGETS`` for
``--targets``), or a knob with no option. A *protocol* variable is the suite's own: set by one process for
another it starts (a self-check child, an xdist worker, a versus worker), never by hand. Reading a name
this table lacks is a programming error (``KeyError``), so a misspelt name fails its first test instead of
reading nothing forever; ``tests/unit/test_config.py`` holds every other module to this table.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Literal


@dataclasses.dataclass(frozen=True)
class Variable:
    name: str
    kind: Literal["setting", "protocol"]
    meaning: str


VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        Variable("INVARIANTS_TARGETS", "setting", "the default of --targets"),
        Variable("INVARIANTS_SPEC_DIR", "setting", "the default of --spec-dir (one folder)"),
        Variable("INVARIANTS_SNAPSHOT_DIR", "setting", "the default of --snapshot-dir"),
        Variable("INVARIANTS_RESULTS", "setting", "the default of --results-json"),
        Variable("INVARIANTS_DUMP_DIR", "setting", "the default of --hlo-dump-dir"),
        Variable("INVARIANTS_CLOCK", "setting", "throughput items' clock: cpu or wall (default by backend)"),
        Variable("INVARIANTS_RATIO_MAX_SECONDS", "setting", "the time budget of one ratio item (default 10)"),
        Variable("INVARIANTS_HEALTH_GPU_CONFIG", "setting",
                 "the GPU description a release environment's health check compiles for"),
        Variable("INVARIANTS_SELFCHECK", "setting", "all: the self-check proof test runs every injection"),
        Variable("INVARIANTS_FREE_CORES", "protocol", "the cores a process started with, before pinning"),
        Variable("INVARIANTS_INJECT", "protocol", "a self-check child's injections (NAME=module:fn;...)"),
        Variable("INVARIANTS_SELFCHECK_CHILD", "protocol", "set in every gate child: it starts no children"),
        Variable("INVARIANTS_VERSUS_CPUS", "protocol", "the cores a versus worker pins itself to"),
        Variable("INVARIANTS_VERSUS_SLOWDOWN", "protocol",
                 "a versus worker's busy wait per call, as a fraction of its CPU time (studies only)"),
        Variable("INVARIANTS_XLA_FLAGS_CHECKED", "protocol", "XLA_FLAGS already probed, for children"),
    )
}  # fmt: skip


def name(variable: str) -> str:
    """``variable`` itself, once checked against the table (for a child's environment)."""
    return VARIABLES[variable].name


def get(variable: str, default: str | None = None) -> str | None:
    """The variable's value in this process's environment, or ``default`` when it is unset."""
    return os.environ.get(name(variable), default)
