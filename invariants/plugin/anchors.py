"""The gate's anchor modules (:mod:`invariants.gate`) as pytest collects them: each one a :class:`TierFile`.

An anchor module is recognised by its name and its line ``GATE_TIER = "<tier>"``, so that a copy of it
anywhere collects the same; nothing in it is imported. The items' modules (which import JAX) are imported
when a tier is collected, after JAX has started.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .tree import Group, Nothing, by_spec, by_target, case_name, each, group, invariant_table

if TYPE_CHECKING:
    from ..records.compiled import Key
    from ..verdict.checks import Case
    from ..verdict.correctness import CorrectnessCase
    from .session import GateSession

# The correctness tier's anchor module, by the name ``-k`` matches (the self-check's children deselect it).
CORRECTNESS = "test_correctness"
# The anchor modules' names; each one's GATE_TIER line names its tier.
ANCHORS = ("test_structure.py", "test_invariants.py", f"{CORRECTNESS}.py", "test_throughput.py")
_TIER_LINE = re.compile(r'^GATE_TIER = "(\w+)"$', re.M)


def anchor_tier(path: Path) -> str | None:
    """The tier an anchor module at ``path`` collects, or None: not an anchor."""
    if path.name not in ANCHORS:
        return None
    try:
        found = _TIER_LINE.search(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
    return found.group(1) if found and found.group(1) in NONE else None


# Why a tier has no item here, and the markers its one skipped item shares with the tier's items.
NONE = {
    "structure": ("no program selected", ("snapshot",)),
    "invariants": ("no invariant applies", ("invariant",)),
    "correctness": ("no correctness check applies", ("correctness",)),
    "throughput": ("no throughput invariant applies", ("throughput", "ratio", "efficiency")),
}


class TierFile(pytest.File):
    def __init__(self, *, tier: str, gate: GateSession, **kw: Any) -> None:
        super().__init__(**kw)
        self.tier = tier
        self.gate = gate

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        made = tier_children(self.tier, self.gate, self)
        if made:
            return made
        reason, marks = NONE[self.tier]
        # Located as its node id names the module: installed, the module's path from the project's folder
        # runs through site-packages, and pytest's SKIPPED line would start with it.
        where = self.nodeid or self.path
        nothing = Nothing.from_parent(self, name="none", located=(where, None), skip=reason)
        for mark in marks:
            nothing.add_marker(mark)
        return [nothing]


def tier_children(tier: str, s: GateSession, file: pytest.File) -> list[pytest.Item | pytest.Collector]:
    """The collectors of ``tier``'s anchor module: one per target (and per spec file and table)."""
    from . import generate
    from .items import CorrectnessItem, InvariantItem, StructureItem
    from .timed import throughput_children

    if tier == "structure":

        def structure(g: Group, key: Key, skip: str | None) -> pytest.Item:
            snapshot = str(s.snapshots.path(key))
            name = f"{key.program}-{key.config}"
            return StructureItem.from_parent(g, name=name, key=key, skip=skip, snapshot=snapshot)

        planned = generate.structure_plan(s)
        return [group(file, t, each(structure, listed)) for t, listed in by_target(planned).items()]
    if tier == "invariants":

        def invariant(g: Group, case: Case, skip: str | None) -> pytest.Item:
            return InvariantItem.from_parent(g, name=case_name(case), case=case, skip=skip)

        cases = generate.invariant_plan(s)
        by = by_target(cases)
        return [group(file, t, by_spec(listed, invariant_table, invariant)) for t, listed in by.items()]
    if tier == "correctness":

        def correctness(g: Group, case: CorrectnessCase, skip: str | None) -> pytest.Item:
            name = f"{case.program}-{case.config}-{case.distribution}"
            return CorrectnessItem.from_parent(g, name=name, case=case, skip=skip)

        checks = generate.correctness_plan(s)
        runtime = next(iter(s.all_targets))
        return (
            [group(file, runtime, by_spec(checks, lambda c: (c.check.where, c.check.id), correctness))]
            if checks
            else []
        )
    return throughput_children(s, file)
