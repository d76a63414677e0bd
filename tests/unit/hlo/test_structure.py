"""Structural metrics on the recorded fixtures: the required results, and the definitions on small cases."""

from __future__ import annotations

import json
import pathlib

import pytest

from invariants.hlo.parse import parse_module
from invariants.hlo.structure import Structure, structure_of, to_json
from invariants.measure.metrics import METRICS

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "hlo"


def _structure(name: str) -> Structure:
    return structure_of(parse_module((DATA / name).read_text(), name))


def test_seed_take() -> None:
    s = _structure("tpu_seed_jit__take.txt")
    assert s.entry_fusions == 4
    assert s.fusion_kinds == {"kCustom": 1, "kLoop": 3}
    assert s.custom_call_targets == ("AssumeGatherIndicesInBound",)
    assert s.while_loops == ()
    assert s.gathers == 1
    # copy, convert, 4 fusions, copy-start (copy-done is free), final copy
    assert s.kernels == 8 and s.dynamic_kernel_launches == 8
    assert s.converts == ("s8->s32", "s8->s32")


def test_seed_gather() -> None:
    s = _structure("tpu_seed_jit_gather.txt")
    assert s.entry_fusions == 2
    assert s.fusion_kinds == {"kCustom": 1, "kLoop": 1}
    assert s.custom_call_targets == ("GatherScatterIndicesBitpacked",)
    assert s.gather_shapes[0].dimension_numbers.startswith("offset_dims={1}, collapsed_slice_dims={0}")
    assert "start_index_map={0,1}" in s.gather_shapes[0].dimension_numbers
    assert s.root_shape == "f32[16384,1,32]{0,2,1:T(8,128)}"


def test_jax0430_cpu_backward_is_a_loop_of_dynamic_update_slices() -> None:
    s = _structure("jax0430_cpu_bwd_index.txt")
    assert len(s.while_loops) == 1
    loop = s.while_loops[0]
    assert loop.trip_count == 16384  # from the condition: no known_trip_count on CPU
    assert dict(loop.body_opcodes)["dynamic-update-slice"] == 1
    assert s.scatters == 0 and s.dynamic_update_slices == 1
    assert loop.body_kernels == 6  # copy, 3 fusions, add; condition: compare
    assert s.dynamic_kernel_launches == 3 + 16384 * 5 + 16385 * 1
    # jax 0.4 wraps CPU kernels in call -> parallel_*: call bodies are inlined into the kernel list.
    assert [k.opcode for k in s.kernel_list] == ["broadcast", "fusion", "copy", "while"]


def test_jax0430_cpu_forward_inlines_parallel_fusion_call() -> None:
    s = _structure("jax0430_cpu_fwd_index.txt")
    assert s.kernels == 1 and s.entry_fusions == 1


def test_current_cpu_backward_is_a_scatter() -> None:
    s = _structure("cpu_bwd_index.txt")
    assert s.scatters == 1 and s.while_loops == ()
    assert s.entry_fusions == 3 and s.kernels == 3 and s.dynamic_kernel_launches == 3
    (scatter,) = s.scatter_shapes
    assert scatter.shape == "f32[8192,32]{1,0}"
    assert scatter.dimension_numbers == (
        "update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, "
        "index_vector_dim=1"
    )


@pytest.mark.parametrize("name", ["cpu_fwd_index.txt", "cpu_fwd_take.txt"])
def test_current_cpu_forward_is_one_gather_fusion(name: str) -> None:
    s = _structure(name)
    assert s.entry_fusions == 1 and s.kernels == 1 and s.gathers == 1
    (kernel,) = s.kernel_list
    assert kernel.fusion_kind == "kLoop" and ("gather", 1) in kernel.inner_opcodes


def test_cpu_take_has_more_selects_than_naive() -> None:
    naive = dict(_structure("cpu_fwd_index.txt").kernel_list[0].inner_opcodes)
    take = dict(_structure("cpu_fwd_take.txt").kernel_list[0].inner_opcodes)
    assert take["select"] > naive["select"]


def test_tpu_backward_of_vmap_index_loops_16384_times() -> None:
    s = _structure("tpu_v5e_bwd_vmap_index.txt")
    assert len(s.while_loops) == 1
    (loop,) = s.while_loops
    assert loop.trip_count == 16384  # not in backend_config: derived from the condition and init tuple
    assert s.dynamic_kernel_launches is not None and s.dynamic_kernel_launches >= 16384
    assert s.dynamic_update_slices == 1
    assert METRICS["max_trip_count"].of(s) == 16384
    while_kernel = next(k for k in s.kernel_list if k.opcode == "while")
    assert while_kernel.trip_count == 16384
    assert [k.opcode for k in while_kernel.condition] == ["compare"]
    assert "dynamic-update-slice" in [k.opcode for k in while_kernel.body]


def test_tpu_forward_take() -> None:
    s = _structure("tpu_v5e_fwd_take.txt")
    assert s.entry_fusions == 4 and s.fusion_kinds == {"kCustom": 1, "kLoop": 3}
    assert s.custom_call_targets == ("AssumeGatherIndicesInBound",)


def test_tpu_sharded_has_an_all_reduce() -> None:
    s = _structure("tpu_v5e_2x2_sharded_fwd_index.txt")
    (ar,) = s.collectives
    assert ar.opcode == "all-reduce"
    assert ar.bytes == 16384 * 32 * 4
    assert ar.replica_groups == "mesh['axis_0'=4,'axis_1'=1] {'axis_0'}"
    assert METRICS["all_reduces"].of(s) == 1 and METRICS["collective_bytes"].of(s) == ar.bytes
    assert "partition-id" not in [k.opcode for k in s.kernel_list]  # free by definition


@pytest.mark.parametrize("path", sorted(DATA.glob("*.txt")), ids=lambda p: p.stem)
def test_to_json_round_trips_and_is_deterministic(path: pathlib.Path) -> None:
    text = path.read_text()
    a, b = to_json(structure_of(parse_module(text))), to_json(structure_of(parse_module(text)))
    assert json.loads(json.dumps(a)) == a == b


def _module(entry_body: str, extra: str = "") -> Structure:
    text = f"HloModule t\n\n{extra}\nENTRY %main (p: s32[]) -> s32[] {{\n{entry_body}}}\n"
    return structure_of(parse_module(text, "t.txt"))


LOOP = """\
%body (bp: (s32[], f32[4])) -> (s32[], f32[4]) {
  %bp = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%bp), index=0
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %v = f32[4]{0} get-tuple-element(%bp), index=1
  %n = f32[4]{0} negate(%v)
  ROOT %t = (s32[], f32[4]{0}) tuple(%next, %n)
}

%cond (cp: (s32[], f32[4])) -> pred[] {
  %cp = (s32[], f32[4]{0}) parameter(0)
  %ci = s32[] get-tuple-element(%cp), index=0
  %limit = s32[] constant(LIMIT)
  ROOT %lt = pred[] compare(COMPARE), direction=DIR
}
"""


def _loop_module(limit: str = "10", compare: str = "%ci, %limit", direction: str = "LT", start: str = "0",
                 config: str = "") -> Structure:  # fmt: skip
    extra = LOOP.replace("LIMIT", limit).replace("COMPARE", compare).replace("DIR", direction)
    entry = f"""\
  %p = s32[] parameter(0)
  %z = s32[] constant({start})
  %zc = s32[] copy(%z)
  %v0 = f32[4]{{0}} broadcast(%p), dimensions={{}}
  %init = (s32[], f32[4]{{0}}) tuple(%zc, %v0)
  %w = (s32[], f32[4]{{0}}) while(%init), condition=%cond, body=%body{config}
  ROOT %r = s32[] get-tuple-element(%w), index=0
"""
    return _module(entry, extra)


def test_trip_count_from_condition() -> None:
    s = _loop_module()
    assert s.while_loops[0].trip_count == 10
    # copy, broadcast + loop (body: add, negate; condition: compare)
    assert s.kernels == 2 + 3
    assert s.dynamic_kernel_launches == 2 + 10 * 2 + 11 * 1


def test_trip_count_variants() -> None:
    assert _loop_module(compare="%limit, %ci", direction="GT").while_loops[0].trip_count == 10
    assert _loop_module(direction="LE").while_loops[0].trip_count == 11
    assert _loop_module(start="3").while_loops[0].trip_count == 7
    assert _loop_module(direction="NE").while_loops[0].trip_count is None
    unknown = _loop_module(direction="NE")
    assert unknown.dynamic_kernel_launches is None and METRICS["max_trip_count"].of(unknown) is None
    known = _loop_module(direction="NE", config=', backend_config={"known_trip_count":{"n":"7"}}')
    assert known.while_loops[0].trip_count == 7


def test_a_counter_index_that_is_not_a_number_gives_no_trip_count() -> None:
    for where in (
        "%i = s32[] get-tuple-element(%bp), index=0",
        "%ci = s32[] get-tuple-element(%cp), index=0",
    ):
        hlo = LOOP.replace("LIMIT", "10").replace("COMPARE", "%ci, %limit").replace("DIR", "LT")
        hlo = hlo.replace(where, where.replace("index=0", "index=abc"))
        entry = """\
  %p = s32[] parameter(0)
  %z = s32[] constant(0)
  %v0 = f32[4]{0} broadcast(%p), dimensions={}
  %init = (s32[], f32[4]{0}) tuple(%z, %v0)
  %w = (s32[], f32[4]{0}) while(%init), condition=%cond, body=%body
  ROOT %r = s32[] get-tuple-element(%w), index=0
"""
        assert _module(entry, hlo).while_loops[0].trip_count is None, where


def test_call_and_conditional_are_inlined() -> None:
    extra = """\
%callee (a: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  ROOT %n = s32[] negate(%a)
}

%b0 (x0: s32[]) -> s32[] {
  %x0 = s32[] parameter(0)
  %m = s32[] multiply(%x0, %x0)
  ROOT %n0 = s32[] negate(%m)
}

%b1 (x1: s32[]) -> s32[] {
  ROOT %x1 = s32[] parameter(0)
}
"""
    entry = """\
  %p = s32[] parameter(0)
  %c = s32[] call(%p), to_apply=%callee
  %idx = s32[] constant(1)
  %pid = u32[] partition-id()
  ROOT %cd = s32[] conditional(%idx, %c, %c), branch_computations={%b0, %b1}
"""
    s = _module(entry, extra)
    assert [k.opcode for k in s.kernel_list] == ["negate", "conditional"]
    assert s.kernels == 1 + 2
    assert s.dynamic_kernel_launches == 1 + 2  # the largest branch


@pytest.mark.parametrize("cores", ["1", "4"])
def test_a_host_with_other_cores_compiles_the_same_structure_and_signature(cores: str) -> None:
    """The same optimized HLO compiled on a host with other cores differs
    only in XLA:CPU's ``outer_dimension_partitions`` (two here, one core: none). ``structure(a) ==
    structure(b)`` and the spec's structural signature (what that relation compares) both leave it out,
    as the snapshot does."""
    from invariants.verdict.checks import structural_signature

    text = (DATA / "cpu_fwd_take.txt").read_text()
    two = '"outer_dimension_partitions":["2"]'
    assert two in text
    other = text.replace(two, "" if cores == "1" else f'"outer_dimension_partitions":["{cores}"]')
    here, there = structure_of(parse_module(text, "here")), structure_of(parse_module(other, "there"))
    assert here == there
    assert structural_signature(here) == structural_signature(there)
    assert hash(structural_signature(here)) == hash(structural_signature(there))


def _typed_body(dtype: str, tiling: str) -> str:
    return (
        f"  %p = s32[] parameter(0)\n"
        f"  %b = {dtype}[8,128]{{1,0{tiling}}} broadcast(%p), dimensions={{}}\n"
        f"  %n = {dtype}[8,128]{{1,0{tiling}}} negate(%b)\n"
        "  ROOT %r = s32[] copy(%p)\n"
    )


def _typed(dtype: str, tiling: str) -> Structure:
    return _module(_typed_body(dtype, tiling))


def test_modulo_element_type_leaves_out_the_type_and_the_tiling_that_follows_from_it() -> None:
    from invariants.hlo.structure import modulo_element_type
    from invariants.verdict.checks import structural_signature

    f32, bf16 = _typed("f32", ":T(8,128)"), _typed("bf16", ":T(8,128)(2,1)")
    assert structural_signature(f32) != structural_signature(bf16)
    assert structural_signature(modulo_element_type(f32)) == structural_signature(modulo_element_type(bf16))
    assert [k.shape for k in modulo_element_type(f32).kernel_list] == ["T[8,128]{1,0}"] * 2 + ["T[]"]
    # the layout's order is no element type's: a transposed layout still differs
    transposed = _module(_typed_body("bf16", "").replace("{1,0}", "{0,1}"))
    assert structural_signature(modulo_element_type(transposed)) != structural_signature(
        modulo_element_type(f32)
    )
