"""What a gate run's items recorded, with their outcomes, and the results file they end in (no JAX).

:class:`Recorder` is a plugin object of one session (its :class:`~invariants.plugin.session.GateSession`
holds it), so that no module state outlives a session: pytester runs several in one process. Its hook runs
in the process that reports, which under xdist is the controller: the results file is the same with or
without workers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .._errors import InvariantsError
from .._paths import check_output_file, shown
from . import results as _results


class Recorder:
    """This run's records (:func:`invariants.plugin.results.record`) and the lines for the terminal
    summary."""

    def __init__(self) -> None:
        self.items: list[_results.Record] = []
        self.gate = False  # a gate item ran (so a results file was expected)
        self.notes: list[str] = []
        self.claim: _results.Claim | None = None
        # Why the results file could not be written (a full disk): the run's last line, and not green.
        self.write_error: str | None = None
        self._discarded = False

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" and not (report.when == "setup" and report.skipped):
            return
        if "gate" not in report.keywords:  # another plugin's or a project's own test: not the gate's record
            return
        self.gate = True
        self.discard_earlier()  # an xdist controller collects nothing: its first gate report says so
        outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
        reason = failure_reason(report) if report.failed else None
        # Why it failed, as the item said it (invariants.plugin.outcomes.fail); a failure it did not say
        # (an exception of the gate's own) is an error.
        failure = None
        if report.failed:
            said = _results.recorded_failure(report.user_properties)
            failure = said or _results.Failure("error", reason or "")
        entries = [
            _results.entry(name, value, outcome, report.nodeid, reason, failure)
            for name, value in report.user_properties
        ]
        self.items.extend(e for e in entries if e is not None)
        if report.failed and not any(entries):
            self.items.append(_results.error_entry(outcome, report.nodeid, reason, failure))
        elif outcome == "xfailed" and not any(entries):  # a known compile failure: nothing compiled to record
            known = _results.recorded_failure(report.user_properties)
            self.items.append(_results.error_entry(outcome, report.nodeid, str(report.wasxfail), known))
        elif report.skipped and outcome == "skipped" and not any(entries):
            # Listed with its reason, so that the file's skips are pytest's: a run of skips alone is seen.
            self.items.append(_results.skipped_entry(report.nodeid, skip_reason(report)))

    def claim_results(self, path: Path) -> None:
        """Check and claim the results path when the run starts, in the process that writes it: a directory
        or an unwritable folder is one line before anything compiles; a path another live run holds gives
        this run a file of its own (see :func:`invariants.plugin.results.claim`)."""
        if not path.is_dir():  # a directory: _results.claim says so, with a file path to give instead
            # A folder that takes no file although os.access says it would (root on /sys or /proc, a
            # read-only mount): tried now, not found at the end, when the results are lost.
            check_output_file(path, "--results-json")
        self.claim = _results.claim(path)

    def discard_earlier(self) -> None:
        """Once the run is known to be a gate run (it collected gate items, ran one, or refused its input):
        remove the earlier run's results file from the claimed path, so that a run that ends without
        writing one leaves none that reads as its own. A run of other tests alone leaves it."""
        if self.claim is not None and not self._discarded:
            self._discarded = True
            self.claim.discard_earlier()

    def release(self) -> None:
        if self.claim is not None:
            self.claim.release()

    def write_results(self, run: dict[str, Any]) -> None:
        """Write the results file: ``run`` (what the run was: versions, runtime, targets, programs) with the
        items. No file when nothing was recorded (the earlier run's was removed: :meth:`discard_earlier`),
        and a note says so."""
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
    """Why an item skipped: the reason of its skip mark or call (pytest's ``(file, line, reason)``)."""
    longrepr = report.longrepr
    said = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
    return said.removeprefix("Skipped: ").strip() or "skipped"


def failure_reason(report: pytest.TestReport) -> str:
    """The one line a failed item gives as its reason: the first line of its failure (what pytest's
    ``FAILED`` short line shows)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    return (text.strip().splitlines() or ["failed"])[0].removeprefix("Failed: ")
