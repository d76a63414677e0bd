"""The one exception type that reaches a user."""

from __future__ import annotations


class InvariantsError(Exception):
    """Bad input or an unmet precondition, stated in one line.

    ``str(err)`` is a single line of the form ``WHERE: what is wrong`` (``WHERE`` is a file, ``file:line``,
    a program or a target). The CLI and the pytest plugin print it as is, without a traceback.
    """
