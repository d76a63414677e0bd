"""Every ``INVARIANTS_*`` environment variable the package reads, in one table (no JAX): its rows are
``data/environment.toml``.

A *setting* is a user's: the default of a gate option, or a knob with no option. A *protocol* variable is the
suite's own, set by one process for another it starts. Reading a name the table lacks is a ``KeyError``, so a
misspelt name fails its first test instead of reading nothing forever.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from typing import Literal

from ._errors import InvariantsError
from ._paths import PACKAGE_DIR


@dataclasses.dataclass(frozen=True)
class Variable:
    name: str
    kind: Literal["setting", "protocol"]
    meaning: str


def _table() -> dict[str, Variable]:
    path = PACKAGE_DIR / "data" / "environment.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    bad = [name for name, row in data.items() if row.get("kind") not in ("setting", "protocol")]
    if bad:  # the package's own data: a broken row is a bug of this package, said once, at import
        raise RuntimeError(f"{path}: {bad[0]}: kind must be 'setting' or 'protocol'")
    return {name: Variable(name, row["kind"], row["meaning"]) for name, row in data.items()}


VARIABLES: dict[str, Variable] = _table()


def name(variable: str) -> str:
    """``variable`` itself, once checked against the table (for a child's environment)."""
    return VARIABLES[variable].name


def get(variable: str, default: str | None = None) -> str | None:
    return os.environ.get(name(variable), default)


def requested_platforms() -> list[str]:
    """The backends ``JAX_PLATFORMS`` asks for, in order; set but blank is unset, ``cpu``."""
    return [p.strip() for p in (os.environ.get("JAX_PLATFORMS", "").strip() or "cpu").split(",") if p.strip()]


def default_platforms() -> None:
    """``JAX_PLATFORMS=cpu`` when it is unset or blank: the runtime is the CPU unless one is asked for."""
    if not os.environ.get("JAX_PLATFORMS", "").strip():
        os.environ["JAX_PLATFORMS"] = "cpu"


def seconds(variable: str, default: float) -> float:
    """The variable as a positive, finite number of seconds; unset or blank: ``default``."""
    raw = get(variable)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise InvariantsError(
            f"{name(variable)}={raw!r}: takes a positive, finite number of seconds (unset: {default:g})"
        )
    return value


def choice(variable: str, choices: tuple[str, ...], unset: str) -> str | None:
    """The variable as one of ``choices``; unset or blank: None (``unset`` says what that means)."""
    raw = get(variable)
    if raw is None or not raw.strip():
        return None
    if raw.strip() not in choices:
        raise InvariantsError(f"{name(variable)}={raw!r}: takes {' or '.join(choices)} (unset: {unset})")
    return raw.strip()


def check_settings() -> None:
    """Every setting the gate's items read, checked before anything compiles."""
    seconds("INVARIANTS_RATIO_MAX_SECONDS", RATIO_MAX_SECONDS)
    choice("INVARIANTS_CLOCK", CLOCKS, "cpu on the CPU backend, else device")


# The default budget of one ratio item, and the clocks a throughput item can time with.
RATIO_MAX_SECONDS = 10.0
CLOCKS = ("cpu", "wall", "device")
