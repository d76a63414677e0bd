"""The record of one compile: what a (program, configuration, target) compiled to, as plain text and
numbers, so that the stages that read it import no JAX and a child process can hand it back as JSON.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

from .._errors import InvariantsError


class Key(NamedTuple):
    program: str
    config: str
    target: str


class FailedCompile(InvariantsError):
    """A program's compile that failed: ``first`` the error's first line, ``kind`` its type's name,
    ``unoptimized`` the HLO the compiler was given (None when it failed before lowering)."""

    def __init__(self, message: str, key: Key, first: str, kind: str, unoptimized: str | None = None) -> None:
        super().__init__(message)
        self.key, self.first, self.kind, self.unoptimized = key, first, kind, unoptimized


@dataclasses.dataclass(frozen=True)
class Compiled:
    """What one program compiles to on one target: the optimized HLO, the jaxpr's primitive sequence,
    XLA's analyses where the backend offers them (aids, not verdicts), the seconds that made it (None for
    a module read from a file) and the code each kernel compiled to (PTX, LLVM IR; none on TPU)."""

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


def _text(value: object) -> bool:
    return isinstance(value, str)


def _table(value: object, holds: Callable[[object], bool]) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and holds(v) for k, v in value.items())


_TEXT = ("text", _text)
# What each field of :meth:`Compiled.to_json` must be, in words and as a test.
_FIELDS: dict[str, tuple[str, Callable[[object], bool]]] = {
    **dict.fromkeys(("program", "config", "target", "jaxpr"), _TEXT),
    "jaxpr_primitives": ("a list of texts", lambda v: isinstance(v, list | tuple) and all(map(_text, v))),
    "hlo_text": _TEXT,
    "cost": ("a table of numbers", lambda v: _table(v, _number)),
    "memory": ("a table of whole numbers", lambda v: _table(v, lambda n: _number(n) and isinstance(n, int))),
    "compile_seconds": ("a number or null", lambda v: v is None or _number(v)),
    "kernel_code": ("a table of texts", lambda v: _table(v, _text)),
}


def json_problem(data: object) -> str | None:
    """What keeps ``data`` from being a :meth:`Compiled.to_json` of this release, in a few words; None when
    it is one. A record read back from a file or another process is checked before any field is used."""
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
