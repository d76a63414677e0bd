"""Every ``INVARIANTS_*`` environment variable the package reads, in one table (no JAX): its rows are
``data/environment.toml``, which a reviewer reads, and adding a variable is one row.

Two kinds. A *setting* is a user's: the default of a gate option (``INVARIANTS_TARGETS`` for
``--targets``), or a knob with no option. A *protocol* variable is the suite's own: set by one process for
another it starts (a self-check child, an xdist worker, a versus worker), never by hand. Reading a name
this table lacks is a programming error (``KeyError``), so a misspelt name fails its first test instead of
reading nothing forever; ``tests/unit/test_config.py`` holds every other module to this table.
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
    """The variable's value in this process's environment, or ``default`` when it is unset."""
    return os.environ.get(name(variable), default)


def requested_platforms() -> list[str]:
    """The backends ``JAX_PLATFORMS`` asks for, in order (JAX's variable, not the suite's; the gate's
    process sets ``cpu`` when it is unset, before JAX starts). Set but empty (or blank) is unset: ``cpu``,
    as everywhere the gate reads it. The one reading of it."""
    return [p.strip() for p in (os.environ.get("JAX_PLATFORMS", "").strip() or "cpu").split(",") if p.strip()]


def default_platforms() -> None:
    """``JAX_PLATFORMS=cpu`` when it is unset, empty or blank (JAX would choose any backend it finds), before
    JAX starts: the gate's runtime is the CPU unless a backend is asked for by name."""
    if not os.environ.get("JAX_PLATFORMS", "").strip():
        os.environ["JAX_PLATFORMS"] = "cpu"


def seconds(variable: str, default: float) -> float:
    """The variable as a positive, finite number of seconds; unset or blank: ``default``. Anything else
    (``nan``, ``-1``, ``abc``, ``inf``) is one line naming it and what it takes."""
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
    """The variable as one of ``choices``; unset or blank: None (``unset`` says what that means). Anything
    else is one line naming it and what it takes."""
    raw = get(variable)
    if raw is None or not raw.strip():
        return None
    if raw.strip() not in choices:
        raise InvariantsError(f"{name(variable)}={raw!r}: takes {' or '.join(choices)} (unset: {unset})")
    return raw.strip()


def check_settings() -> None:
    """Every setting the gate's items read, checked when the run starts: a bad value is one line before
    anything compiles, not an error in the middle of collection."""
    seconds("INVARIANTS_RATIO_MAX_SECONDS", RATIO_MAX_SECONDS)
    choice("INVARIANTS_CLOCK", CLOCKS, "cpu on the CPU backend, else device")


# The default budget of one ratio item, and the clocks a throughput item can time with.
RATIO_MAX_SECONDS = 10.0
CLOCKS = ("cpu", "wall", "device")
