"""The HLO text parser: real fixtures in every format, synthetic edge cases, errors, speed."""

from __future__ import annotations

import pathlib

import pytest

from invariants._errors import InvariantsError
from invariants.hlo.parse import READER, HloParseError, Shape, parse_module

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "hlo"
FIXTURES = sorted(DATA.glob("*.txt"))


def _load(name: str) -> str:
    return (DATA / name).read_text()


def test_fixtures_exist() -> None:
    names = {p.name for p in FIXTURES}
    assert {"tpu_seed_jit__take.txt", "tpu_seed_jit_gather.txt", "cpu_bwd_index.txt",
            "jax0430_cpu_bwd_index.txt", "tpu_v5e_bwd_vmap_index.txt"} <= names  # fmt: skip


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_every_fixture_parses_deterministically(path: pathlib.Path) -> None:
    text = path.read_text()
    first, second = parse_module(text, str(path)), parse_module(text, str(path))
    assert first == second
    assert first.entry.is_entry
    assert list(first.computations)[-1] == first.entry.name  # XLA prints ENTRY last
    for comp in first.computations.values():
        for instr in comp:
            assert all(op in comp for op in instr.operands)
            assert all(c in first.computations for c in instr.called)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_parse_speed(path: pathlib.Path, benchmark) -> None:
    """A benchmark, not a timed test: the per-module parse time goes to pytest-benchmark's report and
    ``--benchmark-json`` (the target is under 50 ms a module)."""
    text = path.read_text()
    # Five rounds are plenty for a figure in milliseconds; pytest-benchmark's default (a second of rounds
    # after calibration, per module) made this the slowest file of the unit tier on a loaded machine.
    module = benchmark.pedantic(parse_module, args=(text,), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info["bytes"] = len(text)
    assert module.entry.instructions


def test_current_cpu_format() -> None:
    m = parse_module(_load("cpu_bwd_index.txt"), "cpu_bwd_index.txt")
    assert m.name == "jit_bwd"
    assert list(m.computations) == [
        "fused_computation", "wrapped_broadcast_computation", "region_0.1", "wrapped_scatter_computation",
        "main.2",
    ]  # fmt: skip
    root = m.entry.root
    assert root.name == "wrapped_scatter" and root.is_root
    assert root.opcode == "fusion" and root.fusion_kind == "kLoop"
    assert root.operands == ("wrapped_broadcast", "select_bitcast_fusion", "bitcast.1")
    assert root.called == ("wrapped_scatter_computation",)
    assert root.backend_config_json == {"outer_dimension_partitions": ["2"]}
    assert str(root.shape) == "f32[8192,32]{1,0}"
    scatter = m.computations["wrapped_scatter_computation"].root
    assert scatter.opcode == "scatter"
    assert scatter.attrs["update_window_dims"] == "{1,2}"
    assert scatter.attrs["to_apply"] == "%region_0.1"
    assert scatter.called == ("region_0.1",)
    assert scatter.attrs["metadata"].startswith("{op_name=")
    const = m.entry["constant.3"]
    assert const.literal == "0" and const.operands == ()
    assert m.entry["x.1"].literal == "0"  # a parameter's number


def test_old_format_typed_operands() -> None:
    m = parse_module(_load("jax0430_cpu_bwd_index.txt"))
    loop = m.entry["while"]
    assert loop.operands == ("tuple.3",)
    assert loop.called == ("while_cond", "while_body")
    assert loop.shape.is_tuple and len(loop.shape.tuple_shapes) == 4
    body = m.computations["while_body"]
    assert body["get-tuple-element.12"].operands == ("param.1",)
    fused = m.computations["fused_computation"]
    assert fused.root.operands == ("param_0", "select.1", "bitcast.1", "constant.19")
    assert m.computations["fused_computation.1"]["constant.21"].literal == "{8191, 0}"
    assert m.entry["call"].called == ("parallel_broadcast.4",)


def test_tpu_seed_format() -> None:
    m = parse_module(_load("tpu_seed_jit__take.txt"))
    assert m.name == "jit__take" and m.entry.name == "main.40"
    copy_start = m.entry["copy-start"]
    assert [str(s) for s in copy_start.shape.tuple_shapes] == [
        "s8[16384]{0:T(1024)(128)(4,1)S(1)}", "s8[16384]{0:T(1024)(128)(4,1)}", "u32[]{:S(2)}",
    ]  # fmt: skip
    fused = m.computations["fused_computation"]
    assert fused["custom-call.1"].custom_call_target == "AssumeGatherIndicesInBound"
    assert fused["param_0.2"].shape.layout == "1,0:T(8,128)S(1)"
    config = m.entry["fusion"].backend_config_json
    assert config is not None and config["integer_config"] == {"integer": "0"}
    assert m.computations["fused_computation.1"]["constant.17"].literal == "nan"


def test_tpu_aot_format_comments_in_tuples() -> None:
    m = parse_module(_load("tpu_v5e_bwd_vmap_index.txt"))
    body = m.computations["wide.while_body.sunk"]
    assert len(body.root.operands) == 7
    assert body.root.operands[5] == "get-tuple-element.64"
    assert len(body["wide.param.2"].shape.tuple_shapes) == 7
    assert body["constant.45..sunk"].literal == "1"
    slice_start = m.entry["slice-start"]
    assert slice_start.shape.tuple_shapes[0].is_tuple  # ((f32[...]), f32[...], s32[])


def test_sharded_tpu_replica_groups_with_mesh_syntax() -> None:
    m = parse_module(_load("tpu_v5e_2x2_sharded_fwd_index.txt"))
    ar = m.entry["all-reduce"]
    assert ar.attrs["replica_groups"] == "mesh['axis_0'=4,'axis_1'=1] {'axis_0'}"
    assert ar.attrs["channel_id"] == "2"
    assert m.entry["param"].attrs["sharding"] == "{devices=[4,1]<=[4]}"


def test_shape_str_and_bytes() -> None:
    assert Shape("f32", (16384, 32), "1,0").byte_size() == 16384 * 32 * 4
    assert str(Shape("f32", (16384, 32), "1,0")) == "f32[16384,32]{1,0}"
    assert str(Shape("s32", ())) == "s32[]"
    assert Shape("pred", (3,)).byte_size() == 3
    assert Shape("s4", (3,)).byte_size() == 2
    assert Shape("bf16", (4,)).byte_size() == 8
    assert Shape("f64", (2,)).byte_size() == 16
    assert Shape("token", ()).byte_size() == 0
    tup = Shape(None, tuple_shapes=(Shape("f32", (2,)), Shape("s8", (3,), "0")))
    assert tup.byte_size() == 11
    assert str(tup) == "(f32[2], s8[3]{0})"


# A backslash-newline joins two lines of this string (keeps the source lines short).
SYNTHETIC = """\
HloModule synthetic, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

// a comment line
%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%branch0 (p: f32[4]) -> f32[4] {
  ROOT %p = f32[4]{0} parameter(0)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0), sharding={devices=[2,1]<=[2]}
  %c = f32[2,2]{1,0} constant({ { 1, 2 }, { 3, 4 } })
  %i = s32[] constant(0)
  %ar = f32[4]{0} all-reduce(%x), replica_groups={{0,1},{2,3}}, to_apply=%add, \
frontend_attributes={a="1",b="{"}
  %ag = f32[8]{0} all-gather(%ar), dimensions={0}, replica_groups=[2,4]<=[8]
  %cc = f32[4]{0} custom-call(%ar), custom_call_target="f", \
backend_config="{\\"k\\": \\"a \\\\\\"q\\\\\\" b\\"}"
  %cond = f32[4]{0} conditional(%i, %cc), branch_computations={%branch0}
  ROOT %big = f32[4]{0} add(%cond,
      %cc), metadata={op_name="multi, line" source_file="/*not a comment*/"}
}
"""


def test_synthetic_syntax() -> None:
    m = parse_module(SYNTHETIC, "synthetic.txt")
    e = m.entry
    assert e["x"].attrs["sharding"] == "{devices=[2,1]<=[2]}"
    assert e["c"].literal == "{ { 1, 2 }, { 3, 4 } }"
    assert e["ar"].attrs["replica_groups"] == "{{0,1},{2,3}}"
    assert e["ar"].attrs["frontend_attributes"] == '{a="1",b="{"}'
    assert e["ar"].called == ("add",)
    assert e["ag"].attrs["replica_groups"] == "[2,4]<=[8]"
    assert e["cc"].custom_call_target == "f"
    assert e["cc"].backend_config_json == {"k": 'a "q" b'}
    assert e["cond"].called == ("branch0",)
    assert e["cond"].operands == ("i", "cc")
    assert e.root.name == "big" and e.root.line == 22  # its first line
    assert e.root.operands == ("cond", "cc")
    assert e.root.attrs["metadata"] == '{op_name="multi, line" source_file="/*not a comment*/"}'


def _error(text: str) -> HloParseError:
    with pytest.raises(HloParseError) as info:
        parse_module(text, "bad.txt")
    err = info.value
    assert isinstance(err, InvariantsError)
    assert "\n" not in str(err)
    assert str(err).startswith(f"bad.txt:{err.line}: ")
    return err


GOOD_HEAD = "HloModule m\n\nENTRY %main (x: f32[4]) -> f32[4] {\n  %x = f32[4]{0} parameter(0)\n"


@pytest.mark.parametrize(
    ("body", "line", "words"),
    [
        ("  %y = f32[4]{0} negate(%x) garbage\n}\n", 5, "attributes"),
        ("  %y = f32[4]{0} negate(%nope)\n}\n", 5, "unknown operand"),
        ("  %y = f32[4]{0} fusion(%x), kind=kLoop, calls=%missing\n}\n", 5, "unknown computation"),
        ("  %y = q7[4]{0} negate(%x)\n}\n", 5, "element type"),
        ("  %y = f32[4]{0 negate(%x)\n}\n", 5, "opcode"),
        ('  %y = f32[4]{0} negate(%x), metadata={op_name="a"\n}\n', 5, "unbalanced"),
        ("  %y = f32[4]{0} negate(%x), oops\n}\n", 5, "key=value"),
        ("  this is not hlo\n}\n", 5, "instruction"),
        ("  %y = f32[4]{0} negate(%x)\n", 3, "not closed"),
        ("  %y = f32[4]{0} negate(%x)\n}\nHloModule second\n", 7, "second HloModule"),
        ("  %y = f32[4]{0} negate(%x)\n}\nstray text here\n", 7, "outside a computation"),
        ("  %x = f32[4]{0} negate(%x)\n}\n", 5, "duplicate"),
        ('  %y = f32[4]{0} negate(%x)\n}, shard_thread="x"\n', 6, "unknown computation attribute"),
    ],
)
def test_malformed_snippets(body: str, line: int, words: str) -> None:
    err = _error(GOOD_HEAD + body)
    assert err.line == line, str(err)
    assert words in err.message, str(err)
    assert err.source == "bad.txt"


def test_error_text_is_truncated() -> None:
    err = _error(GOOD_HEAD + "  %y = f32[4]{0} negate(%x) " + "z" * 300 + "\n}\n")
    assert len(str(err)) < 200 + len(READER)
    assert str(err).endswith("...")


def test_no_entry_and_no_module_line() -> None:
    no_entry = "HloModule m\n%c (x: f32[]) -> f32[] {\n  ROOT %x = f32[] parameter(0)\n}\n"
    assert "ENTRY" in _error(no_entry).message
    assert "HloModule" in _error("ENTRY %main {\n}\n").message
    assert "HloModule" in _error("").message
