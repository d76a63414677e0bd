"""The programs of one run: the catalog's, plus the programs a downstream project declares.

Nothing in a process keeps them. Whoever starts a run makes one :class:`Programs` (the gate session from
its spec folders, a versus worker or a release's child from the project it was handed, the self-check's
child with its injections) and hands it down: every stage that looks a program up by name (checks,
correctness, compile, the gate's items) reads the one it was given. So a ``[[program]]`` of a user's spec
file (see :mod:`invariants.catalog.downstream`) is compiled, snapshotted and checked exactly like a catalog
program, and two runs in one process (pytester, the pytest API's tests) never see each other's programs.
The catalog itself (:mod:`invariants.catalog.programs`) stays the one file a new canonical program touches.

Declared names may not collide with the catalog's (:func:`invariants.specfile.reader.collision`, the one
rule).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from .._errors import InvariantsError, did_you_mean
from ..specfile.reader import collision
from .programs import CATALOG, Program
from .select import select_program_words

__all__ = ["Programs", "get_program"]


class Programs(Mapping[str, Program]):
    """The catalog's programs, then the declared ones, in that order; read-only once made.

    ``declared``: a project's programs. Re-declaring the same program is harmless (xdist workers and the
    ``gate`` command's up-front validation both build them); a different one under a taken name, or a
    catalog name, is one line."""

    def __init__(self, declared: Iterable[Program] = (), catalog: Mapping[str, Program] = CATALOG) -> None:
        own: dict[str, Program] = {}
        for program in declared:
            why = collision(program.name, CATALOG)
            if why is not None:
                raise InvariantsError(why)
            known = own.get(program.name)
            if known is not None and known != program:
                raise InvariantsError(f"{program.name}: declared twice, as two different programs")
            own[program.name] = program
        self._catalog = catalog
        self._declared = own
        self._all: dict[str, Program] = {**catalog, **own}

    def __getitem__(self, name: str) -> Program:
        return self._all[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)

    def __repr__(self) -> str:
        return f"Programs({len(self._catalog)} of the catalog, declared: {list(self._declared)})"

    @property
    def declared(self) -> dict[str, Program]:
        """The project's programs, in declaration order."""
        return dict(self._declared)

    def program(self, name: str) -> Program:
        """The program called ``name``; an unknown name raises one line with the closest known names."""
        try:
            return self._all[name]
        except KeyError:
            hint = did_you_mean(name, self._all, n=3)
            known = ", ".join(sorted(self._all))
            raise InvariantsError(f"{name}: unknown program{hint}; known: {known}") from None

    def select(self, value: str | None, default: list[str] | None = None) -> list[str]:
        """The programs ``--programs`` names (catalog or declared): comma-separated names, fnmatch patterns,
        ``kind:K`` or ``tag:T``, as a spec's ``programs`` takes them. Not given: ``default`` (every
        program). Empty, or a selector that matches nothing: one line."""
        if value is None:
            return list(self._all) if default is None else default
        return select_program_words(value, self._all)

    def replaced(self, functions: Mapping[str, Callable[..., Any]]) -> Programs:
        """These programs with the catalog entries ``functions`` names computing something else: the same
        names, configurations and tags, so a run collects exactly the items it would, and only what they
        compile changes (the self-check's injections). An unknown name is one line."""
        catalog = dict(self._catalog)
        for name, fn in functions.items():
            if name not in catalog:
                raise InvariantsError(f"{name}: not a catalog program{did_you_mean(name, catalog, n=2)}")
            catalog[name] = dataclasses.replace(catalog[name], fn=fn)
        return Programs(self._declared.values(), catalog)


def get_program(name: str) -> Program:
    """The catalog's program called ``name`` (what the public face offers: a project's programs belong to
    the run that declared them, :class:`Programs`); an unknown name is one line."""
    return Programs().program(name)
