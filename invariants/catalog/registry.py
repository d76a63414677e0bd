"""The programs of one run: the catalog's, plus the programs a downstream project declares.

Nothing in a process keeps them: whoever starts a run makes one :class:`Programs` and hands it down, so a
declared program is treated exactly like a catalog one, and two runs in one process never see each other's.
A project's names are its own: a catalog program the project's names shadow is ``catalog:NAME`` in the
run (:func:`invariants.scope.select.run_name`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from .._errors import InvariantsError, did_you_mean
from ..scope.configs import _unknown
from ..scope.select import run_name, select_program_words, written
from .programs import CATALOG, Program


class Programs(Mapping[str, Program]):
    """The catalog's programs, then a project's ``declared`` ones; read-only once made. Re-declaring the same
    program is harmless; a different one under a taken name is one line. A catalog program of a declared
    one's name is ``catalog:NAME`` here, its ``name`` too."""

    def __init__(self, declared: Iterable[Program] = (), catalog: Mapping[str, Program] = CATALOG) -> None:
        own: dict[str, Program] = {}
        for program in declared:
            known = own.get(program.name)
            if known is not None and known != program:
                raise InvariantsError(f"{program.name}: declared twice, as two different programs")
            own[program.name] = program
        self._catalog = catalog
        self._declared = own
        self._run_names = {name: run_name(name, own) for name in catalog}
        in_run = {
            self._run_names[n]: p if n not in own else dataclasses.replace(p, name=self._run_names[n])
            for n, p in catalog.items()
        }
        self._all: dict[str, Program] = {**in_run, **own}

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
        return dict(self._declared)

    @property
    def catalog(self) -> dict[str, Program]:
        """The catalog's programs by their names in this run."""
        return {name: self._all[name] for name in self._run_names.values()}

    def is_catalog(self, name: str) -> bool:
        return name in self._all and name not in self._declared

    def program(self, name: str) -> Program:
        name = written(name, self._all, self._catalog)
        if name not in self._all:
            raise InvariantsError(_unknown("program", name, self._all))
        return self._all[name]

    def select(self, value: str | None, default: list[str] | None = None) -> list[str]:
        """The programs ``--programs`` names (None: ``default``, else every program)."""
        if value is None:
            return list(self._all) if default is None else default
        return select_program_words(value, self._all, catalog=self._catalog)

    def replaced(self, functions: Mapping[str, Callable[..., Any]]) -> Programs:
        """These programs with the catalog entries ``functions`` names computing something else (the
        self-check's injections): the same items, other compiles."""
        catalog = dict(self._catalog)
        for name, fn in functions.items():
            if name not in catalog:
                raise InvariantsError(f"{name}: not a catalog program{did_you_mean(name, catalog, n=2)}")
            catalog[name] = dataclasses.replace(catalog[name], fn=fn)
        return Programs(self._declared.values(), catalog)


def get_program(name: str) -> Program:
    """The catalog's program called ``name``; a project's programs belong to the run that declared them."""
    return Programs().program(name)
