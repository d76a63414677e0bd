"""The programs of this process: the catalog, plus the programs a downstream project declares.

Every stage that looks a program up by name (specs, checks, compile, the gate's items) reads
:data:`PROGRAMS`, never the catalog alone, so that a ``[[program]]`` of a user's spec file (see
:mod:`invariants.catalog.downstream`) is compiled, snapshotted and checked exactly like a catalog program. The
catalog itself (:mod:`invariants.catalog.programs`) stays the one file a new canonical program touches.

Declared names may not collide with the catalog's: a report, a snapshot file and an invariant all name a
program by its name alone, so one name must mean one program.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterable, Mapping

from .._errors import InvariantsError, did_you_mean
from .programs import CATALOG, Program
from .select import select_program_words

_DECLARED: dict[str, Program] = {}
# Catalog first, then declared programs, in iteration order; lookups see both (live: the self-check's
# injections replace catalog entries in place).
PROGRAMS: Mapping[str, Program] = ChainMap(_DECLARED, CATALOG)  # type: ignore[arg-type]


def collision(name: str) -> str | None:
    """Why a declared program may not be called ``name`` (None: it may): the one rule, for spec files
    (:func:`invariants.spec.file.load_specs`, which names the file and line) and :func:`declare` alike."""
    if name in CATALOG:
        return f"program '{name}' collides with the catalog's program of that name; rename it"
    return None


def declare(programs: Iterable[Program]) -> None:
    """Add a downstream project's programs. Re-declaring the same program is a no-op (xdist workers and the
    ``gate`` command's up-front validation both declare); a different one under a taken name is an error."""
    for program in programs:
        why = collision(program.name)
        if why is not None:
            raise InvariantsError(why)
        known = _DECLARED.get(program.name)
        if known is not None and known != program:
            raise InvariantsError(f"{program.name}: declared twice, as two different programs")
        _DECLARED[program.name] = program


def declared() -> dict[str, Program]:
    """The downstream programs declared in this process, in declaration order."""
    return dict(_DECLARED)


def get_program(name: str) -> Program:
    """The program called ``name``; an unknown name raises one line with the closest known names."""
    try:
        return PROGRAMS[name]
    except KeyError:
        hint = did_you_mean(name, PROGRAMS, n=3)
        known = ", ".join(sorted(PROGRAMS))
        raise InvariantsError(f"{name}: unknown program{hint}; known: {known}") from None


def select_program_option(value: str | None, default: list[str] | None = None) -> list[str]:
    """The programs ``--programs`` names (catalog or declared): comma-separated names, fnmatch patterns,
    ``kind:K`` or ``tag:T``, as a spec's ``programs`` takes them. Not given: ``default`` (every program).
    Empty, or a selector that matches nothing: one line."""
    if value is None:
        return list(PROGRAMS) if default is None else default
    return select_program_words(value, PROGRAMS)
