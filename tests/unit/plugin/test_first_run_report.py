"""The report reads the results of a first run, the one that recorded its efficiency baselines: such an item
had no floor to be judged by, and its record says so (verdict "recorded"), which the reader takes, not a
null verdict it would refuse."""

from __future__ import annotations

import json
import os

from gatekit import InProcess

from invariants.__main__ import main as cli
from invariants.compile.child import GATE_DIR
from invariants.records import results as _results


def test_the_report_of_a_run_that_recorded_its_baselines(gate_pytester: InProcess):
    folder = gate_pytester.path
    results = folder / "results.json"
    proc = gate_pytester.pytest(
        str(GATE_DIR / "test_throughput.py"), "-p", "invariants.plugin.hooks",
        "-c", os.devnull, "--rootdir", str(folder),
        "-k", "efficiency and take", "--targets", "cpu", "--programs", "naive,take", "--configs", "f32",
        "--snapshot-dir", str(folder / "snapshots"), "--record-baselines", "--results-json", str(results),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    (item,) = [i for i in json.loads(results.read_text())["items"]
               if i["kind"] == "efficiency" and i["program"] == "take"]  # fmt: skip
    assert item["verdict"] == _results.RECORDED and item["threshold"] is None and item["recorded"]
    out = folder / "report.md"
    assert cli(["report", str(results), "--out", str(out)]) == 0
    (row,) = [ln for ln in out.read_text().splitlines() if "efficiency of `take`" in ln and "recorded" in ln]
    assert "| recorded |" in row
