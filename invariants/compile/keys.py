"""The keys of the persistent compile cache (:mod:`invariants.compile.store`), and one session's use of it.

:class:`Fingerprint` is what a compile depends on besides its program: the compiler's identity, the
environment, JAX's configuration, the target and, for a CPU target, the host CPU. :class:`Persistent`
computes a program's recipe key before it is traced and its result key once it is lowered, and counts what
each key's compile was (:data:`~invariants.compile.store.Outcome`). What the keys leave out, and why, is
said in :mod:`invariants.compile.store`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from .. import _config
from ..catalog.programs import CATALOG, Program
from ..catalog.targets import _GPU_CONFIG_DIR, Target
from .record import Compiled, Key
from .store import Outcome, Store, Tally, digest

__all__ = ["Fingerprint", "Persistent", "callable_identity"]

# Environment variables that change what XLA, libtpu, the CUDA plugin or JAX's lowering produce. The
# gate's own variables do not, except the self-check's program swap, which replaces a program's code.
_ENV_PREFIXES = ("XLA_", "JAX_", "TPU_", "LIBTPU", "TF_", "CUDA", "NVIDIA_", "NCCL_", "PJRT_", "MEGASCALE",
                 "ENABLE_PJRT", "PTXAS", "LD_LIBRARY_PATH")  # fmt: skip
_ENV_NAMES = (_config.name("INVARIANTS_INJECT"),)
# The packages whose shared objects are the compiler: jaxlib (XLA:CPU and the runtime), libtpu, the CUDA
# plugin and the NVIDIA libraries it loads (ptxas, nvJitLink).
_COMPILER_PACKAGES = ("jaxlib", "libtpu", "jax_cuda12_plugin", "jax_cuda13_plugin", "jax_plugins", "nvidia")
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


class Fingerprint:
    """What a compile for a target depends on besides its module, as plain JSON-able data.

    The installed distributions, the compiler's files and each target's identity (its device
    description's bytes, the host CPU) are read once per instance (one per session): they do not change
    under a running process. The environment and JAX's configuration are read at each call, since a test
    or a conftest may change them between compiles.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._installed: dict[str, Any] | None = None
        self._targets: dict[str, dict[str, Any]] = {}

    def installed(self) -> dict[str, Any]:
        with self._lock:
            if self._installed is None:
                self._installed = {
                    "python": sys.version,
                    "platform": [sys.platform, platform.machine()],
                    "distributions": sorted(_name_version(d) for d in importlib.metadata.distributions()),
                    "compiler_files": _compiler_files(),
                }
            return self._installed

    def of(self, target: Target) -> dict[str, Any]:
        env = _compiling_environment()
        return {
            **self.installed(),
            "env": env,
            "jax_config": {k: _ADDRESS.sub("", repr(v)) for k, v in sorted(jax.config.values.items())},
            "target": self._target(target),
        }

    def _target(self, target: Target) -> dict[str, Any]:
        name = json.dumps(target_fields(target), sort_keys=True)
        with self._lock:
            known = self._targets.get(name)
        if known is None:
            known = target_identity(target)
            with self._lock:
                self._targets[name] = known
        return known


def _name_version(dist: importlib.metadata.Distribution) -> str:
    """``NAME==VERSION`` from the first lines of a distribution's metadata file, where the core metadata
    puts both as one-line fields. ``Distribution.metadata`` parses the whole file as an email message,
    description and all, for every installed distribution at every session's first compile; it is the
    fallback where a field is not among those lines."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():  # the end of the header: the description follows
            break
        name, sep, value = line.partition(":")
        if sep and name in ("Name", "Version"):
            fields.setdefault(name, value.strip())
    if len(fields) < 2 or not all(fields.values()):  # absent, or folded onto the next line
        return f"{dist.metadata['Name']}=={dist.version}"
    return f"{fields['Name']}=={fields['Version']}"


def _compiling_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of ``env`` (default this process's) that change compiles. This process's is read
    while pytest's own thread may set and unset others (``PYTEST_CURRENT_TEST``): a read that meets such a
    change is tried again."""
    for _ in range(100):
        try:
            items = (env if env is not None else os.environ).items()
            return {k: v for k, v in items if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES}
        except (KeyError, RuntimeError):
            continue
    raise RuntimeError("the environment kept changing while the compile cache read it")


def target_fields(target: Target) -> dict[str, Any]:
    """A target's own fields, as written: what names it before any device is asked for."""
    return {f.name: repr(getattr(target, f.name)) for f in dataclasses.fields(target)}


def target_identity(target: Target) -> dict[str, Any]:
    """A target as a compile sees it: its fields, a GPU's device description bytes, a runtime device's
    kind and platform version, and the host CPU a CPU compile's code follows."""
    out = target_fields(target)
    out["keeps_kernel_code"] = target.keeps_kernel_code
    if target.family == "gpu" and target.mode == "aot" and target.topology:
        path = _GPU_CONFIG_DIR / f"{target.topology}.txtpb"
        out["description"] = digest(path.read_text(encoding="utf-8")) if path.exists() else "missing"
    if target.mode != "aot":
        device = target.devices()[0]
        version = str(getattr(device.client, "platform_version", ""))
        out["device"] = [device.platform, device.device_kind, version]
    if target.family == "cpu":
        out["host_cpu"] = host_cpu()
    return out


def host_cpu() -> list[str]:
    """The host CPU's model and feature flags (XLA:CPU compiles for them: its LLVM IR follows them)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return [platform.processor(), platform.machine()]
    first = text.split("\n\n", 1)[0]
    fields = dict(line.split(":", 1) for line in first.splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    return [fields.get("model name", ""), fields.get("flags", fields.get("Features", ""))]


def _compiler_files() -> dict[str, str]:
    """Size and mtime of every shared object (and ptxas) of the compiler's packages, and of the ptxas on
    the PATH, which XLA:GPU runs."""
    out: dict[str, str] = {}
    roots = []
    for name in _COMPILER_PACKAGES:
        spec = importlib.util.find_spec(name)
        roots += [Path(p) for p in (spec.submodule_search_locations or [])] if spec is not None else []
    found = [p for root in roots for p in root.rglob("*") if ".so" in p.name or p.name == "ptxas"]
    which = shutil.which("ptxas")
    found += [Path(which)] if which else []
    for path in found:
        try:
            st = path.stat()
        except OSError:
            continue
        out[str(path)] = f"{st.st_size}:{st.st_mtime_ns}"
    return out


def callable_identity(fn: Any, depth: int = 0) -> Any:
    """What a function is, as far as a key can say without its code (the manifest holds the code): its
    module, name, file and line, and what it closes over, functions within functions included."""
    if depth > 4:
        return "..."
    if isinstance(fn, (str, int, float, bool, type(None))):
        return repr(fn)
    if isinstance(fn, (tuple, list)):
        return [callable_identity(v, depth + 1) for v in fn]
    inner = getattr(fn, "func", None)  # functools.partial
    if inner is not None and hasattr(fn, "args"):
        return {"partial": callable_identity(inner, depth + 1), "args": callable_identity(fn.args, depth + 1),
                "keywords": callable_identity(sorted(fn.keywords.items()), depth + 1)}  # fmt: skip
    wrapped = getattr(fn, "__wrapped__", None)
    code = getattr(fn, "__code__", None)
    if code is None:
        return {"type": f"{type(fn).__module__}.{type(fn).__qualname__}",
                "wrapped": callable_identity(wrapped, depth + 1) if wrapped is not None else None,
                "repr": _ADDRESS.sub("", repr(fn))[:200]}  # fmt: skip
    cells = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            value = None
        cells.append(_value_identity(value, depth + 1))
    return {
        "function": f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', '')}",
        "file": code.co_filename,
        "line": code.co_firstlineno,
        "code": digest(code.co_code.hex(), [repr(c) for c in code.co_consts if not hasattr(c, "co_code")]),
        "closure": cells,
        "defaults": callable_identity(list(getattr(fn, "__defaults__", None) or ()), depth + 1),
    }


def _value_identity(value: Any, depth: int) -> Any:
    """What a closed-over value is: a function's identity, a plain value itself, an array's bytes (a
    constant the program bakes in), else its type."""
    if callable(value) or isinstance(value, (str, int, float, bool, type(None), tuple, list)):
        return callable_identity(value, depth)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        try:
            data = np.asarray(value)
            return [str(data.shape), str(data.dtype), hashlib.sha256(data.tobytes()).hexdigest()]
        except Exception:  # an abstract value (a tracer, a ShapeDtypeStruct): its shape and dtype say it
            return [str(value.shape), str(value.dtype)]
    return f"{type(value).__module__}.{type(value).__qualname__}"


def _arguments(args: Sequence[Any]) -> list[str]:
    """Abstract arguments with their shardings and meshes (a mesh's device order included)."""
    out = []
    for a in args:
        sharding = getattr(a, "sharding", None)
        mesh = getattr(sharding, "mesh", None)
        ids = getattr(mesh, "device_ids", None)
        where = [repr(getattr(sharding, "spec", sharding)), repr(getattr(mesh, "shape", None)),
                 ids.tolist() if ids is not None else None]  # fmt: skip
        shape, dtype = str(getattr(a, "shape", "")), str(getattr(a, "dtype", ""))
        out.append(json.dumps([shape, dtype, where], default=str))
    return out


class Persistent:
    """One session's use of a store: its keys, its lookups and what each key's compile was.

    ``store`` None: no persistent cache (``--no-cache``), every compile counted ``off``.
    """

    def __init__(self, store: Store | None) -> None:
        self.store = store
        self.fingerprint = Fingerprint()
        self.tally = Tally()
        self._lock = threading.Lock()
        self.outcomes: dict[Key, Outcome] = {}
        self.recipes: dict[Key, str] = {}  # each key's recipe key, where it has one (a child says its own)

    def count(self, key: Key, outcome: Outcome) -> None:
        with self._lock:
            self.outcomes[key] = outcome
            self.tally.add(outcome)

    def recipe_key(
        self, program: Program, config: str, target: Target, args: Sequence[Any],
        jit_kwargs: Mapping[str, Any],
    ) -> str | None:  # fmt: skip
        """The key of ``program`` before it is traced; None where it cannot be said soundly (a program of
        this process that neither the catalog nor a spec file declares: a test's or a user's own)."""
        if self.store is None or not _named_soundly(program):
            return None
        recipe = digest(
            "recipe", [program.name, config, target.name], self.fingerprint.of(target), _arguments(args),
            sorted((k, repr(v)) for k, v in jit_kwargs.items()), callable_identity(program.fn),
            _declared(program),
            [program.kind, repr(program.layout), program.index_dtype, program.donate, program.logits],
        )  # fmt: skip
        with self._lock:
            self.recipes[Key(program.name, config, target.name)] = recipe
        return recipe

    def child_key(self, program: Program, config: str, target: Target, env: Mapping[str, str]) -> str | None:
        """The key under which this process finds the recipe a child process keyed ``program`` by, when it
        compiled it for ``target`` (a ``subprocess`` target) with ``env``: a warm run then starts no child.

        The child's recipe key follows from what it was given: this interpreter and its installed
        distributions and compiler files, its environment (the host-device flag and the project handed
        down included), the host CPU, the target, the program's name, configuration and declaration. Its
        code is not here: the recipe it leads to hits only while every module file the child had loaded
        still hashes the same (its manifest). None where the program has no recipe key."""
        if self.store is None or not _named_soundly(program):
            return None
        project = {k: v for k, v in env.items() if k.startswith(_config.name("INVARIANTS_PROJECT"))}
        return digest(
            "child", [program.name, config, target.name], sys.executable, self.fingerprint.installed(),
            _compiling_environment(env), project, target_fields(target), host_cpu(), _declared(program),
        )  # fmt: skip

    def from_child(self, key: Key, child: str | None) -> Compiled | None:
        """The record a child's recipe led to (``child``: :meth:`child_key`), or None (a miss)."""
        if self.store is None or child is None:
            return None
        return self.from_recipe(key, self.store.forward(child))

    def put_child(self, child: str | None, recipe: str | None) -> None:
        """Keep ``child`` (:meth:`child_key`) pointing at the recipe the child keyed its compile by."""
        if self.store is not None and child is not None and recipe is not None:
            self.store.put_forward(child, recipe)

    def result_key(self, lowered_text: str, target: Target, args: Sequence[Any]) -> str:
        return digest("result", lowered_text, self.fingerprint.of(target), _arguments(args))

    def from_recipe(self, key: Key, recipe: str | None) -> Compiled | None:
        """The record a recipe led to, under this key's names, or None (a miss, or no store)."""
        if self.store is None or recipe is None:
            return None
        found = self.store.recipe(recipe)
        if found is None:
            return None
        result, traced = found
        record = self.store.result(result)
        return _named(record, key, traced) if record is not None else None

    def from_result(self, key: Key, result: str, traced: Mapping[str, Any]) -> Compiled | None:
        if self.store is None:
            return None
        record = self.store.result(result)
        return _named(record, key, traced) if record is not None else None

    def put(self, recipe: str | None, result: str, compiled: Compiled, record: bool = True) -> None:
        """Keep ``compiled`` under ``result`` (``record`` False: it is there already) and ``recipe``
        pointing at it with its own trace."""
        if self.store is not None:
            traced = {"jaxpr": compiled.jaxpr, "jaxpr_primitives": list(compiled.jaxpr_primitives)}
            self.store.put(recipe, result, compiled.to_json() if record else None, traced)

    def summary(self) -> str | None:
        return self.tally.line(self.store.folder if self.store is not None else None)


def _named_soundly(program: Program) -> bool:
    """Whether ``program``'s name says what it is: the catalog's, or declared by a spec file. A program of
    this process that neither names (a test's or a user's own) has no recipe key."""
    return program.declaration is not None or CATALOG.get(program.name) is program


def _declared(program: Program) -> dict[str, Any] | None:
    """A declared program's declaration, without where it was declared (FILE:LINE changes nothing it
    compiles to)."""
    if program.declaration is None:
        return None
    return {k: v for k, v in dataclasses.asdict(program.declaration).items() if not k.endswith("where")}


def _named(record: Mapping[str, Any], key: Key, traced: Mapping[str, Any]) -> Compiled | None:
    """A stored record as this key's: two programs that lower to one module share a result, each with its
    own names and jaxpr. A record this release cannot read is a miss."""
    try:
        return Compiled.from_json(
            {**record, "program": key.program, "config": key.config, "target": key.target, **traced}
        )
    except (TypeError, KeyError, ValueError):
        return None
