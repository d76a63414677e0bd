"""Where snapshots live: ``<root>/<target>/<program>.<config>.txt``, one syrupy single-file each.

A subclass of syrupy's single-file extension that overrides only what its extension API offers: the
location (the path of the item's ``snapshot_path`` marker, a folder per target), an atomic write (a run
killed during ``--snapshot-update`` leaves each file old or new), a strict read (a file that is not a
snapshot fails its item with one line, not a traceback), and no discovery: syrupy relates a file to a test
by its name, which ours are not, so the gate alone decides which of its files are obsolete
(``invariants.plugin.snapshots.SnapshotFolders.obsolete``) and syrupy never deletes one.
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
from ..scope.select import bare

T = TypeVar("T")

SNAPSHOT_ROOT = "snapshots"
MARKER = "snapshot_path"
SUFFIX = ".txt"
# The first line render_summary writes: ``# <program> [<config>] on <target>``.
_HEADER = re.compile(r"# (?P<program>[^\s\[\]]+) \[(?P<config>[^\s\[\]]+)\] on (?P<target>\S+)")


class SnapshotFileError(InvariantsError):
    """A snapshot file that cannot be read or written as one."""


_A_DIRECTORY = "{}: a directory where the snapshot file should be; remove it"


def snapshot_stem(program: str, config: str) -> str:
    """A snapshot's file stem: a catalog program's by its catalog name, in whichever run (its folder is the
    catalog's)."""
    return f"{bare(program)}.{config}"


def snapshot_header(path: Path) -> tuple[str, str, str] | None:
    """``(program, config, target)`` when ``path`` is a snapshot this gate wrote: its header names the
    program, config and target its path does. None for anything else (a README.txt, a directory)."""
    m = _HEADER.fullmatch(first_line(path) or "")
    if m is None:
        return None
    program, config, target = m["program"], m["config"], m["target"]
    if path.name != snapshot_stem(program, config) + SUFFIX or path.parent.name != target:
        return None
    return program, config, target


def first_line(path: Path, limit: int = 1024) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.readline(limit).decode("utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError):
        return None


def obsolete_snapshots(folder: Path, known: set[str]) -> list[Path]:
    """The snapshot files this gate wrote in ``folder`` whose stem is not ``known`` (the caller decides when
    a folder qualifies)."""
    if not folder.is_dir():
        return []
    return sorted(
        p
        for p in folder.glob("*" + SUFFIX)
        if p.stem not in known and p.is_file() and snapshot_header(p) is not None
    )


def write_atomic(path: Path, text: str) -> None:
    """:func:`invariants._paths.write_atomic`, refusing a directory in the way and a read-only snapshot."""
    where = shown(path)
    if path.is_dir():
        raise SnapshotFileError(_A_DIRECTORY.format(where))
    if path.exists() and not path.stat().st_mode & 0o222:
        raise SnapshotFileError(
            f"{where}: read-only; --snapshot-update does not replace it (make it writable to record it)"
        )
    for stale in path.parent.glob(TEMP_GLOB.format(name=glob.escape(path.name))):  # a killed write's
        with contextlib.suppress(OSError):
            stale.unlink()
    try:
        _paths.write_atomic(path, text)
    except InvariantsError as err:
        raise SnapshotFileError(f"{where}: cannot write it ({str(err).rsplit('(', 1)[-1]}") from None


def read_text(path: Path) -> str | None:
    """The text of the snapshot at ``path`` as syrupy's text mode reads it; None when there is none."""
    where = shown(path)
    try:
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
    """``call(*args)``, a :class:`SnapshotFileError` failing the item in one line (pytest's failure is no
    ``Exception``, so syrupy's assertion does not catch it to show as a diff)."""
    try:
        return call(*args)
    except SnapshotFileError as err:
        pytest.fail(str(err), pytrace=False)


class TextFiles(SingleFileSnapshotExtension):
    """Text snapshots read strictly and written atomically: the gate's and the pytest API's."""

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
        data = next(iter(snapshot_collection)).data
        if not isinstance(data, str):
            raise TypeError(f"Can't write non supported data. Expected 'str', got '{type(data).__name__}'")
        _one_line(write_atomic, Path(snapshot_collection.location), data)


class StructureSnapshotExtension(TextFiles):
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
        return SnapshotCollections()


def _path(test_location: PyTestLocation) -> Path | None:
    """None for an item that keeps no snapshot (syrupy asks about every item at the session's end)."""
    marker = test_location.item.get_closest_marker(MARKER)
    return None if marker is None else Path(marker.args[0])
