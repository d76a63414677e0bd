"""The persistent compile cache: :class:`~invariants.compile.record.Compiled` records kept on disk between
runs, so that a gate run with nothing changed compiles nothing (no JAX here: the keys come from
:mod:`invariants.compile.keys`, which says what they hold and why).

Layout of the folder, ``v1/`` below it: ``results/<key>.json.gz`` (a record). Every file is written
whole or not at all (a temporary file renamed onto its name), so xdist workers and two CI jobs may share
one folder. A file that cannot be read is a miss with one line, and is written again. The folder has a
size bound (:data:`DEFAULT_MAX_BYTES`, ``INVARIANTS_CACHE_MAX_MB``): past it, the files used least
recently go first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gzip
import hashlib
import json
import os
import sys
import sysconfig
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from .. import _config
from .._errors import InvariantsError
from .._paths import shown, write_atomic

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
_SHARED_OBJECT = (".so", ".pyd", ".dylib")
# A module file's digest under its path, size and mtime: a fact about the file, which every session of the
# process may read (pytester's runs and the pytest API's compiles each start a store, and each would hash
# every loaded module again: thousands of files in a test suite's process). A file that changes gets
# another size or mtime, so another entry.
_DIGESTS: dict[tuple[str, int, int], str] = {}
_DIGESTS_LOCK = threading.Lock()


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
    return Path(folder).expanduser() if folder else default_folder()


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


def digest(*parts: Any) -> str:
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
        self._manifests_ok: dict[str, bool] = {}
        self._current: tuple[int, str] | None = None
        self._checked = False

    # ------------------------------------------------------------------------------------------- reading

    def recipe(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """What a recipe ``key`` led to, when every file of its manifest is unchanged: the result key and
        what the trace gave (``jaxpr``, ``jaxpr_primitives``: two programs may lower to one result)."""
        data = self._read_json(self.root / "recipes" / f"{key}.json.gz", compressed=True)
        if not isinstance(data, dict) or not isinstance(data.get("result"), str):
            return None
        if not isinstance(data.get("traced"), dict):
            return None
        if not self._manifest_holds(str(data.get("manifest", ""))):
            return None
        return data["result"], data["traced"]

    def forward(self, key: str) -> str | None:
        """The recipe key a child process's compile was keyed by, kept by its parent under ``key``."""
        data = self._read_json(self.root / "recipes" / f"{key}.json.gz", compressed=True)
        found = data.get("forward") if isinstance(data, dict) else None
        return found if isinstance(found, str) else None

    def result(self, key: str) -> dict[str, Any] | None:
        """The record a result ``key`` compiled to (``Compiled.to_json``), or None."""
        data = self._read_json(self.root / "results" / f"{key}.json.gz", compressed=True)
        return data if isinstance(data, dict) else None

    # ------------------------------------------------------------------------------------------- writing

    def put(
        self, recipe: str | None, result: str, record: Mapping[str, Any] | None, traced: Mapping[str, Any]
    ) -> None:
        """Keep ``record`` under ``result`` (None: it is there), and ``recipe`` (None: a program with no
        recipe key) pointing at it, with what its trace gave, under the manifest of the modules loaded now.
        A write that fails is a note, never an error."""
        if record is not None:
            self._write(self.root / "results" / f"{result}.json.gz", _gz(record))
        if recipe is not None:
            manifest = self._manifest_now()
            self._write(self.root / "recipes" / f"{recipe}.json.gz",
                        _gz({"manifest": manifest, "result": result, "traced": dict(traced)}))  # fmt: skip

    def put_forward(self, key: str, recipe: str) -> None:
        """Keep ``key`` (a parent's key of a child's compile) pointing at the child's ``recipe``."""
        self._write(self.root / "recipes" / f"{key}.json.gz", _gz({"forward": recipe}))

    def _manifest_now(self) -> str:
        """The hash of the manifest of the modules loaded now, written once per distinct manifest."""
        # A module imported since the last manifest changes the count; the common case costs one len().
        loaded = len(sys.modules)
        with self._lock:
            current = self._current
        if current is not None and current[0] == loaded:
            return current[1]
        files = _module_files()
        manifest = {path: self._file_digest(path) for path in files}
        manifest = {p: d for p, d in manifest.items() if d}
        name = digest(sorted(manifest.items()))
        path = self.root / "manifests" / f"{name}.json.gz"
        if not path.exists():
            self._write(path, _gz(manifest))
        with self._lock:
            self._current = (loaded, name)
            self._manifests_ok[name] = True
        return name

    def _manifest_holds(self, name: str) -> bool:
        with self._lock:
            known = self._manifests_ok.get(name)
        if known is not None:
            return known
        path = self.root / "manifests" / f"{name}.json.gz"
        manifest = self._read_json(path, compressed=True) if name else None
        holds = isinstance(manifest, dict) and all(self._file_digest(p) == d for p, d in manifest.items())
        with self._lock:
            self._manifests_ok[name] = holds
        return holds

    def _file_digest(self, path: str) -> str:
        """A module file's identity: its content's sha256, or a shared object's size and mtime (what
        ccache takes of a compiler). '' when it is gone."""
        try:
            st = os.stat(path)
        except OSError:
            return ""
        memo = (path, st.st_size, st.st_mtime_ns)
        with _DIGESTS_LOCK:
            known = _DIGESTS.get(memo)
        if known is not None:
            return known
        if path.endswith(_SHARED_OBJECT):
            found = f"size={st.st_size},mtime={st.st_mtime_ns}"
        else:
            try:
                found = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            except OSError:
                return ""
        with _DIGESTS_LOCK:
            _DIGESTS[memo] = found
        return found

    # ------------------------------------------------------------------------------------- files on disk

    def _ready(self) -> bool:
        """Make the folder (owner-only) on first use; one that is another user's, or that others may write,
        is not used: records planted there would pass for this user's compiles."""
        if self._checked:
            return True
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            st = self.folder.stat()
        except OSError as err:
            raise InvariantsError(
                f"compile cache {shown(self.folder)}: cannot be made ({err.strerror or err}); give another "
                "with --cache-dir or INVARIANTS_CACHE_DIR, or --no-cache"
            ) from None
        if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
            raise InvariantsError(
                f"compile cache {shown(self.folder)}: owned by another user or writable by others, so its "
                "records cannot be trusted; give a folder of your own with --cache-dir, or --no-cache"
            )
        self._checked = True
        return True

    def check(self) -> None:
        """Raise the one line of a folder that cannot serve as the cache, before a run starts."""
        self._ready()

    def _read_json(self, path: Path, compressed: bool) -> Any:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            self._note(path, err.strerror or str(err))
            return None
        try:
            data = json.loads(gzip.decompress(raw) if compressed else raw)
        except (OSError, EOFError, ValueError) as err:
            self._note(path, f"not a cache entry ({str(err).splitlines()[0] if str(err) else err})")
            return None
        with contextlib.suppress(OSError):  # used now: the last to be pruned
            os.utime(path)
        return data

    def _write(self, path: Path, data: bytes) -> None:
        try:
            self._ready()
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_atomic(path, data)
        except OSError as err:
            self._note(path, f"not written ({err.strerror or err})")
        except InvariantsError as err:  # the writer's one line ends with the system's reason
            self._note(path, f"not written ({str(err).rsplit('(', 1)[-1]}")

    def _note(self, path: Path, why: str) -> None:
        line = f"compile cache: {shown(path)}: {why}; compiled again"
        with self._lock:
            if line not in self.notes:  # a recipe and its result read the same entry
                self.notes.append(line)

    # ------------------------------------------------------------------------------ the cache command

    def entries(self) -> list[Path]:
        """Every file of the store (results, recipes, manifests), oldest use first."""
        found = []
        for sub in ("results", "recipes", "manifests"):
            with contextlib.suppress(OSError):
                found += [p for p in (self.root / sub).iterdir() if p.is_file() and p.name[0] != "."]
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
        counts = {sub: 0 for sub in ("results", "recipes", "manifests")}
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


def _gz(data: Any) -> bytes:
    return gzip.compress(json.dumps(data, separators=(",", ":")).encode(), compresslevel=3, mtime=0)


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


_STDLIB = tuple(
    str(Path(p).resolve()) + os.sep
    for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
)


@functools.cache
def _real(path: str) -> str:
    """A module file's real path, resolved once per process (a pure memo: the files do not move)."""
    return os.path.realpath(path)


def _module_files() -> list[str]:
    """The files of every loaded module outside the standard library (whose version the key holds)."""
    out = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not path:
            continue
        path = _real(path)
        if path.startswith(_STDLIB) and "site-packages" not in path:
            continue
        out.add(path)
    return sorted(out)
