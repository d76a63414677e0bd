"""The throughput items' pytest-benchmark records are the per-call times of the program each item judges,
by the clock that judged them: ``pytest-benchmark compare`` of two gate runs shows the statistics the
results file holds. The gate runs in this process (``gate_pytester``); ``compare`` is pytest-benchmark's
own command, in a child."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from gatekit import InProcess

from invariants.plugin.benchmarks import Replay
from invariants.records import results as _results


def test_a_replayed_round_lasts_its_sample():
    """pytest-benchmark reads each round as ``end - start`` of two calls of its timer."""
    timer = Replay()
    timer.load([0.25, 1e-6])
    rounds = [-(timer() - timer()) for _ in range(2)]
    assert rounds == [0.25, 1e-6]


@pytest.mark.e2e
def test_pytest_benchmark_compare_shows_the_results_files_per_call_statistics(
    gate_pytester: InProcess, tmp_path: Path
):
    gate_pytester.project(targets=())
    runs = []
    for n in (1, 2):
        bench, results = tmp_path / f"bench{n}.json", tmp_path / f"results{n}.json"
        proc = gate_pytester.pytest(
            "tests/gate/test_throughput.py",
            *("--targets", "cpu", "--programs", "naive,take", "--configs", "f32", "-m", "ratio"),
            *(f"--snapshot-dir={tmp_path / 's'}", f"--hlo-dump-dir={tmp_path / 'hlo'}"),
            *(f"--results-json={results}", f"--benchmark-json={bench}"),
        )
        assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
        ratios = [it for it in _results.read(results).items if isinstance(it, _results.Ratio)]
        assert len(ratios) == 1, proc.stdout[-2000:]  # time(naive) / time(take)
        runs.append({it.nodeid: it for it in ratios})
    compare = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark", "compare", str(tmp_path / "bench1.json"),
         str(tmp_path / "bench2.json"), "--columns=min,median,max,rounds"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert compare.returncode == 0, compare.stdout + compare.stderr
    said = compare.stdout + compare.stderr  # its table goes to its log, stderr
    lines = said.splitlines()
    unit = re.search(r"\(time in (\w+)\)", said)
    assert unit is not None, said
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[unit[1]]
    for n, by_id in enumerate(runs, 1):
        ((nodeid, item),) = by_id.items()
        # Its row: NAME (I/benchN)  MIN (rel)  MEDIAN (rel)  MAX (rel)  ROUNDS, in UNIT to 4 places.
        (row,) = [ln for ln in lines if ln.startswith(nodeid.split("::")[-1]) and f"bench{n})" in ln]
        cells = [c.replace(",", "") for c in row.split(f"bench{n})")[1].split() if not c.startswith("(")]
        low, median, high, rounds = (float(c) for c in cells)
        assert median * scale == pytest.approx(item.t_a_median, abs=1e-4 * scale), (row, item.t_a_median)
        assert rounds == item.get("pairs") and low <= median <= high, row
