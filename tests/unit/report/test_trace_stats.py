"""``python -m invariants trace-stats``, run as a user runs it, on traces recorded on a TPU v5e."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data" / "traces"
CHIP = DATA / "tpu-v5e"
RECORDED = {
    r["program"]: r["device_us_median"]
    for r in json.loads((CHIP / "device-times-seed-configs.json").read_text())
    if r["config"] == "f32"
}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "invariants", "trace-stats", *args],
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_json_on_the_chips_traces_gives_each_modules_median_within_one_percent():
    done = _run(str(CHIP), "--json")
    assert done.returncode == 0, done.stderr
    traces = json.loads(done.stdout)
    assert len(traces) == 5
    for t in traces:
        program = Path(t["trace"]).name.split(".")[0]
        (module,) = t["modules"]
        assert t["clock"] == "device" and t["plane"] == "/device:TPU:0"
        assert module["calls"] == 20
        assert module["median_s"] * 1e6 == pytest.approx(RECORDED[program], rel=0.01), program
        assert module["ops"] and module["ops"][0]["total_s"] >= module["ops"][-1]["total_s"]


def test_the_table_names_the_clock_and_the_costliest_op():
    done = _run(str(CHIP / "eqx_embedding.f32.tpu-v5e.xplane.pb"), "--top", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("/device:TPU:0, device clock")
    assert "jit_eqx_embedding" in lines[2] and " 20 " in lines[2]
    assert lines[4].split()[0] == "gather_fusion" and len(lines) == 6  # --top 2: two ops


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda d: (d / "x.xplane.pb", b"plain text, not a trace"), "not a profiler trace"),
        (lambda d: (DATA / "cpu" / "take.xplane.pb", None), "no device plane"),
        (lambda d: (d, None), r"no \*.xplane.pb under this folder"),
        (lambda d: (d / "missing.xplane.pb", None), "no such file or folder"),
    ],
)
def test_what_is_not_a_device_trace_is_one_line_and_exit_2(tmp_path, make, expected):
    import re

    path, content = make(tmp_path)
    if content is not None:
        path.write_bytes(content)
    done = _run(str(path))
    assert done.returncode == 2 and done.stdout == ""
    assert re.search(expected, done.stderr.strip().splitlines()[-1])
    assert "Traceback" not in done.stderr


def test_nothing_but_the_table_is_printed_on_a_cpu_host():
    """Reading a trace loads no JAX plugin: the CUDA plugin's warnings on a host without a GPU (six lines
    of absl and cudart before the table) are not printed."""
    done = _run(str(CHIP / "eqx_embedding.f32.tpu-v5e.xplane.pb"))
    assert done.returncode == 0 and done.stderr == "", done.stderr
