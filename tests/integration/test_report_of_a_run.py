"""`python -m invariants report` on the results file of a real gate run (the shared plain run): what the
pytest plugin writes is what the report reads."""

from __future__ import annotations

from pathlib import Path

from gatekit import Run

from invariants import _report, _results
from invariants.__main__ import main as cli


def test_report_of_a_real_run(plain_run: Run, tmp_path: Path):
    """It renders, plot included; its tier table adds up to its items, throughput included."""
    run = _report.load_results(plain_run.results)
    md = _report.render(run)
    assert md.startswith("# Embedding performance invariants")
    assert "147,470" in md  # the TPU backward loop of grad_vmap_naive, from the real compile
    tiers = set(_results.TIERS.values())
    rows = [line for line in md.splitlines() if line.startswith("| ") and line.split("|")[1].strip() in tiers]
    counted = sum(int(cell.replace(",", "")) for row in rows for cell in row.split("|")[2:-1])
    assert counted == len(run.items)
    assert {"| throughput: ratio |", "| throughput: efficiency |"} <= {r[: r.index("|", 2) + 1] for r in rows}
    assert "`naive / take`" in md and run.throughput
    png = tmp_path / "report.png"
    assert cli(["report", str(plain_run.results), "--plot", str(png), "--out", str(tmp_path / "r.md")]) == 0
    assert png.stat().st_size > 10_000


def test_report_lists_each_target_once(plain_run: Run):
    md = _report.render(_report.load_results(plain_run.results))
    headings = [line for line in md.splitlines() if line.startswith("## Target ")]
    assert len(headings) == len(set(headings)) == 2, headings
