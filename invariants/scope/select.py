"""Selection options, for every command: the one splitting of a comma-separated selection, and the one
reading of ``--programs``, whose words (names, fnmatch patterns, ``kind:K``, ``tag:T``) match as a spec's
``programs`` do. No JAX here.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from .._errors import InvariantsError, did_you_mean


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


def match_programs(words: Sequence[str], known: Mapping[str, Selectable]) -> list[str]:
    """The names of ``known`` that selector words match, in the words' order."""
    out: dict[str, None] = {}
    for word in words:
        for name, program in known.items():
            if word.startswith("kind:"):
                hit = program.kind == word[5:]
            elif word.startswith("tag:"):
                hit = word[4:] in program.tags
            else:
                hit = fnmatch.fnmatchcase(name, word)
            if hit:
                out[name] = None
    return list(out)


def select_program_words(
    value: str, known: Mapping[str, Selectable], option: str = "--programs"
) -> list[str]:
    """The names of ``known`` (in its order) that ``value`` selects; a word matching nothing is one line."""
    words = selectors(value, option, "name programs, or leave the option out for all")
    for word in words:
        if not match_programs([word], known):
            raise InvariantsError(f"{option}: unknown program {word!r}{did_you_mean(word, known, n=2)}")
    chosen = set(match_programs(words, known))
    return [name for name in known if name in chosen]
