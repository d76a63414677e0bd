"""The versus worker protocol: JSON lines over a worker's stdin and stdout, versioned and strict.

The only place either side encodes or decodes a message; it imports nothing from JAX, so the worker of an
older installation parses it alike. Every line is one JSON object with ``"v": VERSION``. The worker speaks
first (``{"event": "hello", "versions", "platform", ...}``); then each request ``{"op": OP, ...}`` gets
exactly one reply, ``{"ok": true, ...}`` or ``{"ok": false, "error": "one line"}``:

  ============  ==========================================  ============================================
  op            request fields                              reply fields
  ============  ==========================================  ============================================
  ``prepare``   ``programs``: ``[[program, config], ...]``  ``per_call``: ``{"p/c": seconds}`` (warm)
  ``time``      ``key``: ``"p/c"``; ``calls`` >= 1;         ``wall``, ``cpu``: seconds for ``calls``
                ``warm`` >= 0 untimed calls first           calls
  ``trace``     ``calls``: ``{"p/c": calls >= 1}``, run    ``device``: ``{"p/c": [seconds per call]}``;
                in turn inside one profiler trace           ``wall``, ``cpu``: ``{"p/c": seconds}``
  ``structure`` ``keys``: ``[[program, config, target]]``   ``items``: ``{"p/c/t": {...}}``; ``targets``
  ``quit``      (none)                                      (none: the worker exits 0)
  ============  ==========================================  ============================================

A line the worker does not understand gets one ``ok: false`` line and exit status 2: a controller and a
worker that disagree on the protocol stop at once instead of measuring garbage. Replies are read as strictly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from .. import _config
from .._errors import InvariantsError

VERSION = 1
# A decoded message, or an entry of a versus record: a JSON object whose fields are read by name.
Json = dict[str, Any]
_T = TypeVar("_T")
OPS = ("prepare", "time", "trace", "structure", "quit")
# Test-only: each timed call of the worker costs this fraction more (see versus.worker).
SLOWDOWN_ENV = _config.name("INVARIANTS_VERSUS_SLOWDOWN")
# A pinned round's cores, comma-separated: the worker takes them before JAX sizes its thread pools.
CPUS_ENV = _config.name("INVARIANTS_VERSUS_CPUS")


class ProtocolError(InvariantsError):
    """A message that is not valid protocol."""


def encode(message: Mapping[str, object]) -> str:
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


def _field(data: Json, name: str, kind: type[_T], who: str) -> _T:
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
    who = "worker"
    data = _load(line, who)
    op = data.get("op")
    if op not in OPS:
        raise ProtocolError(f"{who}: unknown op {op!r}; known: {', '.join(OPS)}")
    if op == "prepare":
        programs = _pairs(_field(data, "programs", list, who), 2, "programs", who)
        pads = _field(data, "pads", dict, who) if "pads" in data else {}
        for key, pad in pads.items():
            size, reached = (pad.get("size"), pad.get("reached")) if isinstance(pad, dict) else (None, None)
            if not (type(size) is int and size >= 1 and isinstance(reached, float)):
                raise ProtocolError(
                    f"{who}: prepare's 'pads' must map keys to {{size, reached}}, got {key}: {pad!r}"
                )
        return {"op": op, "programs": programs, "pads": pads}
    if op == "trace":
        counts = _field(data, "calls", dict, who)
        if not counts or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in counts.values()
        ):
            raise ProtocolError(f"{who}: trace's 'calls' must map each key to calls >= 1, got {counts!r}")
        blocks = _field(data, "blocks", int, who) if "blocks" in data else 1
        if blocks < 1:
            raise ProtocolError(f"{who}: 'blocks' must be >= 1, got {blocks}")
        # How many of the blocks a key takes part in, the first ones (default: every block).
        until = _field(data, "until", dict, who) if "until" in data else {}
        if not all(
            k in counts and isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= blocks
            for k, n in until.items()
        ):
            raise ProtocolError(
                f"{who}: trace's 'until' must map keys of 'calls' to 1..{blocks}, got {until!r}"
            )
        return {"op": op, "calls": counts, "blocks": blocks, "until": until}
    if op == "time":
        calls = _field(data, "calls", int, who)
        if calls < 1:
            raise ProtocolError(f"{who}: 'calls' must be >= 1, got {calls}")
        warm = _field(data, "warm", int, who) if "warm" in data else 0
        if warm < 0:
            raise ProtocolError(f"{who}: 'warm' must be >= 0, got {warm}")
        return {"op": op, "key": _field(data, "key", str, who), "calls": calls, "warm": warm}
    if op == "structure":
        return {"op": op, "keys": _pairs(_field(data, "keys", list, who), 3, "keys", who)}
    return {"op": op}


def decode_hello(line: str, who: str) -> Json:
    data = _load(line, who)
    if data.get("event") != "hello":
        if data.get("ok") is False:
            raise ProtocolError(f"{who}: {data.get('error')}")
        raise ProtocolError(f"{who}: expected a hello, got {line.strip()[:80]!r}")
    _field(data, "versions", dict, who)
    _field(data, "platform", str, who)
    return data


def decode_reply(line: str, op: str, who: str) -> Json:
    data = _load(line, who)
    ok = data.get("ok")
    if ok is False:
        raise ProtocolError(f"{who}: {data.get('error') or 'failed without a reason'}")
    if ok is not True:
        raise ProtocolError(f"{who}: a reply needs 'ok', got {line.strip()[:80]!r}")
    _check_reply(data, op, who)
    return data


def _check_reply(data: Json, op: str, who: str) -> None:
    if op == "prepare":
        per_call = _field(data, "per_call", dict, who)
        if not all(isinstance(v, (int, float)) and v > 0 for v in per_call.values()):
            raise ProtocolError(f"{who}: per_call times must be positive numbers")
    elif op == "time":
        for name in ("wall", "cpu"):
            if not isinstance(data.get(name), (int, float)) or data[name] < 0:
                raise ProtocolError(f"{who}: a time reply needs a non-negative {name!r}")
    elif op == "trace":
        blocks = _field(data, "blocks", list, who)
        for block in blocks:
            if not isinstance(block, dict):
                raise ProtocolError(f"{who}: each of 'blocks' must be an object, got {block!r}")
            for name in ("device", "wall", "cpu"):
                _field(block, name, dict, who)
    elif op == "structure":
        _field(data, "items", dict, who)
        _field(data, "targets", dict, who)
