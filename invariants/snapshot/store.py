"""Where snapshots live: ``<root>/<target>/<program>.<config>.txt``, one syrupy single-file each.

This is syrupy's extension half (the serializer half is :mod:`invariants.snapshot.render`). It changes four
things about syrupy's defaults:

* the location: a per-target folder below a root, so a CPU run never compares against a TPU snapshot;
* writing: every write is atomic (:func:`write_atomic`: a temporary dot file in the same folder, flushed
  and fsynced, then ``os.replace``; syrupy's walk skips dot files), so a run killed during
  ``--snapshot-update`` leaves each snapshot with its old text or its new one, never empty or partial;
* reading and writing errors: a snapshot that is not UTF-8, a directory where a snapshot file should be,
  a read-only snapshot on update fail their item with one line naming the path
  (:class:`SnapshotFileError`, raised by :class:`StructureAssertion`), not a traceback;
* discovery and deletion: see below.

The root is ``snapshots/`` at the project root unless ``--snapshot-dir`` moves it; each item's
``snapshot_key`` marker carries it (the plugin decides it per program, see
``invariants.plugin.snapshots.SnapshotFolders.folder``). An item whose root is None (the catalog's snapshots
read from the installed package in a downstream run) is never shown to syrupy: it is compared by the item
itself and never written or deleted.

Discovery. syrupy calls a snapshot *unused* when it discovered it but no assertion read it; a plain run
with one fails, and ``--snapshot-update`` deletes it. It discovers in the folder of every assertion and, at
the end, in the folder of one arbitrary collected item per test file (a set: which one changes from run
to run), and its matching of skipped and deselected tests goes by snapshot *names*, which ours are not;
syrupy has also had bugs here (#19, #787, #842, #963, #1161). So what syrupy is shown is exactly the
obsolete files, whatever ran, was skipped or was picked: only folders of targets that compiled in this
session (:attr:`DeletionGuard.known_stems`, never a folder some item's marker happens to name), only files
in our own format directly in them (:func:`snapshot_header`), only those no program keeps there any more,
and only selected ones (:attr:`DeletionGuard.selected`). Files that are not ours (the efficiency baselines,
a README.txt) are never discovered.

The guard is the pytest session's own, on its ``config.stash`` under :data:`GUARD_KEY`, and the extension
reads it from the item it is asked about (:func:`guard_of`). Not a module global, nor a class made per
session: syrupy makes the extension itself (``extension_class()``, no arguments), and an xdist controller
rebuilds it from its dotted name; every item a worker asks about carries that worker's config. Two
sessions in one process (pytester) keep their guards apart.

Deletion. syrupy deletes nothing (the plugin sets its ``--snapshot-no-cleanup``): the plugin decides, at
the end of a passing update, with :func:`obsolete_snapshots`, and only files it can prove it wrote and no
program has any more (see that function and ``invariants.plugin.snapshots.SnapshotFolders.obsolete``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import re
from pathlib import Path
from typing import Any, TypeVar

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.data import SnapshotCollections
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from .. import _paths
from .._errors import InvariantsError
from .._paths import TEMP_GLOB, shown

A = TypeVar("A", bound=SnapshotAssertion)

SNAPSHOT_ROOT = "snapshots"
MARKER = "snapshot_key"
SUFFIX = ".txt"
# The first line render_summary writes: ``# <program> [<config>] on <target>``.
_HEADER = re.compile(r"# (?P<program>[^\s\[\]]+) \[(?P<config>[^\s\[\]]+)\] on (?P<target>\S+)")


class SnapshotFileError(InvariantsError):
    """A snapshot file that cannot be read or written as one: one line naming the path."""


_A_DIRECTORY = "{}: a directory where the snapshot file should be; remove it"


@dataclasses.dataclass
class DeletionGuard:
    """What this session owns: per snapshot folder (``<root>/<target>``, absolute) of a target that
    compiled here and that this session may write, the stems of the programs that keep their snapshots
    there.

    Filled by the pytest plugin after collection. Empty (nothing discovered) in any process that did not
    collect, such as an xdist controller.
    """

    known_stems: dict[str, set[str]] = dataclasses.field(default_factory=dict)
    # Per folder, the stems selected in this session (``--programs``, ``--configs``); None: no selection.
    # Other files are not discovered at all: not compared, never "unused".
    selected: dict[str, set[str]] | None = None

    def owns(self, folder: Path) -> bool:
        return str(folder.resolve()) in self.known_stems

    def selects(self, path: Path) -> bool:
        if self.selected is None:
            return True
        return path.stem in self.selected.get(str(path.parent.resolve()), set())

    def obsolete(self, path: Path) -> bool:
        """Whether ``path`` is a file of ours in a folder of this session that no program keeps there."""
        folder = str(path.parent.resolve())
        return (
            folder in self.known_stems
            and path.name.removesuffix(SUFFIX) not in self.known_stems[folder]
            and snapshot_header(path) is not None
        )


GUARD_KEY = pytest.StashKey[DeletionGuard]()


def guard_of(test_location: Any) -> DeletionGuard | None:
    """The guard of the session that ``test_location``'s item belongs to; None for an item of no gate
    session (the gate plugin not loaded) or one syrupy rebuilt from a worker's report (no config)."""
    stash = getattr(getattr(test_location.item, "config", None), "stash", None)
    return None if stash is None else stash.get(GUARD_KEY, None)


# syrupy asks every item that ran for its snapshot folder, even items that take no snapshot. Those get a
# folder that never exists, so nothing is discovered on their behalf.
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


def snapshot_stem(program: str, config: str) -> str:
    return f"{program}.{config}"


def snapshot_header(path: Path) -> tuple[str, str, str] | None:
    """``(program, config, target)`` when ``path`` is a snapshot this gate wrote: a file whose first line is
    ``# <program> [<config>] on <target>`` (as :func:`invariants.snapshot.render.render_summary` writes it),
    named ``<program>.<config>.txt`` in a folder named ``<target>``. None for anything else: a foreign file
    (a README.txt), an empty one, one that is not UTF-8, a directory."""
    try:
        with open(path, "rb") as f:
            first = f.readline(1024)
    except OSError:
        return None
    try:
        line = first.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        return None
    m = _HEADER.fullmatch(line)
    if m is None:
        return None
    program, config, target = m["program"], m["config"], m["target"]
    if path.name != snapshot_stem(program, config) + SUFFIX or path.parent.name != target:
        return None
    return program, config, target


def obsolete_snapshots(folder: Path, known: set[str]) -> list[Path]:
    """The snapshot files in ``folder`` (``<root>/<target>``) whose stem no program has any more
    (``known``: the stems of the programs keeping their snapshots there).

    Only files this gate provably wrote (:func:`snapshot_header`) directly in the folder: never a foreign
    file, never the baselines. The caller decides when a folder qualifies (its target's structure items
    ran in this session, the run passed, the folder is writable, and every program that could keep files
    there is known: see ``invariants.plugin.snapshots.SnapshotFolders.obsolete``).
    """
    if not folder.is_dir():
        return []
    return sorted(
        p
        for p in folder.glob("*" + SUFFIX)
        if p.stem not in known and p.is_file() and snapshot_header(p) is not None
    )


def _remove_leftovers(path: Path) -> None:
    """Delete the temporary files an earlier, killed write of ``path`` left (one writer per path)."""
    for stale in path.parent.glob(TEMP_GLOB.format(name=glob.escape(path.name))):
        with contextlib.suppress(OSError):
            stale.unlink()


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) so that, whenever the process dies, the file holds its old text
    or the new one (:func:`invariants._paths.write_atomic`, the package's one atomic writer). Raises
    :class:`SnapshotFileError` (one line) for a directory in the way, a read-only snapshot, or a folder it
    cannot write."""
    where = shown(path)
    if path.is_dir():
        raise SnapshotFileError(_A_DIRECTORY.format(where))
    if path.exists() and not path.stat().st_mode & 0o222:
        raise SnapshotFileError(
            f"{where}: read-only; --snapshot-update does not replace it (make it writable to record it)"
        )
    _remove_leftovers(path)
    try:
        _paths.write_atomic(path, text)
    except InvariantsError as err:
        raise SnapshotFileError(f"{where}: cannot write it ({str(err).rsplit('(', 1)[-1]}") from None


def read_text(path: Path) -> str | None:
    """The text of the snapshot at ``path``, None when there is none; :class:`SnapshotFileError` (one line)
    when it cannot be read as one."""
    where = shown(path)
    try:
        # As syrupy's text mode reads it: UTF-8, universal newlines.
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise SnapshotFileError(_A_DIRECTORY.format(where)) from None
    except UnicodeDecodeError as err:
        raise SnapshotFileError(
            f"{where}: not UTF-8 text (byte {err.start}); not a snapshot this gate wrote: restore it "
            "(git checkout) or delete it and record it with --snapshot-update"
        ) from None
    except OSError as err:
        raise SnapshotFileError(f"{where}: cannot read it ({err.strerror or err})") from None


class TextFiles(SingleFileSnapshotExtension):
    """A single-file syrupy extension of text snapshots read strictly (:func:`read_text`: one line for a
    file that is not one) and written atomically (:func:`write_atomic`): the gate's and the pytest API's."""

    def read_snapshot_data_from_location(
        self, *, snapshot_location: str, snapshot_name: str, session_id: str
    ) -> Any:
        return read_text(Path(snapshot_location))

    @classmethod
    def write_snapshot_collection(cls, *, snapshot_collection: Any, name_order: Any = None) -> None:
        """syrupy's one write of a snapshot file (its ``write_snapshot`` calls it), made atomic."""
        data = next(iter(snapshot_collection)).data
        if not isinstance(data, str):
            raise TypeError(f"Can't write non supported data. Expected 'str', got '{type(data).__name__}'")
        write_atomic(Path(snapshot_collection.location), data)


class StructureSnapshotExtension(TextFiles):
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
        """What syrupy may call unused: the selected obsolete files of ours in a folder of this session
        (see the module docstring), so that "unused" never depends on which items ran."""
        owned = SnapshotCollections()
        folder = Path(self.dirname(test_location=test_location))
        guard = guard_of(test_location)
        if guard is None or not guard.owns(folder):
            return owned
        for path in sorted(folder.glob("*" + SUFFIX)):
            if path.is_file() and guard.selects(path) and guard.obsolete(path):
                owned.add(self.read_snapshot_collection(snapshot_location=str(path)))
        return owned

    def delete_snapshots(self, *, snapshot_location: str, snapshot_names: set[str]) -> None:
        """Never: syrupy's cleanup is off (see the module docstring); the plugin deletes what it proves
        obsolete."""


class StructureAssertion(SnapshotAssertion):
    """syrupy's assertion, except that a snapshot file it cannot read or write fails the item with one line
    naming the path (syrupy would report the exception's traceback as the assertion's diff)."""

    def _assert(self, data: Any) -> bool:
        matched = super()._assert(data)
        result = self.executions.get(self.num_executions - 1)
        if result is not None and isinstance(result.exception, SnapshotFileError):
            pytest.fail(str(result.exception), pytrace=False)
        return matched


def structure_assertion(snapshot: SnapshotAssertion) -> StructureAssertion:
    """The ``structure_snapshot`` fixture's value: ``snapshot`` with our extension and error lines."""
    return rebind(snapshot, StructureAssertion, StructureSnapshotExtension)


def rebind(snapshot: SnapshotAssertion, assertion: type[A], extension: type[Any]) -> A:
    """syrupy's ``snapshot`` fixture value as an ``assertion`` of ours, storing with ``extension``: the
    same session, test and update flags (what ``snapshot.use_extension`` keeps, for our own class)."""
    return assertion(
        session=snapshot.session,
        extension_class=extension,
        test_location=snapshot.test_location,
        update_snapshots=snapshot.update_snapshots,
        update_new_snapshots_only=snapshot.update_new_snapshots_only,
    )
