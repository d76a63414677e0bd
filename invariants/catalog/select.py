"""``--programs``: the one reading of a program selection, for the gate and the report.

Comma-separated words, each an exact name, an fnmatch pattern (``'vmap_*'``), ``kind:K`` or ``tag:T``, matched
as a spec's ``programs`` is (:func:`invariants.spec.file.select_programs`) against ``known``: the programs of
this
process for the gate, the programs a results file recorded for the report. No JAX here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._errors import InvariantsError, did_you_mean, selectors

__all__ = ["select_program_words"]


def select_program_words(value: str, known: Mapping[str, Any], option: str = "--programs") -> list[str]:
    """The names of ``known`` (in its order) that ``value`` selects. Empty, or a word that matches nothing:
    one line (:class:`InvariantsError`), with the closest names."""
    from ..spec.file import select_programs

    words = selectors(value, option, "name programs, or leave the option out for all")
    for word in words:
        if not select_programs([word], known):
            raise InvariantsError(f"{option}: unknown program {word!r}{did_you_mean(word, known, n=2)}")
    chosen = set(select_programs(words, known))
    return [name for name in known if name in chosen]
