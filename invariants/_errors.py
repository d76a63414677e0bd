"""The one exception type that reaches a user, the argument parser every command uses to raise it, and
what every unknown-name message shares (a suggestion). Selection options are split by
:func:`invariants.scope.select.selectors`."""

from __future__ import annotations

import argparse
import difflib
import re
import unicodedata
from collections.abc import Iterable
from typing import NoReturn


def did_you_mean(word: str, known: Iterable[str], n: int = 1) -> str:
    """`` (did you mean 'a' or 'b'?)`` for the ``n`` closest names in ``known``; ``""`` when none is close."""
    close = difflib.get_close_matches(word, list(known), n=n)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def first_line(message: str) -> str:
    """The first line of a message from elsewhere (a parser's), so that ours stays one line."""
    return message.strip().split("\n", 1)[0]


def non_ascii(word: str) -> str:
    """``"; it has a non-ASCII 'с' (U+0441 CYRILLIC SMALL LETTER ES)"`` for a word with a non-ASCII
    character (a look-alike: every name the gate knows is ASCII), else ``""``."""
    ch = next((c for c in word if not c.isascii()), None)
    if ch is None:
        return ""
    return f"; it has a non-ASCII {ch!r} (U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')})"


# C1 (U+0080..U+009F) too: some terminals take it as the start of an escape sequence.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with its control characters but newlines and tabs escaped: text from a user that reaches a
    terminal moves no cursor, erases no line and colours nothing."""
    return _CONTROL.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), text)


class InvariantsError(Exception):
    """Bad input or an unmet precondition, one line ``WHERE: what is wrong``, printed without a traceback."""


class NothingChecked(InvariantsError):
    """Targets named explicitly whose compiler this host does not have: a run that checks nothing where it
    was asked to must not pass, so it exits with pytest's status for a run that could not start as asked."""

    status = 4


class Parser(argparse.ArgumentParser):
    """Every command's argument parser: a mistake is one line and exit 2, not argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        raise InvariantsError(f"{self.prog}: {message} (see {self.prog} --help)")
