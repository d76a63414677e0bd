"""A downstream project's own programs: `python -m invariants gate` with [[program]] spec entries.

Bad input is one line and exit 2 before pytest starts; the worked example under examples/downstream runs
as its README says, snapshots land in the project's folder and never in the catalog's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gatekit import InProcess, command

from invariants.__main__ import main as cli
from invariants.compile.child import GATE_DIR

ROOT = Path(__file__).parents[3]
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

def args():
    return (jnp.zeros(3),)

def not_a_tuple(config):
    return jnp.zeros(3)
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
        (program("p", "{m}:NOT_CALLABLE"), "specs/lib.toml:4: p: {m}:NOT_CALLABLE is an int, not a function"),
        (program("p", "{m}:one_arg"), "specs/lib.toml:4: p: {m}:one_arg(table) is called as (table, "
         "indices), two positional arguments, and cannot be (too many positional arguments)"),
        (program("p", "{m}:summed"), "specs/lib.toml:4: p [f32]: {m}:summed on f32[8192,32] table and "
         "s32[16384] indices must return f32[16384,32] rows, got f32[]"),
        (program("p", "{m}:not_traceable"), "specs/lib.toml:4: p [f32]: {m}:not_traceable fails on "
         "f32[8192,32] table and s32[16384] indices: ConcretizationTypeError"),
        (program("p", "{m}:lookup") + program("p", "{m}:lookup"), "specs/lib.toml:10: program 'p' is "
         "already declared at specs/lib.toml:4"),
        (program("p", "{m}:lookup", kind="grad"), "specs/lib.toml:7: kind 'grad': one of forward, backward, "
         "train"),
        (program("p", "{m}:lookup", configs='["f64"]'), "specs/lib.toml:8: unknown config 'f64'"),
        (program("p", "lookup"), "specs/lib.toml:6: function 'lookup' must read 'module:attribute'"),
        (program("p", "{m}:lookup", kind="step"), "specs/lib.toml:7: kind 'step' runs your own step as "
         'written: give it arguments = "module:factory" (or params)'),
        (program("p", "{m}:lookup", kind="train") + 'arguments = "{m}:args"\n', "specs/lib.toml:7: kind "
         "'train' is the gate's own SGD step around a lookup or a model with params; a train step of your "
         'own, run as written, is kind = "step"'),
        (program("p", "{m}:lookup") + 'arguments = "{m}:args"\nindex_shape = [4]\n', "specs/lib.toml:11: "
         "index_shape is not for a program with arguments, whose factory gives every argument; drop it"),
        (program("p", "{m}:lookup") + 'arguments = "{m}:not_a_tuple"\n', "specs/lib.toml:10: p: "
         "{m}:not_a_tuple() must return a tuple of the function's arguments, got ArrayImpl"),
    ],
    ids=["no-module", "no-attribute", "not-callable", "signature", "shape", "untraceable", "twice", "kind",
         "config", "function-form", "step-of-a-lookup", "train-with-arguments", "arguments-and-index-shape",
         "arguments-not-a-tuple"],
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


SHADOWS = """
[[invariant]]
id = "mine_is_the_catalogs"
assert = "structure(take) == structure(catalog:take) and kernels(take) <= kernels(catalog:take)"

[[invariant]]
id = "mine_one_gather"
programs = ["take"]
assert = "gathers == 1 and while_loops == 0"
"""


def test_a_project_program_named_as_a_catalog_one_runs_with_no_catalog(tmp_path, gate_in):
    """A project's names are its own: its ``take`` is ``take``, the catalog's ``catalog:take``, which its
    relation compiles; no catalog name is reserved. ``--programs`` narrows what is traced: a program it
    leaves out, broken, stops nothing."""
    from invariants.records.results import read

    declared = program("take", "lib_shadow:lookup") + program("broken", "lib_shadow:gone")
    project(tmp_path, "lib_shadow", declared, SHADOWS)
    status, err = gate_in("--spec-dir", "specs", "--no-catalog", "--targets", "cpu", "--programs", "take",
                          "--snapshot-update", "-m", "not throughput", "-p", "no:cacheprovider")  # fmt: skip
    assert status == 0, err
    outcomes = {
        i.nodeid.split("::", 1)[1]: i.outcome for i in read(tmp_path / "artifacts" / "results.json").items
    }
    assert outcomes["cpu::lib.toml::mine_is_the_catalogs::take~catalog:take-f32"] == "passed", outcomes
    assert outcomes["cpu::lib.toml::mine_one_gather::take-f32"] == "passed", outcomes
    # its snapshot by its own name, in its own folder; the catalog's take keeps none here
    assert sorted(p.name for p in (tmp_path / "snapshots" / "cpu").glob("*.txt")) == ["take.f32.txt"]


def test_a_shadowed_name_in_the_catalogs_snapshot_folder_is_one_line(tmp_path, gate_in):
    """The project's take and the catalog's would share take.f32.txt in one folder."""
    project(tmp_path, "lib_one_folder", program("take", "lib_one_folder:lookup"))
    status, err = gate_in("--spec-dir", "specs", "--targets", "cpu", "--programs", "take",
                          "--catalog-snapshot-dir", "snapshots")  # fmt: skip
    assert status == 2 and err.count("\n") == 1, err
    assert "the project's take would share a file with the catalog's" in err, err


def test_with_the_catalog_both_programs_of_one_name_are_addressable(tmp_path):
    """The catalog's own spec files speak of its ``take`` as ``catalog:take`` in a run whose project shadows
    the name; a pattern still matches it by its catalog name; ``catalog:naive`` names ``naive``."""
    from invariants.catalog.programs import CATALOG
    from invariants.catalog.registry import Programs
    from invariants.specfile.reader import SPEC_DIR, load_specs, scope_of, select_programs

    (tmp_path / "mine.toml").write_text(
        '[spec]\ntargets = ["cpu"]\n\n[[program]]\nname = "take"\nfunction = "m:f"\nkind = "forward"\n'
        + SHADOWS
        + '\n[[invariant]]\nid = "n"\nassert = "kernels(take) <= kernels(catalog:naive)"\n'
    )
    specs = load_specs(SPEC_DIR, tmp_path)
    mine = next(s for s in specs if s.path.parent == tmp_path)
    assert [i.programs for i in mine.invariants] == [("take", "catalog:take"), ("take",), ("take", "naive")]
    cpu = next(s for s in specs if s.path.name == "cpu.toml")
    relation = next(i for i in cpu.invariants if i.id == "naive_le_take")
    assert relation.programs == ("naive", "catalog:take") and relation.text.endswith("kernels(catalog:take)")
    catalog_scope = scope_of(cpu, {"catalog:take": object(), "take": object(), "naive": object()})  # type: ignore[dict-item]
    assert sorted(catalog_scope) == ["catalog:take", "naive"]
    assert select_programs(["take*"], catalog_scope) == ["catalog:take"]
    assert select_programs(["take"], {"catalog:take": 0, "take": 0}) == ["take"]  # type: ignore[dict-item]
    # the registry: the catalog's program renamed in the run, the project's under its own name
    mine = dataclasses.replace(CATALOG["naive"], name="take")
    programs = Programs([mine])
    assert programs["take"] is mine and programs["catalog:take"].name == "catalog:take"
    assert programs.is_catalog("catalog:take") and not programs.is_catalog("take")
    assert programs.program("catalog:naive").name == "naive" and "catalog:naive" not in programs
    assert programs.select("catalog:*") == ["catalog:take"] and "catalog:take" in programs.catalog
    assert programs.select("take,catalog:take,catalog:naive") == ["naive", "catalog:take", "take"]


def test_no_program_with_no_catalog(tmp_path, gate_in):
    project(
        tmp_path, "lib_none", "", '[[invariant]]\nid = "x"\nprograms = ["take"]\nassert = "kernels <= 9"\n'
    )
    status, err = gate_in("--spec-dir", "specs", "--no-catalog")
    assert status == 2 and "no [[program]] declared; with --no-catalog nothing is gated" in err, err


def test_a_program_kind_builds_what_the_catalog_builds(tmp_path, monkeypatch):
    """backward and train wrap the lookup exactly as grad_take and train_take do: same structure."""
    from invariants.catalog import downstream as _downstream
    from invariants.catalog import programs as _programs
    from invariants.compile.artifacts import compile_here
    from invariants.scope.targets import all_targets
    from invariants.specfile.reader import load_specs

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
# Programs with parameters: function(params, indices), params = factory(config).

PARAMS_LIB = """
import jax
import jax.numpy as jnp

def tables(config):
    return {"tokens": jax.ShapeDtypeStruct((config.vocab, config.width), config.dtype),
            "positions": jax.ShapeDtypeStruct((config.index_shape[-1], config.width), config.dtype)}

def concrete(config):
    return {"w": jnp.arange(config.vocab * 2, dtype=jnp.float32).reshape(config.vocab, 2)}

def embed(params, indices):
    return jnp.take(params["tokens"], indices, axis=0) + params["positions"]

def rows(params, indices):
    return params["w"][indices]

def embed_indexed(params, indices):
    return params["tokens"][indices] + params["positions"][None]

def embed_off_by_one_row(params, indices):
    return params["tokens"][indices + 1] + params["positions"][None]

def raising(config):
    raise ValueError("boom")

def not_arrays(config):
    return {"w": 3}

def empty(config):
    return {}

def nested_deep(config):
    tree = {"w": jax.ShapeDtypeStruct((config.vocab, 2), jnp.float32)}
    for _ in range(2000):
        tree = {"n": tree}
    return tree

def with_ids(config):
    return {"w": jax.ShapeDtypeStruct((config.vocab, 2), jnp.float32),
            "ids": jax.ShapeDtypeStruct((4,), jnp.int32)}

def per_config(config):
    if config.id == "bf16":
        return [jax.ShapeDtypeStruct((config.vocab, 2), config.dtype)]
    return {"w": jax.ShapeDtypeStruct((config.vocab, 2), config.dtype)}

def counts(params, indices):
    return jnp.argmax(jnp.take(params["w"], indices, axis=0), axis=-1)

def wrong_shape(params, indices):
    return params["w"] @ jnp.ones((3, 3))

@jax.custom_vjp
def _opaque(w):
    return w

def _opaque_fwd(w):
    return w, None

def _opaque_bwd(res, ct):
    raise ValueError("no gradient here")

_opaque.defvjp(_opaque_fwd, _opaque_bwd)

def no_gradient(params, indices):
    return _opaque(params["w"])[indices]
"""


def params_program(
    name: str, function: str, params: str, kind: str = "forward", extra: str = "index_shape = [4, 8]\n"
) -> str:
    return (
        f'[[program]]\nname = "{name}"\nfunction = "{function}"\nparams = "{params}"\nkind = "{kind}"\n'
        + extra
        + "\n"
    )


def params_project(tmp_path: Path, module: str, programs: str, extra: str = "", header: str = "") -> Path:
    (tmp_path / f"{module}.py").write_text(PARAMS_LIB)
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "lib.toml").write_text((header or '[spec]\ntargets = ["cpu"]\n\n') + programs + extra)
    return tmp_path


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        (params_program("p", "{m}:embed", "nolib_here.model:init"),
         "specs/lib.toml:7: p: cannot import nolib_here.model (ModuleNotFoundError: No module named "
         "'nolib_here')"),
        (params_program("p", "{m}:embed", "{m}:missing"),
         "specs/lib.toml:7: p: {m} has no attribute 'missing'"),
        (params_program("p", "{m}:embed", "init"),
         "specs/lib.toml:7: params 'init' must read 'module:factory'"),
        (params_program("p", "{m}:embed", "{m}:raising"),
         "specs/lib.toml:7: p [f32]: {m}:raising(config) fails: ValueError: boom"),
        (params_program("p", "{m}:rows", "{m}:not_arrays"),
         "specs/lib.toml:7: p [f32]: {m}:not_arrays(config): leaf params['w'] is int 3, not an array or a "
         "jax.ShapeDtypeStruct"),
        (params_program("p", "{m}:rows", "{m}:empty"),
         "specs/lib.toml:7: p [f32]: {m}:empty(config) returned no arrays (got dict)"),
        (params_program("p", "{m}:rows", "{m}:nested_deep"),
         "specs/lib.toml:7: p [f32]: {m}:nested_deep(config) returned a pytree nested deeper than JAX can "
         "flatten (Python's recursion limit, "),
        (params_program("p", "{m}:wrong_shape", "{m}:concrete"),
         "specs/lib.toml:4: p [f32]: {m}:wrong_shape fails on its params and s32[4,8] indices: TypeError"),
        (params_program("p", "{m}:counts", "{m}:concrete", "backward"),
         "specs/lib.toml:4: p [f32]: {m}:counts on its params and s32[4,8] indices returns s32[4,8]: a "
         "backward differentiates the sum of its floating-point outputs, and it has none"),
        (params_program("p", "{m}:no_gradient", "{m}:concrete", "backward"),
         "specs/lib.toml:4: p [f32]: the backward of {m}:no_gradient fails: no gradient here"),
        (params_program("p", "{m}:rows", "{m}:with_ids", "train"),
         "specs/lib.toml:7: p [f32]: leaf params['ids'] is s32[4]: a train differentiates every parameter"),
        (params_program("p", "{m}:rows", "{m}:per_config",
                        extra='index_shape = [4]\nconfigs = ["f32", "bf16"]\n'),
         "specs/lib.toml:7: p [bf16]: {m}:per_config(config) returns another pytree in bf16 than in f32"),
        (params_program("p", "{m}:embed", "{m}:tables", extra="index_shape = [0, 8]\n"),
         "specs/lib.toml:9: index_shape: item 1 is 0; each must be a positive integer"),
        (params_program("p", "{m}:embed", "{m}:tables", extra="index_shape = 8\n"),
         "specs/lib.toml:9: index_shape must be a list of 1 to 4 positive integers, e.g. [64, 256]"),
        (program("p", "{m}:lookup") + "index_shape = [4, 8]\n",
         "specs/lib.toml:10: index_shape is for a program with params"),
        (params_program("p", "{m}:embed", "{m}:tables", extra='index_shape = [4, 8]\nexpect = "x"\n'),
         "specs/lib.toml:10: unknown key 'expect' in [[program]]"),
    ],
    ids=["no-module", "no-factory", "params-form", "factory-raises", "leaf-not-array", "no-leaves",
         "nested-deep", "function-fails", "backward-integer-output", "backward-fails", "integer-param",
         "pytree-per-config", "index-shape-zero", "index-shape-scalar", "index-shape-without-params",
         "unknown-key"],
)  # fmt: skip
def test_bad_params_program_is_one_line_and_exit_2(tmp_path, gate_in, request, declared, message):
    module = f"plib_{request.node.callspec.id.replace('-', '_')}"
    params_project(tmp_path, module, declared.replace("{m}", module))
    status, err = gate_in("--spec-dir", "specs", "--no-catalog")
    assert status == 2
    assert err.count("\n") == 1, err
    assert message.replace("{m}", module) in err, err


@pytest.mark.e2e
def test_a_raising_factory_is_one_line_from_the_command_line(tmp_path):
    """As a user runs it, in a child process: the factory's error is the last line of stderr, exit 2."""
    params_project(tmp_path, "plib_cli", params_program("p", "plib_cli:embed", "plib_cli:raising"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-m", "invariants", "gate", "--spec-dir", "specs", "--no-catalog"],
        cwd=tmp_path, capture_output=True, text=True, env=env, check=False, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.splitlines() == [
        "specs/lib.toml:7: p [f32]: plib_cli:raising(config) fails: ValueError: boom"
    ], proc.stderr
    assert proc.stdout == ""


_ENTRY = '[[correctness]]\nid = "c"\ncheck = "{check}"\nprograms = ["{program}"]\n{more}\n'


@pytest.mark.parametrize(
    ("header", "entry", "message"),
    [
        ("", _ENTRY.format(check="agree", program="p", more='reference = "take"\ntargets = ["cpux"]'),
         "specs/lib.toml:23: 'c': targets 'cpux' lies outside this file's targets (cpu): it would never "
         "apply"),
        ('[spec]\ntargets = ["*"]\n\n',
         _ENTRY.format(check="agree", program="p", more='reference = "q"\ntargets = ["gpu-h101"]'),
         "specs/lib.toml:23: 'c': targets 'gpu-h101' matches no target (did you mean 'gpu-h100'"),
        ("", _ENTRY.format(check="agree", program="p", more='reference = "take"'),
         "specs/lib.toml:22: 'c': 'p' takes params {m}:tables and reference 'take' takes (table, indices): "
         "'agree' compares programs called on the same arguments"),
        ("", _ENTRY.format(check="out_of_bounds", program="p", more='expect = "clamp"'),
         "specs/lib.toml:21: 'c': check 'out_of_bounds' calls a lookup (table, indices) on chosen rows; 'p' "
         "is a program with params"),
    ],
    ids=["correctness-target-outside", "correctness-target-unknown", "agree-other-arguments",
         "out-of-bounds"],
)  # fmt: skip
def test_bad_entry_on_a_params_program_is_one_line_and_exit_2(
    tmp_path, gate_in, request, header, entry, message
):
    module = f"pentry_{request.node.callspec.id.replace('-', '_')}"
    declared = params_program("p", f"{module}:embed", f"{module}:tables") + params_program(
        "q", f"{module}:embed", f"{module}:tables"
    )
    params_project(tmp_path, module, declared, entry, header)
    status, err = gate_in("--spec-dir", "specs", "--no-catalog")
    assert status == 2
    assert err.count("\n") == 1, err
    assert message.replace("{m}", module) in err, err


def _built(tmp_path: Path, monkeypatch, module: str, declared: str, extra: str = "") -> dict:
    from invariants.catalog import downstream as _downstream
    from invariants.specfile.reader import load_specs

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    params_project(tmp_path, module, declared, extra)
    specs = load_specs(tmp_path / "specs")
    return {d.name: _downstream.build(d) for s in specs for d in s.programs}


def test_a_params_backward_is_the_gradient_of_the_sum_and_train_an_sgd_step(tmp_path, monkeypatch):
    """On drawn tables and indices: d sum / d tokens counts each token, d sum / d positions is the batch
    size; the train step moves every parameter by -SGD_RATE times that and returns the sum as its loss."""
    import jax
    import numpy as np

    from invariants.catalog.arguments import make_arguments
    from invariants.catalog.downstream import SGD_RATE
    from invariants.catalog.programs import CONFIGS

    m = "plib_grad"
    built = _built(tmp_path, monkeypatch, m, params_program("g", f"{m}:embed", f"{m}:tables", "backward")
                   + params_program("t", f"{m}:embed", f"{m}:tables", "train")
                   + params_program("f", f"{m}:embed", f"{m}:tables"))  # fmt: skip
    config = CONFIGS["f32"]
    args = make_arguments(built["g"], config)
    assert args is make_arguments(built["g"], config)  # drawn once, deterministic
    # Leaves in pytree order: positions, tokens, then the indices.
    positions, tokens, indices = args
    assert positions.shape == (8, 32) and tokens.shape == (8192, 32) and indices.shape == (4, 8)
    assert 0 < float(np.abs(tokens).max()) < 1 and indices.min() >= 0 and indices.max() < 8192
    grads = jax.jit(built["g"].fn)(*args)
    want_tokens = np.bincount(indices.ravel(), minlength=8192)[:, None] * np.ones((1, 32))
    np.testing.assert_allclose(grads["tokens"], want_tokens)
    np.testing.assert_allclose(grads["positions"], np.full((8, 32), 4.0))
    new, loss = jax.jit(built["t"].fn)(*args)
    out = jax.jit(built["f"].fn)(*args)
    np.testing.assert_allclose(loss, np.asarray(out, dtype=np.float32).sum(), rtol=1e-5)
    np.testing.assert_allclose(new["tokens"], tokens - SGD_RATE * want_tokens, atol=1e-7)
    np.testing.assert_allclose(new["positions"], positions - SGD_RATE * 4.0, atol=1e-7)


def test_params_programs_agree_on_the_same_drawn_arguments(tmp_path, monkeypatch):
    """'agree' runs a params program and its reference on one draw: the same model written two ways agrees,
    one that reads the next row does not."""
    from invariants.catalog.registry import Programs
    from invariants.scope.targets import all_targets
    from invariants.specfile.reader import load_specs
    from invariants.verdict.correctness import Correctness, expand_correctness

    m = "plib_agree"
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    declared = "".join(
        params_program(name, f"{m}:{fn}", f"{m}:tables")
        for name, fn in (("ref", "embed"), ("same", "embed_indexed"), ("off", "embed_off_by_one_row"))
    )
    check = '[[correctness]]\nid = "c"\ncheck = "agree"\nprograms = ["same", "off"]\nreference = "ref"\n'
    params_project(tmp_path, m, declared, check)
    specs = load_specs(tmp_path / "specs")
    from invariants.catalog.downstream import build_all

    programs = Programs(build_all(d for s in specs for d in s.programs))
    correctness = Correctness(programs)
    cases = expand_correctness(specs, all_targets()["cpu"], programs)
    verdicts = {c.program: correctness.run(c) for c in cases}
    assert verdicts["same"] is None
    assert verdicts["off"] is not None and verdicts["off"].startswith("max |off - ref| = "), verdicts


def test_a_factorys_concrete_arrays_are_the_values_it_runs_on(tmp_path, monkeypatch):
    import numpy as np

    from invariants.catalog.arguments import make_arguments
    from invariants.catalog.programs import CONFIGS

    m = "plib_concrete"
    built = _built(tmp_path, monkeypatch, m, params_program("c", f"{m}:rows", f"{m}:concrete"))
    weights, indices = make_arguments(built["c"], CONFIGS["f32"])
    np.testing.assert_array_equal(weights, np.arange(8192 * 2, dtype=np.float32).reshape(8192, 2))
    assert not weights.flags.writeable and indices.shape == (4, 8)
    assert built["c"].argument_specs(CONFIGS["f32"])[0].shape == (8192, 2)


def test_a_declared_program_compiles_where_its_specs_aim_it(tmp_path, monkeypatch):
    """A declared program compiles where its spec files aim it, in its own configurations, and nowhere else:
    on core targets (tpu-v4, gpu-a100, which compile only the catalog's core programs otherwise) and on
    cpu, but not on tpu-v5e or gpu-h100, which compile every catalog program, nor on other core targets."""
    from invariants.scope.targets import all_targets
    from invariants.specfile.reader import load_specs
    from invariants.verdict.checks import check_specs

    m = "plib_aim"
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    declared = params_program(
        "p", f"{m}:embed", f"{m}:tables", extra='index_shape = [4, 8]\nconfigs = ["bf16"]\n'
    )
    inv = '[[invariant]]\nid = "x"\nprograms = ["p"]\ntargets = ["tpu-v4"]\nassert = "while_loops == 0"\n'
    params_project(tmp_path, m, declared, inv, header='[spec]\ntargets = ["cpu", "tpu-v4", "gpu-a1*"]\n\n')
    specs = load_specs(tmp_path / "specs")
    (decl,) = specs[0].programs
    assert decl.aimed == ("cpu", "tpu-v4", "gpu-a1*")
    from invariants.catalog.downstream import build
    from invariants.scope.placement import configs_for

    program = build(decl)
    targets = all_targets()
    assert {n: configs_for(t, program) for n, t in targets.items() if configs_for(t, program)} == {
        "cpu": ("bf16",),
        "tpu-v4": ("bf16",),
        "gpu-a100": ("bf16",),
    }
    from invariants.catalog.registry import Programs

    check_specs(specs, programs=Programs([program]))  # an invariant aimed at tpu-v4 makes items there


def test_a_catalog_program_on_a_core_target_is_still_an_error(tmp_path):
    """An invariant naming a catalog program its target does not compile is an error: take_clip is not
    core, tpu-v4 compiles core (a declared program compiles wherever its spec files name)."""
    from invariants._errors import InvariantsError
    from invariants.specfile.reader import load_specs
    from invariants.verdict.checks import check_specs

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "c.toml").write_text(
        '[spec]\ntargets = ["tpu-v4"]\n\n[[invariant]]\nid = "x"\nprograms = ["take_clip"]\n'
        'targets = ["tpu-v4"]\nassert = "while_loops == 0"\n'
    )
    with pytest.raises(
        InvariantsError, match=r"c\.toml:7: 'x': program 'take_clip' does not compile on tpu-v4"
    ) as err:
        check_specs(load_specs(specs))
    assert "it compiles programs tagged 'core' only" in str(err.value)


# ---------------------------------------------------------------------------------------------------------
# The worked example, as its README runs it (from a copy of examples/downstream): the command in this
# process (gatekit.command), its modules imported from the copy and forgotten after; under xdist its
# workers are child processes.


def gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Timing is not what these runs test: each measurement is short (``gatekit.QUICK``)."""
    return command(
        "gate", "--spec-dir", "specs", "--snapshot-dir", "snapshots", "--targets", "cpu",
        "-p", "no:cacheprovider", *args, cwd=cwd,
    )  # fmt: skip


@pytest.fixture
def example(tmp_path: Path) -> Path:
    shutil.copytree(
        EXAMPLE, tmp_path / "downstream", ignore=shutil.ignore_patterns("__pycache__", "snapshots")
    )
    return tmp_path / "downstream"


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.e2e
def test_example_row_loop_fails_take_passes_snapshots_in_the_project(example):
    """The worked example: the lax.map row loop fails while_loops == 0 with the usual diagnosis, jnp.take
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
        "cpu/model_classifier.f32.txt", "cpu/model_classifier_train.f32.txt",
        "cpu/model_token_position.f32.txt", "cpu/model_token_position_grad.f32.txt",
        "cpu/model_token_position_indexed.f32.txt",
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
    assert failed == ["FAILED test_invariants.py::cpu::mylib.toml::mylib_no_while::mylib_row_loop-f32"], out
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
        "PASSED test_invariants.py::cpu::mylib.toml::mylib_take_is_the_catalogs::mylib_take~take-f32"
        in proc.stdout
    )
    assert "PASSED test_structure.py::cpu::take-f32" in proc.stdout
    assert sorted(files(snapshots)) == ["cpu/mylib_take.f32.txt"]  # mylib_take.bf16 not selected
    assert files(ROOT / "snapshots") == catalog_before


def test_catalog_snapshot_mismatch_fails_without_rewriting(example, tmp_path, gate_pytester: InProcess):
    """Catalog snapshots and baselines read from elsewhere: a snapshot is compared and fails with its diff,
    a baseline recorded on another machine is skipped with the reason, and an update (of snapshots and of
    baselines) touches neither."""
    catalog = tmp_path / "catalog"
    shutil.copytree(ROOT / "snapshots" / "cpu", catalog / "cpu")
    changed = catalog / "cpu" / "take.f32.txt"
    changed.write_text(changed.read_text().replace("dynamic launches 1", "dynamic launches 7"))
    baseline = catalog / "cpu" / "efficiency" / "take.f32.json"
    baseline.write_text(baseline.read_text().replace('"cores"', '"cores_elsewhere"'))
    before = files(catalog)
    proc = gate_pytester.pytest(
        str(GATE_DIR / "test_structure.py"), str(GATE_DIR / "test_throughput.py"),
        "-p", "invariants.plugin.hooks", "-c", os.devnull, "-k", "test_structure or efficiency", "-rs",
        "--rootdir", str(example), "--targets", "cpu", "--programs", "take,naive", "--configs", "f32",
        "--snapshot-dir", str(example / "snapshots"), "--catalog-snapshot-dir", str(catalog),
        "--snapshot-update", "--record-baselines", quick=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "take[f32] on cpu no longer compiles to the package's snapshot (read-only" in proc.stdout
    assert "- summary: kernels 1; entry fusions 1 (kLoop 1); while loops 0; dynamic launches 7" in proc.stdout
    assert "+ summary: kernels 1; entry fusions 1 (kLoop 1); while loops 0; dynamic launches 1" in proc.stdout
    assert "no baseline of take[f32] for this machine" in proc.stdout
    assert files(catalog) == before


def test_params_programs_are_timed_with_their_own_arguments(tmp_path):
    """A time() relation between a model and the catalog's take: each side runs on its own arguments (the
    model its drawn parameters and [4, 8] ids), the first update records the efficiency baseline the model
    asks for (bytes: a row per id of its own index shape), and a plain run then compares both."""
    m = "plib_timed"
    declared = params_program(
        "p", f"{m}:embed", f"{m}:tables", extra="index_shape = [4, 8]\nefficiency = true\n"
    )
    relation = '[[invariant]]\nid = "t"\nassert = "time(p) / time(take) <= 50"\n'
    params_project(tmp_path, m, declared, relation)
    first = gate(tmp_path, "--no-catalog", "--snapshot-update", "-rA")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
    assert "PASSED test_throughput.py::cpu::lib.toml::t::p~take-f32" in first.stdout
    assert "recorded efficiency baseline snapshots/cpu/efficiency/p.f32.json" in first.stdout
    baseline = json.loads((tmp_path / "snapshots" / "cpu" / "efficiency" / "p.f32.json").read_text())
    assert baseline["efficiency"] > 0
    again = gate(tmp_path, "--no-catalog", "-rA", "-m", "throughput")
    # The second run compares with the baseline the first recorded. Its verdict is not asserted: a baseline
    # from another run drifts on a shared machine; what must hold is that it was compared with, not skipped.
    assert again.returncode in (0, 1), again.stdout[-3000:]
    items = json.loads((tmp_path / "artifacts" / "results.json").read_text())["items"]
    (efficiency,) = (it for it in items if it["kind"] == "efficiency" and it["program"] == "p")
    assert efficiency["outcome"] in ("passed", "failed") and efficiency["threshold"] is not None, efficiency
    ratio = next(it for it in items if it["kind"] == "ratio")
    assert ratio["outcome"] == "passed", ratio  # a 50x bound: far beyond any noise


def test_a_spec_file_given_as_the_spec_folder_names_the_folder(tmp_path, gate_in):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "lib.toml").write_text('[spec]\ntargets = ["cpu"]\n')
    status, err = gate_in("--spec-dir", "specs/lib.toml", "--no-catalog")
    assert status == 2 and err.count("\n") == 1, err
    assert "specs/lib.toml: a file; --spec-dir takes the folder that holds the spec files (specs)" in err, err


def test_an_entry_target_outside_the_files_names_the_nearest(tmp_path, gate_in):
    m = "plib_near"
    declared = params_program("p", f"{m}:embed", f"{m}:tables")
    entry = '[[invariant]]\nid = "i"\nprograms = ["p"]\ntargets = ["tpu-v5"]\nassert = "while_loops == 0"\n'
    params_project(tmp_path, m, declared, entry, '[spec]\ntargets = ["cpu", "tpu-v5e"]\n\n')
    status, err = gate_in("--spec-dir", "specs", "--no-catalog")
    assert status == 2 and err.count("\n") == 1, err
    assert "targets 'tpu-v5' lies outside this file's targets (cpu, tpu-v5e): it would never apply " in err
    assert err.rstrip().endswith("(did you mean 'tpu-v5e'?)"), err


def test_a_program_takes_its_indices_in_the_dtype_it_declares(tmp_path, monkeypatch):
    """index_dtype = "uint32": a lookup's indices (and a params program's) are uint32 where the catalog's
    configuration has int32, through compile and the drawn arguments; a name that is not an integer dtype
    is one line."""
    from invariants._errors import InvariantsError
    from invariants.catalog.arguments import make_arguments
    from invariants.catalog.downstream import build
    from invariants.catalog.programs import CONFIGS
    from invariants.compile.artifacts import compile_function
    from invariants.scope.targets import all_targets
    from invariants.specfile.reader import load_specs

    m = "lib_u32"
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    decls = program("p", f"{m}:lookup") + 'index_dtype = "uint32"\n\n'
    decls += params_program(
        "q", f"{m}:embed", f"{m}:tables", extra='index_shape = [4, 8]\nindex_dtype = "uint32"\n'
    )
    (tmp_path / f"{m}.py").write_text(LIB + PARAMS_LIB)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "lib.toml").write_text('[spec]\ntargets = ["cpu"]\n\n' + decls)
    for decl in (d for spec in load_specs(tmp_path / "specs") for d in spec.programs):
        built = build(decl)
        config = CONFIGS["f32"]
        assert built.argument_specs(config)[-1].dtype == "uint32"
        assert make_arguments(built, config)[-1].dtype == "uint32"
        compiled, _ = compile_function(
            built.fn, built.argument_specs(config), all_targets()["cpu"], "p", "f32"
        )
        assert "u32[" in compiled.hlo_text
    (tmp_path / "specs" / "lib.toml").write_text(
        '[spec]\ntargets = ["cpu"]\n\n' + program("p", f"{m}:lookup") + 'index_dtype = "float32"\n'
    )
    with pytest.raises(InvariantsError, match=r"lib\.toml:10: unknown index_dtype 'float32'; known: int8, "):
        load_specs(tmp_path / "specs")


def test_a_params_program_is_named_by_the_dtype_of_its_parameters(tmp_path, monkeypatch):
    """A factory that makes f16 parameters under the f32 configuration would be snapshotted as
    ``p.f32.txt``: refused in one line naming the configuration that fits; listed as ``configs = ["f16"]``
    (a configuration for a project's programs, which the catalog does not compile) it builds."""
    from invariants._errors import InvariantsError
    from invariants.catalog.downstream import build
    from invariants.catalog.programs import ALL_CONFIGS
    from invariants.specfile.reader import load_specs

    m = "lib_f16"
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / f"{m}.py").write_text(
        "import jax, jax.numpy as jnp\n\ndef init(config):\n"
        "    return {'w': jax.ShapeDtypeStruct((config.vocab, 8), jnp.float16)}\n\n"
        "def f(params, ids):\n    return params['w'][ids]\n"
    )
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "lib.toml"
    spec.write_text('[spec]\ntargets = ["cpu"]\n\n' + params_program("p", f"{m}:f", f"{m}:init"))
    ((decl,),) = (s.programs for s in load_specs(tmp_path / "specs"))
    with pytest.raises(
        InvariantsError,
        match=r"^specs/lib\.toml:7: p \[f32\]: lib_f16:init\(config\) returns "
        r"float16 parameters where the configuration f32 is float32: .*; list configs = \['f16'\]$",
    ):
        build(decl)
    spec.write_text(spec.read_text().replace('kind = "forward"', 'kind = "forward"\nconfigs = ["f16"]'))
    ((decl,),) = (s.programs for s in load_specs(tmp_path / "specs"))
    assert build(decl).configs == ("f16",) and "f16" not in ALL_CONFIGS


def test_a_models_input_facts_are_its_own_tables(tmp_path, monkeypatch):
    """table_bytes sums the model's tables, row_bytes is one row of them (an index reads one row: a
    per-table sum would count an 8-table bag's rows 8 times over), vocab the largest; ``tables`` narrows
    them to the leaves it names; lookups are the model's own indices."""
    from invariants.catalog.programs import CONFIGS

    m = "plib_facts"
    narrowed = 'index_shape = [4, 8]\ntables = ["positions"]\n'
    built = _built(tmp_path, monkeypatch, m, params_program("p", f"{m}:embed", f"{m}:tables")
                   + params_program("q", f"{m}:embed", f"{m}:tables", extra=narrowed)
                   + params_program("w", f"{m}:rows", f"{m}:with_ids"))  # fmt: skip
    facts = {name: program.input_facts(CONFIGS["f32"]) for name, program in built.items()}
    shown = ("table_bytes", "row_bytes", "vocab", "lookups")
    assert [facts["p"][k] for k in shown] == [(8192 + 8) * 32 * 4, 32 * 4, 8192, 4 * 8]
    assert [facts["q"][k] for k in shown] == [8 * 32 * 4, 32 * 4, 8, 4 * 8]
    assert [facts["w"][k] for k in shown] == [8192 * 2 * 4, 2 * 4, 8192, 4 * 8]  # the s32 ids: no table


def test_a_project_in_a_folder_whose_name_is_not_utf8_says_so(tmp_path):
    """JAX writes the file of each traced frame into the lowered module, and its C++ takes UTF-8 alone: a
    project in a folder named in another encoding fails its compile with "std::bad_cast". The item's line
    names the file and what to do instead."""
    project = tmp_path / os.fsdecode(b"latin1-\xe9t\xe9")
    (project / "specs").mkdir(parents=True)
    (project / "specs" / "lib.toml").write_text(
        '[spec]\ntargets = ["cpu"]\n\n' + program("p", "encodedlib:lookup")
    )
    (project / "encodedlib.py").write_text("import jax.numpy as jnp\n\ndef lookup(table, indices):\n"
                                           "    return jnp.take(table, indices, axis=0)\n")  # fmt: skip
    proc = command("gate", "--spec-dir", "specs", "--no-catalog", "--targets", "cpu", "--no-cache",
                   "--snapshot-update", "-p", "no:cacheprovider", "-q", cwd=project)  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-2000:]
    failed = next(ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED"))
    assert failed.endswith(
        "latin1-\\xe9t\\xe9/encodedlib.py: the path of this module is not UTF-8, and JAX cannot write it "
        "into the source locations of the lowered program (std::bad_cast): move the project to a folder "
        "whose name is UTF-8"
    ), failed


def test_a_project_whose_path_is_past_path_max_says_so(tmp_path, monkeypatch, capsys):
    """A folder reached step by step (each step a short relative path) may have a path longer than
    PATH_MAX: Python opens no module there by its path, and the import's "No module named" hides why. The
    line says why."""
    monkeypatch.chdir(tmp_path)
    limit = os.pathconf("/", "PC_PATH_MAX")
    step = "d" * 200
    for _ in range(limit // len(step) + 1):
        os.mkdir(step)
        monkeypatch.chdir(step)
    os.mkdir("specs")
    Path("specs/lib.toml").write_text('[spec]\ntargets = ["cpu"]\n\n' + program("p", "deepfolderlib:lookup"))
    Path("deepfolderlib.py").write_text("def lookup(table, indices):\n    return table[indices]\n")
    monkeypatch.syspath_prepend(os.getcwd())  # as gate_in does: the run's sys.path undone after it
    status = cli(["gate", "--spec-dir", "specs", "--no-catalog"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    assert re.search(
        r"^specs/lib\.toml:4: p: cannot import deepfolderlib: the folder modules are imported from "
        rf"\(.{{40}}\.\.\.d{{30}}\) has a path of [\d,]+ bytes, past this system's PATH_MAX of {limit:,}: no "
        r"file in it can be opened by its path; run the gate from a shorter path$",
        err.strip(),
    ), err


def test_bad_input_the_command_finds_before_pytest_keeps_the_earlier_results(tmp_path, gate_in):
    """The command checks a project's programs before pytest starts: a program that does not import stops
    it there, and the results file of the run before stays until a run writes a new one."""
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "lib.toml").write_text('[spec]\ntargets = ["cpu"]\n\n' + program("p", "nolib_x:f"))
    earlier = tmp_path / "artifacts" / "results.json"
    earlier.parent.mkdir()
    earlier.write_text('{"items": [], "exitstatus": 0}\n')
    status, err = gate_in("--spec-dir", "specs", "--no-catalog")
    assert status == 2 and "cannot import nolib_x" in err, err
    assert earlier.read_text() == '{"items": [], "exitstatus": 0}\n'


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_a_0d_parameter_draws_as_a_read_only_array(dtype):
    """A declared program's scalar parameter (a temperature, a scale) is drawn for timing like any other:
    numpy's draw for shape () is a scalar, whose flags cannot be set ('Cannot set flags on array scalars')."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from invariants.catalog.downstream import _drawn

    value = _drawn(jax.ShapeDtypeStruct((), jnp.dtype(dtype)), np.random.default_rng(0), 10)
    value.flags.writeable = False
    assert value.shape == () and value.dtype == jnp.dtype(dtype)


ARGUMENTS_LIB = """
import jax
import jax.numpy as jnp
import numpy as np

def graph():
    edges = np.array([0, 1, 2, 0], dtype=np.int32)
    return {"w": jax.ShapeDtypeStruct((2, 2), jnp.float32)}, jnp.ones((3, 2)), edges, (edges + 1) % 3

def layer(params, nodes, senders, receivers):
    summed = jax.ops.segment_sum(nodes[senders], receivers, num_segments=nodes.shape[0])
    return summed @ params["w"]
"""


def test_a_program_with_arguments_is_called_as_written_and_differentiated_in_its_first(tmp_path, monkeypatch):
    """arguments = "module:factory": the function of the factory's tuple, as written (forward and step);
    backward: the gradient of the sum of its outputs with respect to the first argument; drawn for timing,
    the factory's arrays are kept and an integer shape is zeros."""
    import jax

    from invariants.catalog.downstream import build
    from invariants.scope.configs import CONFIGS
    from invariants.specfile.reader import load_specs

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "lib_args.py").write_text(ARGUMENTS_LIB)
    declared = "".join(
        f'[[program]]\nname = "g_{kind}"\nfunction = "lib_args:layer"\narguments = "lib_args:graph"\n'
        f'kind = "{kind}"\n\n'
        for kind in ("forward", "step", "backward")
    )
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "lib.toml").write_text('[spec]\ntargets = ["cpu"]\n\n' + declared)
    built = {d.name: build(d) for s in load_specs(tmp_path / "specs") for d in s.programs}
    f32 = CONFIGS["f32"]
    specs = built["g_forward"].argument_specs(f32)
    assert [tuple(s.shape) for s in specs] == [(2, 2), (3, 2), (4,), (4,)]
    assert jax.eval_shape(built["g_step"].fn, *specs).shape == (3, 2)  # a step runs as written
    grad = jax.eval_shape(built["g_backward"].fn, *specs)
    assert jax.tree_util.tree_structure(grad) == jax.tree_util.tree_structure({"w": 0}) and grad[
        "w"
    ].shape == (2, 2)
    drawn = built["g_forward"].inputs.draw(f32, "uniform", 0)
    assert drawn[2].tolist() == [0, 1, 2, 0] and drawn[3].tolist() == [1, 2, 0, 1]
    assert built["g_forward"].inputs.facts(f32)["table_bytes"] == 16


def test_a_process_started_for_a_narrowed_run_builds_what_it_selects(tmp_path, monkeypatch):
    """A compile child (cpu-8dev) or versus worker reads the project from its environment, --programs
    with it: the broken program the run left out stops it no more than it stops the run."""
    from invariants._errors import InvariantsError
    from invariants.catalog.downstream import load_project
    from invariants.catalog.project import Project

    project(tmp_path, "lib_child", program("mine", "lib_child:lookup") + program("broken", "lib_child:gone"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    handed = Project.from_env(Project((tmp_path / "specs",), False, tmp_path, "mine").environment())
    assert handed.selection == "mine"
    _, programs = load_project(handed)
    assert programs["mine"].fn is not programs["broken"].fn
    with pytest.raises(InvariantsError, match="broken: left out of this run by --programs"):
        programs["broken"].fn()
    with pytest.raises(InvariantsError, match="lib_child has no attribute 'gone'"):
        load_project(dataclasses.replace(handed, selection=None))
