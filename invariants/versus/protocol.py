"""The versus worker protocol: JSON lines over a worker's stdin and stdout, versioned and strict.

This module owns every message that crosses between the ``versus`` controller and a worker, and is the
only place either side encodes or decodes one. It imports nothing from JAX, so the worker of an older
installation and the controller parse it alike.

Each message is one JSON object on one line and carries ``"v": VERSION``.

* The worker speaks first: ``{"v": 1, "event": "hello", "versions": {...}, "platform": "cpu",
  "python": "3.11.9", "slowdown": 0.0}``.
* A request is ``{"v": 1, "op": OP, ...}``; the worker answers each with exactly one line,
  ``{"v": 1, "ok": true, ...}`` or ``{"v": 1, "ok": false, "error": "one line"}``.

  ============  ==========================================  ============================================
  op            request fields                              reply fields
  ============  ==========================================  ============================================
  ``prepare``   ``programs``: ``[[program, config], ...]``  ``per_call``: ``{"p/c": seconds}`` (warm)
  ``time``      ``key``: ``"p/c"``; ``calls``: int >= 1;    ``wall``, ``cpu``: seconds for ``calls``
                ``warm``: int >= 0, optional (default 0),   calls, after ``warm`` untimed ones
                untimed calls first
  ``structure`` ``keys``: ``[[program, config, target]]``   ``items``: ``{"p/c/t": {...}}``; ``targets``
  ``quit``      (none)                                      (none: the worker exits 0)
  ============  ==========================================  ============================================

Anything the worker does not understand (not JSON, another version, an unknown op, a missing or mistyped
field) gets one ``ok: false`` line naming what was wrong, and the worker exits with status 2: a
controller and a worker that disagree on the protocol stop at once instead of measuring garbage. The
controller is as strict about replies (:func:`decode_reply`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .. import _config
from .._errors import InvariantsError

VERSION = 1
# A decoded message, or an entry of a versus record: a JSON object whose fields are read by name.
Json = dict[str, Any]
OPS = ("prepare", "time", "trace", "structure", "quit")
# Set in a worker's environment by the self-check and the detection study only: each timed call of the
# worker costs this fraction more (0.1: a tenth), on the CPU time there, on the device clock on a chip.
SLOWDOWN_ENV = _config.name("INVARIANTS_VERSUS_SLOWDOWN")
# Set by the controller when it pins a round: the worker's cores, comma-separated. The worker restricts
# itself to them first thing, before JAX starts any thread (so its pools are sized to them too).
CPUS_ENV = _config.name("INVARIANTS_VERSUS_CPUS")


class ProtocolError(InvariantsError):
    """A message that is not valid protocol, said in one line."""


def encode(message: Mapping[str, object]) -> str:
    """One protocol line (with ``v`` set), newline-terminated."""
    return json.dumps({"v": VERSION, **message}, separators=(",", ":")) + "\n"


def _load(line: str, who: str) -> Json:
    try:
        data = json.loads(line)
    except ValueError:
        raise ProtocolError(f"{who}: not a JSON line: {line.strip()[:80]!r}") from None
    if not isinstance(data, dict):
        raise ProtocolError(f"{who}: a message must be a JSON object, got {type(data).__name__}")
    if data.get("v") != VERSION:
        raise ProtocolError(f"{who}: protocol version {data.get('v')!r}, this side speaks {VERSION}")
    return data


def _field(data: Json, name: str, kind: type | tuple[type, ...], who: str) -> Any:
    if name not in data:
        raise ProtocolError(f"{who}: {data.get('op') or 'message'} lacks {name!r}")
    value = data[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ProtocolError(f"{who}: {name!r} has the wrong type ({type(value).__name__})")
    return value


def _pairs(value: list[object], width: int, name: str, who: str) -> list[tuple[str, ...]]:
    out = []
    for entry in value:
        if not (isinstance(entry, list) and len(entry) == width and all(isinstance(s, str) for s in entry)):
            raise ProtocolError(f"{who}: each of {name!r} must be a list of {width} strings, got {entry!r}")
        out.append(tuple(entry))
    return out


def decode_request(line: str) -> Json:
    """A request line as ``{"op": ..., fields}``, validated; :class:`ProtocolError` otherwise."""
    who = "worker"
    data = _load(line, who)
    op = data.get("op")
    if op not in OPS:
        raise ProtocolError(f"{who}: unknown op {op!r}; known: {', '.join(OPS)}")
    if op == "prepare":
        return {"op": op, "programs": _pairs(_field(data, "programs", list, who), 2, "programs", who)}
    if op in ("time", "trace"):
        calls = _field(data, "calls", int, who)
        if calls < 1:
            raise ProtocolError(f"{who}: 'calls' must be >= 1, got {calls}")
        warm = _field(data, "warm", int, who) if "warm" in data else 0
        if warm < 0:
            raise ProtocolError(f"{who}: 'warm' must be >= 0, got {warm}")
        key = _field(data, "key", str, who)
        return {"op": op, "key": key, "calls": calls, **({"warm": warm} if op == "time" else {})}
    if op == "structure":
        return {"op": op, "keys": _pairs(_field(data, "keys", list, who), 3, "keys", who)}
    return {"op": op}


def decode_hello(line: str, who: str) -> Json:
    """The worker's first line; :class:`ProtocolError` unless it is a hello of this version."""
    data = _load(line, who)
    if data.get("event") != "hello":
        if data.get("ok") is False:
            raise ProtocolError(f"{who}: {data.get('error')}")
        raise ProtocolError(f"{who}: expected a hello, got {line.strip()[:80]!r}")
    _field(data, "versions", dict, who)
    _field(data, "platform", str, who)
    return data


def _check_prepare(data: Json, who: str) -> None:
    per_call = _field(data, "per_call", dict, who)
    if not all(isinstance(v, (int, float)) and v > 0 for v in per_call.values()):
        raise ProtocolError(f"{who}: per_call times must be positive numbers")


def _check_time(data: Json, who: str) -> None:
    for name in ("wall", "cpu"):
        if not isinstance(data.get(name), (int, float)) or data[name] < 0:
            raise ProtocolError(f"{who}: a time reply needs a non-negative {name!r}")


def _check_structure(data: Json, who: str) -> None:
    _field(data, "items", dict, who)
    _field(data, "targets", dict, who)


_REPLY_CHECKS = {"prepare": _check_prepare, "time": _check_time, "structure": _check_structure}


def decode_reply(line: str, op: str, who: str) -> Json:
    """A reply to ``op``; an ``ok: false`` reply or a malformed one raises one line naming ``who``."""
    data = _load(line, who)
    ok = data.get("ok")
    if ok is False:
        raise ProtocolError(f"{who}: {data.get('error') or 'failed without a reason'}")
    if ok is not True:
        raise ProtocolError(f"{who}: a reply needs 'ok', got {line.strip()[:80]!r}")
    check = _REPLY_CHECKS.get(op)
    if check is not None:
        check(data, who)
    return data
