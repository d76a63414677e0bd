"""The persistent compile cache: :class:`~invariants.compile.record.Compiled` records kept on disk between
runs, so that a gate run with nothing changed compiles nothing (no JAX here: the keys come from
:mod:`invariants.compile.keys`, which says what they hold and why).

Layout of the folder, ``v1/`` below it: ``results/<key>.json.gz`` (a record). Every file is written
whole or not at all (a temporary file renamed onto its name), so xdist workers and two CI jobs may share
one folder. The folder and each level in it are this user's own and writable by no one else
(:mod:`invariants._trust`); an entry is read only as a regular file within :data:`MAX_ENTRY_BYTES`, and
only with the fields and types of its kind. Anything else is a miss with one line, removed and written
again. The folder has a size bound (:data:`DEFAULT_MAX_BYTES`, ``INVARIANTS_CACHE_MAX_MB``): past it, the
files used least recently go first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import json
import os
import re
import threading
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from .. import _config
from .._errors import InvariantsError
from .._paths import shown, write_atomic
from .._trust import read_regular, trusted_folder
from .record import json_problem

__all__ = [
    "DEFAULT_MAX_BYTES",
    "Outcome",
    "Store",
    "Tally",
    "default_folder",
    "digest",
    "folder_of",
    "from_settings",
    "max_bytes",
]

# A change of the record's shape or of what a key hashes moves every entry to a new folder.
SCHEMA = "v1"
DEFAULT_MAX_BYTES = 4 * 1024**3  # 454 catalog programs take ~150 MB; room for several releases
# What one key's compile was in this run: served from the cache, compiled, or not cached at all.
Outcome = Literal["hit", "miss", "off"]
# The folders of the layout, and the name of every file the store writes in them: nothing else there is
# read or deleted.
_SUBFOLDERS = ("results",)
_ENTRY = re.compile(r"[0-9a-f]{64}\.json\.gz")
# Bounds of one entry, far above any compile's (the catalog's 454 take a few MB in all): a planted or broken
# file is a miss, never a run's memory.
MAX_ENTRY_BYTES = 16 * 1024**2
MAX_JSON_BYTES = 64 * 1024**2
# What is wrong with an entry's table, in a few words, or None.
_Problem = Callable[[dict[str, object]], str | None]
_INSTEAD = "give a folder of your own with --cache-dir or INVARIANTS_CACHE_DIR, or --no-cache"


def default_folder() -> Path:
    """``$XDG_CACHE_HOME/jax-embedding-invariants/compiled`` (``~/.cache/...`` without it)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jax-embedding-invariants" / "compiled"


def from_settings(option: str | None = None, disabled: bool = False) -> Store | None:
    """The store a run asked for: ``--cache-dir`` (``option``), else ``INVARIANTS_CACHE_DIR``, else the
    default folder; None under ``--no-cache`` or ``INVARIANTS_NO_CACHE=1``."""
    off = _config.get("INVARIANTS_NO_CACHE", "")
    if off not in ("", "0", "1"):
        raise InvariantsError(f"INVARIANTS_NO_CACHE={off!r}: takes 1 (no compile cache) or 0")
    if disabled or off == "1":
        return None
    return Store(folder_of(option), max_bytes=max_bytes())


def folder_of(option: str | None = None) -> Path:
    """The cache's folder: ``option`` (``--cache-dir``), else ``INVARIANTS_CACHE_DIR``, else the default."""
    folder = option or _config.get("INVARIANTS_CACHE_DIR") or ""
    # Absolute once, here: a compile child runs in another folder and is handed this one.
    return Path(os.path.abspath(Path(folder).expanduser())) if folder else default_folder()


def max_bytes() -> int:
    """The size bound: ``INVARIANTS_CACHE_MAX_MB`` megabytes, else :data:`DEFAULT_MAX_BYTES`."""
    value = _config.get("INVARIANTS_CACHE_MAX_MB")
    if value is None or value == "":
        return DEFAULT_MAX_BYTES
    try:
        megabytes = int(value)
    except ValueError:
        megabytes = -1
    if megabytes < 1:
        raise InvariantsError(f"INVARIANTS_CACHE_MAX_MB={value!r}: takes a whole number of megabytes, >= 1")
    return megabytes * 1024**2


def digest(*parts: object) -> str:
    """The key of ``parts`` (JSON-able): sha256 of their canonical JSON."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class Store:
    """One cache folder, as one process reads and writes it (thread-safe: the compile threads share it).

    ``notes`` collects the one-line notes of entries that could not be read or written; a run shows them
    at its end. Nothing here raises on a bad entry: a cache is never a reason for a run to fail.
    """

    def __init__(self, folder: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.folder = folder
        self.root = folder / SCHEMA
        self.max_bytes = max_bytes
        self.notes: list[str] = []
        self._lock = threading.Lock()
        self._checked = False

    # ------------------------------------------------------------------------------------------- reading

    def result(self, key: str) -> dict[str, object] | None:
        """The record a result ``key`` compiled to (``Compiled.to_json``, checked), or None."""
        return self._read_json(self.root / "results" / f"{key}.json.gz", _result_problem)

    # ------------------------------------------------------------------------------------------- writing

    def put(self, result: str, record: Mapping[str, object]) -> None:
        """Keep ``record`` under ``result``. A write that fails is a note, never an error."""
        self._write(self.root / "results" / f"{result}.json.gz", _gz(record))

    # ------------------------------------------------------------------------------------- files on disk

    def _ready(self) -> bool:
        """Make the folder and its layout (owner-only) on first use, and check each level once: one that is
        another user's, that others may write, or a link below the folder is not used, since records
        planted there would pass for this user's compiles (:func:`invariants._trust.trusted_folder`)."""
        if self._checked:
            return True
        trusted_folder(
            self.folder, [f"{SCHEMA}/{sub}" for sub in _SUBFOLDERS], named="compile cache", instead=_INSTEAD
        )
        self._checked = True
        return True

    def check(self) -> None:
        """Raise the one line of a folder that cannot serve as the cache, before a run starts."""
        self._ready()

    def _read_json(self, path: Path, problem: _Problem) -> dict[str, object] | None:
        """The table entry ``path`` holds, once ``problem`` finds nothing wrong with it; None when there is
        none. A bad entry is a miss with one note, and is removed, so that it is never served again (a link
        or a pipe goes, never what it names)."""
        self._ready()
        try:
            data = _load(path)
            why = problem(data)
        except FileNotFoundError:
            return None
        except ValueError as err:
            why = str(err)
        if why is not None:
            self._note(path, why)
            with contextlib.suppress(OSError):
                os.unlink(path)
            return None
        with contextlib.suppress(OSError):  # used now: the last to be pruned
            os.utime(path)
        return data

    def _write(self, path: Path, data: bytes) -> None:
        try:
            self._ready()
            write_atomic(path, data)
        except OSError as err:
            self._note(path, f"not written ({err.strerror or err})")
        except InvariantsError as err:  # the writer's one line ends with the system's reason
            self._note(path, f"not written ({str(err).rsplit('(', 1)[-1]}")

    def _note(self, path: Path, why: str) -> None:
        line = f"compile cache: {shown(path)}: {why}; compiled again"
        with self._lock:
            if line not in self.notes:
                self.notes.append(line)

    # ------------------------------------------------------------------------------ the cache command

    def entries(self) -> list[Path]:
        """Every file of the store, oldest use first: the regular files of its
        own names in its own folders, never a link nor a file of another name."""
        self._ready()
        found = []
        for sub in _SUBFOLDERS:
            with contextlib.suppress(OSError), os.scandir(self.root / sub) as listing:
                found += [
                    Path(e.path)
                    for e in listing
                    if _ENTRY.fullmatch(e.name) and e.is_file(follow_symlinks=False)
                ]
        return sorted(found, key=_mtime)

    def size(self) -> int:
        return sum(_size(p) for p in self.entries())

    def prune(self, max_bytes: int | None = None) -> int:
        """Delete the least recently used files until the store is within ``max_bytes`` (default its bound),
        down to nine tenths of it so that the next run does not prune again; the number deleted. Another
        process pruning at once is harmless: a file already gone counts as deleted."""
        bound = self.max_bytes if max_bytes is None else max_bytes
        files = self.entries()
        total = sum(_size(p) for p in files)
        if total <= bound:
            return 0
        deleted = 0
        for path in files:
            if total <= bound * 0.9:
                break
            total -= _size(path)
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            deleted += 1
        return deleted

    def clear(self) -> int:
        """Delete every entry this store wrote (the files of its layout, nothing else); the number."""
        return self.prune(0) if self.entries() else 0

    def stats(self) -> dict[str, int]:
        counts = {sub: 0 for sub in _SUBFOLDERS}
        for p in self.entries():
            counts[p.parent.name] += 1
        return {**counts, "bytes": self.size()}


@dataclasses.dataclass
class Tally:
    """What one run's compiles were, by :data:`Outcome`, for the summary line."""

    counts: dict[str, int] = dataclasses.field(default_factory=dict)

    def add(self, outcome: Outcome) -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1

    def line(self, folder: Path | None) -> str | None:
        if not self.counts:
            return None
        if folder is None:
            return f"compile cache: off, {self.counts.get('off', 0)} compiled"
        hits, misses = self.counts.get("hit", 0), self.counts.get("miss", 0)
        return f"compile cache: {hits} hits, {misses} misses ({shown(folder)})"


def _load(path: Path) -> dict[str, object]:
    """The table an entry holds. Only a regular file is read, never through a link, never past
    :data:`MAX_ENTRY_BYTES` read or :data:`MAX_JSON_BYTES` inflated.

    Raises:
        FileNotFoundError: no entry there.
        ValueError: anything else that keeps it from being an entry, in a few words.
    """
    try:
        raw = read_regular(path, MAX_ENTRY_BYTES)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as err:
        raise ValueError(f"not a cache entry ({getattr(err, 'strerror', None) or err})") from None
    try:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        text = inflater.decompress(raw, MAX_JSON_BYTES + 1)
        if len(text) > MAX_JSON_BYTES:
            raise ValueError(f"inflates past {MAX_JSON_BYTES} bytes")
        if not inflater.eof or inflater.unused_data:
            raise ValueError("not one whole gzip member")
        data = json.loads(text)
    except (zlib.error, ValueError, RecursionError) as err:
        raise ValueError(f"not a cache entry ({str(err).splitlines()[0] if str(err) else err})") from None
    if not isinstance(data, dict):
        raise ValueError("not a cache entry (not a table)")
    return data


def _result_problem(data: dict[str, object]) -> str | None:
    why = json_problem(data)
    return None if why is None else f"not a compile's record ({why})"


def _gz(data: object) -> bytes:
    return gzip.compress(json.dumps(data, separators=(",", ":")).encode(), compresslevel=3, mtime=0)


def _mtime(path: Path) -> int:
    try:
        return path.lstat().st_mtime_ns
    except OSError:
        return 0


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0
