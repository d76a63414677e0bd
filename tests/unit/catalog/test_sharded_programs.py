"""A project's sharded programs: a [[program]] with a mesh and shardings compiles on the pod whose chips fit
it, its function traced under the mesh; the same through compile_for; a target whose chips do not fit says
so, and a multi-chip target given nothing sharded is one line, never a silent one-device compile."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gatekit import InProcess, command

from invariants._errors import InvariantsError
from invariants.scope.targets import all_targets
from invariants.specfile.reader import load_spec

ROOT = Path(__file__).parents[3]
EXAMPLE = ROOT / "examples" / "sharded_embed"
POD = all_targets()["tpu-v5e-4x4"]
needs_libtpu = pytest.mark.skipif(POD.unavailable_reason() is not None, reason=str(POD.unavailable_reason()))

SHARDED = """
[[program]]
name = "p"
function = "embed:embed"
kind = "forward"
"""


def _load(tmp_path: Path, body: str) -> object:
    path = tmp_path / "s.toml"
    path.write_text('[spec]\ntargets = ["tpu-v5e-4x4"]\n' + SHARDED + body)
    return load_spec(path, known={})


def test_a_mesh_and_its_shardings_are_read_in_order(tmp_path):
    spec = _load(tmp_path, 'mesh = { data = 4, tensor = 4 }\naxis_types = "explicit"\n'
                           'table_sharding = ["tensor", ""]\nindex_sharding = ["data"]\n')  # fmt: skip
    (decl,) = spec.programs  # type: ignore[attr-defined]
    assert decl.mesh == (("data", 4), ("tensor", 4)) and decl.axis_types == "explicit"
    assert decl.table_sharding == ("tensor", None) and decl.index_sharding == ("data",)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ('index_sharding = ["data"]\n', r"s\.toml:8: index_sharding needs a mesh = \{axis = size, \.\.\.\}"),
        ("mesh = 16\n", r"s\.toml:8: mesh must be a table of axis name = size"),
        ("mesh = { data = 0 }\n", r"s\.toml:8: mesh axis 'data' = 0: a size is a positive integer"),
        ('mesh = { data = 4 }\naxis_types = "manual"\n', r"s\.toml:9: unknown axis_types 'manual'"),
        ('mesh = { data = 4 }\nindex_sharding = ["model"]\n',
         r"s\.toml:9: index_sharding: 'model' is no axis of the mesh \(data\); \"\" replicates"),
        ('mesh = { data = 4 }\ntable_sharding = ["data", "data"]\n',
         r"s\.toml:9: table_sharding: an axis shards one dimension only"),
        ('mesh = { data = 4 }\ntable_sharding = ["", "", "data"]\n',
         r"s\.toml:9: table_sharding has 3 entries for an array of rank 2"),
    ],
)  # fmt: skip
def test_a_mistake_in_a_mesh_is_one_line_at_its_key(tmp_path, body, said):
    with pytest.raises(InvariantsError, match=said):
        _load(tmp_path, body)


def test_a_params_program_shards_its_leaves_in_its_factory(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('[spec]\ntargets = ["cpu"]\n[[program]]\nname = "p"\nfunction = "m:f"\n'
                    'params = "m:init"\nkind = "forward"\nmesh = { data = 4 }\n'
                    'table_sharding = ["data"]\n')  # fmt: skip
    with pytest.raises(InvariantsError, match=r"s\.toml:9: table_sharding is for a lookup .*config\.mesh"):
        load_spec(path, known={})


def _gate(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The gate command on ``project``, in this process (its 8-device CPU compiles in a child still)."""
    return command(
        "gate", "--spec-dir", "specs", "--snapshot-dir", "snapshots", "--no-catalog",
        "-p", "no:cacheprovider", "-q", "-rfs", *args, cwd=project, quick=False,
    )  # fmt: skip


@needs_libtpu
def test_the_example_all_gather_fails_and_the_sharded_form_passes(tmp_path):
    """examples/sharded_embed on tpu-v5e-4x4: the lookup whose rows are replicated over 'data' all-gathers
    them; the one that keeps them sharded like their ids does not."""
    project = tmp_path / "sharded_embed"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", "snapshots"))
    proc = _gate(project, "--snapshot-update")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    failed = sorted(ln.split("::", 1)[1] for ln in proc.stdout.splitlines() if ln.startswith("FAILED"))
    assert [f.split(" ", 1)[0] for f in failed] == [
        "tpu-v5e-4x4::embed.toml::activations_per_chip::embed_gathered-f32",
        "tpu-v5e-4x4::embed.toml::no_all_gather::embed_gathered-f32",
    ]
    assert "assert all_gathers == 0: measured all_gathers = 1" in proc.stdout
    results = json.loads((project / "artifacts" / "results.json").read_text())
    sharded = [
        it for it in results["items"] if it["kind"] == "structure" and it["program"] == "embed_sharded"
    ]
    assert [(it["all_gathers"], it["all_reduces"], it["outcome"]) for it in sharded] == [(0, 1, "passed")]
    assert sorted(p.name for p in (project / "snapshots").iterdir()) == ["tpu-v5e-4x4"]


MODEL = """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

def params(config):
    table = jax.ShapeDtypeStruct((config.vocab, config.width), jnp.float32,
                                 sharding=NamedSharding(config.mesh, P("tensor", None)))
    return {"table": table, "scale": jax.ShapeDtypeStruct((config.width,), jnp.float32)}

def embed(p, ids):
    return p["table"].at[ids].get(out_sharding=P("data", None)) * p["scale"]

def lookup(table, ids):
    return table.at[ids].get(out_sharding=P("data", None))
"""
SPECS = """
[spec]
targets = ["tpu-v5e-4x4", "tpu-v5p-2x2x2", "cpu-8dev"]

[[program]]
name = "model16"
function = "model:embed"
params = "model:params"
kind = "backward"
mesh = { data = 4, tensor = 4 }
axis_types = "explicit"
index_sharding = ["data"]

[[program]]
name = "lookup8"
function = "model:lookup"
kind = "forward"
mesh = { data = 2, tensor = 4 }
axis_types = "explicit"
table_sharding = ["tensor", ""]
index_sharding = ["data"]

[[invariant]]
id = "shards"
programs = ["tag:user"]
assert = "chips * batch_shards >= 16"
"""


@pytest.mark.e2e
@needs_libtpu
def test_a_factory_shards_on_config_mesh_and_each_program_picks_the_targets_that_fit(tmp_path):
    """A params program's factory gives its table a NamedSharding on config.mesh; its backward compiles on
    the 16-chip v5e slice. The 8-chip mesh compiles on the v5p cube and on the 8-device CPU (in its child,
    which declares the project's programs first). Of the targets a file names, each program gets items on
    those its mesh fits, and none is skipped for the others."""
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "s.toml").write_text(SPECS)
    proc = _gate(tmp_path, "--snapshot-update")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    written = sorted(
        str(p.relative_to(tmp_path / "snapshots")) for p in (tmp_path / "snapshots").rglob("*.txt")
    )
    assert written == [
        "cpu-8dev/lookup8.f32.txt",
        "tpu-v5e-4x4/model16.f32.txt",
        "tpu-v5p-2x2x2/lookup8.f32.txt",
    ]
    assert not [ln for ln in proc.stdout.splitlines() if ln.startswith("SKIPPED") and "chips" in ln]
    results = json.loads((tmp_path / "artifacts" / "results.json").read_text())
    facts = {
        (it["programs"][0], it["target"]): it["measured"]
        for it in results["items"]
        if it["kind"] == "invariant"
    }
    assert facts[("model16", "tpu-v5e-4x4")] == {"chips": 16, "batch_shards": 4}


@needs_libtpu
def test_compile_for_on_a_pod_needs_something_sharded():
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from invariants.testing import compile_for, mesh_for

    sys.path.insert(0, str(EXAMPLE))
    try:
        import embed  # the example's two lookups
    finally:
        sys.path.remove(str(EXAMPLE))
    table, ids = jax.ShapeDtypeStruct((8192, 32), jnp.float32), jax.ShapeDtypeStruct((16384,), jnp.int32)
    with pytest.raises(
        InvariantsError, match=r"^compile_for: tpu-v5e-4x4 has 16 chips and nothing is sharded"
    ):
        compile_for(embed.embed, table, ids, target="tpu-v5e-4x4")
    mesh = mesh_for("tpu-v5e-4x4", data=4, tensor=4, axis_types="explicit")
    on = (jax.ShapeDtypeStruct((8192, 32), jnp.float32, sharding=NamedSharding(mesh, P("tensor", None))),
          jax.ShapeDtypeStruct((16384,), jnp.int32, sharding=NamedSharding(mesh, P("data"))))  # fmt: skip
    assert compile_for(embed.embed_gathered, *on, target="tpu-v5e-4x4").all_gathers == 1
    assert compile_for(embed.embed, *on, target="tpu-v5e-4x4").all_gathers == 0
    # A mesh beside the arguments' PartitionSpecs: the same program.
    given = compile_for(embed.embed, table, ids, target="tpu-v5e-4x4", mesh=mesh,
                        in_shardings=(P("tensor", None), P("data")))  # fmt: skip
    assert given.collectives == 1 and given.all_gathers == 0
    # A mesh given by its axes is of Auto axes: jnp.take shards as the compiler propagates it.
    auto = compile_for(lambda t, i: jnp.take(t, i, axis=0), table, ids, target="tpu-v5e-4x4",
                       mesh={"data": 4, "tensor": 4},
                       in_shardings=(P("tensor", None), P("data")))  # fmt: skip
    assert auto.collectives >= 1
    with pytest.raises(InvariantsError, match=r"^mesh_for: tpu-v5e-4x4 has 16 chips; the mesh data=4 has 4$"):
        mesh_for("tpu-v5e-4x4", data=4)
    with pytest.raises(
        InvariantsError, match=r"^compile_for: the mesh has 16 devices, not tpu-v5p-2x2x2's 8"
    ):
        compile_for(embed.embed, *on, target="tpu-v5p-2x2x2")


def test_a_program_that_fits_no_target_of_its_spec_is_one_line_and_the_earlier_results_stay(tmp_path):
    """A mesh of 16 chips in a spec that names targets of 8 would skip every item and pass; it is one line
    at its declaration and exit 2, and the results file an earlier run left there stays as it was."""
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "s.toml").write_text(
        SPECS.replace('"tpu-v5e-4x4", "tpu-v5p-2x2x2", "cpu-8dev"', '"tpu-v5p-2x2x2", "cpu-8dev"')
    )
    earlier = tmp_path / "artifacts" / "results.json"
    earlier.parent.mkdir()
    earlier.write_text('{"items": [], "exitstatus": 0}\n')
    proc = _gate(tmp_path)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-2000:]
    last = (proc.stdout + proc.stderr).strip().splitlines()[-1]
    assert re.search(
        r"s\.toml:\d+: model16 fits no target its spec files name, so none of its items would run: "
        r"tpu-v5p-2x2x2 has 8 chips; the mesh of model16 \(data = 4, tensor = 4\) has 16; "
        r"cpu-8dev has 8 chips; the mesh of model16 \(data = 4, tensor = 4\) has 16$",
        last,
    ), last
    assert "Traceback" not in proc.stdout + proc.stderr
    assert earlier.read_text() == '{"items": [], "exitstatus": 0}\n'


def test_under_pytest_a_program_that_fits_no_target_is_the_run_s_last_line(gate_pytester: InProcess):
    """The same spec under plain pytest: the gate's usage error, exit 2, its line the last."""
    project = gate_pytester.project(targets=())
    (project / "model.py").write_text(MODEL)
    (project / "specs").mkdir()
    (project / "specs" / "s.toml").write_text(
        SPECS.replace('"tpu-v5e-4x4", "tpu-v5p-2x2x2", "cpu-8dev"', '"cpu"')
    )
    proc = gate_pytester.pytest("--spec-dir", "specs", "--no-catalog", f"--snapshot-dir={project / 's'}")
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "model16 fits no target its spec files name" in last, last


def test_a_release_without_the_mesh_api_a_program_needs_stops_that_program_alone(tmp_path, monkeypatch):
    """On a release that lacks ``jax.sharding.AbstractMesh`` (removed here, as jax 0.4.30 lacks it) a
    project's sharded program cannot be checked: the project still loads, its other program is built and
    checked, and compiling the sharded one is the line that names the API and says it is the tool's
    limit, never the program's."""
    import jax

    from invariants._supported import ReleaseLacks
    from invariants.catalog.downstream import build_all
    from invariants.compile.artifacts import compile_here

    (tmp_path / "m.py").write_text("def f(w, x):\n    return w[x]\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "s.toml"
    path.write_text('[spec]\ntargets = ["cpu-8dev"]\n[[program]]\nname = "plain"\nfunction = "m:f"\n'
                    'kind = "forward"\n[[program]]\nname = "meshed"\nfunction = "m:f"\nkind = "forward"\n'
                    'mesh = { data = 1 }\nindex_sharding = ["data"]\n')  # fmt: skip
    decls = load_spec(path, known={}).programs  # type: ignore[attr-defined]
    monkeypatch.delattr(jax.sharding, "AbstractMesh")
    plain, meshed = build_all(decls)
    assert compile_here(plain, "f32", all_targets()["cpu"]).hlo_text
    with pytest.raises(ReleaseLacks) as lacks:
        compile_here(meshed, "f32", all_targets()["cpu"])
    assert str(lacks.value) == (
        f"cpu/meshed[f32]: jax {jax.__version__} has no jax.sharding.AbstractMesh, which this tool needs to "
        "check a sharded program before a target is chosen: a limit of the tool on this release, not of the "
        "program"
    )
