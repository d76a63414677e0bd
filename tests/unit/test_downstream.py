"""A downstream project's own programs: `python -m invariants gate` with [[program]] spec entries.

Bad input is one line and exit 2 before pytest starts; the worked example under examples/downstream runs
as its README says, snapshots land in the project's folder and never in the catalog's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from invariants.__main__ import main as cli

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "downstream"

LIB = """
import jax.numpy as jnp

def lookup(table, indices):
    return jnp.take(table, indices, axis=0)

def one_arg(table):
    return table

def summed(table, indices):
    return jnp.take(table, indices, axis=0).sum()

def not_traceable(table, indices):
    return table[int(indices[0])]

NOT_CALLABLE = 3
"""


def project(tmp_path: Path, module: str, programs: str, extra: str = "") -> Path:
    """A scratch project: ``<module>.py`` (the functions above) and specs/lib.toml declaring ``programs``."""
    (tmp_path / f"{module}.py").write_text(LIB)
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "lib.toml").write_text('[spec]\ntargets = ["cpu"]\n\n' + programs + extra)
    return tmp_path


def program(name: str, function: str, kind: str = "forward", configs: str = '["f32"]') -> str:
    return f'[[program]]\nname = "{name}"\nfunction = "{function}"\nkind = "{kind}"\nconfigs = {configs}\n\n'


@pytest.fixture
def gate_in(tmp_path, monkeypatch, capsys):
    """Run the gate command in-process in ``tmp_path`` (the user's project); return (status, stderr)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))

    def run(*args: str) -> tuple[int, str]:
        status = cli(["gate", *args])
        return status, capsys.readouterr().err

    return run


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        (program("p", "nolib_here.emb:lookup"), "specs/lib.toml:4: p: cannot import nolib_here.emb "
         "(ModuleNotFoundError: No module named 'nolib_here')"),
        (program("p", "{m}:missing"), "specs/lib.toml:4: p: {m} has no attribute 'missing'"),
        (program("p", "{m}:NOT_CALLABLE"), "specs/lib.toml:4: p: {m}:NOT_CALLABLE is a int, not a function"),
        (program("p", "{m}:one_arg"), "specs/lib.toml:4: p: {m}:one_arg(table) must take (table, indices)"),
        (program("p", "{m}:summed"), "specs/lib.toml:4: p [f32]: {m}:summed on f32[8192,32] table and "
         "s32[16384] indices must return f32[16384,32] rows, got f32[]"),
        (program("p", "{m}:not_traceable"), "specs/lib.toml:4: p [f32]: {m}:not_traceable fails on "
         "f32[8192,32] table and s32[16384] indices: ConcretizationTypeError"),
        (program("take", "{m}:lookup"), "specs/lib.toml:4: program 'take' collides with the catalog's"),
        (program("p", "{m}:lookup") + program("p", "{m}:lookup"), "specs/lib.toml:10: program 'p' is "
         "already declared at specs/lib.toml:4"),
        (program("p", "{m}:lookup", kind="grad"), "specs/lib.toml:7: kind 'grad': one of forward, backward, "
         "train"),
        (program("p", "{m}:lookup", configs='["f64"]'), "specs/lib.toml:8: unknown config 'f64'"),
        (program("p", "lookup"), "specs/lib.toml:6: function 'lookup' must read 'module:attribute'"),
    ],
    ids=["no-module", "no-attribute", "not-callable", "signature", "shape", "untraceable", "collision",
         "twice", "kind", "config", "function-form"],
)  # fmt: skip
def test_bad_program_is_one_line_and_exit_2(tmp_path, gate_in, request, declared, message):
    module = f"lib_{request.node.callspec.id.replace('-', '_')}"
    project(tmp_path, module, declared.replace("{m}", module))
    status, err = gate_in("--spec-dir", "specs", "--no-catalog")
    assert status == 2
    assert err.count("\n") == 1, err
    assert message.replace("{m}", module) in err, err


def test_unknown_program_in_an_invariant_names_the_declared_ones(tmp_path, gate_in):
    extra = '[[invariant]]\nid = "x"\nassert = "kernels(my_lookp) <= kernels(take)"\n'
    project(tmp_path, "lib_relational", program("my_lookup", "lib_relational:lookup"), extra)
    status, err = gate_in("--spec-dir", "specs")
    assert status == 2 and "unknown program 'my_lookp' (did you mean 'my_lookup'?)" in err, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--no-catalog"], "--no-catalog: give --spec-dir DIR with the programs to gate"),
        (["--spec-dir", "nowhere"], "nowhere: spec folder not found"),
        (["--snapshot-dir", str(ROOT / "invariants" / "snapshots")], "inside the installed package"),
    ],
)
def test_bad_command_line_is_one_line_and_exit_2(gate_in, args, message):
    status, err = gate_in(*args)
    assert status == 2 and message in err and err.count("\n") == 1, err


def test_no_program_with_no_catalog(tmp_path, gate_in):
    project(
        tmp_path, "lib_none", "", '[[invariant]]\nid = "x"\nprograms = ["take"]\nassert = "kernels <= 9"\n'
    )
    status, err = gate_in("--spec-dir", "specs", "--no-catalog")
    assert status == 2 and "no [[program]] declared; with --no-catalog nothing is gated" in err, err


def test_a_program_kind_builds_what_the_catalog_builds(tmp_path, monkeypatch):
    """backward and train wrap the lookup exactly as grad_take and train_take do: same structure."""
    from invariants import _downstream, _programs
    from invariants._compile import compile_here
    from invariants._spec import load_specs
    from invariants._targets import all_targets

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    declared = program("k_grad", "lib_kinds:lookup", "backward") + program(
        "k_train", "lib_kinds:lookup", "train"
    )
    project(tmp_path, "lib_kinds", declared)
    decls = {d.name: d for s in load_specs(tmp_path / "specs") for d in s.programs}
    assert decls["k_grad"].tags == frozenset({"user"})
    built = {name: _downstream.build(d) for name, d in decls.items()}
    assert built["k_grad"].kind == "backward" and built["k_train"].kind == "train"
    monkeypatch.setitem(_programs.CATALOG, "k_grad", built["k_grad"])  # compile_here looks names up
    monkeypatch.setitem(_programs.CATALOG, "k_train", built["k_train"])
    cpu = all_targets()["cpu"]
    for mine, catalogs in (("k_grad", "grad_take"), ("k_train", "train_take")):
        a, b = compile_here(mine, "f32", cpu), compile_here(catalogs, "f32", cpu)
        assert a.jaxpr_primitives == b.jaxpr_primitives, mine


# ---------------------------------------------------------------------------------------------------------
# The worked example, as its README runs it (a child process, from a copy of examples/downstream).


def gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "INVARIANTS_RATIO_MAX_SECONDS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "invariants", "gate", "--spec-dir", "specs", "--snapshot-dir", "snapshots",
         "--targets", "cpu", "-p", "no:cacheprovider", *args],
        cwd=cwd, capture_output=True, text=True, env=env, check=False, timeout=600,
    )  # fmt: skip


@pytest.fixture
def example(tmp_path: Path) -> Path:
    shutil.copytree(
        EXAMPLE, tmp_path / "downstream", ignore=shutil.ignore_patterns("__pycache__", "snapshots")
    )
    return tmp_path / "downstream"


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_example_row_loop_fails_take_passes_snapshots_in_the_project(example):
    """The issue's figures: the lax.map row loop fails while_loops == 0 with the usual diagnosis, jnp.take
    passes, the snapshots land in the project. An update keeps another target's snapshots, and a failing one
    keeps (and lists) a snapshot of a program no spec declares any more; a plain run names such a file."""
    snapshots = example / "snapshots"
    (snapshots / "tpu-v9x").mkdir(parents=True)
    (snapshots / "tpu-v9x" / "mylib_take.f32.txt").write_text("from a TPU host\n")
    (snapshots / "cpu").mkdir()
    (snapshots / "cpu" / "mylib_gone.f32.txt").write_text("# mylib_gone [f32] on cpu\nno spec declares it\n")
    planted = files(snapshots)
    catalog_before = files(ROOT / "snapshots")
    first = gate(example, "--no-catalog", "--snapshot-update")
    out = first.stdout
    assert first.returncode == 1, out[-3000:]
    written = files(snapshots)
    assert sorted(written) == [
        "cpu/mylib_gone.f32.txt", "cpu/mylib_row_loop.f32.txt", "cpu/mylib_take.bf16.txt",
        "cpu/mylib_take.f32.txt", "cpu/mylib_take_grad.f32.txt", "tpu-v9x/mylib_take.f32.txt",
    ]  # fmt: skip
    assert written["tpu-v9x/mylib_take.f32.txt"] == planted["tpu-v9x/mylib_take.f32.txt"]
    assert (
        "invariants: kept snapshots/cpu/mylib_gone.f32.txt, obsolete (no program has it on cpu any more): "
        "this run failed" in out
    )
    assert "PASSED" not in out and "passed" in out
    # The usual diagnosis: where, what was measured, why, versions, the snapshot, the dumps.
    assert (
        "specs/mylib.toml:27: mylib_no_while failed on cpu mylib_row_loop [f32]: assert while_loops == 0: "
        "measured while_loops = 1" in out
    )
    assert "why it matters: a lookup is one gather" in out and "versions: jax " in out
    assert "optimized HLO and jaxpr: artifacts/hlo/cpu/mylib_row_loop.f32.hlo.txt" in out
    assert (example / "artifacts" / "hlo" / "cpu" / "mylib_row_loop.f32.hlo.txt").exists()
    # Under CI=true pytest adds " - <message>" to each summary line: compare the item ids only.
    failed = [line.split(" - ")[0] for line in out.splitlines() if line.startswith("FAILED")]
    assert failed == ["FAILED test_invariants.py::test_invariant[cpu-mylib_row_loop-f32-mylib_no_while]"], out
    assert "while ×16384" in (example / "snapshots" / "cpu" / "mylib_row_loop.f32.txt").read_text()

    # Again, under xdist, against the recorded snapshots: the same single failure, nothing rewritten; an
    # obsolete file is named, not deleted.
    (snapshots / "cpu" / "mylib_gone.f32.txt").write_text("# mylib_gone [f32] on cpu\nno spec declares it\n")
    recorded = files(example / "snapshots")
    second = gate(example, "--no-catalog", "-n", "2")
    assert second.returncode == 1 and "1 failed" in second.stdout, second.stdout[-3000:]
    assert "mylib_no_while failed on cpu mylib_row_loop [f32]" in second.stdout
    assert "invariants: snapshots/cpu/mylib_gone.f32.txt is obsolete" in second.stdout
    assert files(example / "snapshots") == recorded
    assert files(ROOT / "snapshots") == catalog_before


def test_example_with_the_catalog_reads_its_snapshots_and_never_writes_them(example):
    """The relation to the catalog's `take` holds; a selective update records only the selected programs of
    the project, in the selected configurations, and leaves the catalog's folder alone."""
    snapshots = example / "snapshots"
    catalog_before = files(ROOT / "snapshots")
    proc = gate(example, "--programs", "mylib_take,take", "--configs", "f32", "-m", "not throughput",
                "--snapshot-update", "-rA")  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (
        "PASSED test_invariants.py::test_invariant[cpu-mylib_take~take-f32-mylib_take_is_the_catalogs]"
        in proc.stdout
    )
    assert "PASSED test_structure.py::test_structure[cpu-take-f32]" in proc.stdout
    assert sorted(files(snapshots)) == ["cpu/mylib_take.f32.txt"]  # mylib_take.bf16 not selected
    assert files(ROOT / "snapshots") == catalog_before


def test_catalog_snapshot_mismatch_fails_without_rewriting(example, tmp_path):
    """Catalog snapshots and baselines read from elsewhere: a snapshot is compared and fails with its diff,
    a baseline recorded on another machine is skipped with the reason, and an update (of snapshots and of
    baselines) touches neither."""
    catalog = tmp_path / "catalog"
    shutil.copytree(ROOT / "snapshots" / "cpu", catalog / "cpu")
    (catalog / "cpu" / "take.f32.txt").write_text("summary: something else\n")
    baseline = catalog / "cpu" / "efficiency" / "take.f32.json"
    baseline.write_text(baseline.read_text().replace('"cores"', '"cores_elsewhere"'))
    before = files(catalog)
    gate_dir = ROOT / "invariants" / "gate"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(gate_dir / "test_structure.py"),
         str(gate_dir / "test_throughput.py"), "-k", "test_structure or test_efficiency",
         "-p", "no:cacheprovider", "-rs",
         "--rootdir", str(example), "--targets", "cpu", "--programs", "take,naive", "--configs", "f32",
         "--snapshot-dir", str(example / "snapshots"), "--catalog-snapshot-dir", str(catalog),
         "--snapshot-update", "--record-baselines"],
        cwd=example, capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "take[f32] on cpu no longer compiles to the package's snapshot (read-only" in proc.stdout
    assert "-summary: something else" in proc.stdout
    assert "no baseline of take[f32] for this machine" in proc.stdout
    assert files(catalog) == before
