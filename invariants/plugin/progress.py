"""Lines the terminal shows while a run waits (what is compiling), whatever ``-q`` or capture: written as
pytest-benchmark and pytest's own ``--setup-show`` write mid-run, with capture suspended; from an xdist
worker, whose terminal is not shown, they travel to the controller as the one live event xdist forwards, a
recorded warning of the category :class:`Progress`, which the controller writes and keeps out of the
warnings summary.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import pytest

from .._errors import visible


class Progress(UserWarning):
    """A progress line on its way from an xdist worker to its controller; never a warning."""


def say(config: pytest.Config, line: str) -> None:
    """Show ``line`` now: on this terminal, or from a worker on its controller's."""
    if hasattr(config, "workerinput"):
        message = warnings.WarningMessage(Progress(line), Progress, __file__, 0)
        kwargs = {"warning_message": message, "when": "runtest", "nodeid": "", "location": None}
        config.hook.pytest_warning_recorded.call_historic(kwargs=kwargs)
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    with _uncaptured(config):
        if getattr(reporter, "_width_of_current_line", 0):  # after -q's dots: a line of its own
            reporter.write_line("")
        reporter.write_line(visible(line))


class Relay:
    """The controller's ear for its workers' lines (a plugin object of one session): each is shown when it
    arrives, and taken out of the warnings the terminal reporter keeps."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)  # after the terminal reporter kept it (a historic hook has no wrappers)
    def pytest_warning_recorded(self, warning_message: warnings.WarningMessage) -> None:
        if not isinstance(warning_message.message, Progress):
            return
        said = str(warning_message.message)
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        kept = getattr(reporter, "stats", {}).get("warnings", [])
        kept[:] = [w for w in kept if said not in getattr(w, "message", "")]
        if reporter is not None and not kept:
            reporter.stats.pop("warnings", None)
        say(self.config, said)


@contextlib.contextmanager
def _uncaptured(config: pytest.Config) -> Iterator[None]:
    capman = config.pluginmanager.get_plugin("capturemanager")
    if capman is None:
        yield
        return
    with capman.global_and_fixture_disabled():
        yield
