"""The gate's collection tree, pytest's own model for tests that come from spec files: a tier's anchor
module collects as a :class:`~invariants.plugin.anchors.TierFile`, which yields a collector per target
(and, below it, per spec file and per table of it), which yield the items.

Node ids come from that tree (``<anchor>`` is the module's path, e.g. ``invariants/gate/test_structure.py``)::

    <test_structure.py>::<target>::<program>-<config>
    <test_invariants.py>::<target>::<spec file>::<invariant id>::<programs>-<config>
    <test_correctness.py>::<runtime target>::<spec file>::<check id>::<program>-<config>-<distribution>
    <test_throughput.py>::<runtime target>::<spec file>::<invariant id>::<a>~<b>-<config>   (ratio)
    <test_throughput.py>::<runtime target>::<program>-<config>                             (efficiency)

``<programs>`` joins a relation's programs with ``~`` (a relation across configurations joins its
configurations so too). A spec file is named by its file name, or by its path where two spec files share
one. No name holds brackets: pytest reads ``[...]`` at an id's end as a parametrization's, and its cache
(``--lf``) matches ids so. The second part of every gate item's id is its target, by which
:func:`invariants.plugin.hooks.worker_group` groups a worker's items. A tier with no item makes one
skipped item, ``<anchor>::none``, that says why.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .._paths import shown
from ..records.compiled import Key

if TYPE_CHECKING:
    from ..verdict.checks import Case

Node = pytest.Item | pytest.Collector
Children = Callable[["Group"], Iterable[Node]]
# An item of a (key or case, why it skips) below its collector.
Make = Callable[["Group", Any, str | None], pytest.Item]
Planned = list[tuple[Any, str | None]]
RecordProperty = Callable[[str, object], None]


# Set on each report of a gate item (an attribute of a report crosses from an xdist worker with it): the
# ``gate`` keyword would not tell one, since a project's test parametrized with "gate" has that keyword too.
GATE_REPORT = "invariants_gate_item"


def of_gate_item(report: pytest.TestReport) -> bool:
    return getattr(report, GATE_REPORT, False) is True


class GateItem(pytest.Function):
    """A gate item: a :class:`pytest.Function` whose callable is its own ``check``, so that its fixtures,
    markers, skips and xfails are pytest's own; ``located`` is the file (and line) it is about."""

    check: Callable[..., None]
    MARKS: tuple[str, ...] = ()

    def __init__(self, *, located: tuple[str | Path, int | None], skip: str | None = None, **kw: Any) -> None:
        self.located = located
        super().__init__(callobj=self.check, **kw)
        for mark in ("gate", *self.MARKS):
            self.add_marker(mark)
        if skip:
            self.add_marker(pytest.mark.skip(reason=skip))

    @property
    def reads(self) -> list[Key]:
        """The compiles this item reads, in order: what the session compiles ahead of it."""
        return []

    def reportinfo(self) -> tuple[str | Path, int, str]:
        """The 0-based line (a file's first without one), and the header: ``<id> at FILE[:LINE]``."""
        path, line = self.located
        at = shown(Path(path)) + (f":{line}" if line is not None else "")
        return path, 0 if line is None else line - 1, f"{self.nodeid.split('::', 1)[-1]} at {at}"


class Nothing(GateItem):
    """The one item of a tier that has none here: skipped, with why."""

    def check(self) -> None:  # never runs: the item skips
        pass


class Group(pytest.Collector):
    """A target's, a spec file's or a table's collector: its children, made when pytest collects it."""

    def __init__(self, *, children: Children, **kw: Any):
        super().__init__(**kw)
        self._children = children

    def collect(self) -> list[Node]:
        return list(self._children(self))


def by_target(planned: Planned) -> dict[str, Planned]:
    """``planned`` grouped by target, in the order the targets first appear."""
    groups: dict[str, Planned] = {}
    for value, skip in planned:
        groups.setdefault(value.target, []).append((value, skip))
    return groups


def group(parent: pytest.Collector, name: str, children: Children) -> Group:
    return Group.from_parent(parent, name=name, children=children)


def located(where: str) -> tuple[str, int | None]:
    """``FILE:LINE`` as reportinfo's path and line."""
    path, _, line = where.rpartition(":")
    return (path, int(line)) if line.isdigit() else (where, None)


def case_name(case: Case) -> str:
    """An invariant's (or ratio's) item name below its invariant's collector: ``<programs>-<config>``."""
    if pinned := case.invariant.assertion.pinned:  # a relation across configurations: each side's own
        return "~".join(p for p, _ in pinned) + "-" + "~".join(c for _, c in pinned)
    return f"{case.program or '~'.join(case.invariant.programs)}-{case.config}"


def invariant_table(case: Case) -> tuple[str, str]:
    return case.invariant.where, case.invariant.id


def each(make: Make, entries: Planned) -> Children:
    return lambda parent: [make(parent, value, skip) for value, skip in entries]


def by_spec(entries: Planned, table: Callable[[Any], tuple[str, str]], make: Make) -> Children:
    """A collector's children: a collector per spec file, below it one per table of it (``table(case)`` is
    its ``FILE:LINE`` and id), and below that ``make``'s items."""

    def children(parent: Group) -> list[Node]:
        files: dict[str, dict[str, Planned]] = {}
        for case, skip in entries:
            where, name = table(case)
            files.setdefault(where.rsplit(":", 1)[0], {}).setdefault(name, []).append((case, skip))
        names = [Path(path).name for path in files]
        return [
            group(parent, name if names.count(name) == 1 else path, functools.partial(_tables, tables, make))
            for path, tables in files.items()
            for name in [Path(path).name]
        ]

    return children


def _tables(tables: dict[str, Planned], make: Make, parent: Group) -> list[Node]:
    return [group(parent, name, each(make, listed)) for name, listed in tables.items()]
