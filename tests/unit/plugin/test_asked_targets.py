"""A run asked for targets this host cannot compile for checks nothing there, and is not green: exit 4 and
one line naming each target, why, and what installs it. Under the default selection they skip, and the
summary says which."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from invariants.compile.child import GATE_DIR, gate_env

# A host without the CUDA plugin, as far as the targets can tell (JAX itself is left as it is).
HIDE_CUDA = """
import importlib.util
_find = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name.startswith("jax_cuda") else _find(name, *a)
"""
ROOT = Path(__file__).parents[3]


def _gate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "hide_cuda.py").write_text(HIDE_CUDA)
    env = {**gate_env(), "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "hide_cuda", str(GATE_DIR), "-p", "invariants.plugin.hooks",
         "-c", "/dev/null", "--rootdir", str(tmp_path), "-p", "no:cacheprovider", "-q",
         "--snapshot-dir", str(ROOT / "snapshots"), "--results-json", str(tmp_path / "r.json"), *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_an_asked_target_without_its_compiler_fails_the_run_in_one_line(tmp_path):
    proc = _gate(tmp_path, "--targets", "cpu,gpu-h100", "--programs", "naive", "--configs", "f32")
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    said = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "cannot compile here" in ln]
    assert said == [
        "Exit: --targets cpu,gpu-h100: cannot compile here, so nothing would be checked there: gpu-h100: the "
        "JAX CUDA plugin is not installed; pip install 'jax-embedding-invariants[gpu]' (in a checkout: pip "
        "install -e '.[gpu]'); the CUDA plugin compiles for a GPU without one"
    ]
    assert "passed" not in proc.stdout and not (tmp_path / "r.json").exists()


def test_a_family_asked_for_names_each_of_its_targets(tmp_path):
    proc = _gate(tmp_path, "--targets", "gpu", "--programs", "naive", "--configs", "f32")
    assert proc.returncode == 4, proc.stdout[-2000:]
    (line,) = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "cannot compile here" in ln]
    assert line.startswith("Exit: --targets gpu: cannot compile here, so nothing would be checked there: ")
    assert line.endswith(": gpu-h100, gpu-a100, gpu-l4, gpu-b200: the JAX CUDA plugin is not installed; pip "
                         "install 'jax-embedding-invariants[gpu]' (in a checkout: pip install -e '.[gpu]'); "
                         "the CUDA plugin compiles for a GPU without one")  # fmt: skip


@pytest.mark.parametrize("targets", [None, "all"])
def test_the_default_selection_skips_them_and_says_which(tmp_path, targets):
    args = ["--targets", targets] if targets else []
    proc = _gate(tmp_path, *args, "--programs", "naive", "--configs", "f32", "-k", "test_structure", "-rs")
    assert proc.returncode == 0, proc.stdout[-3000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("invariants: skipped, cannot compile")]
    assert "gpu-h100, gpu-a100, gpu-l4, gpu-b200: the JAX CUDA plugin is not installed; pip install" in line
    assert "cpu" not in line and "tpu" not in line  # what compiles is not listed
    assert "passed" in proc.stdout


def test_a_projects_spec_files_name_the_targets_it_asks_for(tmp_path):
    """``--no-catalog``: the targets a project's spec files name (not its patterns) are asked for; the gate
    command keeps the exit status 4 (pytest's own bad input there is 2)."""
    (tmp_path / "hide_cuda.py").write_text(HIDE_CUDA)
    (tmp_path / "lib.py").write_text(
        "import jax.numpy as jnp\n\ndef lookup(t, i):\n    return jnp.take(t, i, axis=0)\n"
    )
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "lib.toml").write_text(
        '[spec]\ntargets = ["cpu", "gpu-h100", "tpu-*"]\n\n[[program]]\nname = "p"\nfunction = "lib:lookup"\n'
        'kind = "forward"\n\n[[invariant]]\nid = "w"\nprograms = ["p"]\nassert = "while_loops == 0"\n'
    )
    env = {**gate_env(), "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    proc = subprocess.run(
        [sys.executable, "-m", "invariants", "gate", "--spec-dir", "specs", "--snapshot-dir", "snapshots",
         "--no-catalog", "-p", "hide_cuda", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "cannot compile here" in ln]
    assert line.startswith("Exit: the spec files' targets: cannot compile here, so nothing would be checked ")
    assert "gpu-h100: the JAX CUDA plugin is not installed" in line and "tpu" not in line
