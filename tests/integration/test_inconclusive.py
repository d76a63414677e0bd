"""An inconclusive time relation (its interval still straddles the bound when the budget is spent) is
visible: the run's end shows every relation's ratio, interval, bound and verdict, and a warning line for the
inconclusive one, as does the report read from the run's results file; ``--inconclusive fail`` fails it."""

from __future__ import annotations

import dataclasses

from gatekit import InProcess

from invariants.plugin import timed

RELATION = ("-k", "naive_not_slower_than_take")
SELECTION = ("--targets", "cpu", "--programs", "naive,take", "--configs", "f32", "-m", "ratio", *RELATION)
WARNING = "invariants: warning: time(naive) / time(take) [f32] on cpu is inconclusive: "


def _undecided(monkeypatch) -> None:
    """Every ratio measured as it is, its verdict left undecided (a real one is so by chance)."""
    real = timed.measure_ratio
    monkeypatch.setattr(
        timed, "measure_ratio", lambda *a, **k: dataclasses.replace(real(*a, **k), verdict="inconclusive")
    )


def test_an_inconclusive_relation_passes_with_a_warning_in_the_terminal_and_the_report(
    gate_pytester: InProcess, monkeypatch
):
    _undecided(monkeypatch)
    gate_pytester.project(targets=("cpu",))
    proc = gate_pytester.pytest(*SELECTION, "--results-json", "results.json")
    assert proc.returncode == 0, proc.stdout[-2000:]
    lines = proc.stdout.splitlines()
    table = lines.index("invariants: time relations (median [95% interval], bound, verdict):")
    row = lines[table + 1].split()
    assert row[:6] == ["time(naive)", "/", "time(take)", "[f32]", "cpu", row[5]] and row[-2:] == [
        "1.1",
        "inconclusive",
    ]
    assert row[-3] == "<=" and row[6].startswith("[") and row[7].endswith("]")
    warned = [line for line in lines if line.startswith(WARNING)]
    assert len(warned) == 1 and warned[0].endswith(
        "straddles <= 1.1 (passed; --inconclusive fail makes it fail)"
    ), warned
    assert lines[-1].startswith(WARNING) or lines.index(warned[0]) > table
    report = gate_pytester.command("report", "results.json")
    assert report.returncode == 0, report.stderr
    said = [line for line in report.stdout.splitlines() if line.startswith("- **warning**:")]
    assert len(said) == 1 and "is inconclusive: " in said[0] and "straddles ≤ 1.1 (passed)" in said[0], said


def test_inconclusive_fail_fails_it(gate_pytester: InProcess, monkeypatch):
    _undecided(monkeypatch)
    gate_pytester.project(targets=("cpu",))
    proc = gate_pytester.pytest(*SELECTION, "--inconclusive", "fail")
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "inconclusive (--inconclusive fail)" in proc.stdout
    assert any(line.startswith(WARNING) and "(failed; " in line for line in proc.stdout.splitlines())
    bad = gate_pytester.pytest(*SELECTION, "--inconclusive", "maybe")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].endswith(
        "--inconclusive 'maybe': takes warn or fail"
    ), bad.stderr[-500:]


def test_each_run_of_a_process_measures_within_its_own_budget(gate_pytester: InProcess, monkeypatch):
    """INVARIANTS_RATIO_MAX_SECONDS is read as a relation is measured, not when the plugin was first
    imported (this module imported it): each of several runs in one process has the budget it was given."""
    budgets: list[float] = []
    real = timed.measure_ratio

    def measure(*a, **k):
        budgets.append(k["max_seconds"])
        return dataclasses.replace(real(*a, **k), verdict="pass")

    monkeypatch.setattr(timed, "measure_ratio", measure)
    gate_pytester.project(targets=("cpu",))
    for budget in ("0.25", "0.5"):
        proc = gate_pytester.pytest(*SELECTION, env={"INVARIANTS_RATIO_MAX_SECONDS": budget})
        assert proc.returncode == 0, proc.stdout[-2000:]
    assert budgets == [0.25, 0.5], budgets
