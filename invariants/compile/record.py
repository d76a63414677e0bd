"""The record of one compile: what a (program, configuration, target) compiled to, as plain text and
numbers (no JAX).

:mod:`invariants.compile.artifacts` makes it; every later stage reads it, and a child process hands it
back as JSON (:meth:`Compiled.to_json`). Nothing in it is a JAX object, so the stages that read it (the
measuring stage, the snapshot, the reports) import no JAX.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

from .._errors import InvariantsError

__all__ = ["Compiled", "FailedCompile", "Key", "json_problem"]


class Key(NamedTuple):
    """What one compile is of: a program of this process (the catalog's or a declared one), in one
    configuration, for one target."""

    program: str
    config: str
    target: str


class FailedCompile(InvariantsError):
    """A program's compile that failed (a tracing or compiler error): ``str()`` is its one line
    (``TARGET/PROGRAM[CONFIG]: compile failed: FIRST``), ``first`` the error's first line, ``kind`` the
    exception's type name, ``unoptimized`` the HLO the compiler was given (None when it
    failed before lowering)."""

    def __init__(self, message: str, key: Key, first: str, kind: str, unoptimized: str | None = None) -> None:
        super().__init__(message)
        self.key, self.first, self.kind, self.unoptimized = key, first, kind, unoptimized


@dataclasses.dataclass(frozen=True)
class Compiled:
    """What one program compiles to on one target.

    ``hlo_text`` is the optimized, scheduled HLO module (``compiled.as_text()``); ``jaxpr_primitives`` is
    the jaxpr's primitive sequence with nested calls inlined and gather/scatter modes attached, e.g.
    ``gather[PROMISE_IN_BOUNDS]``. ``cost`` and ``memory`` are XLA's analyses where the backend offers them
    (aids for inspection, not comparable across versions). ``compile_seconds`` is the wall time of the
    trace, lower and compile that made the record (None for a module read from a file). ``kernel_code`` is
    the code each kernel compiled to, file name -> text (``invariants.kernels``): the PTX of a GPU compile,
    the optimized LLVM IR of a CPU compile; empty where the backend writes none (TPU) or the target does
    not read it.
    """

    program: str
    config: str
    target: str
    jaxpr: str
    jaxpr_primitives: tuple[str, ...]
    hlo_text: str
    cost: dict[str, float]
    memory: dict[str, int]
    compile_seconds: float | None
    kernel_code: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def key(self) -> Key:
        return Key(self.program, self.config, self.target)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Compiled:
        data = dict(data)
        data["jaxpr_primitives"] = tuple(data["jaxpr_primitives"])
        return cls(**data)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _texts(value: object) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)


def _table(value: object, holds: Callable[[object], bool]) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and holds(v) for k, v in value.items())


# What each field of :meth:`Compiled.to_json` must be, in words and as a test.
_FIELDS: dict[str, tuple[str, Callable[[object], bool]]] = {
    "program": ("text", lambda v: isinstance(v, str)),
    "config": ("text", lambda v: isinstance(v, str)),
    "target": ("text", lambda v: isinstance(v, str)),
    "jaxpr": ("text", lambda v: isinstance(v, str)),
    "jaxpr_primitives": ("a list of texts", _texts),
    "hlo_text": ("text", lambda v: isinstance(v, str)),
    "cost": ("a table of numbers", lambda v: _table(v, _number)),
    "memory": ("a table of whole numbers", lambda v: _table(v, lambda n: _number(n) and isinstance(n, int))),
    "compile_seconds": ("a number or null", lambda v: v is None or _number(v)),
    "kernel_code": ("a table of texts", lambda v: _table(v, lambda t: isinstance(t, str))),
}


def json_problem(data: object) -> str | None:
    """What keeps ``data`` from being a :meth:`Compiled.to_json` of this release (a missing or unknown
    field, a field of the wrong type), in a few words; None when it is one. A record read back from a file
    or another process is checked before any field is used."""
    if not isinstance(data, dict):
        return "not a table"
    if unknown := sorted(set(data) - set(_FIELDS)):
        return f"unknown field {unknown[0]!r}"
    for name, (kind, holds) in _FIELDS.items():
        if name not in data:
            return f"no field {name!r}"
        if not holds(data[name]):
            return f"{name} is not {kind}"
    return None
