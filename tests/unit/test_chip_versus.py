"""scripts/chip_versus.sh, rehearsed on a CPU host: each run says its time, its exit status and reasons,
and each program's ratio and attempts; the script exits 0 only when the same installation passed and the
slowed candidate failed."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "chip_versus.sh"


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=900,
                          env={**os.environ, **env}, check=False, cwd=tmp_path)  # fmt: skip


@pytest.mark.e2e
def test_the_rehearsal_says_each_runs_time_exit_and_programs(tmp_path: Path):
    # The candidate made about twice as slow, on the CPU clock: three short rounds on a loaded machine may
    # still leave it inconclusive (exit 0), and then the script must say so and exit 1.
    done = _run(tmp_path, "--out", str(tmp_path / "out"), "--slowdown", "0.9", "--",
                "--programs", "naive", "--targets", "cpu", "--no-structure", "--no-parallel",
                "--min-rounds", "3", "--max-rounds", "3", "--round-seconds", "0.05",
                JAX_PLATFORMS="cpu")  # fmt: skip
    same, same_naive, slow, slow_naive = done.stdout.splitlines()
    assert re.fullmatch(r"same-1: [0-9.]+ s, exit 0: no regression", same), done.stderr[-2000:]
    assert same_naive.startswith("  naive: cpu ratio ") and " fail " not in same_naive
    caught = re.fullmatch(r"slowdown: [0-9.]+ s, exit 1: naive: fail: cpu ratio .*", slow) is not None
    assert caught or re.fullmatch(r"slowdown: [0-9.]+ s, exit 0: no regression", slow), slow
    assert ("attempts ['fail', 'fail']" in slow_naive) == caught
    assert done.returncode == (0 if caught else 1)
    assert caught or done.stderr.strip().endswith("slowdown exited 0, expected 1 (progress: "
                                                  f"{tmp_path / 'out' / 'slowdown.log'})")  # fmt: skip
    for name in ("same-1", "slowdown"):
        assert (tmp_path / "out" / f"{name}.md").read_text().startswith("## versus")
        assert "measure round 3" in (tmp_path / "out" / f"{name}.log").read_text()


@pytest.mark.e2e
def test_no_slowdown_runs_the_same_installation_only(tmp_path: Path):
    done = _run(tmp_path, "--out", str(tmp_path / "out"), "--no-slowdown", "--runs", "2", "--",
                "--programs", "naive", "--targets", "cpu", "--no-structure", "--no-parallel",
                "--min-rounds", "3", "--max-rounds", "3", "--round-seconds", "0.02",
                JAX_PLATFORMS="cpu")  # fmt: skip
    runs = [line.split(":")[0] for line in done.stdout.splitlines() if not line.startswith(" ")]
    assert (runs, done.returncode) == (["same-1", "same-2"], 0), done.stderr[-2000:]
    assert not (tmp_path / "out" / "slowdown.log").exists()


def test_help_and_bad_usage(tmp_path: Path):
    shown = _run(tmp_path, "--help")
    assert shown.returncode == 0 and shown.stdout.startswith("versus on a TPU host's own chip, timed")
    assert "bash scripts/chip_versus.sh [--out DIR]" in shown.stdout and "set -uo" not in shown.stdout
    for args, says in (
        (["--runs", "0"], "--runs needs a count"),
        (["--slowdown", "1.5"], "--slowdown needs a fraction in (0, 1)"),
        (["--slowdown", "0"], "--slowdown needs a fraction in (0, 1)"),
        (["--fly"], "unknown argument --fly"),
    ):
        bad = _run(tmp_path, *args)
        assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith(f"chip_versus: {says}")


def test_each_program_says_the_slowdown_its_calls_met(tmp_path: Path):
    # On a chip the pass compiled beside a program can change how the program itself compiles, so what the
    # slowdown reached is measured (the record's "slowed"), and a reader of the run needs it beside the
    # verdict. A stand-in versus writes the real writer's record of a measured slowdown.
    import sys

    from invariants.timing.paired import RatioResult
    from invariants.versus import report
    from invariants.versus.stats import ProgramVerdict

    result = RatioResult(1.015, 1.014, 1.016, 12, 1.0, 0.95, 1.01, "fail", 1e-4, 1e-4, 1e-3, 1, 1, 1,
                         clock="device")  # fmt: skip
    timing = [
        ProgramVerdict("naive", "device", "fail", {"device": result}, ["fail", "fail"],
                       slowed={"candidate": 0.0153}),
        ProgramVerdict("grad", "device", "pass", {"device": result}, ["pass"], slowed={"candidate": -0.0021}),
    ]  # fmt: skip
    side = report.SideRecord("current", sys.executable)
    record = report.make_record(side, side, {"threshold": 1.01}, [t.to_dict() for t in timing], [], {}, 1.0)
    report.write_json(record, tmp_path / "record.json")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "python").write_text(
        "#!/bin/sh\n"
        'if [ "$1 $2 $3" = "-m invariants versus" ]; then\n'
        '  while [ "$1" != --json ]; do shift; done\n'
        f'  cp {tmp_path / "record.json"} "$2"; exit 1\n'
        "fi\n"
        f'exec {sys.executable} "$@"\n'
    )
    (bin_ / "python").chmod(0o755)
    done = _run(
        tmp_path, "--out", str(tmp_path / "out"), "--no-slowdown", PATH=f"{bin_}:{os.environ['PATH']}"
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith("same-1: ") and "exit 1: naive: fail" in lines[0], done.stderr[-2000:]
    assert "; candidate slowed +1.53%; attempts ['fail', 'fail']" in lines[1], lines
    assert lines[2].startswith("  grad: ") and "; candidate slowed -0.21%; attempts" in lines[2], lines
