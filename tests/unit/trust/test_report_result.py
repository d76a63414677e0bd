"""The report's result line says passed only when the items did, and its exit status says the same."""

from __future__ import annotations

from invariants.__main__ import main as cli
from invariants.records import results as _results


def _report(tmp_path, monkeypatch, capsys, outcomes: list[str]) -> tuple[int, str]:
    """(the report's exit status, its result line) for a file of items with these outcomes."""
    monkeypatch.chdir(tmp_path)
    items = [
        _results.error_entry(o, f"gate/test_structure.py::test_{i}", "boom") for i, o in enumerate(outcomes)
    ]
    _results.write(tmp_path / "r.json", {"exitstatus": 0}, items)
    status = cli(["report", "r.json"])
    return status, next(line for line in capsys.readouterr().out.splitlines() if "**result**" in line)


def test_every_outcome_exploded_is_not_passed(tmp_path, monkeypatch, capsys):
    status, line = _report(tmp_path, monkeypatch, capsys, ["exploded", "exploded"])
    assert "passed" not in line.split(";")[0] and "2 exploded" in line, line
    assert status == 1


def test_a_failed_item_with_exit_status_0_is_not_passed(tmp_path, monkeypatch, capsys):
    status, line = _report(tmp_path, monkeypatch, capsys, ["passed", "failed"])
    assert "**failed**" in line, line
    assert status == 1


def test_only_skipped_items_is_not_passed(tmp_path, monkeypatch, capsys):
    status, line = _report(tmp_path, monkeypatch, capsys, ["skipped"])
    assert "nothing passed" in line, line
    assert status == 1


def test_passed_items_pass(tmp_path, monkeypatch, capsys):
    status, line = _report(tmp_path, monkeypatch, capsys, ["passed", "skipped"])
    assert "**result**: passed;" in line, line
    assert status == 0
