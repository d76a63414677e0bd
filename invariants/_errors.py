"""The one exception type that reaches a user, the argument parser every command uses to raise it, and
what every unknown-name message shares (a suggestion). Selection options are split by
:func:`invariants.catalog.select.selectors`."""

from __future__ import annotations

import argparse
import difflib
import re
import unicodedata
from collections.abc import Iterable
from typing import NoReturn


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


# Every control character but newline and tab: C0 (ESC, CR, BS...), DEL and C1 (U+0080..U+009F, which some
# terminals also take as the start of an escape sequence).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with its control characters shown as escapes (ESC as ``\\x1b``, CR as ``\\r``): text from
    a user (a spec's ``why``, a folder's name, a message of their code) that reaches a terminal moves no
    cursor, erases no line and colours nothing. Newlines and tabs stay."""
    return _CONTROL.sub(lambda m: m[0].encode("unicode_escape").decode("ascii"), text)


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


class Parser(argparse.ArgumentParser):
    """Every command's argument parser: a mistake (an unknown flag, a missing or ill-typed value) is one line
    and exit 2, like every other bad input, instead of argparse's usage block."""

    def error(self, message: str) -> NoReturn:
        raise InvariantsError(f"{self.prog}: {message} (see {self.prog} --help)")
