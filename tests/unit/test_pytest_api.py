"""The pytest API (invariants.testing, invariants.pytest_plugin): what a compile_for result reads as, its
errors, and a plugin that stays inert in a session that uses none of it.

The example that uses it as a project would is run by tests/integration/test_pytest_api_example.py.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import json
import operator
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import pytest
from gatekit import IN_PROCESS, environment

import invariants.pytest_plugin as plugin
from invariants._errors import InvariantsError
from invariants.hlo.structure import Structure
from invariants.measure.metrics import METRICS
from invariants.testing import CompiledStructure, MetricUnavailable, TargetUnavailable, compile_for
from invariants.verdict.checks import WidenedDtype

ROOT = Path(__file__).parents[2]
TABLE = jax.ShapeDtypeStruct((512, 16), jnp.float32)
INDICES = jax.ShapeDtypeStruct((64,), jnp.int32)


def take(params, indices):
    return jnp.take(params["w"], indices, axis=0)


def row_loop(params, indices):
    return jax.lax.map(lambda i: params["w"][i], indices)


@pytest.fixture(scope="module")
def on_cpu() -> CompiledStructure:
    return compile_for(take, {"w": TABLE}, INDICES, target="cpu")


def test_every_metric_of_a_compile_is_there(on_cpu):
    measured = {m.name for m in METRICS.values() if not m.call_only and m.source != "input"}
    measured -= {m.name for m in METRICS.values() if m.source == "throughput"}
    assert set(on_cpu.metrics) == measured


def test_a_metric_wins_over_the_structure_field_of_its_name(on_cpu):
    assert on_cpu.while_loops == 0 and on_cpu.structure.while_loops == ()
    assert on_cpu.gathers == on_cpu.metric("gathers") == 1
    assert on_cpu.fusions == on_cpu.entry_fusions  # an alias reads too
    # Fields that are not metrics read through.
    assert on_cpu.kernel_list == on_cpu.structure.kernel_list
    assert on_cpu.root_shape.startswith("f32[64,16]")
    assert isinstance(on_cpu.structure, Structure)
    assert on_cpu.name == "take" and on_cpu.target == "cpu" and on_cpu.config == "f32[512,16],s32[64]"


def test_the_loop_shows(on_cpu):
    s = compile_for(row_loop, {"w": TABLE}, INDICES, target="cpu", name="rows")
    assert (s.name, s.while_loops, s.max_trip_count) == ("rows", 1, 64)
    assert on_cpu.snapshot != s.snapshot
    assert s.snapshot.startswith("# rows [f32[512,16],s32[64]] on cpu\n")
    assert "while ×64 {" in s.snapshot


def test_an_unknown_name_is_one_line_with_the_closest(on_cpu):
    with pytest.raises(AttributeError, match=r"take on cpu: no metric or Structure field 'while_loop' "
                       r"\(did you mean 'while_loops'"):  # fmt: skip
        _ = on_cpu.while_loop
    with pytest.raises(AttributeError, match=r"no metric 'tmp_bytes' \(did you mean 'temp_bytes'"):
        on_cpu.metric("tmp_bytes")
    assert not hasattr(on_cpu, "table_bytes")  # an input fact of the gate's configurations, not of a compile


def test_a_metric_the_target_does_not_give_says_why(on_cpu):
    with pytest.raises(MetricUnavailable, match=r"take on cpu: estimated_cycles unavailable: .*TPU"):
        _ = on_cpu.estimated_cycles
    assert on_cpu.metric("temp_bytes") == 0


def test_an_unknown_target_is_one_line_with_did_you_mean():
    with pytest.raises(InvariantsError) as err:
        compile_for(take, {"w": TABLE}, INDICES, target="tpu-v5")
    assert str(err.value).startswith("compile_for: unknown target 'tpu-v5' (did you mean 'tpu-v5")
    assert "\n" not in str(err.value)
    with pytest.raises(InvariantsError, match=r"cpu-8dev compiles in a child process"):
        compile_for(take, {"w": TABLE}, INDICES, target="cpu-8dev")


def test_an_argument_that_is_not_an_array_names_its_place():
    with pytest.raises(InvariantsError, match=r"argument \[0\]\['w'\] is a str, not an array"):
        compile_for(take, {"w": "table"}, INDICES, target="cpu")


def test_a_trace_error_is_one_line_naming_the_function():
    with pytest.raises(InvariantsError, match=r"compile_for: take \[f32\[512,16\]\] on cpu: TypeError: "):
        compile_for(take, {"w": TABLE}, target="cpu")


def test_a_target_without_its_compiler_is_unavailable_with_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "libtpu" else real(n, *a))
    with pytest.raises(TargetUnavailable, match=r"tpu-v5e: libtpu is not installed; pip install .*\[tpu\]"):
        compile_for(take, {"w": TABLE}, INDICES, target="tpu-v5e")


def test_the_result_is_frozen(on_cpu):
    with pytest.raises(dataclasses.FrozenInstanceError):
        on_cpu.target = "tpu-v5e"  # type: ignore[misc]


# --- the plugin: registered by the package, inert until used ---------------------------------------------

FACTS = """
import json, sys
def pytest_sessionfinish(session):
    with open("facts.json", "w") as f:
        json.dump({"jax": "jax" in sys.modules,
                   "plugin": session.config.pluginmanager.has_plugin("invariants"),
                   "modules": sorted(m for m in sys.modules if m.startswith("invariants"))}, f)
"""


def _session(tmp_path: Path, test: str) -> dict:
    tmp_path.mkdir()
    (tmp_path / "conftest.py").write_text(FACTS)
    (tmp_path / "test_mine.py").write_text(test)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_mine.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((tmp_path / "facts.json").read_text())


def test_the_plugin_is_registered_by_the_package():
    points = importlib.metadata.entry_points(group="pytest11")
    assert [p.value for p in points if p.name == "invariants"] == ["invariants.pytest_plugin"]


def test_the_plugin_defines_no_hooks():
    assert [n for n in vars(plugin) if n.startswith("pytest_")] == []


@pytest.mark.e2e
def test_a_session_that_uses_none_of_it_imports_no_jax(tmp_path):
    unused = _session(tmp_path / "unused", "def test_plain():\n    assert 1 + 1 == 2\n")
    assert unused == {"jax": False, "plugin": True, "modules": ["invariants", "invariants.pytest_plugin"]}
    # The check can see JAX: a session that calls the fixture has it.
    used = _session(
        tmp_path / "used",
        "import jax.numpy as jnp\n"
        "def test_it(compile_for):\n"
        "    s = compile_for(lambda w, x: jnp.take(w, x, axis=0), jnp.zeros((8, 4)), jnp.zeros(3, 'int32'),"
        " target='cpu')\n"
        "    assert s.gathers == 1\n",
    )
    assert used["jax"] and "invariants.testing" in used["modules"]


@pytest.mark.usefixtures("_preloaded")
def test_the_fixture_takes_what_compile_for_takes(pytester: pytest.Pytester):
    """The fixture passes on what :func:`invariants.testing.compile_for` takes beside the target: a donated
    step's parameter buffer is an output's (one alias, none without), and a mesh with its shardings
    compiles for a pod target (skipped there where libtpu is missing, as the fixture skips). In this
    process (pytester)."""
    pytester.makepyfile(
        test_mine="import jax, jax.numpy as jnp\n"
        "from jax.sharding import PartitionSpec as P\n"
        "W, X = jax.ShapeDtypeStruct((64, 8), jnp.float32), jax.ShapeDtypeStruct((16,), jnp.int32)\n"
        "def step(w, x):\n"
        "    return w - 0.1 * jax.grad(lambda w: jnp.take(w, x, axis=0).sum())(w)\n"
        "def test_donated(compile_for):\n"
        "    assert compile_for(step, W, X, target='cpu', donate_argnums=0).aliased_buffers == 1\n"
        "    assert compile_for(step, W, X, target='cpu').aliased_buffers == 0\n"
        "def test_sharded(compile_for):\n"
        "    s = compile_for(lambda w, x: jnp.take(w, x, axis=0), W, X, target='tpu-v5e-2x4',\n"
        "                    mesh={'data': 8}, in_shardings=(P('data', None), P('data')))\n"
        "    assert s.collectives >= 1  # the table's rows on 8 chips: its lookups gather across them\n",
    )
    with environment():
        result = pytester.runpytest("-q", "-p", "no:cacheprovider", *IN_PROCESS, "test_mine.py")
    assert result.ret == 0, "\n".join(result.outlines[-40:])
    result.assert_outcomes(passed=2)


@pytest.mark.e2e
@pytest.mark.skipif(
    importlib.util.find_spec("jax_cuda12_plugin") is None or shutil.which("nvidia-smi") is not None,
    reason="the notices are the CUDA plugin's on a host without CUDA",
)
def test_a_test_that_starts_jax_in_compile_for_shows_no_cuda_notices(tmp_path):
    """JAX starts in the first compile_for (numpy arguments: nothing else starts it): the CUDA plugin's
    notices of a CPU-only host (absl's, cudart_stub's) are dropped as the gate drops them, so that they are
    not the captured output of a project's failing test. ``-s`` shows what the test wrote, uncaptured."""
    tmp_path.joinpath("test_mine.py").write_text(
        "import numpy as np\n"
        "def test_it(compile_for):\n"
        "    s = compile_for(lambda w: w * 2, np.zeros((8, 4), np.float32), target='cpu')\n"
        "    print('compiled', s.kernels)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "test_mine.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "compiled " in out, out[-2000:]
    assert "absl::InitializeLog" not in out and "cudart_stub" not in out, out[:2000]


def test_this_repository_collects_with_both_plugins(pytestconfig: pytest.Config):
    """The gate's plugin (this repository's conftest) and the package's plugin load side by side: this
    session is one that collected with both (a clash, such as an option both register, stops it first)."""
    manager = pytestconfig.pluginmanager
    assert manager.has_plugin("invariants"), "the package's pytest11 plugin is not loaded"
    assert manager.has_plugin("invariants.plugin.hooks"), "the gate's plugin is not loaded"
    assert manager.get_plugin("invariants") is plugin


# --- the snapshot extension ------------------------------------------------------------------------------


def test_only_snapshots_of_ours_are_discovered(tmp_path, on_cpu):
    from invariants.snapshot.user import ours

    folder = tmp_path / "snapshots" / "cpu" / "test_mine"
    folder.mkdir(parents=True)
    (folder / "test_take.txt").write_text(on_cpu.snapshot)
    (folder / "README.txt").write_text("what these are\n")
    (folder / "test_elsewhere.txt").write_text(on_cpu.snapshot.replace(" on cpu\n", " on tpu-v5e\n", 1))
    gate_layout = tmp_path / "snapshots" / "cpu" / "take.f32.txt"
    gate_layout.write_text("# take [f32] on cpu\n")
    assert [p.name for p in sorted(folder.parent.rglob("*.txt")) if ours(p)] == ["test_take.txt"]


def test_a_snapshot_write_is_the_gates_atomic_write(tmp_path):
    from syrupy.data import Snapshot, SnapshotCollection

    from invariants.snapshot.user import CompiledSnapshotExtension

    path = tmp_path / "test_take.txt"
    collection = SnapshotCollection(location=str(path))
    collection.add(Snapshot(name="test_take", data="# new\n"))
    CompiledSnapshotExtension.write_snapshot_collection(snapshot_collection=collection)
    assert path.read_text() == "# new\n" and [p.name for p in tmp_path.iterdir()] == ["test_take.txt"]
    path.chmod(0o444)  # refused by the write itself, even for root: an update never forces a read-only file
    with pytest.raises(pytest.fail.Exception, match=r"test_take.txt: read-only; --snapshot-update does not"):
        CompiledSnapshotExtension.write_snapshot_collection(snapshot_collection=collection)


def test_the_layout_puts_the_target_above_syrupys_own():
    from invariants.snapshot.user import CompiledSnapshotExtension

    class Location:  # what the extension reads of syrupy's PyTestLocation
        filepath = "/project/tests/test_mine.py"
        basename = "test_mine"
        snapshot_name = "test_take[x]"

    location: Any = Location()
    where = CompiledSnapshotExtension.get_location(test_location=location, index="0@tpu-v5e")
    assert where == "/project/tests/snapshots/tpu-v5e/test_mine/test_take[x].txt"
    again = CompiledSnapshotExtension.get_location(test_location=location, index="1@tpu-v5e")
    assert again == "/project/tests/snapshots/tpu-v5e/test_mine/test_take[x].1.txt"
    with pytest.raises(TypeError, match=r"not an index of ours: 0"):
        CompiledSnapshotExtension.get_location(test_location=location, index=0)


def test_a_metric_takes_the_call_form_a_spec_writes(on_cpu):
    """`scatters(dtype="f32")` in a spec is `s.scatters(dtype="f32")` here; `s.gathers` is still a number."""
    assert on_cpu.gathers(dtype="f32") == on_cpu.metric("gathers", dtype="f32") == 1
    with pytest.warns(WidenedDtype):
        assert on_cpu.gathers(dtype="bf16") == 0
    assert on_cpu.gathers() == on_cpu.gathers == 1 and on_cpu.gathers + 1 == 2
    with pytest.raises(InvariantsError, match="while_loops takes no dtype"):
        on_cpu.while_loops(dtype="f32")


def _scoped_attribute(name: str) -> Callable[[CompiledStructure], Any]:
    return lambda s: getattr(s, name)(dtype="f32")


# An assert of each metric type that reads it (``{}``: the read).
ASSERTED = {"number": "{} >= 0", "set": "'none' not in {}", "structure": "{} == structure(take)"}


def test_every_metric_form_a_spec_accepts_reads_the_same_here(on_cpu, tmp_path):
    """Each metric of a compile, in each form a spec's assert writes it (``NAME``, ``NAME(dtype="f32")``,
    ``NAME(program)``), reads here as the gate's evaluation of that assert reads it: the same number, set
    or structure, or no value in both."""
    from invariants.measure.metrics import COMPILED_SOURCES
    from invariants.specfile.reader import load_spec
    from invariants.verdict.checks import Case, evaluate

    forms: list[
        tuple[str, str, Callable[[CompiledStructure], Any]]
    ] = []  # (the spec's assert, the term it reads, this API's read)
    for m in METRICS.values():
        if m.source not in COMPILED_SOURCES:
            continue
        asserted = ASSERTED[m.type]
        if not m.call_only:
            forms.append((asserted.format(m.name), m.name, operator.attrgetter(m.name)))
            forms.append((asserted.format(m.name), m.name, operator.methodcaller("metric", m.name)))
        if m.by_dtype is not None:
            term = f"{m.name}(dtype='f32')"
            forms.append((asserted.format(term), term, _scoped_attribute(m.name)))
            forms.append((asserted.format(term), term, operator.methodcaller("metric", m.name, dtype="f32")))
        term = f"{m.name}(take)"
        forms.append((asserted.format(term), term, operator.methodcaller("metric", m.name)))
    entries = []
    for i, (text, _, _) in enumerate(forms):
        scope = "" if "(take)" in text else 'programs = ["take"]\n'  # a call names its program
        written = text.replace("'", '\\"')
        entries.append(f'[[invariant]]\nid = "m{i}"\n{scope}assert = "{written}"\n\n')
    body = "".join(entries)
    (tmp_path / "forms.toml").write_text('[spec]\ntargets = ["cpu"]\n\n' + body)
    invariants = load_spec(tmp_path / "forms.toml").invariants
    assert len(invariants) == len(forms) > 50
    for inv, (text, term, here) in zip(invariants, forms, strict=True):
        program = "take" if inv.kind == "absolute" else None
        decision = evaluate(Case(inv, "cpu", "f32", program), lambda key: on_cpu.measured)
        if term.startswith("structure("):
            assert here(on_cpu) == here(compile_for(take, {"w": TABLE}, INDICES, target="cpu")), text
            assert decision.holds, text
        elif term in decision.measured:
            assert here(on_cpu) == decision.measured[term], text
        else:  # no value: the verdict says why, and this API raises
            assert not decision.holds and decision.detail, text
            with pytest.raises(MetricUnavailable):
                here(on_cpu)


CACHED = """\
import os
import sys

import jax
import jax.numpy as jnp

from invariants.testing import compile_for


def scaled(table, indices):
    # Read while tracing, as a model reads its configuration: it is in the lowered module, not the code.
    return jnp.take(table, indices, axis=0) * float(os.environ["SCALE"])


s = compile_for(scaled, jax.ShapeDtypeStruct((64, 8), jnp.float32), jax.ShapeDtypeStruct((4,), jnp.int32),
                target=sys.argv[1])
print(s.compile_cache)
"""


@pytest.mark.e2e
@pytest.mark.parametrize("target", ["cpu", "tpu-v5e"])
def test_compile_for_is_served_by_the_gates_compile_cache_in_a_new_process(tmp_path, target):
    """A second compile_for of the same function in a new process is a hit of the gate's own cache; a
    change made while tracing (a constant read from the environment) lowers to another module and misses;
    no cache (INVARIANTS_NO_CACHE=1) compiles."""
    from invariants.scope.targets import all_targets

    if (why := all_targets()[target].unavailable_reason()) is not None:
        pytest.skip(why)
    (tmp_path / "cached.py").write_text(CACHED)
    cache = tmp_path / "cache"

    def run(scale: str, **env: str) -> str:
        proc = subprocess.run(
            [sys.executable, "cached.py", target], cwd=tmp_path, capture_output=True, text=True, timeout=300,
            env={**os.environ, "INVARIANTS_CACHE_DIR": str(cache), "SCALE": scale, **env}, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout.strip().splitlines()[-1]

    assert run("2") == "miss"
    assert run("2") == "hit"
    assert run("3") == "miss"
    assert run("3", INVARIANTS_NO_CACHE="1") == "off"
    assert run("3") == "hit"


def test_a_dtype_the_target_widens_warns_as_a_specs_item_does(on_cpu):
    """XLA:CPU computes bf16 in f32: a bf16 count there passes for the very program it guards, so it warns in
    one line, in either form; a dtype the CPU keeps does not."""
    with pytest.warns(WidenedDtype) as caught:
        on_cpu.scatters(dtype="bf16")
        on_cpu.metric("gathers", dtype="bf16")
    assert [str(w.message) for w in caught] == [
        f"take on cpu: {name}(dtype='bf16') reads the compiled dtype, and cpu computes bf16 in f32: "
        "the count does not see the bf16 work it guards there"
        for name in ("scatters", "gathers")
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert on_cpu.scatters(dtype="f16") == 0


def test_a_child_process_target_names_the_targets_that_compile_here():
    """cpu-8dev compiles in a child of the gate; for a sharded program the pytest API names the targets of
    its chip count that compile in this process, never the one-chip cpu."""
    with pytest.raises(InvariantsError) as err:
        compile_for(take, {"w": TABLE}, INDICES, target="cpu-8dev")
    assert str(err.value) == (
        "compile_for: cpu-8dev compiles in a child process with 8 host devices; compile_for compiles in this "
        "process: use a target of 8 chips, tpu-v5e-2x4, tpu-v5p-2x2x2"
    )


def test_axis_types_go_with_a_mesh_of_axis_sizes():
    """A spec's ``axis_types = "explicit"`` is ``axis_types="explicit"`` here: the out_sharding of a lookup
    traces only on explicit axes. With a mesh already built, it is mesh_for's to say."""
    from jax.sharding import PartitionSpec as P

    def lookup(table, ids):
        return table.at[ids].get(out_sharding=P("data", None))

    try:
        s = compile_for(lookup, TABLE, INDICES, target="tpu-v5e-2x4", mesh={"data": 2, "tensor": 4},
                        in_shardings=(P("tensor", None), P("data")), axis_types="explicit")  # fmt: skip
    except TargetUnavailable as err:
        pytest.skip(str(err))
    assert s.all_gathers == 0
    with pytest.raises(InvariantsError, match=r"^compile_for: axis_types goes with mesh=\{\.\.\.\}"):
        compile_for(lookup, TABLE, INDICES, target="cpu", axis_types="explicit")


EVAL_SHAPE_AT_IMPORT = """\
import jax, jax.numpy as jnp
# A flax model's parameter shapes: eval_shape of its init on a key, a concrete array that starts JAX.
PARAMS = jax.eval_shape(lambda k: {"w": jax.random.normal(k, (64, 8))}, jax.random.key(0))
IDS = jax.ShapeDtypeStruct((16,), jnp.int32)
def test_h100(compile_for):
    assert compile_for(lambda p, i: jnp.take(p["w"], i, axis=0), PARAMS, IDS, target="gpu-h100").gathers >= 1
"""


@pytest.mark.e2e
@pytest.mark.skipif(
    importlib.util.find_spec("jax_cuda12_plugin") is None or shutil.which("nvidia-smi") is not None,
    reason="the CUDA plugin, on a host without CUDA",
)
def test_shapes_from_eval_shape_at_import_compile_for_a_gpu_as_the_guide_says(tmp_path):
    """JAX started by the test module (a key made at import) leaves the CUDA plugin unable to compile ahead of
    time: the GPU test skips saying to set JAX_PLATFORMS=cpu, and with it, as the guide's command runs the
    tests, it passes."""
    tmp_path.joinpath("test_mine.py").write_text(EVAL_SHAPE_AT_IMPORT)
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    argv = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "test_mine.py"]
    for platforms, said in ((None, "set JAX_PLATFORMS=cpu"), ("cpu", "1 passed")):
        run_env = env if platforms is None else {**env, "JAX_PLATFORMS": platforms}
        proc = subprocess.run(argv, cwd=tmp_path, env=run_env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and said in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
