"""The gate from an installed wheel (not this checkout), in an empty project folder.

A wheel is built from a copy of the checkout (``uv build``), installed without dependencies into a fresh
virtual environment that borrows this environment's packages (jax, pytest, ...) through a ``.pth`` line,
and ``python -m invariants gate`` runs the worked example of ``examples/downstream`` there. It checks what
a downstream run must do: the lax.map row loop fails ``while_loops == 0`` with the usual
diagnosis, the jnp.take lookup passes, the snapshots land in the project, and nothing is written inside
the installed package. The package must be imported from that environment, never from the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

# A wheel built and installed into a fresh environment: end to end (tests/conftest.py: -m e2e).
pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]
_NOISE = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")


def _run(
    cmd: list[str], cwd: Path, timeout: float = 600, bytecode: bool = False
) -> subprocess.CompletedProcess[str]:
    # Nothing of this process's PYTHONPATH (it points at the checkout) or virtual environment may leak in.
    # ``bytecode``: as a user's Python runs, writing bytecode caches unless told not to; the gate must
    # still write nothing inside the installed package.
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", *(("PYTHONDONTWRITEBYTECODE",) if bytecode else ()))
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["INVARIANTS_RATIO_MAX_SECONDS"] = "1"
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=timeout)


def _uv() -> str:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert found, "uv is in the test extra: pip install -e '.[test]'"
    return found


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The interpreter of a fresh environment holding the wheel of this checkout."""
    tmp = tmp_path_factory.mktemp("installed")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("invariants", "snapshots"):
        shutil.copytree(ROOT / name, src / name, ignore=_NOISE)
    build = _run([_uv(), "build", "--wheel", "-o", str(tmp / "dist"), str(src)], cwd=tmp)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (tmp / "dist").glob("*.whl")
    venv = tmp / "venv"
    made = _run([_uv(), "venv", "-q", "--python", sys.executable, str(venv)], cwd=tmp)
    assert made.returncode == 0, made.stderr[-2000:]
    python = venv / "bin" / "python"
    # The wheel without its dependencies; the bytecode compiled at install time, as pip does.
    add = _run([_uv(), "pip", "install", "-q", "--python", str(python), "--no-deps", "--compile-bytecode",
                str(wheel)], cwd=tmp)  # fmt: skip
    assert add.returncode == 0, add.stderr[-2000:]
    # This environment's packages (jax, pytest, syrupy, ...) after the new environment's own, as a plain
    # path: its .pth files (the editable install of a checkout) are not processed there.
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=tmp).stdout.strip())  # fmt: skip
    (site / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty folder holding only the example's library and specs."""
    for name in ("mylib", "specs"):
        shutil.copytree(ROOT / "examples" / "downstream" / name, tmp_path / name, ignore=_NOISE)
    return tmp_path


def test_the_package_comes_from_the_environment(installed, project):
    where = _run([str(installed), "-c", "import invariants; print(invariants.__file__)"], cwd=project)
    path = Path(where.stdout.strip())
    assert path.is_relative_to(installed.parent.parent) and not path.is_relative_to(ROOT), where.stdout


def test_gate_on_the_example_from_the_wheel(installed, project):
    where = "import invariants, os; print(os.path.dirname(invariants.__file__))"
    package = Path(_run([str(installed), "-c", where], cwd=project).stdout.strip())
    assert (package / "gate" / "test_structure.py").exists() and (package / "snapshots" / "cpu").is_dir()
    before = _tree(package.parent)
    gate = [str(installed), "-m", "invariants", "gate", "--spec-dir", "specs", "--snapshot-dir", "snapshots",
            "--targets", "cpu", "-p", "no:cacheprovider"]  # fmt: skip

    own = _run([*gate, "--no-catalog", "--snapshot-update"], cwd=project, bytecode=True)
    assert own.returncode == 1, own.stdout[-3000:] + own.stderr[-2000:]
    assert (
        "specs/mylib.toml:27: mylib_no_while failed on cpu mylib_row_loop [f32]: assert while_loops == 0: "
        "measured while_loops = 1" in own.stdout
    )
    assert "why it matters:" in own.stdout and "optimized HLO and jaxpr: artifacts/hlo/cpu/" in own.stdout
    # Under CI=true pytest adds " - <message>" to each summary line: compare the item ids only.
    failed = [line.split(" - ")[0] for line in own.stdout.splitlines() if line.startswith("FAILED")]
    assert failed == ["FAILED test_invariants.py::cpu::mylib.toml::mylib_no_while::mylib_row_loop-f32"]
    snapshots = sorted(str(p.relative_to(project)) for p in (project / "snapshots").rglob("*.txt"))
    assert snapshots == [
        *(f"snapshots/cpu/{name}.f32.txt" for name in MODELS),
        "snapshots/cpu/mylib_row_loop.f32.txt", "snapshots/cpu/mylib_take.bf16.txt",
        "snapshots/cpu/mylib_take.f32.txt", "snapshots/cpu/mylib_take_grad.f32.txt",
    ]  # fmt: skip

    # With the catalog: its `take` compared with the snapshot the wheel ships, an update notwithstanding.
    both = _run([*gate, "--programs", "mylib_take,take", "-m", "not throughput", "--snapshot-update", "-rA"],
                cwd=project, bytecode=True)  # fmt: skip
    assert both.returncode == 0, both.stdout[-3000:]
    assert "PASSED test_structure.py::cpu::take-f32" in both.stdout
    assert (
        "PASSED test_invariants.py::cpu::mylib.toml::mylib_take_is_the_catalogs::mylib_take~take-f32"
        in both.stdout
    )

    assert _tree(package.parent) == before  # nothing written inside site-packages: no file, no mtime


# The example's programs with params (specs/model.toml), sorted: a token plus position embedding (two
# tables, [64, 256] indices), its gradient and a second form of it, and a module (embedding, layer norm
# scale, projection) with its SGD step.
MODELS = ("model_classifier", "model_classifier_train", "model_token_position", "model_token_position_grad",
          "model_token_position_indexed")  # fmt: skip
# One file aims them at cpu, a TPU and a GPU that compile only the catalog's core programs.
FAMILIES = ("cpu", "tpu-v4", "gpu-a100")


def test_programs_with_params_on_three_families_from_the_wheel(installed, project):
    """Programs with parameters: the token plus position embedding and the module compile on cpu, tpu-v4 and
    gpu-a100 (core-scope targets: they compile these because specs/model.toml names them), the snapshots
    land in the project, and that file's invariants for the three families each decide their items (the
    A100's is a ratchet: xla#46225's compare-and-swap loops); the two forms of the embedding agree on cpu."""
    where = "import invariants, os; print(os.path.dirname(invariants.__file__))"
    package = Path(_run([str(installed), "-c", where], cwd=project).stdout.strip())
    before = _tree(package.parent)
    gate = [str(installed), "-m", "invariants", "gate", "--spec-dir", "specs", "--snapshot-dir", "snapshots",
            "--targets", ",".join(FAMILIES), "--programs", "model_*", "--no-catalog",
            "-p", "no:cacheprovider"]  # fmt: skip
    proc = _run([*gate, "-m", "not throughput", "--snapshot-update", "-rA"], cwd=project, bytecode=True)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-2000:]
    snapshots = sorted(str(p.relative_to(project)) for p in (project / "snapshots").rglob("*.txt"))
    assert snapshots == sorted(f"snapshots/{t}/{name}.f32.txt" for t in FAMILIES for name in MODELS)
    for target in FAMILIES:
        for name in MODELS:
            assert f"PASSED test_structure.py::{target}::{name}-f32" in out, (target, name)
        text = (project / "snapshots" / target / "model_token_position.f32.txt").read_text()
        assert text.startswith(f"# model_token_position [f32] on {target}\n") and "gather" in text
    assert "PASSED test_invariants.py::cpu::model.toml::model_no_while_cpu::model_classifier_train-f32" in out
    assert (
        "PASSED test_invariants.py::tpu-v4::model.toml::model_grad_scatters_tpu::"
        "model_token_position_grad-f32" in out
    )
    # The position table is a parameter the compiled program reads, not a constant XLA folded away.
    assert (
        "PASSED test_invariants.py::tpu-v4::model.toml::model_position_table_is_an_argument_tpu::"
        "model_token_position-f32" in out
    )
    assert (
        "XFAIL test_invariants.py::gpu-a100::model.toml::model_grad_native_atomics_gpu::"
        "model_token_position_grad-f32" in out
    )
    assert (
        "PASSED test_correctness.py::cpu::model.toml::model_token_position_values::"
        "model_token_position_indexed-f32-uniform" in out
    )
    assert _tree(package.parent) == before


def test_children_run_the_installed_gate(installed, project):
    """selfcheck, bisect and matrix start the gate modules of the installed package, in their own folder:
    their child command lines, built as they build them (a whole self-check from a wheel is too long here)."""
    probe = (
        "from pathlib import Path\n"
        "import invariants.selfcheck.children as s, invariants.selfcheck.registry as r\n"
        "import invariants.releases.bisect as b\n"
        "c = s.child_command(r.INJECTIONS[0], Path('w/r.json'), Path('w/d'))\n"
        "print(c[3]); print(c[c.index('--rootdir') + 1]); print(c[c.index('--catalog-snapshot-dir') + 1])\n"
        "print(b.gate_command(b.suite_run(Path('py'), 'k', 'cpu', None, Path('w/r.json'), Path('d'),"
        " 'test_structure.py'))[3])"
    )
    out = _run([str(installed), "-c", probe], cwd=project)
    assert out.returncode == 0, out.stderr[-2000:]
    gate_dir, rootdir, catalog, structure = map(Path, out.stdout.split())
    site = installed.parent.parent
    assert gate_dir.is_relative_to(site) and gate_dir.name == "gate"
    assert rootdir == (project / "w").resolve()
    assert catalog.is_relative_to(site) and (catalog / "cpu" / "take.f32.txt").exists()
    # bisect and matrix run another interpreter: it imports the installed package through a folder that
    # links to it alone, never this environment's site-packages.
    assert structure.resolve() == gate_dir / "test_structure.py" and not structure.is_relative_to(site)
    assert [p.name for p in structure.parents[2].iterdir()] == ["invariants"]
