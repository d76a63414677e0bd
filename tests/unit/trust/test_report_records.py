"""``python -m invariants report`` reads a results file as a record to check, not to trust: a file with no
item, a number no record holds, a console that cannot encode the report's marks. Each gives one line or
the report, never a traceback: run in this process (``gatekit.command``), and, for the console, as a user
runs it, in a child process of its own (an ``e2e`` test: tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gatekit import command

from invariants.records.results import FORMAT_VERSION, record

ROOT = Path(__file__).parents[3]


def _report(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return command("report", *args, cwd=cwd)


def _results(items: list[dict], exitstatus: int = 0) -> str:
    return json.dumps({
        "format_version": FORMAT_VERSION,
        "versions": {"jax": "0.10.2"}, "runtime": {"platform": "cpu", "device_kind": "cpu", "count": 1},
        "targets": {"cpu": {"mode": "runtime", "scope": "all", "unavailable": None}},
        "exitstatus": exitstatus, "items": items,
    })  # fmt: skip


def _structure(**metrics: object) -> dict:
    base = dict(kernels=1, entry_fusions=1, while_loops=0, max_trip_count=0, dynamic_kernel_launches=1,
                collectives=0, collective_bytes=0)  # fmt: skip
    _, value = record("structure", target="cpu", program="p", config="f32", **{**base, **metrics})
    return {**value, "outcome": "passed", "nodeid": "s::cpu-p-f32"}


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    return line


def test_a_results_file_with_no_items_is_not_passed(tmp_path):
    (tmp_path / "r.json").write_text(_results([]))
    proc = _report(tmp_path, "r.json")
    assert proc.returncode == 2 and "passed" not in proc.stdout
    assert _one_line(proc) == "report: r.json: no item recorded; a run that checked nothing has no result"


def test_a_file_whose_every_item_exploded_exits_nonzero(tmp_path):
    items = [{"kind": "error", "outcome": "exploded", "nodeid": f"t::{i}", "reason": "boom"} for i in (1, 2)]
    (tmp_path / "r.json").write_text(_results(items))
    proc = _report(tmp_path, "r.json")
    assert proc.returncode == 1, proc.stderr
    assert "- **result**: **failed** (2 exploded" in proc.stdout


def test_numbers_no_record_holds_are_one_line(tmp_path):
    """A 5,000-digit metric is past Python's int-to-str digit limit (ValueError while parsing), a 400-digit
    one past a float's range (OverflowError where a size or a ratio is shown): one line, naming the file."""
    for digits in (5000, 400):
        text = _results([_structure(kernels=0)]).replace('"kernels": 0', f'"kernels": {"9" * digits}')
        (tmp_path / "r.json").write_text(text)
        proc = _report(tmp_path, "r.json")
        assert proc.returncode == 2, proc.stderr
        assert _one_line(proc) == (
            f"r.json: a number of {digits:,} digits, past any count or size the gate records; not a results "
            "file it wrote"
        )
    # The widest a record holds (an int64 size) is shown.
    (tmp_path / "r.json").write_text(_results([_structure(temp_bytes=2**63 - 1)]))
    proc = _report(tmp_path, "r.json")
    assert proc.returncode == 0, proc.stderr
    assert "| `p` | f32 | 8388608.0 TiB |" in proc.stdout


@pytest.mark.e2e
def test_a_cp1252_console_gets_the_report(tmp_path):
    """Windows' console code page cannot encode the report's marks (✗, ≤): they are written escaped."""
    _, value = record("invariant", id="bound", target="cpu", programs=["p"], config="f32", holds=False,
                      measured={}, **{"assert": "kernels <= 1"})  # fmt: skip
    items = [_structure(), {**value, "outcome": "failed", "nodeid": "i::cpu-p-f32-bound", "reason": "r"}]
    (tmp_path / "r.json").write_text(_results(items, exitstatus=1))
    proc = subprocess.run(
        [sys.executable, "-m", "invariants", "report", "r.json"], cwd=tmp_path, capture_output=True,
        text=True, env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "cp1252"}, timeout=120,
        check=False,
    )  # fmt: skip
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 1
    assert "1 **fail**, \\u2717 `bound`" in proc.stdout


def _bench(tmp_path: Path, **ratio: object) -> str:
    numbers = {"median": 5000.0, "low": 4000.0, "high": 6000.0, "threshold": 1000.0, **ratio}
    _, value = record("ratio", id="r", target="cpu", a="naive", b="take", config="f32", **numbers)
    bench = {"benchmarks": [{"name": "naive~take-f32", "fullname": "t::naive~take-f32", "extra_info": value}]}
    (tmp_path / "b.json").write_text(json.dumps(bench))
    (tmp_path / "r.json").write_text(_results([_structure()]))
    return "b.json"


def test_a_verdict_its_own_interval_and_bound_contradict_is_refused(tmp_path):
    """A ratio of 5000 [4000, 6000] against a bound of 1000 is a failure whatever the file says; a verdict
    no timer gives ('maybe') is no verdict."""
    for verdict, decided in (("pass", "fail"), ("maybe", "fail")):
        proc = _report(tmp_path, "r.json", "--benchmark-json", _bench(tmp_path, verdict=verdict))
        assert proc.returncode == 2, proc.stdout
        assert _one_line(proc) == (
            f"b.json: benchmarks[0] (naive~take-f32): t::naive~take-f32: ratio record: verdict {verdict!r} "
            f"contradicts its interval [4000, 6000] against its bound (<= 1000), which decide {decided!r}"
        )
    proc = _report(tmp_path, "r.json", "--benchmark-json", _bench(tmp_path, low=900.0, verdict="pass"))
    assert "which decide 'inconclusive'" in _one_line(proc)
    proc = _report(tmp_path, "r.json", "--benchmark-json", _bench(tmp_path, low=7000.0, verdict="fail"))
    assert "interval [7000.0, 6000.0] is no interval" in _one_line(proc)
    proc = _report(tmp_path, "r.json", "--benchmark-json", _bench(tmp_path, verdict="fail"))
    assert proc.returncode == 0 and "| 5000.000 [4000.000, 6000.000] |" in proc.stdout, proc.stderr


def test_a_results_file_whose_verdict_contradicts_its_numbers_is_refused(tmp_path):
    _, value = record("ratio", id="r", target="cpu", a="naive", b="take", config="f32", median=5000.0,
                      low=4000.0, high=6000.0, threshold=1000.0, verdict="pass")  # fmt: skip
    (tmp_path / "r.json").write_text(_results([{**value, "outcome": "passed", "nodeid": "t::r"}]))
    proc = _report(tmp_path, "r.json")
    assert proc.returncode == 2
    assert _one_line(proc).startswith("r.json: t::r: ratio record: verdict 'pass' contradicts its interval")
