"""The results file: the one owner of its records, written by the pytest plugin, read by every reader.

A gate item records what it measured with :func:`record` (through ``record_property``); the plugin turns
each into a typed :class:`Record` (:func:`entry`) and writes the file (:func:`write`); every reader reads it
with :func:`read`. Nothing else spells a record kind or its fields. Each kind is one frozen dataclass
(:data:`KINDS`), and the JSON codec is derived from their fields and type hints; fields a kind does not
declare (a structure's metrics) are kept in :attr:`Record.extra`. The file carries :data:`FORMAT_VERSION`,
and a file of another, or of none, is refused in one line (asv's ``api_version`` is the model).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import numbers
import os
import socket
import stat
import time
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, ClassVar, Literal, Union

from .._errors import InvariantsError
from .._paths import json_file_of, write_atomic
from .compiled import Key

# Raised by a change to a record's fields or meaning.
FORMAT_VERSION = 2
# The verdict of an efficiency item whose run recorded its baseline: it had no floor to be judged by.
RECORDED = "recorded"
PROPERTY = "invariants"
FAILURE_PROPERTY = "invariants-failure"
LACKS_PROPERTY = "invariants-lacks"
PYTEST_OUTCOMES = ("failed", "passed", "skipped", "xfailed", "xpassed", "error")
NO_TESTS = 5  # pytest's exit status for a run with no test

FailureKind = Literal["assert", "snapshot", "compile", "error"]
# A measured term: a count, a size, a ratio, a sorted set, or a structure term's text.
Measured = bool | int | float | str | tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Failure:
    """Why an item failed, as a value beside pytest's text: ``error`` where the suite could not decide;
    ``what`` is one line without its key, ``key`` the compile it is about (a relation's first)."""

    kind: FailureKind
    what: str
    key: Key | None = None


def compile_name(target: str, program: str, config: str) -> str:
    """How a line names one compile."""
    return f"{target}/{program}[{config}]"


def compile_failed(target: str, program: str, config: str, why: str) -> str:
    return f"{compile_name(target, program, config)}: compile failed: {why}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Record:
    """One item of a results file; each kind declares the key fields it has as required."""

    kind: str
    outcome: str
    nodeid: str
    reason: str | None = None
    failure: Failure | None = None
    target: str | None = None
    program: str | None = None
    config: str | None = None
    id: str | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    tier: ClassVar[str] = "other"

    def get(self, name: str, default: Any = None) -> Any:
        """The field the file names ``name`` (a declared one, or a metric in :attr:`extra`)."""
        cls: Any = type(self)
        attr = _named(cls).get(name)
        if attr is None:
            return self.extra.get(name, default)
        value = getattr(self, attr)
        return default if value is None and _absent_when_none(cls, attr) else value

    def program_names(self) -> list[str]:
        return [self.program] if self.program else []

    def with_extra(self, **fields: Any) -> Record:
        return dataclasses.replace(self, extra={**self.extra, **fields})


def _required() -> Any:
    return dataclasses.field()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Structure(Record):
    """A program's compile on a target; its metrics are in :attr:`extra`."""

    kind: Literal["structure"] = "structure"
    tier: ClassVar[str] = "structure"
    target: str = _required()
    program: str = _required()
    config: str = _required()
    compile_cache: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Invariant(Record):
    """An assert's verdict; ``ratio``: ``metric(A) / metric(B)`` of a scaled relation."""

    kind: Literal["invariant"] = "invariant"
    tier: ClassVar[str] = "invariant"
    id: str = _required()
    target: str = _required()
    programs: tuple[str, ...] = _required()
    config: str = _required()
    assertion: str = dataclasses.field(metadata={"json": "assert"})
    holds: bool = _required()
    measured: Mapping[str, Measured] = _required()
    ratio: float | None = None
    ratchet: str | None = None
    where: str | None = None
    warning: str | None = None

    def program_names(self) -> list[str]:
        return list(self.programs)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Correctness(Record):
    """A value check of a program against its reference."""

    kind: Literal["correctness"] = "correctness"
    tier: ClassVar[str] = "correctness"
    id: str = _required()
    program: str = _required()
    config: str = _required()
    distribution: str = _required()
    problem: str | None = _required()


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Timed(Record):
    """A paired measurement (:class:`invariants.timing.paired.RatioResult`)."""

    id: str = _required()
    target: str = _required()
    config: str = _required()
    median: float = _required()
    low: float = _required()
    high: float = _required()
    verdict: str | None = _required()
    clock: str | None = None
    t_a_median: float | None = None
    t_b_median: float | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Ratio(_Timed):
    """``time(a) / time(b) <= threshold``; ``predicted``: the TPU cost model's ratio (None off TPU)."""

    kind: Literal["ratio"] = "ratio"
    tier: ClassVar[str] = "throughput: ratio"
    a: str = _required()
    b: str = _required()
    threshold: float = _required()
    verdict: str = _required()
    predicted: float | None = None

    def program_names(self) -> list[str]:
        return [side.split("[", 1)[0] for side in (self.a, self.b)]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Efficiency(_Timed):
    """``t_copy / t_program`` against the floor of its baseline (``threshold``)."""

    kind: Literal["efficiency"] = "efficiency"
    tier: ClassVar[str] = "throughput: efficiency"
    program: str = _required()
    threshold: float | None = _required()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Error(Record):
    """An item that failed before it recorded anything."""

    kind: Literal["error"] = "error"
    tier: ClassVar[str] = "error"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Skipped(Record):
    """An item that skipped before it recorded anything; ``lacks``: the API of JAX whose absence from the
    release skipped it (the tool's limit there, :class:`~invariants._supported.ReleaseLacks`), with the
    compile it stopped in ``target``, ``program`` and ``config``."""

    kind: Literal["skipped"] = "skipped"
    tier: ClassVar[str] = "skipped"
    lacks: str | None = None


KINDS: dict[str, type[Record]] = {
    cls.kind: cls for cls in (Structure, Invariant, Correctness, Ratio, Efficiency, Error, Skipped)
}
RecordKind = Literal["structure", "invariant", "correctness", "ratio", "efficiency", "error", "skipped"]


class _Bad(ValueError):
    """A value that is not of its field's type (``args[0]``: what it is instead)."""


# Each called with a class typed Any: mypy takes a dataclass type for no Hashable.
_resolved = functools.cache(typing.get_type_hints)


@functools.cache
def _named(cls: Any) -> dict[str, str]:
    """The file's name of each field of a record class to its attribute."""
    return {f.metadata.get("json", f.name): f.name for f in dataclasses.fields(cls) if f.name != "extra"}


# Which JSON values each scalar type takes (a float takes an integer).
_SCALARS: dict[Any, Any] = {
    bool: lambda v: isinstance(v, bool),
    str: lambda v: isinstance(v, str),
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    type(None): lambda v: v is None,
}


def _decode(hint: Any, value: Any) -> Any:
    """``value`` from JSON, checked against ``hint`` and made its type; raises :class:`_Bad`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        for arg in sorted(args, key=lambda a: a is not type(None)):  # null first: it is never a number
            with contextlib.suppress(_Bad):
                return _decode(arg, value)
    elif origin is Literal:
        if value in args:
            return value
    elif hint in _SCALARS:
        if _SCALARS[hint](value):
            return float(value) if hint is float else value
    elif origin is tuple and isinstance(value, list | tuple):
        return tuple(_decode(args[0], v) for v in value)
    elif isinstance(value, dict):
        return _decode_object(hint, value)
    raise _Bad("null" if value is None else repr(value) if origin is Literal else type(value).__name__)


def _decode_object(hint: Any, value: dict[str, Any]) -> Any:
    if typing.get_origin(hint) in (dict, Mapping):
        return {str(k): _decode(typing.get_args(hint)[1], v) for k, v in value.items()}
    if hint is Key:
        return Key(*(_decode(str, value.get(name)) for name in Key._fields))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        hints = _resolved(hint)
        return hint(**{f.name: _decode(hints[f.name], value.get(f.name)) for f in dataclasses.fields(hint)})
    raise _Bad(type(value).__name__)


def _encode(value: Any) -> Any:
    """``value`` as JSON holds it (a set as a sorted list, a numpy number as a Python one)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Key):
        value = value._asdict()
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(_encode(v) for v in value)
    if isinstance(value, bool | str | None | int | float):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


def to_json(item: Record) -> dict[str, Any]:
    """A record as the file holds it: a field that is None and None by default left out."""
    out: dict[str, Any] = {k: _encode(v) for k, v in item.extra.items()}
    for f in dataclasses.fields(item):
        value = getattr(item, f.name)
        if f.name == "extra" or (value is None and f.default is None):
            continue
        out[f.metadata.get("json", f.name)] = _encode(value)
    return out


class RecordError(ValueError):
    """What is wrong with a record."""


def from_json(data: Mapping[str, Any]) -> Record:
    """A record from the file's object; raises :class:`RecordError`."""
    cls = KINDS.get(str(data.get("kind")))
    if cls is None:
        raise RecordError(f"unknown kind {data.get('kind')!r}")
    key: Any = cls
    hints, names = _resolved(key), _named(key)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    missing = [n for n, attr in names.items() if n not in data and _needed(fields[attr])]
    if missing:
        raise RecordError(f"lacks {', '.join(missing)}")
    values: dict[str, Any] = {}
    nulls: list[str] = []
    wrong: list[str] = []
    for name, attr in names.items():
        if name not in data:
            continue
        try:
            values[attr] = _decode(hints[attr], data[name])
        except _Bad:
            (nulls if data[name] is None else wrong).append(name)
    if nulls:
        raise RecordError(f"{', '.join(nulls)} null")
    if wrong:
        raise RecordError(", ".join(f"{name!r} cannot be {data[name]!r}" for name in wrong))
    extra = {k: v for k, v in data.items() if k not in names}
    return cls(**values, extra=extra)


def _absent_when_none(cls: Any, attr: str) -> bool:
    return next(f.default is None for f in dataclasses.fields(cls) if f.name == attr)


def _needed(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


@dataclasses.dataclass(frozen=True)
class ShardOf:
    """Which shard of a split run (``--shard K/N``) wrote a results file: ``index`` of ``count``, of the
    selection whose digest is ``selection`` (every shard of one run has the same)."""

    index: int
    count: int
    selection: str


@dataclasses.dataclass
class Results:
    """A results file as :func:`read` returns it: what the run was, and its records."""

    items: list[Record]
    versions: dict[str, str] = dataclasses.field(default_factory=dict)
    runtime: dict[str, Any] = dataclasses.field(default_factory=dict)
    targets: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    exitstatus: int = 0
    # The programs the spec files declared (the report's default); every program, name to {"kind", "tags"}.
    declared: list[str] = dataclasses.field(default_factory=list)
    programs: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    # pytest's count of each outcome (None: a run without its terminal reporter).
    pytest: dict[str, int] | None = None
    shard: ShardOf | None = None

    def run_exitstatus(self) -> int:
        """The exit status as the run's verdict reads it: a shard that had nothing to do (pytest's 5 for no
        tests, and no record) is no failure of the run it is part of."""
        nothing = self.shard is not None and not self.items and self.exitstatus == NO_TESTS
        return 0 if nothing else self.exitstatus

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "results") -> Results:
        """The results of a file's object (its format version checked by :func:`read`); one line when not."""
        items = [_item(n, item, where) for n, item in enumerate(data["items"])]
        for key, (holds, what) in _RUN_FIELDS.items():
            if key in data and not holds(data[key]):
                raise InvariantsError(f"{where}: '{key}' must be {what}")
        counts, programs = data.get("pytest", {}), data.get("programs", {})
        return cls(
            items=items,
            versions={str(k): str(v) for k, v in data.get("versions", {}).items()},
            runtime=dict(data.get("runtime", {})),
            targets={str(k): (v if isinstance(v, dict) else {}) for k, v in data.get("targets", {}).items()},
            exitstatus=data.get("exitstatus", 0),
            declared=[n for n in data.get("declared", []) if isinstance(n, str)],
            programs={str(k): v for k, v in programs.items() if isinstance(v, dict)}
            if isinstance(programs, dict)
            else {},
            pytest={k: int(counts.get(k, 0)) for k in PYTEST_OUTCOMES} if "pytest" in data else None,
            shard=_decode(ShardOf, data["shard"]) if "shard" in data else None,
        )


def _counts(value: object) -> bool:
    return isinstance(value, dict) and all(_SCALARS[int](n) and n >= 0 for n in value.values())


def _a_shard(value: object) -> bool:
    try:
        shard = _decode(ShardOf, value)
    except _Bad:
        return False
    return isinstance(shard, ShardOf) and 1 <= shard.index <= shard.count


# What each field of a run must be where it is given, in the order checked: a test, and its words.
_RUN_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    **dict.fromkeys(("versions", "runtime", "targets"), (lambda v: isinstance(v, dict), "an object")),
    "declared": (lambda v: isinstance(v, list), "a list of program names"),
    "exitstatus": (lambda v: isinstance(v, int), "an integer"),
    "pytest": (_counts, "an object of outcome counts"),
    "shard": (_a_shard, "an object of a shard's index, count (1 <= index <= count) and selection"),
}


def _item(n: int, item: Any, where: str) -> Record:
    if not isinstance(item, dict) or not all(
        isinstance(item.get(k), str) for k in ("kind", "nodeid", "outcome")
    ):
        raise InvariantsError(f"{where}: items[{n}] is not an object with string 'kind', 'nodeid', 'outcome'")
    try:
        return from_json(item)
    except RecordError as err:
        raise InvariantsError(f"{where}: items[{n}] ({item['kind']} {item['nodeid']}): {err}") from None


def record(kind: RecordKind, **fields: Any) -> tuple[str, dict[str, Any]]:
    """``(name, value)`` for ``record_property``: one record of ``kind``, its fields checked here."""
    data = {**fields, "kind": kind, "outcome": "passed", "nodeid": ""}
    try:
        checked = to_json(from_json(_encode(data)))
    except RecordError as err:
        raise InvariantsError(f"results: a {kind} record {err}") from None
    return PROPERTY, {k: v for k, v in checked.items() if k not in ("outcome", "nodeid")}


def entry(
    name: str,
    value: Any,
    outcome: str,
    nodeid: str,
    reason: str | None = None,
    failure: Failure | None = None,
) -> Record | None:
    """The record of one recorded property, or None when it is not one of :func:`record`'s."""
    if name != PROPERTY or not isinstance(value, dict) or value.get("kind") not in KINDS:
        return None
    item = from_json({**value, "outcome": outcome, "nodeid": nodeid})
    return dataclasses.replace(item, reason=reason or None, failure=failure)


def failure_property(failure: Failure) -> tuple[str, dict[str, Any]]:
    """``(name, value)`` for a report's ``user_properties``: it crosses from an xdist worker as JSON."""
    return FAILURE_PROPERTY, _encode(failure)


def recorded_failure(properties: list[tuple[str, Any]]) -> Failure | None:
    for name, value in properties:
        if name == FAILURE_PROPERTY:
            with contextlib.suppress(_Bad):
                failure: Failure = _decode(Failure, value)
                return failure
    return None


def error_entry(
    outcome: str, nodeid: str, reason: str | None = None, failure: Failure | None = None
) -> Record:
    return Error(outcome=outcome, nodeid=nodeid, reason=reason or None, failure=failure)


def skipped_entry(nodeid: str, reason: str, properties: Sequence[tuple[str, Any]] = ()) -> Record:
    """A skip's record; ``properties``: the item's, where :func:`lacks_property` may say the tool's limit on
    the release skipped it."""
    said = next((dict(v) for n, v in properties if n == LACKS_PROPERTY and isinstance(v, dict)), {})
    lacks, target, program, config = (str(said[k]) if said.get(k) else None for k in _LIMIT)
    return Skipped(
        outcome="skipped",
        nodeid=nodeid,
        reason=reason,
        lacks=lacks,
        target=target,
        program=program,
        config=config,
    )


_LIMIT = ("lacks", "target", "program", "config")  # what a skip for the tool's limit says


def lacks_property(api: str, key: Key | None) -> tuple[str, dict[str, str]]:
    """``(name, value)`` for an item's ``user_properties``: the release lacked ``api`` for the compile of
    ``key`` (its skip's record carries them)."""
    return LACKS_PROPERTY, {"lacks": api, **(key._asdict() if key is not None else {})}


def compile_failure(item: Record) -> Key | None:
    """The compile an item failed on: a finding about that program, where any other error says the suite
    could not run."""
    failure = item.failure
    return failure.key if failure is not None and failure.kind == "compile" else None


def write(path: Path, run: Mapping[str, Any], items: list[Record]) -> None:
    """Write ``run`` and the records, sorted so that the file is the same under xdist, atomically."""
    entries = [to_json(e) for e in sorted(items, key=lambda e: (e.kind, e.nodeid))]
    data = {**run, "format_version": FORMAT_VERSION, "items": entries}
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InvariantsError(f"{path}: cannot write the results file ({err.strerror or err})") from None
    try:
        write_atomic(path, text)
    except InvariantsError as err:
        said = f"{err}; this run wrote no results file (one there is an earlier run's)"
        raise InvariantsError(said) from None


def check_path(path: Path, option: str = "--results-json") -> None:
    """One line when the results file cannot be written at ``path``: checked when the run starts, so that
    a bad path never costs the run its results at the end."""
    if path.is_dir():
        raise InvariantsError(
            f"{option} {path}: a directory; give a file path such as {path / 'results.json'}"
        )
    folder = next((p for p in (path.parent, *path.parent.parents) if p.exists()), None)
    if folder is not None and not folder.is_dir():
        raise InvariantsError(f"{option} {path}: {folder} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InvariantsError(f"{option} {path}: cannot make its folder ({err.strerror or err})") from None
    if not os.access(path.parent, os.W_OK):
        raise InvariantsError(f"{option} {path}: its folder {path.parent} is not writable")
    if path.is_file() and not json_file_of(path, "items"):
        raise InvariantsError(
            f"{option} {path}: a file the gate did not write (not a results file); the gate replaces only "
            "its own results: give another path, or remove the file"
        )


@dataclasses.dataclass
class Claim:
    """The results path one run writes, held for the whole run by a lock beside it (none without
    ``fcntl``); ``note``: the one line to print about it."""

    path: Path
    note: str | None = None
    _handle: IO[str] | None = None

    def release(self) -> None:
        if self._handle is None:
            return
        with contextlib.suppress(OSError):
            if _same_file(self._handle, lock := lock_path(self.path)):
                lock.unlink()
        self._handle.close()
        self._handle = None


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _same_file(handle: IO[str], path: Path) -> bool:
    try:
        return os.fstat(handle.fileno()).st_ino == path.stat().st_ino
    except OSError:
        return False


# A lock file is never opened through a link (a planted one would have the lock's line written over the
# file it names), as the results file is replaced, never written through.
_LOCK_OPEN = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _open_lock(path: Path) -> IO[str]:
    try:
        fd = os.open(path, _LOCK_OPEN | getattr(os, "O_NONBLOCK", 0), 0o644)
    except OSError:
        if os.path.islink(path):
            raise InvariantsError(
                f"{path}: a link, where the gate keeps its own lock file; remove it (it is not followed)"
            ) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InvariantsError(f"{path}: not a regular file, where the gate keeps its lock file; remove it")
    return open(fd, "r+", encoding="utf-8")  # held for the run


def _try_lock(path: Path) -> tuple[IO[str] | None, str]:
    """``(handle, "")``, or ``(None, holder)`` when a live process holds it. The lock dies with its process,
    so a stale lock file never blocks a later run."""
    import fcntl

    for _ in range(5):
        handle = _open_lock(path)
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            return None, holder
        if not _same_file(handle, path):  # removed by its last holder meanwhile: lock the new one
            handle.close()
            continue
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%H:%M:%S')}\n")
        handle.flush()
        return handle, ""
    raise InvariantsError(f"{path}: cannot lock it (it keeps being replaced)")


def claim(path: Path) -> Claim:
    """Claim ``path`` for this run's results; when another live run holds it, this run gets a file of its
    own, ``<stem>.<pid><suffix>``, and a note saying so."""
    check_path(path)
    try:
        handle, holder = _try_lock(lock_path(path))
    except (OSError, ImportError):  # no fcntl, or no lock file can be made there (a read-only share)
        return Claim(path)
    if handle is not None:
        return Claim(path, None, handle)
    own = path.with_name(f"{path.stem}.{os.getpid()}{path.suffix}")
    try:
        handle, _ = _try_lock(lock_path(own))
    except OSError:
        handle = None
    note = (
        f"invariants: {path} is being written by another run ({holder or 'a live process'}); "
        f"this run writes {own}"
    )
    return Claim(own, note, handle)


# The widest whole number a record holds (an int64); a longer one would raise wherever it is read or shown.
_DIGITS = 19


class _TooLong(ValueError):
    pass


def _count(digits: str) -> int:
    n = len(digits.lstrip("-"))
    if n > _DIGITS:
        raise _TooLong(n)
    return int(digits)


def read(path: str | Path) -> Results:
    """Read and validate a results file; one line when it is not one, or of another format."""
    p = Path(path)
    if not p.is_file():
        raise InvariantsError(f"{p}: no such results file")
    try:
        data = json.loads(p.read_text(), parse_int=_count)
    except UnicodeDecodeError:
        raise InvariantsError(f"{p}: not a results file (not text)") from None
    except json.JSONDecodeError as err:
        raise InvariantsError(f"{p}:{err.lineno}: not JSON ({err.msg})") from None
    except _TooLong as err:
        raise InvariantsError(
            f"{p}: a number of {err.args[0]:,} digits, past any count or size the gate records; not a "
            "results file it wrote"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise InvariantsError(
            f"{p}: not a results file (expected an object with an 'items' list, as written by "
            "pytest --results-json)"
        )
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        written = "no format version" if version is None else f"format version {version!r}"
        raise InvariantsError(
            f"{p}: a results file of {written}; this version reads format {FORMAT_VERSION} only: run the "
            "gate again (pytest --results-json) to write a new one"
        )
    return Results.from_json(data, str(p))
