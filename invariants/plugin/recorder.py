"""What a gate run's items recorded, and the results file they end in.

:class:`Recorder` is a plugin object of one session, so that no module state outlives a session. Its hook
runs in the process that reports (the xdist controller), so the results file is the same under xdist.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .._errors import InvariantsError
from .._paths import check_output_file, shown
from ..records import results as _results


class Recorder:
    """This run's records and the lines for the terminal summary."""

    def __init__(self) -> None:
        self.items: list[_results.Record] = []
        self.gate = False  # a gate item ran (so a results file was expected)
        self.notes: list[str] = []
        self.claim: _results.Claim | None = None
        # Why the results file could not be written: the run's last line, and not green.
        self.write_error: str | None = None
        self._discarded = False

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" and not (report.when == "setup" and report.skipped):
            return
        if "gate" not in report.keywords:
            return
        self.gate = True
        self.discard_earlier()  # an xdist controller collects nothing: its first gate report says so
        outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
        reason = failure_reason(report) if report.failed else None
        said = _results.recorded_failure(report.user_properties)
        # A failure the item did not say (an exception of the gate's own) is an error.
        failure = (said or _results.Failure("error", reason or "")) if report.failed else None
        recorded = [
            entry
            for name, value in report.user_properties
            if (entry := _results.entry(name, value, outcome, report.nodeid, reason, failure)) is not None
        ]
        if recorded:
            self.items.extend(recorded)
        elif report.failed:
            self.items.append(_results.error_entry(outcome, report.nodeid, reason, failure))
        elif outcome == "xfailed":  # a known compile failure: nothing compiled to record
            self.items.append(_results.error_entry(outcome, report.nodeid, str(report.wasxfail), said))
        elif report.skipped and outcome == "skipped":
            # So that the file's skips are pytest's: a run of skips alone is seen.
            self.items.append(_results.skipped_entry(report.nodeid, skip_reason(report)))

    def claim_results(self, path: Path) -> None:
        """Check and claim the results path when the run starts: a bad one is one line before anything
        compiles."""
        if not path.is_dir():  # a directory: _results.claim says so, with a file path to give instead
            # A folder that takes no file although os.access says it would (a read-only mount): tried now.
            check_output_file(path, "--results-json")
        self.claim = _results.claim(path)

    def discard_earlier(self) -> None:
        """Once the run is known to be a gate run: remove the earlier run's results file, so that a run that
        ends without writing one leaves none that reads as its own."""
        if self.claim is not None and not self._discarded:
            self._discarded = True
            self.claim.discard_earlier()

    def release(self) -> None:
        if self.claim is not None:
            self.claim.release()

    def write_results(self, run: dict[str, Any]) -> None:
        """Write ``run`` with the items; no file, and a note, when nothing was recorded."""
        claim = self.claim
        if claim is None:
            return
        if claim.note:
            self.notes.append(claim.note)
        if not self.items:
            if self.gate:
                self.notes.append(
                    f"invariants: no gate item recorded anything; {shown(claim.path)} was not written"
                )
            return
        path = claim.path
        try:
            _results.write(path, run, self.items)
        except InvariantsError as err:
            self.write_error = f"invariants: {err}"


def skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    said = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
    return said.removeprefix("Skipped: ").strip() or "skipped"


def failure_reason(report: pytest.TestReport) -> str:
    """The first line of a failed item's failure, as pytest's ``FAILED`` short line shows it."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    return (text.strip().splitlines() or ["failed"])[0].removeprefix("Failed: ")
