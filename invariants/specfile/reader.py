"""Spec files: what must hold on a target family, in TOML a reviewer reads without opening Python.

One file per target family (``invariants/cpu.toml``, ``tpu.toml``, ``gpu.toml``). docs/specs.md describes
the format, and docs/downstream.md a project's ``[[program]]`` tables::

    [spec]
    targets = ["tpu-*"]            # fnmatch patterns over target names this file applies to

    [[invariant]]
    id = "no_while"                # unique in the file; part of the pytest id
    programs = ["kind:forward"]    # names, fnmatch patterns, "kind:K" or "tag:T"; omit for relational
    assert = "while_loops == 0"    # one comparison, parsed once by invariants.specfile.asserts
    why = "a lookup is one gather; a loop is the seed's pathology"

A declared program compiles on the targets its spec files name (the ``[spec] targets`` of the file that
declares it and of every file whose entries name it), whatever the target's scope, and nowhere else.

Every mistake is one line ``FILE:LINE: what is wrong``, with the closest valid name, raised as
:class:`~invariants._errors.InvariantsError`; a file that declares nothing is one too (it would replace the
package's specs with none, in silence). What needs the targets to be found wrong (a pattern that matches no
target, an invariant that makes no item) is checked by :func:`invariants.verdict.checks.check_specs`: this
stage knows no target. Each file is read and parsed once, and its lines are located in one pass
(:class:`_Locator`): loading is linear in the file (``python benchmarks/spec_load.py``).
"""

from __future__ import annotations

import bisect
import dataclasses
import fnmatch
import functools
import re
import tomllib
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard, TypeVar

from packaging.requirements import InvalidRequirement, Requirement

from .._errors import InvariantsError, did_you_mean, first_line, non_ascii
from .._paths import IMPORTED_DIR, shown, what_is
from ..scope.configs import CONFIGS, DISTRIBUTIONS
from ..scope.select import CATALOG_PREFIX, Selectable, bare, match_programs, run_name
from . import asserts
from .asserts import InvariantKind

# A TOML table as tomllib reads it: each value's type is checked where it is read, in one line when wrong.
Table = dict[str, Any]

SPEC_DIR = IMPORTED_DIR
# The [[correctness]] checks and the values each one's ``expect`` may take (none: it takes no ``expect``).
# The spec file owns the vocabulary; invariants.verdict.correctness implements it.
CORRECTNESS_EXPECT: dict[str, tuple[str, ...]] = {
    "agree": (),
    "out_of_bounds": ("clamp", "fill_nan", "fill_zero", "wrap", "wrap_negative_clamp"),
    "narrow_index": ("ok", "overflow_error", "wrong_rows"),
}
CORRECTNESS_CHECKS = tuple(CORRECTNESS_EXPECT)
VERSIONED_PACKAGES = ("jax", "jaxlib", "libtpu", "equinox")

_ENTRY_KEYS = ("id", "programs", "configs", "targets", "why", "when")
_INVARIANT_KEYS = (*_ENTRY_KEYS, "assert", "ratchet")
_CORRECTNESS_KEYS = (*_ENTRY_KEYS, "check", "reference", "distributions", "expect")
_RATCHET_KEYS = ("reason", "issue")
_KNOWN_FAILURE_KEYS = ("id", "programs", "configs", "targets", "ratchet")
# The keys only a program with params takes: what its factory's model has beside a lookup's one table.
_PARAMS_ONLY = ("index_shape", "inputs", "donate", "vocab", "tables")
_MESH_ONLY = ("axis_types", "table_sharding", "index_sharding")
_DECLARED = (
    "name", "function", "kind", "configs", "tags", "doc", "params", "arguments", "index_dtype", "efficiency"
)  # fmt: skip
_PROGRAM_KEYS = (*_DECLARED, "mesh", *_PARAMS_ONLY, *_MESH_ONLY)
INDEX_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
AXIS_TYPES = ("auto", "explicit")
PROGRAM_KINDS = ("forward", "backward", "train", "step")
# What a program with ``arguments`` takes none of: its factory gives every argument.
_NOT_WITH_ARGUMENTS = ("params", "index_shape", "inputs", "vocab", "tables", "index_dtype", "table_sharding")
_TOP_KEYS = ("spec", "invariant", "correctness", "program", "known_compile_failure")
_SPEC_KEYS = ("targets", "efficiency_max_loss")
# A program's name names its files (snapshots, dumps: NAME.CONFIG.hlo.txt), and a file name is at most 255
# bytes: the name stays well below, with room for the configuration and the suffix.
MAX_NAME = 100
# A reason (``why``) is shown in failures and reports: past this it is cut, and the cut said.
MAX_TEXT = 2000
# A spec file is text a reviewer reads: past this it is refused before it is parsed.
MAX_SPEC_BYTES = 16 * 1024 * 1024
# Enough for [batch, sequence] and a few more axes; past this it is not an embedding's index array.
_MAX_INDEX_RANK = 4


@dataclasses.dataclass(frozen=True)
class Ratchet:
    reason: str
    issue: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Entry:
    """What every entry has. ``where`` is ``FILE:LINE`` of its table, ``lines`` the line of each selector
    key written; ``targets`` narrows the file's, so that one file states a fact on every GPU and its
    known-bad exception on two of them."""

    id: str
    where: str
    programs: tuple[str, ...]  # selectors; for relational/throughput: the programs the assert names
    configs: tuple[str, ...]
    targets: tuple[str, ...] = ("*",)
    lines: tuple[tuple[str, int], ...] = ()
    why: str = ""
    when: tuple[Requirement, ...] = ()

    def where_of(self, key: str) -> str:
        """``FILE:LINE`` of ``key`` in this entry's table (of the table when the key is not written)."""
        line = dict(self.lines).get(key)
        return self.where if line is None else f"{self.where.rsplit(':', 1)[0]}:{line}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Invariant(Entry):
    assertion: asserts.Assertion
    ratchet: Ratchet | None

    @property
    def text(self) -> str:
        return self.assertion.text

    @property
    def kind(self) -> InvariantKind:
        return self.assertion.kind


@dataclasses.dataclass(frozen=True, kw_only=True)
class KnownCompileFailure(Entry):
    """Programs that fail to compile on some targets today: their items xfail with the ratchet's reason."""

    ratchet: Ratchet


@dataclasses.dataclass(frozen=True, kw_only=True)
class CorrectnessCheck(Entry):
    check: str
    reference: str | None
    distributions: tuple[str, ...]
    expect: str | None

    @property
    def targets_where(self) -> str:
        return self.where_of("targets")


@dataclasses.dataclass(frozen=True)
class ProgramDecl:
    """One ``[[program]]``, which :func:`invariants.catalog.downstream.build` imports. ``tags`` always holds
    ``user``; ``aimed`` is the ``[spec] targets`` of the files that declare or name it."""

    name: str
    function: str  # "module:attribute"
    kind: str
    configs: tuple[str, ...]
    tags: frozenset[str]
    doc: str
    where: str
    params: str | None = None  # "module:factory": a program of (params, indices), not (table, indices)
    arguments: str | None = None  # "module:factory": a program of whatever arguments the factory gives
    index_shape: tuple[int, ...] | None = None
    index_dtype: str | None = None
    aimed: tuple[str, ...] = ()
    params_where: str = ""
    inputs: str | None = None
    vocab: int | None = None
    tables: tuple[str, ...] = ()
    donate: bool = False
    inputs_where: str = ""
    tables_where: str = ""
    arguments_where: str = ""
    # A PartitionSpec entry of None ("" in TOML) replicates that dimension.
    mesh: tuple[tuple[str, int], ...] | None = None
    axis_types: str = "auto"
    table_sharding: tuple[str | None, ...] | None = None
    index_sharding: tuple[str | None, ...] | None = None
    efficiency: bool | None = None  # None: when it is ``lookup_shaped``

    @property
    def lookup_shaped(self) -> bool:
        """A lookup of the configuration's table that is not a train step: its time is mostly moving the
        rows it gathers or scatters, so a copy of those bytes is a fair reference."""
        return self.params is None and self.arguments is None and self.kind != "train"

    @property
    def signature(self) -> tuple[object, ...] | None:
        """What a params or arguments program's arguments follow from (None: the one-table contract's)."""
        if self.arguments is not None:
            return (self.arguments, self.kind)
        if self.params is None:
            return None
        return (self.params, self.index_shape, self.index_dtype, self.inputs, self.vocab, self.kind)


@dataclasses.dataclass(frozen=True)
class Spec:
    path: Path
    targets: tuple[str, ...]
    invariants: tuple[Invariant, ...]
    correctness: tuple[CorrectnessCheck, ...]
    efficiency_max_loss: float | None = None
    programs: tuple[ProgramDecl, ...] = ()
    known_compile_failures: tuple[KnownCompileFailure, ...] = ()
    # The package's own spec files speak of the catalog: their selectors ("kind:forward", "*") never match
    # a downstream project's programs, which only its own spec files hold to anything.
    catalog_scope: bool = False
    targets_where: str = ""


class _Locator:
    """Maps tables and keys back to line numbers (tomllib keeps none), counting lines as TOML does (``\\n``
    only). Every header is found once, and a table's keys on the first question about it."""

    _HEADER = re.compile(r"\s*\[(\[?)\s*(\"[^\"\n]*\"|[A-Za-z0-9_.-]+)\s*\](\]?)")
    # A key at the start of a line, or inside an inline table (``ratchet = { reason = ... }``).
    _KEY_AT_START = re.compile(r"\s*(\"[^\"\n]*\"|[A-Za-z0-9_-]+)\s*=")
    _KEY_INLINE = re.compile(r"[{,]\s*(\"[^\"\n]*\"|[A-Za-z0-9_-]+)\s*=")

    def __init__(self, path: Path, text: str) -> None:
        self.path = shown(path)
        self.lines = text.split("\n")
        self._headers: list[int] = []
        self._arrays: dict[str, list[int]] = {}  # [[name]] -> the lines of its tables, in order
        self._tables: dict[str, int] = {}  # [name] -> its line
        for n, line in enumerate(self.lines, 1):
            if line.lstrip().startswith("["):
                self._headers.append(n)
                m = self._HEADER.match(line)
                if m is not None:
                    name = m.group(2).strip('"')
                    if m.group(1) and m.group(3):
                        self._arrays.setdefault(name, []).append(n)
                    elif not m.group(1):
                        self._tables.setdefault(name, n)
        self._keys: dict[int, tuple[dict[str, int], dict[str, int]]] = {}

    def table_line(self, array: str, index: int) -> int:
        """The line of the ``index``-th ``[[array]]`` table (where ``array = [...]`` is, if inline)."""
        lines = self._arrays.get(array, ())
        return lines[index] if index < len(lines) else self.top_line(array)

    def top_line(self, name: str) -> int:
        """The line of ``[name]``, ``[[name]]`` or ``name = ...``."""
        if name in self._tables:
            return self._tables[name]
        if name in self._arrays:
            return self._arrays[name][0]
        return self.key_line(1, name)

    def key_line(self, start: int, key: str) -> int:
        """The line of ``key`` in the table that starts at line ``start`` (``start`` when not found)."""
        if start not in self._keys:
            at_start: dict[str, int] = {}
            inline: dict[str, int] = {}
            end = bisect.bisect_right(self._headers, start)
            stop = self._headers[end] if end < len(self._headers) else len(self.lines) + 1
            for n in range(start, stop):
                line = self.lines[n - 1]
                m = self._KEY_AT_START.match(line)
                if m is not None:
                    at_start.setdefault(m.group(1).strip('"'), n)
                if "=" in line:
                    for k in self._KEY_INLINE.findall(line):
                        inline.setdefault(k.strip('"'), n)
            self._keys[start] = (at_start, inline)
        at_start, inline = self._keys[start]
        return at_start.get(key) or inline.get(key) or start

    def header_line(self, name: str) -> int:
        """The line of table ``[name]``, or 1: where that table's keys are looked for."""
        return self._tables.get(name, 1)

    def where(self, line: int) -> str:
        return f"{self.path}:{line}"

    def error(self, line: int, message: str) -> InvariantsError:
        return InvariantsError(f"{self.path}:{line}: {message}")


# TOML's value types as a message names them, bool before int (a bool is an int in Python).
_TOML_TYPES = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a float"),
    (str, "a string"),
    (list, "an array"),
    (dict, "a table"),
)


def _a(value: object) -> str:
    """What a TOML value is, for a message: ``an integer``, ``a table``..."""
    return next((word for kind, word in _TOML_TYPES if isinstance(value, kind)), "a date or time")


def _positive(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _strings(value: object, loc: _Locator, line: int, key: str, allow_empty: bool = False) -> tuple[str, ...]:
    """A string or a list of strings, as a tuple; an empty list selects nothing, so it is refused."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        for i, v in enumerate(value):
            if not isinstance(v, str):
                raise loc.error(
                    line, f"'{key}' must be a string or a list of strings; item {i + 1} is {_a(v)}"
                )
        if not value and not allow_empty:
            raise loc.error(line, f"'{key}' = [] names nothing: it would select nothing and check nothing")
        return tuple(value)
    raise loc.error(line, f"'{key}' must be a string or a list of strings, not {_a(value)}")


def _string(table: Table, key: str, loc: _Locator, line: int, default: str = "") -> str:
    value = table.get(key, default)
    if not isinstance(value, str):
        raise loc.error(loc.key_line(line, key), f"'{key}' must be a string, not {_a(value)}")
    return value


def _ascii_names(names: Sequence[str], loc: _Locator, line: int, what: str) -> None:
    """Target names and patterns are ASCII: a look-alike letter (a Cyrillic 'с') would match nothing."""
    for name in names:
        if note := non_ascii(name):
            raise loc.error(line, f"{what} {name!r} can match no target{note}")


def _check_keys(
    table: Table, known: Sequence[str], loc: _Locator, line: int, what: str, required: Sequence[str] = ()
) -> None:
    for key in table:
        if key not in known:
            raise loc.error(
                loc.key_line(line, key), f"unknown key {key!r} in {what}{did_you_mean(key, known)}"
            )
    for key in required:
        if key not in table:
            raise loc.error(line, f"{what} needs '{key}'")


def _one_of(value: str, known: Collection[str], what: str, loc: _Locator, line: int) -> None:
    if value not in known:
        raise loc.error(
            line,
            f"unknown {what} {value!r}{non_ascii(value)}{did_you_mean(value, known)}; "
            f"known: {', '.join(known)}",
        )


def _parse_when(value: object, loc: _Locator, line: int) -> tuple[Requirement, ...]:
    """Version conditions on :data:`VERSIONED_PACKAGES` only: the version check would drop an environment
    marker, extras or a URL in silence."""
    if not isinstance(value, str):
        raise loc.error(
            line, f"'when' must be a string of version conditions such as 'jax >= 0.5', not {_a(value)}"
        )
    if ";" in value:
        marker = value[value.index(";") :].strip()
        raise loc.error(
            line,
            f"when: {value!r} has an environment marker ({marker!r}): 'when' takes version conditions only, "
            "such as 'jax >= 0.5, jaxlib < 0.11'",
        )
    reqs = tuple(_requirement(c, loc, line) for c in map(str.strip, value.split(",")) if c)
    if not reqs:
        raise loc.error(line, f"when: {value!r} holds no version condition such as 'jax >= 0.5'")
    return reqs


def _requirement(clause: str, loc: _Locator, line: int) -> Requirement:
    try:
        req = Requirement(clause)
    except InvalidRequirement as err:
        raise loc.error(line, f"when: cannot read {clause!r}: {first_line(str(err))}") from None
    if req.name not in VERSIONED_PACKAGES:
        raise loc.error(
            line, f"when: unknown package {req.name!r}{did_you_mean(req.name, VERSIONED_PACKAGES)}"
        )
    if req.extras or req.url or req.marker:
        raise loc.error(line, f"when: {clause!r}: 'when' takes a package and a version condition only")
    if not req.specifier:
        raise loc.error(line, f"when: {clause!r} has no version condition such as '>= 0.5'")
    return req


_BOMS = {
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe": "UTF-16",
    b"\xfe\xff": "UTF-16",
}


def _decode(raw: bytes, path: Path) -> str:
    """The text of a spec file, which is UTF-8 (a UTF-8 byte-order mark is allowed)."""
    where = shown(path)
    for bom, name in _BOMS.items():
        if raw.startswith(bom):
            raise InvariantsError(
                f"{where}:1: the file is {name} (it starts with a byte-order mark); save it as UTF-8"
            )
    if b"\x00" in raw:
        line, column = _position(raw, raw.index(b"\x00"))
        raise InvariantsError(
            f"{where}:{line}: a NUL byte (column {column}): spec files are UTF-8 text "
            "(is it UTF-16 without a byte-order mark?)"
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        start = err.start + (3 if raw.startswith(b"\xef\xbb\xbf") else 0)
        line, column = _position(raw, start)
        raise InvariantsError(
            f"{where}:{line}: not UTF-8 (byte 0x{raw[start]:02x} at column {column}); "
            "spec files are UTF-8 text"
        ) from None


def _position(raw: bytes, at: int) -> tuple[int, int]:
    return raw.count(b"\n", 0, at) + 1, at - raw.rfind(b"\n", 0, at)


def _read(path: Path) -> tuple[Table, _Locator]:
    """Parse one spec file (once) and check its top-level shape."""
    text = _decode(_bytes(path), path)
    loc = _Locator(path, text)
    data = _toml(text, loc)
    _check_keys(data, _TOP_KEYS, loc, 1, "the spec file")
    header = data.get("spec", {})
    if isinstance(header, list):
        raise loc.error(loc.top_line("spec"), "[spec] is one table: write [spec], not [[spec]]")
    if not isinstance(header, dict):
        raise loc.error(loc.top_line("spec"), f"'spec' must be the table [spec], not {_a(header)}")
    for array in ("invariant", "correctness", "program", "known_compile_failure"):
        tables = data.get(array, [])
        if isinstance(tables, dict):
            raise loc.error(loc.top_line(array), f"[{array}] must be an array of tables: write [[{array}]]")
        if not isinstance(tables, list):
            raise loc.error(
                loc.top_line(array), f"'{array}' must be an array of tables [[{array}]], not {_a(tables)}"
            )
        for i, table in enumerate(tables):
            if not isinstance(table, dict):
                raise loc.error(
                    loc.top_line(array),
                    f"'{array}' must be an array of tables [[{array}]]; item {i + 1} is {_a(table)}",
                )
    return data, loc


def _bytes(path: Path) -> bytes:
    """Only a regular file is a spec file: reading a named pipe, a socket or a folder would block."""
    try:
        if not path.is_file():
            raise InvariantsError(f"{shown(path)}: {what_is(path)}, not a spec file (a regular *.toml file)")
        size = path.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise InvariantsError(
                f"{shown(path)}: {size:,} bytes; a spec file may be at most {MAX_SPEC_BYTES:,} bytes"
            )
        return path.read_bytes()
    except OSError as err:
        raise InvariantsError(f"{shown(path)}: cannot read spec: {err.strerror}") from None


def _toml(text: str, loc: _Locator) -> Table:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        m = re.search(r"\(at line (\d+), column \d+\)", str(err))
        line = int(m.group(1)) if m else len(loc.lines) if "end of document" in str(err) else 1
        raise loc.error(line, f"not valid TOML: {first_line(str(err).split(' (at ')[0])}") from None
    except (ValueError, RecursionError) as err:  # tomllib: an integer past 4300 digits, nesting too deep
        what = "nested too deeply" if isinstance(err, RecursionError) else first_line(str(err))
        raise loc.error(1, f"not valid TOML: {what}") from None


def _programs_of(data: Table, loc: _Locator) -> tuple[ProgramDecl, ...]:
    tables = enumerate(data.get("program", []))
    return tuple(_program(table, loc, loc.table_line("program", i)) for i, table in tables)


def _names(table: Table, loc: _Locator, line: int) -> tuple[str, str, str]:
    """A ``[[program]]``'s ``name``, ``function`` and ``kind``."""
    name = table["name"]
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise loc.error(
            loc.key_line(line, "name"), f"name {_cut(repr(name))} must be a Python-style identifier"
        )
    if len(name) > MAX_NAME:
        raise loc.error(
            loc.key_line(line, "name"),
            f"name {name[:40]}... is {len(name):,} characters; a program's name names its snapshot and "
            f"dump files, and may be at most {MAX_NAME} characters",
        )
    function = table["function"]
    if not isinstance(function, str) or not re.fullmatch(r"[\w.]+:[\w.]+", function, re.ASCII):
        raise loc.error(loc.key_line(line, "function"), f"function {function!r} must read 'module:attribute'")
    kind = table["kind"]
    if not isinstance(kind, str) or kind not in PROGRAM_KINDS:
        raise loc.error(
            loc.key_line(line, "kind"),
            f"kind {kind!r}: one of {', '.join(PROGRAM_KINDS)}{did_you_mean(str(kind), PROGRAM_KINDS)}",
        )
    return name, function, kind


def _program(table: Table, loc: _Locator, line: int) -> ProgramDecl:
    _check_keys(table, _PROGRAM_KEYS, loc, line, "[[program]]", required=("name", "function", "kind"))
    name, function, kind = _names(table, loc, line)
    _contract(table, loc, line, kind)
    configs_line = loc.key_line(line, "configs")
    configs = _strings(table.get("configs", "f32"), loc, configs_line, "configs")
    for config in configs:
        _one_of(config, CONFIGS, "config", loc, configs_line)
    tags = _strings(table.get("tags", []), loc, loc.key_line(line, "tags"), "tags", allow_empty=True)
    doc = _string(table, "doc", loc, line, default=function)
    values = _program_values(table, loc, line, kind)
    return ProgramDecl(
        name,
        function,
        kind,
        tuple(dict.fromkeys(configs)),
        frozenset({*tags, "user"}),
        doc,
        loc.where(line),
        **values,
        params_where=loc.where(loc.key_line(line, "params")),
        **_sharding_of(
            table, loc, line, kind, "params" in table or "arguments" in table, values.get("index_shape")
        ),
    )


def _contract(table: Table, loc: _Locator, line: int, kind: str) -> None:
    """The keys a program's contract takes: ``arguments`` gives every argument itself; ``step`` is a user's
    own step, of params or arguments; ``train`` the gate's SGD step around a lookup or a model."""
    if "arguments" in table:
        why = "is not for a program with arguments, whose factory gives every argument; drop it"
        _stray(table, _NOT_WITH_ARGUMENTS, loc, line, why)
        if kind == "train":
            raise loc.error(
                loc.key_line(line, "kind"),
                "kind 'train' is the gate's own SGD step around a lookup or a model with params; a train "
                'step of your own, run as written, is kind = "step"',
            )
    elif kind == "step" and "params" not in table:
        raise loc.error(
            loc.key_line(line, "kind"),
            "kind 'step' runs your own step as written: give it arguments = \"module:factory\" (or params)",
        )


def _vocab(value: object, loc: _Locator, line: int) -> int:
    if not _positive(value):
        raise loc.error(line, f"vocab {value!r}: the rows indices address, a positive integer")
    return value


def _index_dtype(value: object, loc: _Locator, line: int) -> str:
    if not isinstance(value, str):
        raise loc.error(line, f"'index_dtype' must be a string, not {_a(value)}")
    _one_of(value, INDEX_DTYPES, "index_dtype", loc, line)
    return value


def _stray(table: Table, keys: Sequence[str], loc: _Locator, line: int, why: str) -> None:
    """One line at the first of ``keys`` that ``table`` has: ``KEY why``."""
    if given := next((k for k in keys if k in table), None):
        raise loc.error(loc.key_line(line, given), f"{given} {why}")


def _factory(value: object, loc: _Locator, line: int, key: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[\w.]+:[\w.]+", value, re.ASCII):
        raise loc.error(line, f"{key} {value!r} must read 'module:factory'")
    return value


def _boolean(value: object, loc: _Locator, line: int, key: str) -> bool:
    if not isinstance(value, bool):
        raise loc.error(line, f"{key} must be true or false, not {_a(value)}")
    return value


def _sharding_of(
    table: Table, loc: _Locator, line: int, kind: str, has_params: bool, index_shape: tuple[int, ...] | None
) -> dict[str, Any]:
    """A ``[[program]]``'s mesh and shardings (none: a one-device program)."""
    if "mesh" not in table:
        _stray(table, _MESH_ONLY, loc, line, "needs a mesh = {axis = size, ...}")
        return {}
    mesh_line = loc.key_line(line, "mesh")
    mesh = _mesh(table["mesh"], loc, mesh_line)
    axis_types = _string(table, "axis_types", loc, line, default="auto")
    _one_of(axis_types, AXIS_TYPES, "axis_types", loc, loc.key_line(line, "axis_types"))
    out: dict[str, Any] = {"mesh": tuple(mesh.items()), "axis_types": axis_types}
    if "table_sharding" in table:
        at = loc.key_line(line, "table_sharding")
        if has_params:
            raise loc.error(
                at,
                "table_sharding is for a lookup (table, indices); a program with params gives each "
                "leaf its sharding in its factory: NamedSharding(config.mesh, PartitionSpec(...))",
            )
        out["table_sharding"] = _sharding(table["table_sharding"], "table_sharding", mesh, 2, loc, at)
    if "index_sharding" in table:
        rank = len(index_shape) if index_shape else 1
        at = loc.key_line(line, "index_sharding")
        out["index_sharding"] = _sharding(table["index_sharding"], "index_sharding", mesh, rank, loc, at)
    if kind == "train" and not has_params:
        raise loc.error(
            mesh_line,
            "a sharded training step of a lookup has more arguments than a mesh can place here: "
            "declare it as a program with params, whose factory shards each leaf",
        )
    return out


def _mesh(mesh: object, loc: _Locator, line: int) -> dict[str, int]:
    if not isinstance(mesh, dict) or not mesh:
        raise loc.error(
            line, "mesh must be a table of axis name = size, e.g. mesh = { data = 4, tensor = 4 }"
        )
    for axis, size in mesh.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", axis):
            raise loc.error(line, f"mesh axis {axis!r} must be a Python-style identifier")
        if not _positive(size):
            raise loc.error(line, f"mesh axis {axis!r} = {size!r}: a size is a positive integer")
    return mesh


def _sharding(
    value: object, key: str, mesh: Mapping[str, int], rank: int, loc: _Locator, line: int
) -> tuple[str | None, ...]:
    """A mesh axis (or ``""``, replicated) per dimension of an array of ``rank``, each axis once."""
    entries = _strings(value, loc, line, key)
    if len(entries) > rank:
        raise loc.error(line, f"{key} has {len(entries)} entries for an array of rank {rank}")
    for entry in entries:
        if entry and entry not in mesh:
            raise loc.error(
                line, f'{key}: {entry!r} is no axis of the mesh ({", ".join(mesh)}); "" replicates'
            )
    named = [e for e in entries if e]
    if len(named) != len(set(named)):
        raise loc.error(line, f"{key}: an axis shards one dimension only")
    return tuple(e or None for e in entries)


def _index_shape(value: object, loc: _Locator, line: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= _MAX_INDEX_RANK:
        raise loc.error(
            line, f"index_shape must be a list of 1 to {_MAX_INDEX_RANK} positive integers, e.g. [64, 256]"
        )
    for i, n in enumerate(value):
        if not _positive(n):
            raise loc.error(line, f"index_shape: item {i + 1} is {n!r}; each must be a positive integer")
    return tuple(value)


# Each optional value of a [[program]], in the order it is read: a lookup (no params) is refused any key of
# _PARAMS_ONLY once its index_shape is read.
_PROGRAM_VALUES: dict[str, Callable[[object, _Locator, int], object]] = {
    "params": functools.partial(_factory, key="params"),
    "arguments": functools.partial(_factory, key="arguments"),
    "index_shape": _index_shape,
    "inputs": functools.partial(_factory, key="inputs"),
    "vocab": _vocab,
    "tables": functools.partial(_strings, key="tables"),
    "donate": functools.partial(_boolean, key="donate"),
    "efficiency": functools.partial(_boolean, key="efficiency"),
    "index_dtype": _index_dtype,
}


def _program_values(table: Table, loc: _Locator, line: int, kind: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, read in _PROGRAM_VALUES.items():
        if key == "inputs" and "params" not in table and "arguments" not in table:
            lookup = "a lookup (table, indices) takes the configuration's table and indices"
            _stray(table, _PARAMS_ONLY, loc, line, f"is for a program with params; {lookup}")
        if key in table:
            at = loc.key_line(line, key)
            values[key] = read(table[key], loc, at)
            if key in ("inputs", "tables", "arguments"):
                values[f"{key}_where"] = loc.where(at)
            if key == "donate" and values[key] and kind not in ("train", "step"):
                keeps = f"a {kind} keeps them"
                raise loc.error(
                    at, f"donate is for a train step, whose parameters' buffers it may reuse; {keeps}"
                )
    return values


def load_spec(path: Path, known: Mapping[str, Selectable] | None = None) -> Spec:
    """Read and validate one spec file, its program names checked against ``known`` (default: the
    catalog's). Raises :class:`InvariantsError` naming ``FILE:LINE``."""
    data, loc = _read(path)
    return _spec_of(path, data, loc, known, _programs_of(data, loc))


def _spec_of(
    path: Path,
    data: Table,
    loc: _Locator,
    known: Mapping[str, Selectable] | None,
    programs: tuple[ProgramDecl, ...],
) -> Spec:
    max_loss, targets, targets_line = _header(data, loc, programs)
    entries = _Entries(loc, known, targets)
    return Spec(
        path,
        targets,
        entries.each(data, "invariant", _invariant),
        entries.each(data, "correctness", _correctness),
        max_loss,
        programs,
        entries.each(data, "known_compile_failure", _known_failure),
        targets_where=loc.where(targets_line),
    )


def _header(
    data: Table, loc: _Locator, programs: tuple[ProgramDecl, ...]
) -> tuple[float | None, tuple[str, ...], int]:
    """The ``[spec]`` table's ``efficiency_max_loss``, its ``targets`` and their line."""
    header = data.get("spec", {})
    head = loc.header_line("spec")
    _check_keys(header, _SPEC_KEYS, loc, head, "[spec]")
    max_loss = _max_loss(header.get("efficiency_max_loss"), loc, head)
    entry_tables = ("invariant", "correctness", "known_compile_failure")
    if not (any(data.get(k) for k in entry_tables) or programs or max_loss is not None):
        raise loc.error(
            head,
            "declares nothing: no [[invariant]], [[correctness]] or [[program]] (a spec file that checks "
            "nothing would pass in silence)",
        )
    if "targets" not in header and any(k in data for k in entry_tables):
        raise loc.error(head, "missing [spec] targets = [...] (the target names this file applies to)")
    targets_line = loc.key_line(head, "targets")
    targets = _strings(
        header.get("targets", []), loc, targets_line, "targets", allow_empty="targets" not in header
    )
    _ascii_names(targets, loc, targets_line, "targets:")
    return max_loss, targets, targets_line


def _max_loss(value: object, loc: _Locator, head: int) -> float | None:
    if value is not None and not (isinstance(value, float) and 0 < value < 1):
        raise loc.error(
            loc.key_line(head, "efficiency_max_loss"), "efficiency_max_loss must be a fraction in (0, 1)"
        )
    return value


_Entry = TypeVar("_Entry")


@dataclasses.dataclass
class _Entries:
    """What one file's entries are read against, with the selectors and config patterns already found good
    (20,000 invariants share a few) and the ids each table has taken (an id is unique within its table)."""

    loc: _Locator
    known: Mapping[str, Selectable] | None
    targets: tuple[str, ...]
    good_selectors: dict[str, bool] = dataclasses.field(default_factory=dict)
    good_configs: set[str] = dataclasses.field(default_factory=set)
    ids: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)

    def each(
        self, data: Table, array: str, parse: Callable[[Table, int, _Entries], _Entry]
    ) -> tuple[_Entry, ...]:
        return tuple(
            parse(table, self.loc.table_line(array, i), self) for i, table in enumerate(data.get(array, []))
        )

    def id(self, table: Table, line: int, array: str) -> str:
        ident, seen = table["id"], self.ids.setdefault(array, {})
        if not isinstance(ident, str) or not re.fullmatch(r"[A-Za-z0-9_]+", ident):
            raise self.loc.error(
                self.loc.key_line(line, "id"), f"id {ident!r} must be letters, digits and '_'"
            )
        if ident in seen:
            raise self.loc.error(line, f"duplicate id '{ident}' (first at line {seen[ident]})")
        seen[ident] = line
        return ident

    def programs(self, table: Table, line: int) -> tuple[str, ...]:
        """An entry's ``programs``: selectors, each matching some program."""
        at = self.loc.key_line(line, "programs")
        programs = _strings(table["programs"], self.loc, at, "programs")
        names = _known(self.known)
        for sel in programs:
            if sel not in self.good_selectors:
                self.good_selectors[sel] = sel in names or bool(select_programs([sel], self.known))
            if not self.good_selectors[sel]:
                raise self.loc.error(
                    at,
                    f"program selector {sel!r} matches no program{non_ascii(sel)}{did_you_mean(sel, names)}",
                )
        return programs

    def configs(self, table: Table, line: int, default: str) -> tuple[str, ...]:
        """An entry's ``configs`` (``default`` when it has none): patterns, each matching a configuration."""
        at = self.loc.key_line(line, "configs")
        configs = _strings(table.get("configs", default), self.loc, at, "configs")
        for pattern in configs:
            if pattern not in self.good_configs and not any(fnmatch.fnmatchcase(c, pattern) for c in CONFIGS):
                raise self.loc.error(
                    at,
                    f"configs: {pattern!r} matches no configuration{non_ascii(pattern)}"
                    f"{did_you_mean(pattern, CONFIGS)}; known: {', '.join(CONFIGS)}",
                )
            self.good_configs.add(pattern)
        return configs

    def targets_of(self, table: Table, line: int, entry_id: str) -> tuple[str, ...]:
        """An entry's ``targets`` (default ``*``): patterns that narrow the file's, each overlapping them."""
        at, targets = self.loc.key_line(line, "targets"), self.targets
        entry = _strings(table.get("targets", "*"), self.loc, at, "targets")
        _ascii_names(entry, self.loc, at, f"'{entry_id}': targets")
        for pattern in entry:
            if not any(fnmatch.fnmatchcase(pattern, p) or fnmatch.fnmatchcase(p, pattern) for p in targets):
                raise self.loc.error(
                    at,
                    f"'{entry_id}': targets {pattern!r} lies outside this file's targets "
                    f"({', '.join(targets)}): it would never apply"
                    + did_you_mean(pattern, [t for t in targets if not any(c in t for c in "*?[")]),
                )
        return entry

    def shared(self, table: Table, line: int, entry_id: str, *selection: tuple[str, ...]) -> dict[str, Any]:
        """What every entry has: its id, where it and its selector keys are, its ``programs, configs,
        targets``, why, and its version scope."""
        loc = self.loc
        when = _parse_when(table["when"], loc, loc.key_line(line, "when")) if "when" in table else ()
        why = _cut(_string(table, "why", loc, line))
        keys = ("programs", "configs", "targets")
        lines = tuple((k, loc.key_line(line, k)) for k in keys if k in table)
        return {
            **dict(zip(keys, selection, strict=True)),
            "id": entry_id,
            "where": loc.where(line),
            "lines": lines,
            "why": why,
            "when": when,
        }


def _known_failure(table: Table, line: int, entries: _Entries) -> KnownCompileFailure:
    loc = entries.loc
    where = "[[known_compile_failure]]"
    _check_keys(table, _KNOWN_FAILURE_KEYS, loc, line, where, required=("id", "programs", "ratchet"))
    entry_id = entries.id(table, line, "known_compile_failure")
    programs = entries.programs(table, line)
    configs = entries.configs(table, line, "*")
    targets = entries.targets_of(table, line, entry_id)
    ratchet = _ratchet(table["ratchet"], loc, loc.key_line(line, "ratchet"))
    return KnownCompileFailure(
        **entries.shared(table, line, entry_id, programs, configs, targets), ratchet=ratchet
    )


def _invariant(table: Table, line: int, entries: _Entries) -> Invariant:
    loc = entries.loc
    _check_keys(table, _INVARIANT_KEYS, loc, line, "[[invariant]]", required=("id", "assert"))
    inv_id = entries.id(table, line, "invariant")
    assert_line = loc.key_line(line, "assert")
    if not isinstance(table["assert"], str):
        raise loc.error(assert_line, f"'assert' must be a string, not {_a(table['assert'])}")
    error = functools.partial(loc.error, assert_line)
    assertion = asserts.parse(table["assert"], error, _known(entries.known))
    if assertion.kind == "absolute":
        if "programs" not in table:
            raise loc.error(line, f"'{inv_id}' needs 'programs' (which programs the assert is about)")
        programs = entries.programs(table, line)
    else:
        if "programs" in table:
            at = loc.key_line(line, "programs")
            raise loc.error(at, f"'{inv_id}' names its programs in the assert; drop 'programs'")
        programs = assertion.programs
    if assertion.pinned and "configs" in table:
        at = loc.key_line(line, "configs")
        raise loc.error(at, f"'{inv_id}' names its configurations in the assert; drop 'configs'")
    configs = entries.configs(table, line, "*")
    targets = entries.targets_of(table, line, inv_id)
    shared = entries.shared(table, line, inv_id, programs, configs, targets)
    ratchet = _ratchet(table["ratchet"], loc, loc.key_line(line, "ratchet")) if "ratchet" in table else None
    return Invariant(**shared, assertion=assertion, ratchet=ratchet)


def _ratchet(raw: object, loc: _Locator, r_line: int) -> Ratchet:
    if not isinstance(raw, dict):
        raise loc.error(r_line, "ratchet must be a table { reason = ..., issue = ... }")
    _check_keys(raw, _RATCHET_KEYS, loc, r_line, "ratchet")
    if not raw.get("reason") or not raw.get("issue"):
        raise loc.error(r_line, "a ratchet needs both a 'reason' and an 'issue' link")
    if not isinstance(raw["reason"], str) or not isinstance(raw["issue"], str):
        raise loc.error(r_line, "a ratchet's 'reason' and 'issue' are strings")
    return Ratchet(raw["reason"], raw["issue"])


def _cut(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]}... (cut: {len(text):,} characters, shown up to {MAX_TEXT:,})"


def _correctness(table: Table, line: int, entries: _Entries) -> CorrectnessCheck:
    loc = entries.loc
    _check_keys(table, _CORRECTNESS_KEYS, loc, line, "[[correctness]]", required=("id", "check", "programs"))
    check_id = entries.id(table, line, "correctness")
    check, check_line = table["check"], loc.key_line(line, "check")
    if not isinstance(check, str):
        raise loc.error(
            check_line, f"'check' must be a string, one of {', '.join(CORRECTNESS_CHECKS)}, not {_a(check)}"
        )
    if check not in CORRECTNESS_CHECKS:
        raise loc.error(check_line, f"unknown check {check!r}{did_you_mean(check, CORRECTNESS_CHECKS)}")
    programs = entries.programs(table, line)
    targets = entries.targets_of(table, line, check_id)
    _check_arguments(table, line, entries, check_id, programs)
    reference = _reference(table, line, entries, check_id)
    configs = entries.configs(table, line, "f32")
    dist_line = loc.key_line(line, "distributions")
    if "distributions" in table and check != "agree":
        raise loc.error(dist_line, f"'{check_id}': check {check!r} uses fixed indices; drop 'distributions'")
    distributions = _strings(table.get("distributions", "uniform"), loc, dist_line, "distributions")
    for dist in distributions:
        _one_of(dist, DISTRIBUTIONS, "index distribution", loc, dist_line)
    expect = _expect(table, line, loc, check_id)
    return CorrectnessCheck(
        **entries.shared(table, line, check_id, programs, configs, targets),
        check=check,
        reference=reference,
        distributions=tuple(dict.fromkeys(distributions)),
        expect=expect,
    )


def _reference(table: Table, line: int, entries: _Entries, check_id: str) -> str | None:
    """The program an ``agree`` check compares with: a known name, given for that check alone."""
    loc, check, reference = entries.loc, table["check"], table.get("reference")
    ref_line = loc.key_line(line, "reference")
    if check != "agree":
        if reference is not None:
            raise loc.error(
                ref_line, f"'{check_id}': check {check!r} compares with no reference; drop 'reference'"
            )
        return None
    if reference is None:
        raise loc.error(line, f"'{check_id}': check 'agree' needs a 'reference' program to agree with")
    if not isinstance(reference, str):
        raise loc.error(ref_line, f"'reference' must be a program name, not {_a(reference)}")
    names = _known(entries.known)
    if reference not in names:
        raise loc.error(
            ref_line,
            f"unknown reference program {reference!r}{non_ascii(reference)}{did_you_mean(reference, names)}",
        )
    return reference


def _expect(table: Table, line: int, loc: _Locator, check_id: str) -> str | None:
    """One of the check's own words (:data:`CORRECTNESS_EXPECT`), or None for a check that takes none."""
    check, expect, expect_line = table["check"], table.get("expect"), loc.key_line(line, "expect")
    allowed = CORRECTNESS_EXPECT[check]
    if not allowed and expect is not None:
        raise loc.error(expect_line, f"'{check_id}': check {check!r} takes no 'expect'; drop it")
    if allowed and expect is None:
        raise loc.error(line, f"'{check_id}': check {check!r} needs 'expect', one of {', '.join(allowed)}")
    if allowed and expect not in allowed:
        word = expect if isinstance(expect, str) else ""
        raise loc.error(
            expect_line,
            f"'{check_id}': expect {expect!r} is not one of {', '.join(allowed)}"
            f"{did_you_mean(word, allowed)}",
        )
    return expect


def _signature_of(program: object) -> tuple[object, ...] | None:
    """:attr:`ProgramDecl.signature`, of a declaration or of a built program's inputs."""
    found = getattr(program, "signature", None)
    return found if found is not None else getattr(getattr(program, "inputs", None), "signature", None)


def _check_arguments(
    table: Table, line: int, entries: _Entries, check_id: str, selectors: Sequence[str]
) -> None:
    """A correctness check calls its programs on arguments it makes: a program with params takes its own,
    so it may only ``agree`` with a reference of the very same arguments."""
    loc, names = entries.loc, _known(entries.known)
    programs = select_programs(selectors, entries.known)
    own = {p: sig for p in programs if (sig := _signature_of(names[p])) is not None}
    check, reference = table["check"], table.get("reference")
    if own and check != "agree":
        raise loc.error(
            loc.key_line(line, "programs"),
            f"'{check_id}': check {check!r} calls a lookup (table, indices) on chosen rows; "
            f"'{next(iter(own))}' is a program with params",
        )
    if check != "agree" or not isinstance(reference, str) or reference not in names:
        return
    want = _signature_of(names[reference])
    for name in programs:
        if own.get(name) != want:
            raise loc.error(
                loc.key_line(line, "reference"),
                f"'{check_id}': '{name}' takes {_takes(own.get(name))} and reference '{reference}' takes "
                f"{_takes(want)}: 'agree' compares programs called on the same arguments",
            )


def _takes(signature: tuple[object, ...] | None) -> str:
    return "(table, indices)" if signature is None else f"params {signature[0]}"


def scope_of(spec: Spec, programs: Mapping[str, Selectable]) -> Mapping[str, Selectable]:
    """The programs ``spec``'s selectors range over: the catalog's (by their names in the run) for the
    package's own files, else the run's ``programs``."""
    if not spec.catalog_scope:
        return programs
    catalog = _known(None)
    return {
        name: program
        for name, program in programs.items()
        if name.startswith(CATALOG_PREFIX) or (name in catalog and CATALOG_PREFIX + name not in programs)
    }


def _known(known: Mapping[str, Selectable] | None) -> Mapping[str, Selectable]:
    """``known``, else the catalog's programs (a project's declared programs belong to its run)."""
    if known is not None:
        return known
    from ..catalog.programs import CATALOG

    return CATALOG


def select_programs(selectors: Sequence[str], known: Mapping[str, Selectable] | None = None) -> list[str]:
    """Program names matched by selectors (default: among the catalog's programs)."""
    return match_programs(selectors, _known(known), _known(None))


def load_specs(*directories: Path) -> list[Spec]:
    """Every ``*.toml`` of each directory (default: the package's own), each parsed once. The ``[[program]]``
    tables of all files are read first, so that an entry of one file may name a program of another."""
    catalog = _known(None)
    paths = [path for d in directories or (SPEC_DIR,) for path in _spec_files(d)]
    parsed = [(path, *_read(path)) for path in paths]
    declared, by_name = _declarations(parsed)
    # A project's names are its own: a catalog program it shadows is catalog:NAME in this run.
    known: dict[str, Selectable] = {run_name(n, by_name): p for n, p in catalog.items()} | by_name
    own = SPEC_DIR.resolve()
    specs = [
        _in_run(_spec_of(path, data, loc, catalog, decls), known)
        if path.parent.resolve() == own
        else _spec_of(path, data, loc, known, decls)
        for (path, data, loc), decls in zip(parsed, declared, strict=True)
    ]
    return _aim([_paired(spec, known) for spec in specs], known)


def _paired(spec: Spec, known: Mapping[str, Selectable]) -> Spec:
    """``spec`` with each relation between programs of one configuration each, which share none, comparing
    those configurations (as if each side named its own in brackets)."""
    invariants = []
    for inv in spec.invariants:
        configs = [tuple(getattr(known.get(p), "configs", ())) for p in inv.programs]
        if (
            inv.kind == "relational"
            and not inv.assertion.pinned
            and "configs" not in dict(inv.lines)
            and all(len(c) == 1 for c in configs)
            and len({c[0] for c in configs}) > 1
        ):
            pins = {p: c[0] for p, c in zip(inv.programs, configs, strict=True)}
            inv = dataclasses.replace(inv, assertion=asserts.paired(inv.assertion, pins))
        invariants.append(inv)
    return dataclasses.replace(spec, invariants=tuple(invariants))


def _in_run(spec: Spec, known: Mapping[str, Selectable]) -> Spec:
    """One of the package's own files, which speak of the catalog alone, with the catalog's names as the run
    has them: where a project shadows a name, its entries name ``catalog:NAME`` explicitly."""
    shadowed = {bare(n): n for n in known if n.startswith(CATALOG_PREFIX)}
    if not shadowed:
        return dataclasses.replace(spec, catalog_scope=True)

    def named(selectors: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(shadowed.get(word, word) for word in selectors)

    def said(text: str) -> str:
        return re.sub(r"(?<![\w:])([A-Za-z_]\w*)", lambda m: shadowed.get(m[1], m[1]), text)

    def relation(inv: Invariant) -> Invariant:
        if inv.kind == "absolute":
            return dataclasses.replace(inv, programs=named(inv.programs))

        def error(message: str) -> InvariantsError:
            return InvariantsError(f"{inv.where}: {message}")

        assertion = asserts.parse(said(inv.text), error, known)
        return dataclasses.replace(inv, programs=assertion.programs, assertion=assertion)

    return dataclasses.replace(
        spec,
        catalog_scope=True,
        invariants=tuple(relation(inv) for inv in spec.invariants),
        correctness=tuple(
            dataclasses.replace(c, programs=named(c.programs), reference=c.reference and said(c.reference))
            for c in spec.correctness
        ),
        known_compile_failures=tuple(
            dataclasses.replace(k, programs=named(k.programs)) for k in spec.known_compile_failures
        ),
    )


def _spec_files(directory: Path) -> list[Path]:
    if directory.is_file():
        raise InvariantsError(
            f"{shown(directory)}: a file; --spec-dir takes the folder that holds the spec files "
            f"({shown(directory.parent)})"
        )
    if not directory.is_dir():
        raise InvariantsError(f"{shown(directory)}: spec folder not found")
    found = sorted(directory.glob("*.toml"))
    if not found:
        raise InvariantsError(f"{shown(directory)}: no *.toml spec files here")
    return found


def _declarations(
    parsed: Sequence[tuple[Path, Table, _Locator]],
) -> tuple[list[tuple[ProgramDecl, ...]], dict[str, ProgramDecl]]:
    """Each file's ``[[program]]`` declarations, and all of them by name, each name new."""
    declared = []
    by_name: dict[str, ProgramDecl] = {}
    for _path, data, loc in parsed:
        declared.append(_programs_of(data, loc))
        for decl in declared[-1]:
            if decl.name in by_name:
                raise InvariantsError(
                    f"{decl.where}: program '{decl.name}' is already declared at {by_name[decl.name].where}"
                )
            by_name[decl.name] = decl
    return declared, by_name


def _named_by_entries(spec: Spec, select: Callable[[tuple[str, ...]], list[str]]) -> set[str]:
    named: set[str] = set()
    for inv in spec.invariants:
        named.update(select(inv.programs) if inv.kind == "absolute" else inv.programs)
    for check in spec.correctness:
        named.update(select(check.programs), *([check.reference] if check.reference else []))
    return named


def _aim(specs: list[Spec], known: Mapping[str, Selectable]) -> list[Spec]:
    """``specs`` with each declared program's :attr:`ProgramDecl.aimed` filled in."""
    aims: dict[str, dict[str, None]] = {d.name: {} for spec in specs for d in spec.programs}
    selected: dict[tuple[str, ...], list[str]] = {}  # a file of 20,000 entries shares a few selectors

    def select(selectors: tuple[str, ...]) -> list[str]:
        if selectors not in selected:
            selected[selectors] = select_programs(selectors, known)
        return selected[selectors]

    for spec in specs:
        named = {d.name for d in spec.programs}
        if not spec.catalog_scope:  # the package's own files speak of the catalog alone
            named |= _named_by_entries(spec, select)
        for name in named & aims.keys():
            aims[name].update(dict.fromkeys(spec.targets))
    return [
        dataclasses.replace(
            spec, programs=tuple(dataclasses.replace(d, aimed=tuple(aims[d.name])) for d in spec.programs)
        )
        for spec in specs
    ]
