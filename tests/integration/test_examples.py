"""The examples of a project's own programs, run as their READMEs say: each fails on its bad form and
passes on its good one (examples/sharded_embed runs in tests/unit/catalog/test_sharded_programs.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gatekit import command

from invariants.scope.targets import all_targets

ROOT = Path(__file__).parents[2]
TARGETS = all_targets()


def _copy(name: str, tmp_path: Path) -> Path:
    project = tmp_path / name
    shutil.copytree(
        ROOT / "examples" / name, project, ignore=shutil.ignore_patterns("__pycache__", "snapshots")
    )
    return project


GATE = ("gate", "--spec-dir", "specs", "--snapshot-dir", "snapshots", "--no-catalog",
        "-p", "no:cacheprovider", "-q", "-rfsx")  # fmt: skip


def _gate(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The README's command, ``python -m invariants gate``, in this process (``gatekit.command``)."""
    return command(*GATE, *args, cwd=project, quick=False)


def _gate_child(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The same command in a process of its own, as the e2e tier runs it."""
    return subprocess.run([sys.executable, "-m", "invariants", *GATE, *args], cwd=project,
                          capture_output=True, text=True, timeout=900, check=False)  # fmt: skip


def _failed(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return sorted(
        ln.split("::", 1)[1].split(" ", 1)[0] for ln in proc.stdout.splitlines() if ln.startswith("FAILED")
    )


def test_segment_sum_the_vmapped_rows_are_strided_and_the_transposed_form_is_not(tmp_path):
    """examples/segment_sum on the CPU: the vmapped per-row segment sum writes each segment's row strided
    (jax >= 0.9.2); one segment sum of the transposed batch writes it whole. Snapshots go to the targets
    the spec file names, and only there."""
    project = _copy("segment_sum", tmp_path)
    proc = _gate(project, "--targets", "cpu", "--snapshot-update")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert _failed(proc) == ["cpu::segsum.toml::rows_written_whole::segsum_rows-f32"]
    assert "assert strided_scatters == 0: measured strided_scatters = 1" in proc.stdout
    snapshot = (project / "snapshots" / "cpu" / "segsum_rows.f32.txt").read_text()
    assert any(
        ln.startswith("  scatter -> f32[1024,2048]") and ln.endswith(" strided")
        for ln in snapshot.splitlines()
    )
    assert " strided" not in (project / "snapshots" / "cpu" / "segsum_rows_transposed.f32.txt").read_text()
    assert sorted(p.name for p in (project / "snapshots").iterdir()) == ["cpu"]


def test_message_passing_a_layer_and_its_own_step_with_arguments_from_a_factory(tmp_path):
    """examples/message_passing on the CPU, as its README says: a GNN layer (gather + segment_sum) and the
    library's own train step (kind = "step", donated) take their arguments from a factory, and pass; the
    row loop fails on its while loop. --keep-hlo leaves the HLO of every program, the passing ones too."""
    project = _copy("message_passing", tmp_path)
    proc = _gate(project, "--targets", "cpu", "--snapshot-update", "--keep-hlo")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert sorted(p.name for p in (project / "snapshots" / "cpu").iterdir()) == [
        "gnn_layer.f32.txt", "gnn_train_step.f32.txt"]  # fmt: skip
    dumped = project / "artifacts" / "hlo" / "cpu"
    assert {"gnn_layer.f32.hlo.txt", "gnn_train_step.f32.jaxpr.txt"} <= {p.name for p in dumped.iterdir()}
    spec = project / "specs" / "gnn.toml"
    spec.write_text(spec.read_text().replace('"gnn:layer"', '"gnn:layer_row_loop"', 1))
    proc = _gate(project, "--targets", "cpu")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert _failed(proc) == ["cpu::gnn.toml::one_gather_one_scatter::gnn_layer-f32", "cpu::gnn_layer-f32"]
    assert "measured gathers = 0, scatters = 0, while_loops = 1" in proc.stdout


@pytest.mark.skipif(
    TARGETS["gpu-l4"].unavailable_reason() is not None, reason="the CUDA plugin is not installed"
)
def test_segment_sum_without_targets_compiles_where_the_spec_file_says(tmp_path):
    """[spec] targets = ["cpu", "gpu-l4"]: a run without --targets writes snapshots for those two alone, not
    for the targets that compile every catalog program; the L4's pooled sum is a CAS loop (a ratchet)."""
    project = _copy("segment_sum", tmp_path)
    proc = _gate(project, "--snapshot-update")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert sorted(p.name for p in (project / "snapshots").iterdir()) == ["cpu", "gpu-l4"]
    assert any(
        "XFAIL" in ln and "::gpu-l4::" in ln and "::segsum_pool-" in ln and "compare-and-swap" in ln
        for ln in proc.stdout.splitlines()
    )
    pool = (project / "snapshots" / "gpu-l4" / "segsum_pool.f32.txt").read_text()
    assert "(CAS retry loops " in pool


def _command(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "invariants", *args], cwd=project, capture_output=True,
                          text=True, timeout=900, check=False)  # fmt: skip


@pytest.mark.e2e
@pytest.mark.skipif(
    TARGETS["gpu-l4"].unavailable_reason() is not None, reason="the CUDA plugin is not installed"
)
def test_segment_sum_across_releases_as_its_readme_runs_it(tmp_path):
    """examples/segment_sum's cross-release commands, as its README gives them: versus and bisect on the
    project's own programs (--spec-dir), each release in an environment of its own (built with uv from
    PyPI, then cached) that imports the project's module from its folder. The L4's CAS loops come with
    jaxlib 0.10.2 behind equal HLO lines, and the vmapped sum's scatter became strided in jax 0.9.2."""
    project = _copy("segment_sum", tmp_path)
    spec = ("--spec-dir", "specs")
    proc = _command(project, "versus", "--baseline", "0.10.1", "--candidate", "current", *spec,
                    "--programs", "segsum_pool", "--targets", "gpu-l4", "--no-timing")  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:] + proc.stderr[-2000:]
    assert "invariant `pool_native_float_atomics` (ratchet)" in out and "**regressed**" in out, out[-3000:]
    assert "+      code ptx: atomics atom.cas.b32×4 (CAS retry loops 4); loops 4" in out, out[-3000:]
    assert "the HLO lines are equal" in out
    proc = _command(project, "bisect", "--good", "0.10.1", "--bad", "0.10.2", *spec,
                    "--programs", "segsum_pool", "--targets", "gpu-l4")  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "first release where the selection breaks: jax 0.10.2 (last with it holding: jax 0.10.1)" in (
        proc.stdout
    ), proc.stdout[-3000:]
    proc = _command(project, "versus", "--baseline", "0.9.1", "--candidate", "0.9.2", *spec,
                    "--programs", "segsum_rows", "--targets", "cpu", "--no-timing")  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "invariant rows_written_whole holds on the baseline, fails on the candidate" in proc.stdout
    assert "measured strided_scatters = 1" in proc.stdout
    assert any(ln.startswith("+  scatter -> f32[1024,2048]") and ln.endswith(" strided")
               for ln in proc.stdout.splitlines()), proc.stdout[-3000:]  # fmt: skip


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.skipif(
    TARGETS["gpu-h100"].unavailable_reason() is not None, reason="the CUDA plugin is not installed"
)
def test_compile_time_the_reduction_after_the_chain_fails_its_relation(tmp_path):
    """examples/compile_time on gpu-h100 (a minute of compile, ahead of time): the chain followed by a sum
    compiles far more than ten times slower than the chain alone. An e2e test (tests/conftest.py): what it
    measures is the compile itself, minutes of it on a loaded machine."""
    project = _copy("compile_time", tmp_path)
    proc = _gate_child(project, "--snapshot-update")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert _failed(proc) == ["gpu-h100::chain.toml::reduction_compiles_in_seconds::chain_summed~chain-f32"]
    items = json.loads((project / "artifacts" / "results.json").read_text())["items"]
    seconds = {it["program"]: it["compile_seconds"] for it in items if it["kind"] == "structure"}
    assert seconds["chain_summed"] > 10 * seconds["chain"] + 5


@pytest.mark.skipif(
    any(TARGETS[t].unavailable_reason() for t in ("tpu-v5e", "gpu-a100")),
    reason="libtpu or the CUDA plugin missing",
)
def test_embedding_bag_takes_its_offsets_as_inputs_and_donates_in_its_train_step(tmp_path):
    """examples/embedding_bag on cpu, tpu-v5e and gpu-a100: the offsets are an input the gradient does not
    differentiate, the train step donates its table (an input-output alias in the module), the f32
    scatters are counted apart from the offsets' s32 one, and the input facts are the model's table."""
    project = _copy("embedding_bag", tmp_path)
    proc = _gate(project, "--snapshot-update")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    items = json.loads((project / "artifacts" / "results.json").read_text())["items"]
    scoped = {(it["programs"][0], it["target"]): it["measured"] for it in items
              if it["kind"] == "invariant" and "dtype" in it["assert"]}  # fmt: skip
    assert {k: v["scatters(dtype='f32')"] for k, v in scoped.items() if k[0] == "bag"} == {
        ("bag", "cpu"): 1, ("bag", "tpu-v5e"): 1, ("bag", "gpu-a100"): 1}  # fmt: skip
    structures = {(it["program"], it["target"]): it for it in items if it["kind"] == "structure"}
    assert all(structures[("bag", t)]["scatters"] == 2 for t in ("cpu", "tpu-v5e", "gpu-a100"))  # s32 and f32
    memory = next(it for it in items if it["kind"] == "invariant" and "temp_bytes" in it["assert"])
    assert memory["measured"]["table_bytes"] == 50000 * 32 * 4  # the model's table, its own vocab
    train = (project / "snapshots" / "cpu" / "bag_train.f32.txt").read_text()
    grad = (project / "snapshots" / "cpu" / "bag_grad.f32.txt").read_text()
    assert "aliases: output {0} <- parameter 0" in train and "aliases: none" in grad
    reused = {it["target"]: it["outcome"] for it in items if it.get("id") == "donated_table_is_reused"}
    assert reused == {"cpu": "passed", "tpu-v5e": "passed", "gpu-a100": "passed"}, reused
