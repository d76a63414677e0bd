"""`python -m invariants report` on the results file of a real gate run (the shared plain run): what the
pytest plugin writes is what the report reads."""

from __future__ import annotations

import json
from pathlib import Path

from gatekit import Run

from invariants.__main__ import main as cli
from invariants.records import results as _results
from invariants.report import markdown as _report


def test_report_of_a_real_run(plain_run: Run, tmp_path: Path):
    """It renders, plot included; its tier table adds up to its items, throughput included."""
    run = _report.load_results(plain_run.results)
    md = _report.render(run)
    assert md.startswith("# Embedding performance invariants")
    # Its figures say where and when they were measured: the device, and the run's date.
    date = json.loads(plain_run.results.read_text())["runtime"]["date"]
    assert f"- **runtime**: cpu (cpu) x1, run on {date} (UTC)" in md.splitlines()
    assert "147,470" in md  # the TPU backward loop of grad_vmap_naive, from the real compile
    tiers = {kind.tier for kind in _results.KINDS.values()}
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


def test_predicted_cost_beside_measured_from_a_real_run(plain_run: Run, tmp_path: Path):
    """The compiler's predictions reach the report from the real compile, and a ratio timed on a chip
    shows the predicted ratio beside the measured one."""
    run = _report.load_results(plain_run.results)
    md = _report.render(run)
    # libtpu's cycles for the looped backward (hand-counted in tests/unit/hlo/test_cost.py from a recorded
    # copy
    # of the same module).
    assert "## Predicted TPU cost" in md and "| `grad_vmap_naive` | f32 | 149,925,672 |" in md
    assert "## Predicted memory" in md
    cycles = {i.program: i.get("estimated_cycles") for i in run.of_kind("structure") if i.target == "tpu-v5e"}
    # The CPU ratio naive / take, measured in this run, beside tpu-v5e's predicted ratio.
    cpu = next(t for t in run.throughput if t.label == "naive / take")
    predicted_fwd = cycles["naive"] / cycles["take"]
    assert f"| `naive / take` | f32 | `cpu` | {_report._interval(cpu)} | {predicted_fwd:.3g} |" in md
    # A TPU host records each time ratio with the predicted ratio of its own target (the throughput tier).
    # Here that record is built from this run's real structure items, as the chip's run would write it; the
    # measured figures are stand-ins (no chip here).
    predicted = cycles["grad_vmap_naive"] / cycles["grad_vmap_take"]
    _, ratio = _results.record(
        "ratio",
        id="chip",
        target="tpu-v5e",
        a="grad_vmap_naive",
        b="grad_vmap_take",
        config="f32",
        median=9.0,
        low=8.5,
        high=9.6,
        threshold=1.1,
        verdict="fail",
    )
    on_chip = {**ratio, "predicted": predicted, "outcome": "xfailed", "nodeid": "t::tpu-v5e-ratio"}
    data = json.loads(plain_run.results.read_text())
    data["items"].append(on_chip)
    chip_file = tmp_path / "chip.json"
    chip_file.write_text(json.dumps(data))
    chip = _report.render(_report.load_results(chip_file))
    assert (
        "| `tpu-v5e` | `grad_vmap_naive / grad_vmap_take` | f32 | 9.000 [8.500, 9.600] | — | ≤ 1.1 | fail | "
        f"xfailed | {predicted:.3g} |" in chip
    )
    assert (
        f"| `grad_vmap_naive / grad_vmap_take` | f32 | `tpu-v5e` | 9.000 [8.500, 9.600] | {predicted:.3g} |"
        in chip
    )
