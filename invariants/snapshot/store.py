"""Where snapshots live: ``<root>/<target>/<program>.<config>.txt``, one syrupy single-file each.

This is syrupy's extension half (the serializer half is :mod:`invariants.snapshot.render`), a subclass that
overrides only what syrupy's extension API offers for it:

* the location (``dirname``, ``get_snapshot_name``): the path the gate chose for the item
  (``invariants.plugin.snapshots.SnapshotFolders.path``), carried by its ``snapshot_path`` marker, a
  per-target folder below a root, so a CPU run never compares against a TPU snapshot;
* writing (``write_snapshot_collection``): every write is atomic (:func:`write_atomic`: a temporary dot
  file in the same folder, flushed and fsynced, then ``os.replace``; syrupy's walk skips dot files), so a
  run killed during ``--snapshot-update`` leaves each snapshot with its old text or its new one;
* reading (``read_snapshot_data_from_location``): a snapshot that is not UTF-8, a directory where a
  snapshot file should be, a read-only snapshot on update fail their item with one line naming the path
  (:class:`SnapshotFileError`, raised as pytest's failure, which syrupy's assertion does not catch),
  not a traceback;
* discovery (``discover_snapshots``): nothing. Which of the gate's files no program keeps any more is the
  gate's to say (``invariants.plugin.snapshots.SnapshotFolders.obsolete``: only files it wrote, of targets
  that compiled, deleted only by an update that passed). syrupy relates a file to a test by its name,
  which ours are not, so it is never shown one: it never calls one unused and never deletes one, whatever
  its own options say.
"""

from __future__ import annotations

import contextlib
import glob
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from syrupy.data import SnapshotCollection, SnapshotCollections
from syrupy.extensions.single_file import SingleFileSnapshotExtension
from syrupy.location import PyTestLocation

from .. import _paths
from .._errors import InvariantsError
from .._paths import TEMP_GLOB, shown

T = TypeVar("T")

SNAPSHOT_ROOT = "snapshots"
MARKER = "snapshot_path"
SUFFIX = ".txt"
# The first line render_summary writes: ``# <program> [<config>] on <target>``.
_HEADER = re.compile(r"# (?P<program>[^\s\[\]]+) \[(?P<config>[^\s\[\]]+)\] on (?P<target>\S+)")


class SnapshotFileError(InvariantsError):
    """A snapshot file that cannot be read or written as one: one line naming the path."""


_A_DIRECTORY = "{}: a directory where the snapshot file should be; remove it"


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


def _one_line(call: Callable[..., T], *args: Any) -> T:
    """``call(*args)``, a :class:`SnapshotFileError` turned into the item's failure: one line, no traceback
    (pytest's failure is no ``Exception``, so syrupy's assertion does not catch it to show as a diff)."""
    try:
        return call(*args)
    except SnapshotFileError as err:
        pytest.fail(str(err), pytrace=False)


class TextFiles(SingleFileSnapshotExtension):
    """A single-file syrupy extension of text snapshots read strictly (:func:`read_text`) and written
    atomically (:func:`write_atomic`): the gate's and the pytest API's."""

    file_extension = SUFFIX.lstrip(".")

    @classmethod
    def get_supported_dataclass(cls) -> type[str]:
        return str

    def read_snapshot_data_from_location(
        self, *, snapshot_location: str, snapshot_name: str, session_id: str
    ) -> Any:
        return _one_line(read_text, Path(snapshot_location))

    @classmethod
    def write_snapshot_collection(
        cls, *, snapshot_collection: SnapshotCollection, name_order: dict[str, int] | None = None
    ) -> None:
        """syrupy's one write of a snapshot file (its ``write_snapshot`` calls it), made atomic."""
        data = next(iter(snapshot_collection)).data
        if not isinstance(data, str):
            raise TypeError(f"Can't write non supported data. Expected 'str', got '{type(data).__name__}'")
        _one_line(write_atomic, Path(snapshot_collection.location), data)


class StructureSnapshotExtension(TextFiles):
    """One text file per (target, program, config): the path of the item's ``snapshot_path`` marker."""

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        path = _path(test_location)
        return str(path.parent) if path else super().dirname(test_location=test_location)

    @classmethod
    def get_snapshot_name(cls, *, test_location: PyTestLocation, index: Any = 0) -> str:
        path = _path(test_location)
        return path.stem if path else super().get_snapshot_name(test_location=test_location, index=index)

    def discover_snapshots(
        self, *, test_location: PyTestLocation, ignore_extensions: list[str] | None = None
    ) -> SnapshotCollections:
        """None: the gate names and deletes its obsolete files itself (see the module docstring)."""
        return SnapshotCollections()


def _path(test_location: PyTestLocation) -> Path | None:
    """The snapshot file of the item's ``snapshot_path`` marker; None for an item that keeps none (syrupy
    asks about every collected item at the session's end)."""
    marker = test_location.item.get_closest_marker(MARKER)
    return None if marker is None else Path(marker.args[0])
