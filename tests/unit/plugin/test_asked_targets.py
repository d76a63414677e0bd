"""A run asked for targets this host cannot compile for checks nothing there, and is not green: exit 4 and
one line naming each target, why, and what installs it. Under the default selection they skip, and the
summary says which. The gate runs in this process, on a host without the CUDA plugin as far as the targets
can tell (``no_cuda``)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest
from gatekit import InProcess

from invariants.compile.child import GATE_DIR

ROOT = Path(__file__).parents[3]


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host without the CUDA plugin, as far as the targets can tell (JAX itself is left as it is)."""
    find = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name.startswith("jax_cuda") else find(name, *a)
    )


def _gate(gate_pytester: InProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """The gate's modules as the package ships them, in this process."""
    folder = gate_pytester.path
    return gate_pytester.pytest(
        str(GATE_DIR), "-p", "invariants.plugin.hooks", "-c", os.devnull, "--rootdir", str(folder),
        "--snapshot-dir", str(ROOT / "snapshots"), "--results-json", str(folder / "r.json"), *args,
    )  # fmt: skip


@pytest.mark.usefixtures("no_cuda")
def test_an_asked_target_without_its_compiler_fails_the_run_in_one_line(gate_pytester):
    proc = _gate(gate_pytester, "--targets", "cpu,gpu-h100", "--programs", "naive", "--configs", "f32")
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    said = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "cannot compile here" in ln]
    assert said == [
        "error: --targets cpu,gpu-h100: cannot compile here, so nothing would be checked there: gpu-h100: "
        "the JAX CUDA plugin is not installed; pip install 'jax-embedding-invariants[gpu]' (in a checkout: "
        "pip install -e '.[gpu]'); the CUDA plugin compiles for a GPU without one"
    ]
    assert "passed" not in proc.stdout and not (gate_pytester.path / "r.json").exists()


@pytest.mark.usefixtures("no_cuda")
def test_a_family_asked_for_names_each_of_its_targets(gate_pytester):
    proc = _gate(gate_pytester, "--targets", "gpu", "--programs", "naive", "--configs", "f32")
    assert proc.returncode == 4, proc.stdout[-2000:]
    (line,) = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "cannot compile here" in ln]
    assert line.startswith("error: --targets gpu: cannot compile here, so nothing would be checked there: ")
    assert line.endswith(": gpu-h100, gpu-a100, gpu-l4, gpu-b200: the JAX CUDA plugin is not installed; pip "
                         "install 'jax-embedding-invariants[gpu]' (in a checkout: pip install -e '.[gpu]'); "
                         "the CUDA plugin compiles for a GPU without one")  # fmt: skip


@pytest.mark.usefixtures("no_cuda")
@pytest.mark.parametrize("targets", [None, "all"])
def test_the_default_selection_skips_them_and_says_which(gate_pytester, targets):
    args = ["--targets", targets] if targets else []
    proc = _gate(
        gate_pytester, *args, "--programs", "naive", "--configs", "f32", "-k", "test_structure", "-rs"
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("invariants: skipped, cannot compile")]
    assert "gpu-h100, gpu-a100, gpu-l4, gpu-b200: the JAX CUDA plugin is not installed; pip install" in line
    assert "cpu" not in line and "tpu" not in line  # what compiles is not listed
    assert "passed" in proc.stdout


@pytest.mark.usefixtures("no_cuda")
def test_a_projects_spec_files_name_the_targets_it_asks_for(gate_pytester):
    """``--no-catalog``: the targets a project's spec files name (not its patterns) are asked for; the gate
    command keeps the exit status 4 (pytest's own bad input there is 2)."""
    folder = gate_pytester.path
    (folder / "lib.py").write_text(
        "import jax.numpy as jnp\n\ndef lookup(t, i):\n    return jnp.take(t, i, axis=0)\n"
    )
    (folder / "specs").mkdir()
    (folder / "specs" / "lib.toml").write_text(
        '[spec]\ntargets = ["cpu", "gpu-h100", "tpu-*"]\n\n[[program]]\nname = "p"\nfunction = "lib:lookup"\n'
        'kind = "forward"\n\n[[invariant]]\nid = "w"\nprograms = ["p"]\nassert = "while_loops == 0"\n'
    )
    proc = gate_pytester.command("gate", "--spec-dir", "specs", "--snapshot-dir", "snapshots", "--no-catalog",
                                 "-p", "no:cacheprovider", "-q")  # fmt: skip
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "cannot compile here" in ln]
    assert line.startswith(
        "error: the spec files' targets: cannot compile here, so nothing would be checked "
    )
    assert "gpu-h100: the JAX CUDA plugin is not installed" in line and "tpu" not in line
