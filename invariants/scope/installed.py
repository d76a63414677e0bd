"""What is installed that decides what a program compiles to, read from the distributions' metadata (no JAX).

Two parts: the compiler (JAX's lowering, XLA in jaxlib, libtpu, each JAX plugin and the CUDA tools it runs),
named by its distributions' versions and built by its shared objects; and the distributions whose modules a
traced program ran. Nothing else installed beside them (a linter, tox, an unrelated package) is named: it
changes no compile, and naming it would empty the compile cache at every install.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import importlib.metadata
import importlib.util
import os
import shutil
import sys
import threading
import types
from collections.abc import Iterable, Mapping
from pathlib import Path

from packaging.utils import canonicalize_name

# The compiler's import packages; a JAX plugin named by the jax_plugins entry points is one too.
COMPILER_PACKAGES = (
    "jax", "jaxlib", "libtpu", "jax_cuda12_plugin", "jax_cuda13_plugin", "jax_plugins", "nvidia",
)  # fmt: skip


class Installed:
    """One reading of what is installed (a session's: what is installed during a run, the next run reads).
    Safe to share between the threads that compile."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owners: Mapping[str, list[str]] | None = None
        self._versions: dict[str, str] = {}
        self._modules: dict[str, str] = {}  # a module's file -> its top-level package
        self._modules_seen = -1

    def compiler(self) -> list[str]:
        """``NAME==VERSION`` of each distribution that installs a compiler package."""
        return self.distributions(compiler_packages())

    def distributions(self, packages: Iterable[str]) -> list[str]:
        """``NAME==VERSION`` of each distribution that installs one of the top-level ``packages``, sorted."""
        owners = self._packages()
        names = {name for package in packages for name in owners.get(package, ())}
        return sorted(self._version(name) for name in names)

    def of_files(self, files: Iterable[str]) -> list[str]:
        """``NAME==VERSION`` of each distribution that installs a loaded module of ``files`` (a file of no
        loaded module, or of none installed, names nothing: its code is in the lowered module anyway)."""
        files = set(files)
        with self._lock:
            if not files <= self._modules.keys() and len(sys.modules) != self._modules_seen:
                self._modules_seen = len(sys.modules)
                for name, module in list(sys.modules.items()):
                    file = getattr(module, "__file__", None)
                    if isinstance(file, str):
                        self._modules.setdefault(file, name.partition(".")[0])
            packages = {self._modules[f] for f in files if f in self._modules}
        return self.distributions(packages)

    def _packages(self) -> Mapping[str, list[str]]:
        with self._lock:
            if self._owners is None:
                self._owners = _owners(installed_set())
            return self._owners

    def _version(self, name: str) -> str:
        with self._lock:
            known = self._versions.get(name)
        if known is None:
            try:
                known = name_version(importlib.metadata.distribution(name))
            except importlib.metadata.PackageNotFoundError:  # its metadata removed under a running process
                known = f"{name}==?"
            with self._lock:
                self._versions[name] = known
        return known


def installed_set() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """What installing, upgrading or removing a distribution changes: each folder of the import path with
    the metadata folders of the distributions it holds (a version is in their names)."""
    out = []
    for entry in sys.path:
        try:
            names = tuple(
                sorted(n for n in os.listdir(entry or ".") if n.endswith((".dist-info", ".egg-info")))
            )
        except OSError:  # no folder: a zip, a path hook's name, or gone
            names = ()
        out.append((entry, names))
    return tuple(out)


@functools.lru_cache(maxsize=1)
def _owners(installed: tuple[tuple[str, tuple[str, ...]], ...]) -> Mapping[str, list[str]]:
    """:func:`packages_distributions` of one set of installed distributions (``installed``)."""
    return types.MappingProxyType(packages_distributions())


@functools.lru_cache(maxsize=1)
def _plugin_packages(installed: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple[str, ...]:
    """The top-level package of each ``jax_plugins`` entry point of one set of installed distributions."""
    entries = importlib.metadata.entry_points(group="jax_plugins")
    return tuple(e.value.partition(":")[0].partition(".")[0] for e in entries)


def packages_distributions() -> dict[str, list[str]]:
    """``importlib.metadata.packages_distributions()``, read as a gate run can afford at its start: each
    distribution's name from its metadata's header (not the whole file parsed), and the packages it installs
    from its ``top_level.txt`` or else the first folder of each ``.py`` file its RECORD lists (not a path
    object made for every file it installs)."""
    owners: dict[str, list[str]] = {}
    for dist in importlib.metadata.distributions():
        declared = (dist.read_text("top_level.txt") or "").split()
        packages = declared or _top_level_inferred(dist)
        if packages:
            name = _header(dist).get("Name") or dist.metadata["Name"]
            for package in packages:
                owners.setdefault(package, []).append(name)
    return owners


def _top_level_inferred(dist: importlib.metadata.Distribution) -> set[str]:
    """The first folder of each ``.py`` file ``dist`` installs (a module's own name at the top level)."""
    record = dist.read_text("RECORD")
    if record is None:  # an egg's file list, or none
        paths = [str(f) for f in dist.files or () if f.suffix == ".py"]
    else:
        paths = [row[0] for row in csv.reader(record.splitlines()) if row and row[0].endswith(".py")]
    return {p.split("/", 1)[0] if "/" in p else p.removesuffix(".py") for p in paths if p != ".py"}


def _header(dist: importlib.metadata.Distribution) -> dict[str, str]:
    """``Name`` and ``Version`` from the header of a distribution's metadata file (empty where absent, or
    folded onto the next line)."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():  # the end of the header: the description follows
            break
        name, sep, value = line.partition(":")
        if sep and name in ("Name", "Version") and value.strip():
            fields.setdefault(name, value.strip())
    return fields


def compiler_packages() -> list[str]:
    """:data:`COMPILER_PACKAGES` and the top-level package of each ``jax_plugins`` entry point."""
    return list(dict.fromkeys([*COMPILER_PACKAGES, *_plugin_packages(installed_set())]))


def name_version(dist: importlib.metadata.Distribution) -> str:
    """``NAME==VERSION`` from the header of a distribution's metadata file; ``Distribution.metadata``, which
    parses the whole file, is the slow fallback."""
    fields = _header(dist)
    if len(fields) < 2:
        return f"{dist.metadata['Name']}=={dist.version}"
    return f"{fields['Name']}=={fields['Version']}"


def compiler_files() -> dict[str, str]:
    """What builds each shared object and ptxas of the compiler's packages, and the PATH's ptxas (a build
    that keeps its version, a nightly or a local build, is another compiler), as :func:`_identity` names
    it."""
    recorded = _recorded(installed_set())
    out: dict[str, str] = {}
    for path in _compiler_paths():
        with contextlib.suppress(OSError):
            name, value = _identity(str(path), recorded)
            out[name] = value
    return out


def library_identity(path: str) -> str:
    """A compiler library named by its path (``TPU_LIBRARY_PATH``, which JAX sets to the libtpu it found),
    as :func:`_identity` names it; a path that names no file, as it is."""
    try:
        return ":".join(_identity(path, _recorded(installed_set())))
    except OSError:
        return path


def _identity(path: str, recorded: Mapping[str, tuple[str, str, int, int]]) -> tuple[str, str]:
    """A compiler file's name and value in the key. As its installer wrote it: its path in its
    distribution's RECORD, its size and the hash the RECORD gives it, the same in every environment that
    installs that wheel (a CI job's fresh one included). Any other file (none recorded, a size that is not
    the recorded one, or written after its RECORD): its own path, size and mtime."""
    st = os.stat(path)
    entry = recorded.get(os.path.normpath(path))
    if entry is not None and entry[2] == st.st_size and st.st_mtime_ns <= entry[3]:
        return entry[0], f"{st.st_size}:{entry[1]}"
    return path, f"{st.st_size}:{st.st_mtime_ns}"


def _recorded(installed: tuple[tuple[str, tuple[str, ...]], ...]) -> dict[str, tuple[str, str, int, int]]:
    """Each shared object and ptxas that a compiler distribution's RECORD lists with a hash, by its path:
    its path in the RECORD, its hash, its size, and the mtime of that RECORD (read now: an install over the
    same version writes a new one)."""
    owners = _owners(installed)
    wanted = {canonicalize_name(n) for package in compiler_packages() for n in owners.get(package, ())}
    out: dict[str, tuple[str, str, int, int]] = {}
    for entry, folders in installed:
        for folder in folders:
            name = folder.removesuffix(".dist-info").rpartition("-")[0]
            if not (folder.endswith(".dist-info") and canonicalize_name(name) in wanted):
                continue
            record = os.path.join(entry or ".", folder, "RECORD")
            with contextlib.suppress(OSError, ValueError):
                st = os.stat(record)
                for file, digest, size in _record_rows(record, st.st_mtime_ns, st.st_size):
                    where = os.path.normpath(os.path.join(entry or ".", file))
                    out[where] = (file, digest, size, st.st_mtime_ns)
    return out


@functools.lru_cache(maxsize=64)
def _record_rows(record: str, mtime_ns: int, size: int) -> tuple[tuple[str, str, int], ...]:
    """The shared objects and ptxas a RECORD file lists with a hash and a size, for one reading of it."""
    with open(record, newline="") as f:
        rows = list(csv.reader(f))
    return tuple(
        (row[0], row[1], int(row[2]))
        for row in rows
        if len(row) == 3 and row[1] and row[2].isdigit() and (".so" in row[0] or row[0].endswith("ptxas"))
    )


def _compiler_paths() -> list[Path]:
    which = shutil.which("ptxas")
    return [*_shared_objects(installed_set()), *([Path(which)] if which else [])]


@functools.lru_cache(maxsize=1)
def _shared_objects(installed: tuple[tuple[str, tuple[str, ...]], ...]) -> tuple[Path, ...]:
    """Every shared object and ptxas in the compiler's packages, for one set of installed distributions (a
    build installed over another of its version rewrites them: :func:`compiler_files` reads each anew)."""
    roots = []
    for name in compiler_packages():
        spec = importlib.util.find_spec(name)
        roots += [Path(p) for p in (spec.submodule_search_locations or [])] if spec is not None else []
    return tuple(
        Path(folder, name)
        for root in roots
        for folder, _, names in os.walk(root)
        for name in names
        if ".so" in name or name == "ptxas"
    )
