"""Where the ``compiled_snapshot`` fixture keeps a project's own snapshots: one syrupy single-file each.

Beside the test file, per target as the gate's own::

    <folder of the test file>/snapshots/<target>/<test file stem>/<test name>.txt

The target folder comes from the asserted :class:`~invariants.testing.CompiledStructure`, so one test may
snapshot a function on several targets (a second one of a target is ``<test name>.1.txt``). Below it the
layout is syrupy's own, so syrupy relates each file to its test and updates, reports and deletes them as
it does its ``__snapshots__``; only files of this form are ever shown to it, never a foreign one.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.data import SnapshotCollections
from syrupy.location import PyTestLocation

from .._paths import shown
from .store import SNAPSHOT_ROOT, SUFFIX, TextFiles, first_line

# render_summary's first line: ``# <name> [<argument shapes>] on <target>``.
_HEADER = re.compile(r"# \S+ \[.*\] on (?P<target>\S+)")


def _parse(index: Any) -> tuple[int, str]:
    # syrupy asks an extension for a location by test and index only, so the target travels in the index.
    n, at, target = str(index).partition("@")
    if not at or not n.isdigit() or not target:
        raise TypeError(f"compiled_snapshot: not an index of ours: {index!r}; assert compiled_snapshot == s")
    return int(n), target


def ours(path: Path) -> bool:
    """Whether ``path`` is a snapshot this extension wrote: its header names the target its path does."""
    m = _HEADER.fullmatch(first_line(path, 4096) or "")
    return m is not None and m["target"] == path.parent.parent.name


class CompiledSnapshotExtension(TextFiles):
    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(Path(test_location.filepath).parent / SNAPSHOT_ROOT)

    @classmethod
    def discovery_dirname(cls, *, test_location: PyTestLocation) -> str:
        return cls.dirname(test_location=test_location)

    @classmethod
    def get_snapshot_name(cls, *, test_location: PyTestLocation, index: Any = 0) -> str:
        n, _ = _parse(index)
        return super().get_snapshot_name(test_location=test_location, index=n)

    @classmethod
    def get_location(cls, *, test_location: PyTestLocation, index: Any) -> str:
        _, target = _parse(index)
        name = cls.get_file_basename(test_location=test_location, index=index)
        return str(
            Path(cls.dirname(test_location=test_location)) / target / test_location.basename / (name + SUFFIX)
        )

    def discover_snapshots(
        self, *, test_location: PyTestLocation, ignore_extensions: list[str] | None = None
    ) -> SnapshotCollections:
        """Every snapshot of ours below the root, all targets and test files; nothing else."""
        found = SnapshotCollections()
        root = Path(self.dirname(test_location=test_location))
        for path in sorted(root.glob(f"*/*/*{SUFFIX}")):
            if path.is_file() and ours(path):
                found.add(self.read_snapshot_collection(snapshot_location=str(path)))
        return found

    def serialize(self, data: Any, **kwargs: Any) -> str:
        return str(data.snapshot)


class CompiledSnapshotAssertion(SnapshotAssertion):
    """syrupy's assertion for :class:`~invariants.testing.CompiledStructure` values: ``==`` names the
    snapshot by the value's target before syrupy compares."""

    def __eq__(self, other: object) -> bool:
        from ..testing import CompiledStructure

        if not isinstance(other, CompiledStructure):
            caller = sys._getframe(1)  # the test's ``assert compiled_snapshot == data``
            where = f"{shown(Path(caller.f_code.co_filename))}:{caller.f_lineno}"
            pytest.fail(
                f"{where}: compiled_snapshot compares what compile_for returns, got a {type(other).__name__}",
                pytrace=False,
            )
        # The how-many-th snapshot of this target in this test: its earlier ones are in the executions.
        earlier = self.executions.values()
        n = sum(Path(r.snapshot_location).parent.parent.name == other.target for r in earlier)
        self(name=f"{n}@{other.target}")  # the target travels in syrupy's index (see _parse)
        return super().__eq__(other)

    __hash__ = SnapshotAssertion.__hash__


def compiled_assertion(snapshot: SnapshotAssertion) -> CompiledSnapshotAssertion:
    """syrupy's ``snapshot`` (its session, test and update flags) as a :class:`CompiledSnapshotAssertion`."""
    return CompiledSnapshotAssertion(
        session=snapshot.session,
        extension_class=CompiledSnapshotExtension,
        test_location=snapshot.test_location,
        update_snapshots=snapshot.update_snapshots,
        update_new_snapshots_only=snapshot.update_new_snapshots_only,
    )
