"""The device check (scripts/device_check.sh, scripts/device_scatter_timing.py), as far as a CPU host runs
it: its dry run lists the steps, without a GPU it is one line, and the timing code runs on the CPU."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from invariants.releases.environments import SUITE_DEPS

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "device_check.sh"
TIMING = ROOT / "scripts" / "device_scatter_timing.py"


def _run(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DEVICE_CHECK_")}
    base.update({"DEVICE_CHECK_CACHE": str(tmp_path / "envs"), **env})
    # A hang guard only: the rehearsal takes 10 s on a quiet machine and over 60 s was seen at load 10.
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=base, timeout=600,
                          check=False, cwd=tmp_path)  # fmt: skip


def _timing_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("device_scatter_timing", TIMING)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_dry_run_lists_every_step_and_runs_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _run(["--dry-run", "--out", str(out)], tmp_path, DEVICE_CHECK_NVIDIA_SMI="no-such-nvidia-smi")
    assert proc.returncode == 0, proc.stderr
    steps = re.findall(r"^==> step (\d+): (\w+)", proc.stdout, re.M)
    assert steps == [("1", "gpu"), ("2", "env"), ("3", "env"), ("4", "timing"), ("5", "gate"), ("6", "gate"),
                     ("7", "findings")], proc.stdout  # fmt: skip
    text = proc.stdout
    for version in ("0.10.1", "0.10.2"):
        assert f"jax[cuda12]=={version} jaxlib=={version}" in text
        assert f"--snapshot-dir {out}/snapshots-{version}" in text
    installs = [ln for ln in text.splitlines() if ln.strip().startswith("installs:")]
    assert len(installs) == 2 and all(set(SUITE_DEPS) <= set(ln.split()) for ln in installs)
    assert "device_scatter_timing.py --platform cuda" in text and "JAX_PLATFORMS=cuda" in text
    runs = next(ln for ln in text.splitlines() if ln.strip().startswith("runs:"))
    assert "--targets runtime --programs grad_take,take,grad_naive,train_take --configs f32,bf16" in runs
    assert "--snapshot-update" in runs
    # Every gate option it passes is one the gate's plugin declares (--snapshot-update is syrupy's).
    from invariants.plugin.options import OPTIONS

    declared = {o.flag for o in OPTIONS}
    for option in set(re.findall(r" (--[a-z-]+)", runs)) - {"--snapshot-update"}:
        assert option in declared, option
    assert "--findings" in text and "docs/findings.md" in text
    assert proc.stdout.strip().splitlines()[-1] == "device_check: dry run: 7 steps listed, none run"
    assert not out.exists() and not (tmp_path / "envs").exists(), "a dry run creates nothing"


def test_without_a_gpu_it_exits_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _run(["--out", str(out)], tmp_path, DEVICE_CHECK_NVIDIA_SMI="no-such-nvidia-smi")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("device_check: no NVIDIA GPU visible")
    assert not out.exists(), "nothing is created before the GPU is found"
    # An nvidia-smi that lists no GPU (a driver without a device) is one line too.
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    proc = _run(["--out", str(out)], tmp_path, DEVICE_CHECK_NVIDIA_SMI=str(fake))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == f"device_check: no NVIDIA GPU visible ({fake} lists none)"


@pytest.mark.parametrize("budget", ["SECONDS[$(touch {})]", "1e3", "-5"])
def test_a_budget_that_is_not_a_number_runs_nothing_and_is_one_line(tmp_path: Path, budget: str) -> None:
    marker = tmp_path / "MARKER"
    proc = _run(["--dry-run"], tmp_path, DEVICE_CHECK_BUDGET=budget.format(marker))
    assert not marker.exists() and proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("device_check: DEVICE_CHECK_BUDGET=")
    assert line.endswith(": not a whole number of seconds (at most 6 digits)")


def test_unknown_argument_is_one_line(tmp_path: Path) -> None:
    proc = _run(["--fast"], tmp_path)
    assert (
        proc.returncode == 2 and proc.stderr.count("\n") == 1 and "unknown argument '--fast'" in proc.stderr
    )


def test_script_parses_and_passes_shellcheck() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True, timeout=30)
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (apt-get install shellcheck)")
    proc = subprocess.run(
        ["shellcheck", str(SCRIPT)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout


@pytest.mark.e2e
def test_timing_smoke_on_cpu_writes_its_json(tmp_path: Path) -> None:
    # No project code in the timing script: nothing there may start libtpu or read the catalog.
    assert not re.search(r"^\s*(from|import) invariants", TIMING.read_text(), re.M)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    out, md = tmp_path / "t.json", tmp_path / "t.md"
    proc = subprocess.run([sys.executable, str(TIMING), "--platform", "cpu", "--smoke", "--out", str(out),
                           "--md", str(md)], capture_output=True, text=True, env=env, timeout=300,
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads(out.read_text())
    cases = {c["case"]: c for c in record["cases"]}
    assert set(cases) == {f"{d}/{x}" for d in ("f32", "bf16") for x in ("all-equal", "zipf-1.1", "uniform")}
    for c in cases.values():
        lo, hi = c["ratio_ci95"]
        assert c["pairs"] >= 2 and 0 < lo <= c["ratio_median"] <= hi  # two pairs at least, past the budget
        assert c["baseline_us"] > 0 and c["candidate_us"] > 0
    for side in record["sides"].values():
        assert side["platform"] == "cpu" and side["size"] == {"vocab": 64, "width": 4, "indices": 128}
        assert side["cases"]["f32/all-equal"]["distinct_rows"] == 1
        assert side["cases"]["f32/uniform"]["distinct_rows"] > side["cases"]["f32/zipf-1.1"]["distinct_rows"]
    table = md.read_text()
    assert "| case | distinct rows | baseline µs/call | candidate µs/call |" in table
    assert sum(ln.startswith(("| f32 ", "| bf16 ")) for ln in table.splitlines()) == 6


def test_findings_section_is_replaced_or_appended(tmp_path: Path) -> None:
    t = _timing_module()
    doc = "# Findings\n\nsome text\n"
    once = t.replace_section(doc, "## Device check\nfirst\n")
    assert once == doc + f"\n{t.BEGIN}\n## Device check\nfirst\n{t.END}\n"
    twice = t.replace_section(once + "\n## Later section\n", "## Device check\nsecond")
    assert "first" not in twice and "second" in twice and twice.endswith("\n## Later section\n")
    assert twice.count(t.BEGIN) == 1 and twice.startswith(doc)
    with pytest.raises(t.TimingError, match="not one pair"):
        t.replace_section(f"{t.END}\n{t.BEGIN}\n", "x")
    findings, section = tmp_path / "findings.md", tmp_path / "section.md"
    findings.write_text(doc)
    section.write_text("## Device check\nfrom the CLI\n")
    cli = [sys.executable, str(TIMING), "--findings", str(findings), "--section", str(section)]
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "from the CLI" in findings.read_text() and findings.read_text().startswith(doc)


@pytest.mark.slow
@pytest.mark.e2e
def test_rehearsal_on_cpu_runs_every_step(tmp_path: Path) -> None:
    """Steps 1-7 for real on the CPU (DEVICE_CHECK_PLATFORM=cpu), with a stand-in nvidia-smi and both
    releases' environments prepared as this interpreter: the wiring a GPU host relies on, end to end."""
    import jax

    version = jax.__version__
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'NVIDIA Rehearsal GPU, 0.0'\n")
    fake.chmod(0o755)
    env_dir = tmp_path / "envs" / f"jax-{version}-cuda12"
    (env_dir / "bin").mkdir(parents=True)
    (env_dir / "bin" / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (env_dir / "bin" / "python").chmod(0o755)
    reqs = [f"jax[cuda12]=={version}", f"jaxlib=={version}", "numpy", "equinox", *SUITE_DEPS]
    (env_dir / "device-check-env.txt").write_text("\n".join(reqs) + "\n")
    findings = tmp_path / "findings.md"
    findings.write_text("# Findings\n\nkept\n")
    out = tmp_path / "out"
    knobs = {"NVIDIA_SMI": str(fake), "PLATFORM": "cpu", "BASELINE": version, "CANDIDATE": version,
             "FINDINGS": str(findings), "TIMING_ARGS": "--smoke --budget 2"}  # fmt: skip
    proc = _run(["--out", str(out)], tmp_path, **{f"DEVICE_CHECK_{k}": v for k, v in knobs.items()})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "reusing" in proc.stdout and "device_check: done in" in proc.stdout
    assert json.loads((out / "scatter-timing.json").read_text())["cases"]
    assert list((out / f"snapshots-{version}" / "cpu").glob("grad_take.*.txt")), "the gate recorded snapshots"
    text = findings.read_text()
    assert text.startswith("# Findings\n\nkept\n") and "NVIDIA Rehearsal GPU" in text
    assert "| f32 all-equal | 1 |" in text and "gate on the GPU runtime target" in text
