"""The one exception type that reaches a user, and what every unknown-name message shares (a suggestion).
Selection options are split by :func:`invariants.catalog.select.selectors`."""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable


def did_you_mean(word: str, known: Iterable[str], n: int = 1) -> str:
    """`` (did you mean 'a' or 'b'?)`` for the ``n`` closest names in ``known``, or ``""`` when none is close.

    The one place every "unknown name" message gets its suggestion from.
    """
    close = difflib.get_close_matches(word, list(known), n=n)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def first_line(message: str) -> str:
    """The first line of a message from elsewhere (a parser's), so that ours stays one line."""
    return message.strip().split("\n", 1)[0]


def non_ascii(word: str) -> str:
    """``"; it has a non-ASCII 'с' (U+0441 CYRILLIC SMALL LETTER ES)"`` for a word with a look-alike of an
    ASCII letter (every name the gate knows is ASCII), else ``""``: said beside a did-you-mean, because
    the two names look the same."""
    ch = next((c for c in word if not c.isascii()), None)
    if ch is None:
        return ""
    return f"; it has a non-ASCII {ch!r} (U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')})"


class InvariantsError(Exception):
    """Bad input or an unmet precondition, stated in one line.

    ``str(err)`` is a single line of the form ``WHERE: what is wrong`` (``WHERE`` is a file, ``file:line``,
    a program or a target). The CLI and the pytest plugin print it as is, without a traceback.
    """


class NothingChecked(InvariantsError):
    """What was asked to be checked cannot be checked here: targets named explicitly (``--targets``, or the
    spec files of a run of a project's programs alone) whose compiler this host does not have. A run that
    checks nothing where it was asked to must not pass: its exit status is :attr:`status`, pytest's for a
    run that could not start as asked, where other bad input is 2."""

    status = 4
