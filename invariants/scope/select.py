"""Selection options, for every command: the one splitting of a comma-separated selection, and the one
reading of ``--programs``, whose words (names, fnmatch patterns, ``kind:K``, ``tag:T``) match as a spec's
``programs`` do; and the two namespaces of a run's program names. No JAX here.

A project's names are its own: a catalog program keeps its bare name (``take``) unless the project declares
one of that name, and is then ``catalog:take`` in that run. ``catalog:NAME`` always names the catalog's.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from .._errors import InvariantsError, did_you_mean

CATALOG_PREFIX = "catalog:"
PROGRAMS_OTHERWISE = "name programs, or leave the option out for all"


def run_name(name: str, declared: Collection[str]) -> str:
    """A catalog program's name in a run whose project declares ``declared``."""
    return f"{CATALOG_PREFIX}{name}" if name in declared else name


def bare(name: str) -> str:
    """A program's name without its namespace: what the catalog's own snapshot files are named by."""
    return name.removeprefix(CATALOG_PREFIX)


def file_stem(name: str) -> str:
    """A program's name as a file name part: ``catalog:take`` is ``catalog-take`` (an identifier holds no
    ``-``, so it names no declared program; ``:`` is refused by artifact uploads)."""
    return name.replace(":", "-")


def written(word: str, known: Collection[str], catalog: Collection[str]) -> str:
    """The run's name of a program as a spec or an option writes it: ``catalog:take`` is ``take`` where the
    project declares no ``take``. ``word`` unchanged when it names no catalog program this way."""
    if word.startswith(CATALOG_PREFIX) and word not in known and bare(word) in catalog:
        return bare(word)
    return word


class Selectable(Protocol):
    """What a selector reads of a program besides its name (a catalog, declared or recorded one)."""

    @property
    def kind(self) -> str: ...

    @property
    def tags(self) -> Collection[str]: ...


def selectors(value: str, option: str, otherwise: str) -> list[str]:
    """The comma-separated words of a selection option's ``value``; none is an error that says
    ``otherwise``, never "all" in silence."""
    words = [w.strip() for w in value.split(",") if w.strip()]
    if not words:
        raise InvariantsError(f"{option}: empty selection; {otherwise}")
    return words


def match_programs(
    words: Sequence[str], known: Mapping[str, Selectable], catalog: Collection[str] = ()
) -> list[str]:
    """The names of ``known`` that selector words match, in the words' order; ``catalog``: the catalog's bare
    names, which a ``catalog:NAME`` word may name."""
    out: dict[str, None] = {}
    for word in words:
        word = written(word, known, catalog)
        if word.startswith("kind:"):
            hits = [name for name, program in known.items() if program.kind == word[5:]]
        elif word.startswith("tag:"):
            hits = [name for name, program in known.items() if word[4:] in program.tags]
        elif not any(c in word for c in "*?["):  # a name: itself or nothing
            hits = [word] if word in known else []
        else:  # a pattern matches a shadowed catalog program by its catalog name, as it did unshadowed
            match = re.compile(fnmatch.translate(word)).match
            hits = [name for name in known if match(name) or match(bare(name))]
        out.update(dict.fromkeys(hits))
    return list(out)


def select_program_words(
    value: str, known: Mapping[str, Selectable], option: str = "--programs", catalog: Collection[str] = ()
) -> list[str]:
    """The names of ``known`` (in its order) that ``value`` selects; a word matching nothing is one line."""
    words = selectors(value, option, PROGRAMS_OTHERWISE)
    for word in words:
        if not match_programs([word], known, catalog):
            raise InvariantsError(f"{option}: unknown program {word!r}{did_you_mean(word, known, n=2)}")
    chosen = set(match_programs(words, known, catalog))
    return [name for name in known if name in chosen]
