"""The results file: the one owner of its record types, written by the pytest plugin, read by the report.

A gate item records what it measured with :func:`record` (through pytest's ``record_property``); the plugin
turns each recorded value into an entry with :func:`entry` and writes the file with :func:`write`; the
report reads it with :func:`read`. Nothing else spells a record kind or its fields.

The file is one JSON object::

    {"versions": {package: version}, "runtime": {"platform", "device_kind", "count"},
     "targets": {name: {"mode", "scope", "unavailable"}}, "exitstatus": int, "items": [entry, ...]}

Every entry has ``kind`` (one of :data:`KINDS`), ``outcome`` (pytest's: passed, failed, skipped, xfailed)
and ``nodeid``, plus the fields :data:`FIELDS` lists for its kind (a writer that leaves one out fails at
once, so the reader can rely on them). Extra fields are allowed and kept. The kinds:

* ``structure``: ``target``, ``program``, ``config`` and every structural metric of the registry
  (:func:`invariants._metrics.structure_metrics`), and every compiler and kernel-code metric (null where
  the target gives none; :func:`~invariants._metrics.compiler_metrics`, ``kernel_metrics``);
* ``invariant``: ``id``, ``target``, ``programs``, ``config``, ``assert``, ``holds``, ``measured``; and
  ``ratio`` (``metric(A) / metric(B)`` of a scaled relation, else null);
* ``correctness``: ``id``, ``program``, ``config``, ``distribution``, ``problem``;
* ``ratio`` (throughput tier): ``id``, ``target``, ``a``, ``b``, ``config``, ``median``, ``low``,
  ``high``, ``threshold``, ``verdict``; and ``predicted``, the TPU compiler's estimated-cycles ratio of the
  same programs on the same target (null off TPU);
* ``efficiency`` (throughput tier): ``id``, ``target``, ``program``, ``config``, ``efficiency``, ``low``,
  ``high``, ``min_efficiency``, ``verdict``;
* ``error``: an item that failed before it recorded anything (no fields).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from ._errors import InvariantsError

__all__ = ["FIELDS", "KINDS", "PROPERTY", "TIERS", "entry", "read", "record", "write"]

RecordKind = Literal["structure", "invariant", "correctness", "ratio", "efficiency", "error"]

FIELDS: dict[str, tuple[str, ...]] = {
    "structure": ("target", "program", "config"),
    "invariant": ("id", "target", "programs", "config", "assert", "holds", "measured"),
    "correctness": ("id", "program", "config", "distribution", "problem"),
    "ratio": ("id", "target", "a", "b", "config", "median", "low", "high", "threshold", "verdict"),
    "efficiency": (
        "id", "target", "program", "config", "efficiency", "low", "high", "min_efficiency", "verdict",
    ),
    "error": (),
}  # fmt: skip
KINDS: tuple[str, ...] = tuple(FIELDS)
# The tier each kind belongs to, as the report's tier table names it.
TIERS: dict[str, str] = {
    "structure": "structure",
    "invariant": "invariant",
    "correctness": "correctness",
    "ratio": "throughput: ratio",
    "efficiency": "throughput: efficiency",
    "error": "error",
}
# The ``record_property`` name every gate item records under.
PROPERTY = "invariants"


def record(kind: RecordKind, **fields: Any) -> tuple[str, dict[str, Any]]:
    """``(name, value)`` for ``record_property``: one record of ``kind``; raises if a field is missing."""
    missing = [f for f in FIELDS[kind] if f not in fields]
    if missing:
        raise InvariantsError(f"results: a {kind} record needs {', '.join(missing)}")
    return PROPERTY, {**fields, "kind": kind}


def entry(name: str, value: Any, outcome: str, nodeid: str) -> dict[str, Any] | None:
    """The results-file entry of one recorded property, or None when it is not one of :func:`record`'s."""
    if name != PROPERTY or not isinstance(value, dict) or value.get("kind") not in FIELDS:
        return None
    return {**value, "outcome": outcome, "nodeid": nodeid}


def error_entry(outcome: str, nodeid: str) -> dict[str, Any]:
    """The entry of an item that failed before recording anything."""
    return {"kind": "error", "outcome": outcome, "nodeid": nodeid}


def write(path: Path, payload: dict[str, Any]) -> None:
    """Write the results file (entries sorted by kind and node id, so the file is the same under xdist)."""
    items = sorted(payload["items"], key=lambda r: (r["kind"], r["nodeid"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**payload, "items": items}, indent=1, sort_keys=True) + "\n")


def read(path: str | Path) -> dict[str, Any]:
    """Read and validate a results file; raise :class:`InvariantsError` (one line) when it is not one.

    Entries of a kind this version does not know are kept as they are (a newer writer may add kinds);
    entries of a known kind must carry its fields.
    """
    p = Path(path)
    if not p.is_file():
        raise InvariantsError(f"{p}: no such results file")
    try:
        data = json.loads(p.read_text())
    except UnicodeDecodeError:
        raise InvariantsError(f"{p}: not a results file (not text)") from None
    except json.JSONDecodeError as err:
        raise InvariantsError(f"{p}:{err.lineno}: not JSON ({err.msg})") from None
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
    for key in ("versions", "runtime", "targets"):
        if not isinstance(data.get(key, {}), dict):
            raise InvariantsError(f"{p}: '{key}' must be an object")
    if not isinstance(data.get("exitstatus", 0), int):
        raise InvariantsError(f"{p}: 'exitstatus' must be an integer")
    return data
