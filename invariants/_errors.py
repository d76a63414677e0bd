"""The one exception type that reaches a user, and what every unknown-name message shares (a suggestion).
Selection options are split by :func:`invariants.catalog.select.selectors`."""

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
