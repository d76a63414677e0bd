"""The one exception type that reaches a user, and what every bad-input message shares (suggestions, the
splitting of a selection option)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(word: str, known: Iterable[str], n: int = 1) -> str:
    """`` (did you mean 'a' or 'b'?)`` for the ``n`` closest names in ``known``, or ``""`` when none is close.

    The one place every "unknown name" message gets its suggestion from.
    """
    close = difflib.get_close_matches(word, list(known), n=n)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


class InvariantsError(Exception):
    """Bad input or an unmet precondition, stated in one line.

    ``str(err)`` is a single line of the form ``WHERE: what is wrong`` (``WHERE`` is a file, ``file:line``,
    a program or a target). The CLI and the pytest plugin print it as is, without a traceback.
    """


def selectors(value: str, option: str, otherwise: str) -> list[str]:
    """The comma-separated words of a selection option's ``value``. None of them (``''``, ``' , '``) is an
    error, never "all" in silence; ``otherwise`` says what to do instead.

    The one place every selection option (``--targets``, ``--programs``, ``--configs``) is split.
    """
    words = [w.strip() for w in value.split(",") if w.strip()]
    if not words:
        raise InvariantsError(f"{option}: empty selection; {otherwise}")
    return words
