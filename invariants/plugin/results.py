"""The results file: the one owner of its record types, written by the pytest plugin, read by the report.

A gate item records what it measured with :func:`record` (through pytest's ``record_property``); the plugin
turns each recorded value into an :class:`Entry` with :func:`entry` and writes the file with :func:`write`;
every reader (the report, bisect, matrix, the self-check) reads it with :func:`read`, a :class:`Results`.
Nothing else spells a record kind or its fields.

The file is one JSON object::

    {"versions": {package: version}, "runtime": {"platform", "device_kind", "count"},
     "targets": {name: {"mode", "scope", "unavailable"}}, "exitstatus": int, "items": [entry, ...]}

Every entry has ``kind`` (one of :data:`KINDS`), ``outcome`` (pytest's: passed, failed, skipped, xfailed) and
``nodeid``, plus the fields :data:`FIELDS` lists for its kind (a writer that leaves one out fails at once, so
the reader can rely on them); a failed entry also has ``reason``, the first line of its failure
(:attr:`Entry.reason`), and a ``skipped`` entry its skip's reason. Extra fields are allowed and kept. The top
level may hold ``declared``: the programs the run's spec files declared (a downstream project's own), which
the report shows by default; ``programs``: every program of the run, name to ``{"kind", "tags"}``, which the
report's ``--programs`` selects from; and ``pytest``: pytest's own count of the run's outcomes
(:data:`PYTEST_OUTCOMES`, as its last line counts them), which holds what no entry records (a module skipped
whole), so that the report counts what pytest did (all of them :class:`Results`). The kinds:

* ``structure``: ``target``, ``program``, ``config`` and every numeric metric a compile gives (structural,
  the compiler's, the kernels' code, the compile time; null where the target gives none:
  :meth:`invariants.measure.measurement.Measurement.numbers`);
* ``invariant``: ``id``, ``target``, ``programs``, ``config``, ``assert``, ``holds``, ``measured``; and
  ``ratio`` (``metric(A) / metric(B)`` of a scaled relation, else null);
* ``correctness``: ``id``, ``program``, ``config``, ``distribution``, ``problem``;
* ``ratio`` (throughput tier): ``id``, ``target``, ``a``, ``b``, ``config``, ``median``, ``low``,
  ``high``, ``threshold``, ``verdict``; and ``predicted``, the TPU compiler's estimated-cycles ratio of the
  same programs on the same target (null off TPU);
* ``efficiency`` (throughput tier): ``id``, ``target``, ``program``, ``config``, ``median`` (the
  efficiency ``t_copy / t_program``), ``low``, ``high``, ``threshold`` (its floor; null without a
  baseline), ``verdict`` (:data:`RECORDED` where the run recorded the baseline it is then judged by:
  nothing to judge against yet).

Both throughput kinds carry one :class:`invariants.timing.paired.RatioResult` (``to_dict``), whose
``direction`` says which side of ``threshold`` passes (``at_most`` a ratio, ``at_least`` an efficiency);
* ``skipped``: an item that skipped before it recorded anything (no fields; ``reason`` says why: a
  target that cannot compile here, a program whose chips do not fit it, no invariant that applies), so
  that the file lists every skip pytest counts;
* ``error``: an item that failed before it recorded anything (no fields); when what failed was a
  program's compile (a compiler or tracing error, in that release, on that target), its reason reads
  ``TARGET/PROGRAM[CONFIG]: compile failed: ...`` (:data:`COMPILE_FAILED`, :func:`compile_failure`): a
  finding about the program, where any other error says the suite could not run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple

from .._errors import InvariantsError
from .._paths import write_atomic

__all__ = [
    "COMPILE_FAILED", "FIELDS", "KINDS", "PROPERTY", "PYTEST_OUTCOMES", "TIERS", "Claim", "CompileFailure",
    "Entry", "Results", "check_path", "claim", "compile_failed", "compile_failure", "discard_earlier",
    "entry", "error_entry", "lock_path", "read", "record", "skipped_entry", "write",
]  # fmt: skip

RecordKind = Literal["structure", "invariant", "correctness", "ratio", "efficiency", "error", "skipped"]

FIELDS: dict[str, tuple[str, ...]] = {
    "structure": ("target", "program", "config"),
    "invariant": ("id", "target", "programs", "config", "assert", "holds", "measured"),
    "correctness": ("id", "program", "config", "distribution", "problem"),
    "ratio": ("id", "target", "a", "b", "config", "median", "low", "high", "threshold", "verdict"),
    "efficiency": (
        "id", "target", "program", "config", "median", "low", "high", "threshold", "verdict",
    ),
    "error": (),
    "skipped": (),
}  # fmt: skip
KINDS: tuple[str, ...] = tuple(FIELDS)
# The fields of FIELDS that may be null: a value check that found no problem, an efficiency item with no
# baseline to hold it to (no floor, so no verdict: RatioResult.verdict is None when no bound was given; the
# item itself fails, saying how to record one). Any other null is a record no writer of this module makes.
NULLABLE: dict[str, frozenset[str]] = {
    "correctness": frozenset({"problem"}),
    "efficiency": frozenset({"threshold", "verdict"}),
}
# The tier each kind belongs to, as the report's tier table names it.
TIERS: dict[str, str] = {
    "structure": "structure",
    "invariant": "invariant",
    "correctness": "correctness",
    "ratio": "throughput: ratio",
    "efficiency": "throughput: efficiency",
    "error": "error",
    "skipped": "skipped",
}
# The verdict of an efficiency item whose run recorded its baseline: it had no floor to be judged by.
RECORDED = "recorded"
# The ``record_property`` name every gate item records under.
PROPERTY = "invariants"
# The outcomes pytest's last line counts (its terminal reporter's keys), in the order it says them.
PYTEST_OUTCOMES = ("failed", "passed", "skipped", "xfailed", "xpassed", "error")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One item of a results file: what pytest said of it (``kind``, ``outcome``, ``nodeid``, the failure's
    ``reason``) and the fields its record holds (``fields``: :data:`FIELDS` of its kind, and more). The
    fields every reader asks for are properties; any other (a metric) is :meth:`get`."""

    kind: str
    outcome: str
    nodeid: str
    reason: str | None = None
    fields: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        """The record's field ``name`` (a metric, ``measured``, ``holds``...), else ``default``."""
        return self.fields.get(name, default)

    @property
    def target(self) -> str | None:
        return self._text("target")

    @property
    def program(self) -> str | None:
        return self._text("program")

    @property
    def config(self) -> str | None:
        return self._text("config")

    @property
    def id(self) -> str | None:
        return self._text("id")

    @property
    def programs(self) -> list[str]:
        """The programs of an invariant (several for a relation), else the one program, else none."""
        programs = self.fields.get("programs")
        if isinstance(programs, list):
            return [str(p) for p in programs]
        return [self.program] if self.program else []

    def _text(self, name: str) -> str | None:
        value = self.fields.get(name)
        return None if value is None else str(value)

    def to_json(self) -> dict[str, Any]:
        reason = {"reason": self.reason} if self.reason else {}
        return {**self.fields, "kind": self.kind, "outcome": self.outcome, "nodeid": self.nodeid, **reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Entry:
        """An entry as the file holds it (its fields checked by :func:`read`)."""
        fields = {k: v for k, v in data.items() if k not in ("kind", "outcome", "nodeid", "reason")}
        reason = data.get("reason")
        return cls(str(data["kind"]), str(data["outcome"]), str(data["nodeid"]),
                   reason if isinstance(reason, str) and reason else None, fields)  # fmt: skip


@dataclasses.dataclass
class Results:
    """A results file as :func:`read` returns it: what the run was, and its entries."""

    items: list[Entry]
    versions: dict[str, str] = dataclasses.field(default_factory=dict)
    runtime: dict[str, Any] = dataclasses.field(default_factory=dict)
    targets: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    exitstatus: int = 0
    # The programs the run's spec files declared (a downstream project's own: the report's default), and
    # every program of the run, name to ``{"kind", "tags"}`` (what the report's --programs selects from).
    declared: list[str] = dataclasses.field(default_factory=list)
    programs: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    # pytest's count of each outcome (None: an older file, or a run without its terminal reporter).
    pytest: dict[str, int] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Results:
        """A results file's object as :func:`read` has checked it (an entry without ``kind``, ``outcome`` or
        ``nodeid`` raises ``KeyError``)."""
        declared, programs, counts = data.get("declared", []), data.get("programs", {}), data.get("pytest")
        return cls(
            items=[Entry.from_json(item) for item in data["items"]],
            versions={str(k): str(v) for k, v in data.get("versions", {}).items()},
            runtime=dict(data.get("runtime", {})),
            targets={str(k): (v if isinstance(v, dict) else {}) for k, v in data.get("targets", {}).items()},
            exitstatus=data.get("exitstatus", 0),
            declared=[n for n in declared if isinstance(n, str)],
            programs={str(k): v for k, v in programs.items() if isinstance(v, dict)}
            if isinstance(programs, dict) else {},
            pytest={k: int(counts.get(k, 0)) for k in PYTEST_OUTCOMES} if isinstance(counts, dict) else None,
        )  # fmt: skip


def record(kind: RecordKind, **fields: Any) -> tuple[str, dict[str, Any]]:
    """``(name, value)`` for ``record_property``: one record of ``kind``; raises if a field is missing."""
    missing = [f for f in FIELDS[kind] if f not in fields]
    if missing:
        raise InvariantsError(f"results: a {kind} record needs {', '.join(missing)}")
    return PROPERTY, {**fields, "kind": kind}


def entry(name: str, value: Any, outcome: str, nodeid: str, reason: str | None = None) -> Entry | None:
    """The results-file entry of one recorded property, or None when it is not one of :func:`record`'s.
    ``reason``: a failed item's one line."""
    if name != PROPERTY or not isinstance(value, dict) or value.get("kind") not in FIELDS:
        return None
    fields = {k: v for k, v in value.items() if k != "kind"}
    return Entry(str(value["kind"]), outcome, nodeid, reason or None, fields)


def error_entry(outcome: str, nodeid: str, reason: str | None = None) -> Entry:
    """The entry of an item that failed before recording anything."""
    return Entry("error", outcome, nodeid, reason or None)


def skipped_entry(nodeid: str, reason: str) -> Entry:
    """The entry of an item that skipped before recording anything, with why."""
    return Entry("skipped", "skipped", nodeid, reason)


# What a failed compile's message says after its key: the words compile_failure reads an error entry by.
COMPILE_FAILED = "compile failed"
_FAILED_KEY = re.compile(
    rf"^(?P<target>[^/\s]+)/(?P<program>[^\[\s]+)\[(?P<config>[^\]\s]+)\]: {COMPILE_FAILED}: "
)


class CompileFailure(NamedTuple):
    """A program's compile that failed in a run: its key, and the item's reason (the compile's message)."""

    target: str
    program: str
    config: str
    reason: str


def compile_failed(target: str, program: str, config: str, why: str) -> str:
    """The one line a failed compile says (what :func:`compile_failure` reads back from a results file)."""
    return f"{target}/{program}[{config}]: {COMPILE_FAILED}: {why}"


def compile_failure(item: Entry) -> CompileFailure | None:
    """The compile failure an ``error`` entry's item failed on (see the module doc), else None: the verdict
    of that program in that run, not a run that could not happen."""
    reason = item.reason
    match = _FAILED_KEY.match(reason or "") if item.kind == "error" else None
    if match is None or reason is None:
        return None
    return CompileFailure(match["target"], match["program"], match["config"], reason)


def write(path: Path, run: Mapping[str, Any], items: list[Entry]) -> None:
    """Write the results file: ``run`` (versions, runtime, targets, exit status, programs, pytest's counts)
    and the entries, sorted by kind and node id (so the file is the same under xdist), atomically
    (:func:`invariants._paths.write_atomic`): a reader, or a run killed meanwhile, sees the old file or the
    new one, never a part. An ``OSError`` is one line (:class:`InvariantsError`)."""
    entries = [e.to_json() for e in sorted(items, key=lambda e: (e.kind, e.nodeid))]
    text = json.dumps({**run, "items": entries}, indent=1, sort_keys=True) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InvariantsError(f"{path}: cannot write the results file ({err.strerror or err})") from None
    try:
        write_atomic(path, text)
    except InvariantsError as err:
        raise InvariantsError(f"{err}; this run wrote no results file (an earlier one was removed)") from None


def check_path(path: Path, option: str = "--results-json") -> None:
    """Raise :class:`InvariantsError` (one line) when the results file cannot be written at ``path``: a
    directory there, a file where its folder should be, a folder that cannot be made or written. Checked
    when the run starts, so that a bad path never costs the run its results at the end."""
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
    if path.is_file() and not _a_results_file(path):
        raise InvariantsError(
            f"{option} {path}: a file the gate did not write (not a results file); the gate replaces only "
            "its own results: give another path, or remove the file"
        )


def _a_results_file(path: Path) -> bool:
    """Whether the file at ``path`` is one this gate may replace: empty, or a results file (a JSON object
    with ``items``), read whole only when it starts like one."""
    try:
        with open(path, "rb") as f:
            head = f.read(1)
            if not head:
                return f.read(1) == b"" and path.stat().st_size == 0
            if head != b"{":
                return False
            data = json.loads(head + f.read())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get("items"), list)


@dataclasses.dataclass
class Claim:
    """The results path one run writes, held for the whole run by a lock beside it.

    ``path``: where this run writes (the one asked for, or a file of its own when another live run holds
    that one). ``note``: the one line to print about it, or None. Under an OS without ``fcntl`` (Windows)
    nothing is locked.
    """

    path: Path
    note: str | None = None
    _lock: Path | None = None
    _handle: IO[str] | None = None

    def discard_earlier(self) -> None:
        """Remove the results file an earlier run left at :attr:`path` (one :func:`check_path` found the
        gate's own, or none; another live run's is never this claim's path): a gate run that then writes
        none, stopped by bad input or a crash, leaves no earlier run's file to be read as its own."""
        _unlink_earlier(self.path)

    def release(self) -> None:
        if self._handle is None:
            return
        with contextlib.suppress(OSError):
            if self._lock is not None and _same_file(self._handle, self._lock):
                self._lock.unlink()
        self._handle.close()
        self._handle = None


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def _same_file(handle: IO[str], path: Path) -> bool:
    try:
        return os.fstat(handle.fileno()).st_ino == path.stat().st_ino
    except OSError:
        return False


def _try_lock(path: Path) -> tuple[IO[str] | None, str]:
    """Lock ``path`` (made if missing) for this process: ``(handle, "")``; or ``(None, holder)`` when a
    live process holds it (``holder``: what that process wrote in it). The lock dies with its process, a
    SIGKILL included, so a stale lock file never blocks a later run."""
    import fcntl

    for _ in range(5):
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held for the run)
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


def _unlink_earlier(path: Path) -> None:
    """Remove the results file at ``path``; unlinking is atomic: a reader sees the whole earlier file or
    none."""
    try:
        path.unlink(missing_ok=True)
    except OSError as err:
        raise InvariantsError(
            f"--results-json {path}: cannot remove the earlier run's results ({err.strerror or err})"
        ) from None


def discard_earlier(path: Path) -> None:
    """Before anything can stop a gate run: remove the results file an earlier run left at ``path``,
    unless it is no results file (:func:`claim` says so later) or a live run holds it (its own file)."""
    if not path.is_file() or path.is_symlink() or not _a_results_file(path):
        return
    try:
        handle, _ = _try_lock(lock_path(path))
    except (OSError, ImportError):
        return
    if handle is not None:
        try:
            _unlink_earlier(path)
        finally:
            Claim(path, None, lock_path(path), handle).release()


def claim(path: Path) -> Claim:
    """Claim ``path`` for this run's results (after :func:`check_path`); :meth:`Claim.discard_earlier`
    then removes the file an earlier run left there.

    When another run that is still going holds it (two runs writing the same file would leave whichever
    ends last, and a report of the other run's items), this run gets a file of its own,
    ``<stem>.<pid><suffix>`` beside it, and a note saying so.
    """
    check_path(path)
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return Claim(path)
    try:
        handle, holder = _try_lock(lock_path(path))
    except OSError:  # no lock file can be made there (a read-only share): write unlocked
        return Claim(path)
    if handle is not None:
        return Claim(path, None, lock_path(path), handle)
    own = path.with_name(f"{path.stem}.{os.getpid()}{path.suffix}")
    try:
        handle, _ = _try_lock(lock_path(own))
    except OSError:
        handle = None
    note = (
        f"invariants: {path} is being written by another run ({holder or 'a live process'}); "
        f"this run writes {own}"
    )
    return Claim(own, note, lock_path(own) if handle else None, handle)


# The widest whole number a record holds: a count or a size in bytes, an int64 where the compiler gives it.
# A longer one is no record of the gate's, and past Python's digit limit or a float's range it would raise
# wherever it is read or shown.
_DIGITS = 19


class _TooLong(ValueError):
    pass


def _count(digits: str) -> int:
    """A JSON integer as :func:`read` takes it: refused (:class:`_TooLong`) past :data:`_DIGITS` digits."""
    n = len(digits.lstrip("-"))
    if n > _DIGITS:
        raise _TooLong(n)
    return int(digits)


def read(path: str | Path) -> Results:
    """Read and validate a results file; raise :class:`InvariantsError` (one line) when it is not one.

    Entries of a kind this version does not know are kept as they are (a newer writer may add kinds);
    entries of a known kind must carry its fields.
    """
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
    for n, item in enumerate(data["items"]):
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) for k in ("kind", "nodeid", "outcome")
        ):
            raise InvariantsError(f"{p}: items[{n}] is not an object with string 'kind', 'nodeid', 'outcome'")
        missing = [f for f in FIELDS.get(item["kind"], ()) if f not in item]
        if missing:
            raise InvariantsError(f"{p}: items[{n}] ({item['kind']}) lacks {', '.join(missing)}")
        nulls = [
            f
            for f in FIELDS.get(item["kind"], ())
            if item[f] is None and f not in NULLABLE.get(item["kind"], ())
        ]
        if nulls:
            what = f"{item['kind']} {item['nodeid']}"
            raise InvariantsError(f"{p}: items[{n}] ({what}): {', '.join(nulls)} null")
    for key in ("versions", "runtime", "targets"):
        if not isinstance(data.get(key, {}), dict):
            raise InvariantsError(f"{p}: '{key}' must be an object")
    if not isinstance(data.get("declared", []), list):
        raise InvariantsError(f"{p}: 'declared' must be a list of program names")
    if not isinstance(data.get("exitstatus", 0), int):
        raise InvariantsError(f"{p}: 'exitstatus' must be an integer")
    counts = data.get("pytest", {})
    if not isinstance(counts, dict) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts.values()
    ):
        raise InvariantsError(f"{p}: 'pytest' must be an object of outcome counts")
    return Results.from_json(data)
