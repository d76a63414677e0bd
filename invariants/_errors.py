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


# Every character but printable ASCII, newlines and tabs: the candidates, each then judged by its category.
_SUSPECT = re.compile(r"[^\x20-\x7e\n\t]")
_SUSPECT_ONE_LINE = re.compile(r"[^\x20-\x7e]")
# Control (C0, and C1: some terminals take it as the start of an escape sequence), format (bidi overrides
# and isolates, zero-width spaces and joiners: text that reads other than it is), line and paragraph
# separators, surrogates and unassigned code points.
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"})


def _escape(m: re.Match[str]) -> str:
    c = m[0]
    if c not in "\n\t" and unicodedata.category(c) not in _HIDDEN:
        return c  # a letter, a mark, a symbol of another script: shown as written
    return c.encode("unicode_escape", "backslashreplace").decode("ascii")


def visible(text: str, one_line: bool = False) -> str:
    """``text`` from a user or a file as it reaches a terminal, a markdown page or a log: its control,
    bidi and zero-width characters written as escapes (``\\x1b``, ``\\u202e``), so that it moves no cursor,
    colours nothing, links nowhere and reads as it is. Newlines and tabs are kept, unless ``one_line``: a
    name in a table or a line of its own, where a newline would forge a row."""
    return (_SUSPECT_ONE_LINE if one_line else _SUSPECT).sub(_escape, text)


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
