"""examples/pytest_api, run as a project runs it: ``pytest`` on a copy of the folder.

The committed snapshots pass as they are, and under xdist; a row-loop lookup fails the ``while_loops == 0``
asserts; a change those asserts do not see fails the snapshot with syrupy's diff; ``--snapshot-update``
records what is missing, deletes a snapshot no test asserts any more, and leaves other files alone; bad
input to the fixture is one line at the test's line; a missing extra skips with its install command.

What the fixtures do is tested in this process (pytester, ``_inline``; under xdist its workers are
processes); a child process (``_pytest``, in a user's environment: none of the gate's variables) where the
subject is the process: the example under xdist as a user starts it, JAX started before the first compile
(and again with the setting that message names).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gatekit import IN_PROCESS, environment

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "pytest_api"
TAKE = '    return jnp.take(params["table"], indices, axis=0)\n'
# Without the tpu/gpu extras those items skip; the committed snapshots are compared where they compile.
AOT = (
    importlib.util.find_spec("libtpu") is not None
    and importlib.util.find_spec("jax_cuda12_plugin") is not None
)


def _copy(tmp_path: Path) -> Path:
    """A project with the example in it, outside this checkout (no conftest, no pyproject of ours)."""
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project / "pytest_api")
    return project


# What the gate's plugin (loaded in this session) set in the environment: a user's shell has none of it.
_GATE_DEFAULTS = {
    "JAX_PLATFORMS": "cpu", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1", "TPU_SKIP_MDS_QUERY": "1",
    "TPU_ACCELERATOR_TYPE": "v5litepod-1", "TPU_WORKER_HOSTNAMES": "localhost", "TF_CPP_MIN_LOG_LEVEL": "1",
}  # fmt: skip


def _pytest(project: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    # Nor an xdist worker's variables: with them, syrupy in the child would take itself for a worker.
    mine = {
        k: v
        for k, v in os.environ.items()
        if _GATE_DEFAULTS.get(k) != v and not k.startswith("PYTEST_XDIST_")
    }
    env = {**mine, **(env or {})}
    env["COLUMNS"] = "250"  # the short summary's lines whole
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "pytest_api", *args],
        cwd=project, capture_output=True, text=True, timeout=600, check=False, env=env,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def _inline(pytester: pytest.Pytester, *args: str) -> tuple[int, str]:
    """``pytest pytest_api ARGS`` in this process, in pytester's folder (the project: see ``_copy_here``)."""
    with environment({"COLUMNS": "250"}, quick=False):  # the short summary's lines whole
        result = pytester.runpytest("-p", "no:cacheprovider", *IN_PROCESS, "pytest_api", *args)
    return int(result.ret), "\n".join(result.outlines + result.errlines)


def _copy_here(pytester: pytest.Pytester) -> Path:
    """The example in pytester's folder, as ``_copy`` makes it."""
    shutil.copytree(EXAMPLE, pytester.path / "pytest_api")
    return pytester.path


def _replace_lookup(project: Path, body: str) -> None:
    test_file = project / "pytest_api" / "test_embeddings.py"
    text = test_file.read_text()
    assert text.count(TAKE) == 1, "the example's lookup moved: update TAKE here"
    test_file.write_text(text.replace(TAKE, body))


def _snapshots(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def _passes_with_the_committed_snapshots(rc: int, out: str) -> None:
    assert rc == 0, out[-3000:]
    if AOT:
        assert "6 passed, 1 xfailed" in out
        assert "6 snapshots passed." in out
    else:
        assert "skipped" in out and "pip install" in out


@pytest.mark.usefixtures("_preloaded")
def test_the_example_passes_with_its_committed_snapshots(pytester: pytest.Pytester):
    _copy_here(pytester)
    _passes_with_the_committed_snapshots(*_inline(pytester))


@pytest.mark.e2e
@pytest.mark.slow
def test_the_example_passes_under_xdist_as_a_user_runs_it(tmp_path):
    """A child process in a user's environment, its tests in two xdist workers."""
    _passes_with_the_committed_snapshots(*_pytest(_copy(tmp_path), "-n", "2"))


@pytest.mark.usefixtures("_preloaded")
def test_a_row_loop_fails_the_while_asserts(pytester: pytest.Pytester):
    project = _copy_here(pytester)
    _replace_lookup(project, '    return jax.lax.map(lambda i: params["table"][i], indices)\n')
    rc, out = _inline(pytester)
    assert rc == 1, out[-3000:]
    assert "FAILED pytest_api/test_embeddings.py::test_embed_is_one_gather - assert 1 == 0" in out
    # What the example's README shows of it, line for line.
    shown = re.search(r"fails with\n\n```\n(.*?)```", (EXAMPLE / "README.md").read_text(), re.S)
    assert shown, "examples/pytest_api/README.md: the failure it shows moved"
    for line in shown[1].splitlines():
        assert line in out, line
    assert "FAILED pytest_api/test_embeddings.py::test_gradient_is_one_scatter[cpu] - assert 2 == 0" in out


@pytest.mark.usefixtures("_preloaded")
def test_a_change_the_asserts_miss_fails_the_snapshot_with_a_diff(pytester: pytest.Pytester):
    project = _copy_here(pytester)
    _replace_lookup(project, '    return params["table"][indices]\n')
    rc, out = _inline(pytester, "-k", "test_embed_is_one_gather")
    assert rc == 1, out[-3000:]
    assert ">       assert compiled_snapshot == s" in out
    # Numpy-style indexing promises in-bounds indices: one gather fusion still, with less clamping around
    # it. The kernel is named by what it is, so the diff is that kernel's line.
    before = r"^E\s+-   fusion kLoop \{add, and, bitcast×3, .*gather, select×2\} -> f32\[256,64\]"
    after = r"^E\s+\+   fusion kLoop \{add, bitcast×2, .*gather, select\} -> f32\[256,64\]"
    assert re.search(before, out, re.M) and re.search(after, out, re.M), out[-3000:]
    assert "1 snapshot failed." in out


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.usefixtures("_preloaded")
def test_snapshot_update_records_rewrites_and_deletes_only_its_own(pytester: pytest.Pytester):
    project = _copy_here(pytester)
    snapshots = project / "pytest_api" / "snapshots"
    committed = _snapshots(snapshots)
    cpu = snapshots / "cpu" / "test_embeddings"
    (cpu / "test_embed_is_one_gather.txt").unlink()
    # A snapshot no test asserts any more (ours: render_summary's header), a foreign file beside it, and a
    # file in the gate's own layout one level up.
    gone = cpu / "test_gone.txt"
    gone.write_text((cpu / "test_gradient_is_one_scatter[cpu].txt").read_text())
    (cpu / "README.txt").write_text("not a snapshot\n")
    gate_file = snapshots / "cpu" / "naive.f32.txt"
    gate_file.write_text("# naive [f32] on cpu\n")

    # syrupy's semantics: a -k selection leaves a snapshot whose name it does not match alone ...
    rc, out = _inline(pytester, "-k", "gather")
    assert rc == 1, out[-3000:]
    assert "1 snapshot failed." in out and "unused" not in out
    # ... and a whole run fails on it, as on the snapshot that is missing.
    rc, out = _inline(pytester)
    assert rc == 1, out[-3000:]
    assert "1 snapshot failed." in out and "1 snapshot unused." in out

    # The update under xdist (the runs above were in one process): syrupy merges what its workers saw.
    rc, out = _inline(pytester, "--snapshot-update", "-n", "2")
    assert rc == 0, out[-3000:]
    assert "1 snapshot generated. 1 unused snapshot deleted." in out
    assert not gone.exists()
    assert (cpu / "README.txt").read_text() == "not a snapshot\n"
    assert gate_file.read_text() == "# naive [f32] on cpu\n"
    now = _snapshots(snapshots)
    for extra in ("cpu/test_embeddings/README.txt", "cpu/naive.f32.txt"):
        now.pop(extra)
    if AOT:
        assert now == committed  # recorded again byte for byte: the committed snapshots are current
    assert not list(snapshots.rglob(".*.tmp"))

    rc, out = _inline(pytester)
    assert rc == 0, out[-3000:]


BAD = """
import jax
import jax.numpy as jnp

W = jax.ShapeDtypeStruct((8, 4), jnp.float32)
X = jax.ShapeDtypeStruct((3,), jnp.int32)

def lookup(w, x):
    return jnp.take(w, x, axis=0)

def test_typo(compile_for):
    compile_for(lookup, W, X, target="tpu-v5")

def test_not_an_array(compile_for):
    compile_for(lookup, [1.0], X, target="cpu")

def test_no_libtpu(compile_for):
    compile_for(lookup, W, X, target="tpu-v5e")

def test_not_a_compile(compiled_snapshot):
    assert compiled_snapshot == "text"
"""


@pytest.mark.usefixtures("_preloaded")
def test_bad_input_is_one_line_at_the_test_and_a_missing_extra_skips(pytester: pytest.Pytester, monkeypatch):
    """On a host without the tpu extra, as far as the targets can tell (a monkeypatch, undone after)."""
    find = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "libtpu" else find(name, *a)
    )
    (pytester.path / "pytest_api").mkdir()
    (pytester.path / "pytest_api" / "test_bad.py").write_text(BAD)
    rc, out = _inline(pytester, "-rs")
    assert rc == 1, out[-3000:]
    lines = out.splitlines()
    assert (
        "pytest_api/test_bad.py:12: compile_for: unknown target 'tpu-v5' (did you mean 'tpu-v5p' or "
        "'tpu-v5e'?); known: runtime, cpu, " in out
    )
    assert "pytest_api/test_bad.py:15: compile_for: argument [0][0] is a float, not an array" in out
    assert any("SKIPPED" in ln and "tpu-v5e: libtpu is not installed; pip install" in ln for ln in lines)
    assert "pytest_api/test_bad.py:21: compiled_snapshot compares what compile_for returns, got a str" in out
    # The skip names the test's line; no failure shows the error it replaced, nor a traceback.
    assert "SKIPPED [1] pytest_api/test_bad.py:18: tpu-v5e: libtpu is not installed" in out
    assert "Traceback" not in out and "During handling" not in out and "invariants/" not in out
    assert "3 failed, 1 skipped" in out


EARLY = """
import jax.numpy as jnp

W = jnp.zeros((8, 4))  # starts JAX when the module is imported, before any fixture

def test_gpu(compile_for):
    s = compile_for(lambda w, x: jnp.take(w, x, axis=0), W, jnp.zeros(3, "int32"), target="gpu-h100")
    assert s.gathers == 1
"""


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a CUDA host starts its GPU backend")
@pytest.mark.skipif(importlib.util.find_spec("jax_cuda12_plugin") is None, reason="needs the gpu extra")
def test_jax_started_before_compile_for_skips_gpu_saying_how_to_fix_it(tmp_path):
    project = tmp_path / "project"
    (project / "pytest_api").mkdir(parents=True)
    (project / "pytest_api" / "test_early.py").write_text(EARLY)
    rc, out = _pytest(project, "-rs")
    assert rc == 0, out[-3000:]
    assert (
        "SKIPPED [1] pytest_api/test_early.py:7: gpu-h100: the CUDA plugin cannot describe this device" in out
    )
    assert "set JAX_PLATFORMS=cpu" in out
    rc, out = _pytest(project, "-rs", env={"JAX_PLATFORMS": "cpu"})
    assert rc == 0 and "1 passed" in out, out[-3000:]
