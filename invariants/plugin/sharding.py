"""``--shard K/N``: this session's share of the selection, taken after every other selection (``-k``, ``-m``)
and before anything compiles, so that a shard compiles only what its own items read
(:mod:`invariants.scope.shard` says how the items split).

Every shard of a run collects the same items and splits them the same way; the results file says which
shard it is, of which selection (:func:`facts`), so that ``python -m invariants report`` can tell a
missing or a repeated shard. A shard left with nothing exits as pytest does for no tests (5), and still
writes its results file: the merge counts it as a shard that had nothing to do.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from .._errors import InvariantsError
from ..scope.shard import DURATIONS_FILE, Shard, assign, parse_shard, read_durations, selection_digest, units

# What an xdist worker sends its controller, which writes the results file but collects nothing.
WORKER_OUTPUT = "invariants-shard-selection"


@dataclasses.dataclass
class Sharding:
    """The session's shard; once the items are known, the selection's digest and what this shard kept."""

    shard: Shard
    durations: Path
    selection: str | None = None
    kept: int = 0
    of: int = 0
    by: str = ""

    @classmethod
    def from_options(cls, config: pytest.Config) -> Sharding | None:
        """``--shard``, checked; pytest-split's own split refused, since it splits item by item."""
        if config.getoption("splits", None) or config.getoption("group", None):
            raise InvariantsError(
                "--splits/--group (pytest-split): it splits item by item, so one program would compile in "
                "several shards; give --shard K/N, which balances by pytest-split's durations file"
            )
        value = config.getoption("shard")
        if value is None:
            return None
        durations = config.getoption("durations_path", None) or DURATIONS_FILE
        return cls(parse_shard(value), Path(durations))

    def take(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Keep this shard's items of ``items`` (in place); the others are deselected."""
        durations = read_durations(self.durations)
        groups = units((i.nodeid, getattr(i, "reads", ())) for i in items)
        where = assign(groups, self.shard.count, durations)
        mine = {n for unit, s in zip(groups, where, strict=True) if s == self.shard.index for n in unit}
        self.selection = selection_digest((i.nodeid for i in items), self.shard.count)
        self.of, self.by = len(items), "recorded durations" if durations else "hash"
        dropped = [i for i in items if i.nodeid not in mine]
        items[:] = [i for i in items if i.nodeid in mine]
        self.kept = len(items)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        output = getattr(config, "workeroutput", None)
        if output is not None:
            output[WORKER_OUTPUT] = self.selection

    def summary_line(self) -> str:
        if not self.of:  # an xdist controller: its workers split
            return f"invariants: shard {self.shard} (split by the workers)"
        return f"invariants: shard {self.shard}: {self.kept} of {self.of} items (split by {self.by})"

    def facts(self) -> dict[str, Any]:
        """The results file's ``shard``: which one, of how many, of which selection."""
        return {"shard": {"index": self.shard.index, "count": self.shard.count, "selection": self.selection}}
