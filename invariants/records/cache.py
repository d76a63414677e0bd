"""The persistent compile cache: compile records kept on disk between runs, so that a gate run with nothing
changed compiles nothing (no JAX; the keys are :mod:`invariants.compile.keys`'s).

Layout: ``v1/results/<key>.json.gz``, each written whole or not at all, so xdist workers and CI jobs may
share one folder. Every level is this user's own and writable by no one else; an entry is read only as a
bounded regular file with the fields and types of a record. Anything else is a miss with one line, removed.
Past the size bound, the files used least recently go first. A cache is never a reason for a run to fail.
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
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from .. import _config
from .._errors import InvariantsError
from .._paths import shown, write_atomic
from .._trust import read_regular, trusted_folder
from .compiled import json_problem

# A change of the record's shape or of what a key hashes moves every entry to a new folder.
SCHEMA = "v1"
DEFAULT_MAX_BYTES = 4 * 1024**3  # 454 catalog programs take ~150 MB; room for several releases
# What one key's compile was in this run: served from the cache, compiled, or not cached at all.
Outcome = Literal["hit", "miss", "off"]
# The name of every file the store writes: nothing else is read or deleted.
_ENTRY = re.compile(r"[0-9a-f]{64}\.json\.gz")
# Far above any compile's: a planted or broken file is a miss, never a run's memory.
MAX_ENTRY_BYTES = 16 * 1024**2
MAX_JSON_BYTES = 64 * 1024**2
_INSTEAD = "give a folder of your own with --cache-dir or INVARIANTS_CACHE_DIR, or --no-cache"


def default_folder() -> Path:
    """``$XDG_CACHE_HOME/jax-embedding-invariants/compiled`` (``~/.cache/...`` without it)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jax-embedding-invariants" / "compiled"


def from_settings(option: str | None = None, disabled: bool = False) -> Store | None:
    """The store a run asked for; None under ``--no-cache`` or ``INVARIANTS_NO_CACHE=1``."""
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
    value = _config.get("INVARIANTS_CACHE_MAX_MB")
    if not value:
        return DEFAULT_MAX_BYTES
    with contextlib.suppress(ValueError):
        if (megabytes := int(value)) >= 1:
            return megabytes * 1024**2
    raise InvariantsError(f"INVARIANTS_CACHE_MAX_MB={value!r}: takes a whole number of megabytes, >= 1")


def digest(*parts: object) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class Store:
    """One cache folder, as one process's compile threads share it. ``notes``: the one-line notes of
    entries that could not be read or written, shown at the run's end."""

    def __init__(self, folder: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.folder = folder
        self.root = folder / SCHEMA
        self.max_bytes = max_bytes
        self.notes: list[str] = []
        self._lock = threading.Lock()
        self._checked = False

    def result(self, key: str) -> dict[str, object] | None:
        """The record kept under ``key``, once checked. A bad entry is a miss with one note, and is removed
        (a link goes, never what it names)."""
        path = self.root / "results" / f"{key}.json.gz"
        self.check()
        try:
            data = _load(path)
            why = json_problem(data)
            why = None if why is None else f"not a compile's record ({why})"
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

    def put(self, result: str, record: Mapping[str, object]) -> None:
        self._write(self.root / "results" / f"{result}.json.gz", _gz(record))

    def check(self) -> None:
        """Make the folder's layout on first use and check each level once: records planted in a folder
        another user can write would pass for this user's compiles. One line when it cannot serve."""
        if not self._checked:
            trusted_folder(self.folder, [f"{SCHEMA}/results"], named="compile cache", instead=_INSTEAD)
            self._checked = True

    def _write(self, path: Path, data: bytes) -> None:
        try:
            self.check()
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

    def entries(self) -> list[Path]:
        """Every file of the store, oldest use first: regular files of its own names, never a link."""
        self.check()
        found: list[Path] = []
        with contextlib.suppress(OSError), os.scandir(self.root / "results") as listing:
            found = [
                Path(e.path) for e in listing if _ENTRY.fullmatch(e.name) and e.is_file(follow_symlinks=False)
            ]
        return sorted(found, key=lambda p: _stat(p, "st_mtime_ns"))

    def size(self) -> int:
        return sum(_stat(p, "st_size") for p in self.entries())

    def stats(self) -> dict[str, int]:
        return {"results": len(self.entries()), "bytes": self.size()}

    def prune(self, max_bytes: int | None = None) -> int:
        """Delete the least recently used files until the store is within nine tenths of ``max_bytes``
        (default its bound), so the next run does not prune again; the number deleted."""
        bound = self.max_bytes if max_bytes is None else max_bytes
        files = self.entries()
        total = sum(_stat(p, "st_size") for p in files)
        if total <= bound:
            return 0
        deleted = 0
        for path in files:
            if total <= bound * 0.9:
                break
            total -= _stat(path, "st_size")
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            deleted += 1
        return deleted

    def clear(self) -> int:
        return self.prune(0) if self.entries() else 0


@dataclasses.dataclass
class Tally:
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
    """The table an entry holds, read bounded; FileNotFoundError, or ValueError with why it is not one."""
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


def _gz(data: object) -> bytes:
    return gzip.compress(json.dumps(data, separators=(",", ":")).encode(), compresslevel=3, mtime=0)


def _stat(path: Path, field: str) -> int:
    try:
        return int(getattr(path.lstat(), field))
    except OSError:
        return 0
