"""Where snapshots live: ``<root>/<target>/<program>.<config>.txt``, one syrupy single-file each.

This is syrupy's extension half (the serializer half is :mod:`invariants._snapshot`). It changes two
things about syrupy's defaults: the location (a per-target folder below a root, so a CPU run never
compares against a TPU snapshot) and deletion (guarded, see :class:`DeletionGuard`).

The root is ``snapshots/`` at the project root unless ``--snapshot-dir`` moves it; each item's
``snapshot_key`` marker carries it (the plugin decides it per program, see
``invariants._plugin.GateSession.snapshot_folder``). An item whose root is None (the catalog's snapshots
read from the installed package in a downstream run) is never shown to syrupy: it is compared by the item
itself and never written or deleted.

Why the guard: syrupy decides a snapshot is *unused* when it was discovered beside a test that ran but no
assertion read it, and ``--snapshot-update`` deletes unused snapshots. Its matching of skipped and
deselected tests goes by snapshot *names*, and ours are not test names; syrupy has also had bugs here
(#19, #787, #842, #963, #1161). So a deletion happens only for a file that is provably obsolete: its target
compiled in this run and no program of that name (catalog or declared) keeps its snapshots in that folder
for that target. Everything else is kept, whatever syrupy concludes. Files that are not ours (the efficiency
baselines beside the snapshots) are never even discovered.

syrupy never discovers the file of a program that no longer exists (no test item points at it), so the
plugin deletes those itself at the end of an update (:func:`obsolete_snapshots`), by the same rule, and a
plain run names them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from syrupy.data import SnapshotCollections
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

SNAPSHOT_ROOT = "snapshots"
MARKER = "snapshot_key"


@dataclasses.dataclass
class DeletionGuard:
    """What this session may delete: per snapshot folder (``<root>/<target>``, absolute) of a target that
    compiled here, the stems of the programs that keep their snapshots there.

    Filled by the pytest plugin after collection. Empty (delete nothing) in any process that did not
    collect, such as an xdist controller.
    """

    known_stems: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    refused: list[str] = dataclasses.field(default_factory=list)
    # Per folder, the stems selected in this session (``--programs``, ``--configs``); None: no selection.
    # Other files are not discovered at all: not compared, never "unused", never deleted.
    selected: dict[str, set[str]] | None = None

    def may_delete(self, path: Path) -> bool:
        folder = str(path.parent.resolve())
        if folder not in self.known_stems:
            return False
        return path.name.removesuffix(".txt") not in self.known_stems[folder]


GUARD = DeletionGuard()


# syrupy asks every item that ran for its snapshot folder, even items that take no snapshot. Those get a
# folder that never exists, so nothing is discovered (or deleted) on their behalf.
_NO_KEY = ("", "", ".no-snapshot")


def _key(test_location: Any) -> tuple[str, str, str]:
    marker = test_location.item.get_closest_marker(MARKER)
    if marker is None or marker.kwargs.get("root") is None:
        return _NO_KEY
    program, config, target = marker.args
    return program, config, target


def _root(test_location: Any) -> Path:
    marker = test_location.item.get_closest_marker(MARKER)
    if marker is None or marker.kwargs.get("root") is None:
        return Path(test_location.item.config.rootpath) / SNAPSHOT_ROOT
    return Path(marker.kwargs["root"])


def _selected(location: str) -> bool:
    if GUARD.selected is None:
        return True
    path = Path(location)
    return path.stem in GUARD.selected.get(str(path.parent.resolve()), set())


def snapshot_stem(program: str, config: str) -> str:
    return f"{program}.{config}"


def obsolete_snapshots(folder: Path, known: set[str]) -> list[Path]:
    """The snapshot files in ``folder`` (``<root>/<target>``) whose stem no program has any more
    (``known``: the stems the programs keeping their snapshots there have).

    The caller decides when a folder qualifies: only when its target's structure items ran in this session,
    and never a read-only one. Only our own ``.txt`` files directly in the folder are considered (never the
    baselines).
    """
    return sorted(p for p in folder.glob("*.txt") if p.is_file() and p.stem not in known)


class StructureSnapshotExtension(SingleFileSnapshotExtension):
    """One text file per (target, program, config) under ``<root>/<target>/``."""

    _write_mode = WriteMode.TEXT
    file_extension = "txt"

    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        return str(_root(test_location) / _key(test_location)[2])

    @classmethod
    def get_snapshot_name(cls, *, test_location: Any, index: Any = 0) -> str:
        program, config, _ = _key(test_location)
        return snapshot_stem(program, config)

    def discover_snapshots(self, *, test_location: Any, ignore_extensions: list[str] | None = None) -> Any:
        """Only our own ``.txt`` files. syrupy would also list every other file under ``snapshots/<target>/``
        (the efficiency baselines) as an unknown collection: reported unused, a failed plain run."""
        owned = SnapshotCollections()
        for collection in super().discover_snapshots(
            test_location=test_location, ignore_extensions=ignore_extensions
        ):
            if self.is_snapshot_location(location=collection.location) and _selected(collection.location):
                owned.add(collection)
        return owned

    def delete_snapshots(self, *, snapshot_location: str, snapshot_names: set[str]) -> None:
        path = Path(snapshot_location)
        if GUARD.may_delete(path):
            path.unlink()
        else:
            GUARD.refused.append(str(path))
