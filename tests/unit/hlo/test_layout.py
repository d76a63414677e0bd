"""Layout facts: whether a gather's or scatter's window is contiguous in its operand's layout, and transposes.

Real dumps first (the vmapped segment sum on both sides of its change of scatter window, on every target;
every embedding fixture), then the definition's edges on small hand-written modules, then the errors.
"""

from __future__ import annotations

import dataclasses
import pathlib

import pytest

from invariants._errors import InvariantsError
from invariants.hlo.parse import parse_module
from invariants.hlo.structure import Structure, contiguous_window, structure_of, to_json
from invariants.verdict.checks import structural_signature

TESTS = pathlib.Path(__file__).resolve().parents[2]
DATA = TESTS / "data" / "hlo"
SEGMENT_SUMS = sorted(DATA.glob("*vmap_segment_sum.txt"))
# Every other real dump: the embedding fixtures, the dump folder's modules, the kernel fixtures' GPU and CPU
# modules. An embedding gathers or scatters whole rows: contiguous in every one of them.
EMBEDDINGS = sorted(
    {*DATA.glob("*.txt"), *DATA.glob("cpu_dump/*optimizations.txt"),
     *(TESTS / "data" / "kernels").rglob("*after_optimizations.txt")} - set(SEGMENT_SUMS)
)  # fmt: skip


def _structure(path: pathlib.Path | str, text: str | None = None) -> Structure:
    path = DATA / path if isinstance(path, str) else path
    return structure_of(parse_module(path.read_text() if text is None else text, path.name))


# --- the vmapped segment sum, recorded -------------------------------------------------------------------


def test_segment_sum_scatter_is_contiguous_then_strided_across_the_release_pair() -> None:
    before, after = (
        _structure("jax091_cpu_vmap_segment_sum.txt"),
        _structure("jax092_cpu_vmap_segment_sum.txt"),
    )
    # What the gate checked already cannot tell the two apart.
    assert before.scatters == after.scatters == 1 and before.while_loops == after.while_loops == ()
    (old,), (new,) = before.scatter_shapes, after.scatter_shapes
    # Before: segments major, each index writes one contiguous row of the batch; transposed afterwards.
    assert old.shape == "f32[2048,1024]{1,0}" and "scatter_dims_to_operand_dims={0}" in old.dimension_numbers
    assert not old.strided and before.strided_scatters == 0
    # After: the batch major, each index writes one element in every row, 2048 floats apart.
    assert new.shape == "f32[1024,2048]{1,0}" and "scatter_dims_to_operand_dims={1}" in new.dimension_numbers
    assert new.strided and after.strided_scatters == 1
    # The transpose after the scatter is a transpose fused with the copy that moves the data; the input's
    # transpose is there on both sides.
    assert before.transposes == 2 and after.transposes == 1
    assert before.kernel_list[-1].inner_opcodes == (("copy", 1), ("transpose", 1))
    assert before != after and structural_signature(before) != structural_signature(after)


def test_the_pinned_release_compiles_the_strided_form_on_cpu() -> None:
    s = _structure("cpu_vmap_segment_sum.txt")
    assert s.strided_scatters == 1 and s.transposes == 1
    assert s.scatter_shapes == _structure("jax092_cpu_vmap_segment_sum.txt").scatter_shapes


def test_gpu_segment_sum_scatter_is_strided_too() -> None:
    s = _structure("gpu_h100_vmap_segment_sum.txt")
    (scatter,) = s.scatter_shapes
    assert scatter.shape == "f32[1024,2048]{1,0}" and scatter.strided and s.strided_scatters == 1
    # The input is transposed into updates f32[4096,1024,1] by one transpose fusion, nothing after.
    assert s.transposes == 1 and s.kernel_list[-1].fusion_kind == "kInput"


def test_tpu_lays_the_scatter_out_column_major_and_copies_it_back() -> None:
    s = _structure("tpu_v5e_vmap_segment_sum.txt")
    (scatter,) = s.scatter_shapes
    # The result's minor dimension is the batch: a window of 1024 along dim 0 is contiguous in {0,1}.
    assert scatter.shape == "f32[1024,2048]{0,1:T(8,128)S(1)}" and not scatter.strided
    # Back to {1,0} by a layout-changing copy, no transpose instruction: transposes does not count it.
    root = s.kernel_list[-1]
    assert root.opcode == "copy" and root.shape == "f32[1024,2048]{1,0:T(8,128)}"
    assert s.transposes == 2  # both on the inputs (one of them rank 1)
    assert s.strided_scatters == 0


@pytest.mark.parametrize("path", EMBEDDINGS, ids=lambda p: str(p.relative_to(TESTS / "data")))
def test_every_embedding_fixture_reads_and_writes_contiguous_rows(path: pathlib.Path) -> None:
    s = _structure(path)
    assert s.strided_gathers == s.strided_scatters == 0
    assert [g.strided for g in (*s.gather_shapes, *s.scatter_shapes)] == [False] * (s.gathers + s.scatters)


def test_the_embedding_fixtures_do_gather_and_scatter() -> None:
    # Not vacuous: most of them have a gather or a scatter to judge, on every target.
    judged = [p for p in EMBEDDINGS if _structure(p).gather_shapes or _structure(p).scatter_shapes]
    assert len(judged) >= 30
    assert any("tpu" in p.name for p in judged) and any("gpu" in str(p) for p in judged)


def test_strided_is_part_of_equality_and_json() -> None:
    text = (DATA / "cpu_fwd_take.txt").read_text()
    row_major = "%param_0.1 = f32[8192,32]{1,0} parameter(0)"
    assert text.count(row_major) == 1
    real = _structure("cpu_fwd_take.txt")
    flipped = _structure("flipped", text.replace(row_major, row_major.replace("{1,0}", "{0,1}")))
    # The gather's result and dimension numbers are the same; what one row read costs is not.
    assert [(g.shape, g.dimension_numbers) for g in flipped.gather_shapes] == [
        (g.shape, g.dimension_numbers) for g in real.gather_shapes
    ]
    assert flipped.strided_gathers == 1 and real.strided_gathers == 0
    assert flipped != real and structural_signature(flipped) != structural_signature(real)
    js = to_json(flipped)
    assert js["gather_shapes"][0]["strided"] is True and js["strided_gathers"] == 1
    assert js["strided_scatters"] == 0 and js["transposes"] == flipped.transposes == 0
    assert set(js) == {f.name for f in dataclasses.fields(Structure)}


# --- the definition's edges ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dims", "window", "m2m", "contiguous"),
    [
        ((8, 4, 16), (3, 4, 16), (2, 1, 0), True),  # whole minor dims, then one partial
        ((8, 4, 16), (1, 1, 16), (2, 1, 0), True),
        ((8, 4, 16), (2, 2, 16), (2, 1, 0), False),  # a second partial dimension
        ((8, 16), (2, 8), (1, 0), False),  # a partial minor dim, >1 on the major one
        ((8, 16), (8, 1), (1, 0), False),
        ((8, 16), (8, 1), (0, 1), True),  # the same window, the other layout
        ((8, 1, 16), (2, 1, 16), (1, 2, 0), True),  # a dimension of size 1 is no gap
        ((8, 16), (0, 16), (0, 1), True),  # an empty window moves nothing
        ((), (), (), True),
    ],
)
def test_contiguous_window(
    dims: tuple[int, ...], window: tuple[int, ...], m2m: tuple[int, ...], contiguous: bool
) -> None:
    assert contiguous_window(dims, window, m2m) is contiguous


GATHER = """\
HloModule t, is_scheduled=true

ENTRY %main (w: OPERAND, i: INDICES) -> RESULT {
  %w = OPERAND parameter(0)
  %i = INDICES parameter(1)
  ROOT %g = RESULT gather(%w, %i), DIMS
}
"""

SCATTER = """\
HloModule t, is_scheduled=true

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (w: OPERAND, i: INDICES, u: UPDATES) -> OPERAND {
  %w = OPERAND parameter(0)
  %i = INDICES parameter(1)
  %u = UPDATES parameter(2)
  ROOT %sc = OPERAND scatter(%w, %i, %u), DIMS, to_apply=%add
}
"""

# Gathering rows of a rank-2 operand, and the shapes of its indices and result for 16 wide rows.
ROWS = "offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1"
I5, R16 = "s32[5,1]{1,0}", "f32[5,16]{1,0}"


def _gather(operand: str, dims: str, indices: str = I5, result: str = R16) -> Structure:
    text = GATHER.replace("OPERAND", operand).replace("INDICES", indices).replace("RESULT", result)
    return structure_of(parse_module(text.replace("DIMS", dims), "t.txt"))


def _scatter(operand: str, updates: str, dims: str, indices: str = I5) -> Structure:
    text = SCATTER.replace("OPERAND", operand).replace("INDICES", indices).replace("UPDATES", updates)
    return structure_of(parse_module(text.replace("DIMS", dims), "t.txt"))


def _strided(s: Structure) -> list[bool]:
    return [op.strided for op in (*s.gather_shapes, *s.scatter_shapes)]


@pytest.mark.parametrize(("layout", "strided"), [("1,0", False), ("0,1", True)])
def test_gather_of_rows_all_ones_but_the_minor_dim(layout: str, strided: bool) -> None:
    s = _gather(f"f32[8192,32]{{{layout}}}", f"{ROWS}, slice_sizes={{1,32}}", result="f32[5,32]{1,0}")
    assert _strided(s) == [strided] and s.strided_gathers == int(strided)


@pytest.mark.parametrize(("layout", "strided"), [("2,1,0", False), ("1,2,0", True)])
def test_gather_rank_3_all_ones_but_the_last_dim(layout: str, strided: bool) -> None:
    dims = "offset_dims={1}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=1"
    s = _gather(f"f32[8,4,16]{{{layout}}}", f"{dims}, slice_sizes={{1,1,16}}", indices="s32[5,2]{1,0}")
    assert _strided(s) == [strided]


def test_gather_window_of_whole_minor_dims_then_a_partial_one_is_contiguous() -> None:
    dims = "offset_dims={1,2,3}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1"
    s = _gather("f32[8,4,16]{2,1,0}", f"{dims}, slice_sizes={{3,4,16}}", result="f32[5,3,4,16]{3,2,1,0}")
    assert _strided(s) == [False]


def test_gather_window_wider_than_1_on_a_major_dim_with_the_minor_partial_is_strided() -> None:
    dims = "offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1"
    s = _gather("f32[8,16]{1,0}", f"{dims}, slice_sizes={{2,8}}", result="f32[5,2,8]{2,1,0}")
    assert _strided(s) == [True]


@pytest.mark.parametrize(("layout", "strided"), [("0,1", False), ("1,0", True)])
def test_gather_of_columns_in_a_column_major_operand(layout: str, strided: bool) -> None:
    dims = "offset_dims={1}, collapsed_slice_dims={1}, start_index_map={1}, index_vector_dim=1"
    assert _strided(_gather(f"f32[16,8]{{{layout}}}", f"{dims}, slice_sizes={{16,1}}")) == [strided]


@pytest.mark.parametrize(("layout", "strided"), [("2,1,0", False), ("0,1,2", True)])
def test_gather_with_a_batching_dim(layout: str, strided: bool) -> None:
    dims = (
        "offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, "
        "start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,16}"
    )
    s = _gather(f"f32[4,8,16]{{{layout}}}", dims, indices="s32[4,5,1]{2,1,0}", result="f32[4,5,16]{2,1,0}")
    assert _strided(s) == [strided]


def test_rank_1_operand_needs_no_layout() -> None:
    dims = "offset_dims={1}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1"
    s = _gather("f32[16]", f"{dims}, slice_sizes={{4}}", indices="s32[5,1]", result="f32[5,4]")
    assert _strided(s) == [False]


def _scatter_dims(window: str, inserted: str, to_operand: str, rest: str = "index_vector_dim=1") -> str:
    return (
        f"update_window_dims={{{window}}}, inserted_window_dims={{{inserted}}}, "
        f"scatter_dims_to_operand_dims={{{to_operand}}}, {rest}"
    )


# As XLA:CPU compiles the vmapped segment sum now: updates [indices, rows, 1] into the result's columns.
COLUMNS = _scatter_dims("1,2", "", "1")


@pytest.mark.parametrize(("layout", "strided"), [("1,0", True), ("0,1", False)])
def test_scatter_of_columns_as_the_segment_sum_compiles(layout: str, strided: bool) -> None:
    s = _scatter(f"f32[8,16]{{{layout}}}", "f32[5,8,1]{2,1,0}", COLUMNS)
    assert _strided(s) == [strided] and s.strided_scatters == int(strided)


@pytest.mark.parametrize(("updates", "strided"), [("f32[5,3,4,16]", False), ("f32[5,3,2,16]", True)])
def test_scatter_window_of_whole_minor_dims_then_a_partial_one(updates: str, strided: bool) -> None:
    s = _scatter("f32[8,4,16]{2,1,0}", updates + "{3,2,1,0}", _scatter_dims("1,2,3", "", "0"))
    assert _strided(s) == [strided]


@pytest.mark.parametrize(("layout", "strided"), [("1,0", False), ("0,1", True)])
def test_scatter_with_an_inserted_dim(layout: str, strided: bool) -> None:
    s = _scatter(f"f32[8,16]{{{layout}}}", "f32[5,16]{1,0}", _scatter_dims("1", "0", "0"))
    assert _strided(s) == [strided]


BATCHED = _scatter_dims(
    "2", "1", "1", "input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2"
)


@pytest.mark.parametrize(("layout", "strided"), [("2,1,0", False), ("0,1,2", True)])
def test_scatter_with_a_batching_dim(layout: str, strided: bool) -> None:
    s = _scatter(f"f32[4,8,16]{{{layout}}}", "f32[4,5,16]{2,1,0}", BATCHED, indices="s32[4,5,1]{2,1,0}")
    assert _strided(s) == [strided]


TWO_OPERANDS = f"""\
HloModule t, is_scheduled=true

%add2 (a: f32[], b: f32[], c: f32[], d: f32[]) -> (f32[], f32[]) {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %c = f32[] parameter(2)
  %d = f32[] parameter(3)
  %s0 = f32[] add(%a, %c)
  %s1 = f32[] add(%b, %d)
  ROOT %t = (f32[], f32[]) tuple(%s0, %s1)
}}

ENTRY %main (w0: f32[8,16], w1: f32[8,16], i: s32[5,1], u0: f32[5,8,1], u1: f32[5,8,1]) -> (f32[8,16], f32[8,16]) {{
  %w0 = f32[8,16]{{0,1}} parameter(0)
  %w1 = f32[8,16]{{LAYOUT}} parameter(1)
  %i = s32[5,1]{{1,0}} parameter(2)
  %u0 = f32[5,8,1]{{2,1,0}} parameter(3)
  %u1 = f32[5,8,1]{{2,1,0}} parameter(4)
  ROOT %sc = (f32[8,16]{{0,1}}, f32[8,16]{{LAYOUT}}) scatter(%w0, %w1, %i, %u0, %u1), {COLUMNS}, to_apply=%add2
}}
"""  # noqa: E501


@pytest.mark.parametrize(("layout", "strided"), [("0,1", False), ("1,0", True)])
def test_scatter_of_two_operands_is_strided_when_either_is(layout: str, strided: bool) -> None:
    assert _strided(structure_of(parse_module(TWO_OPERANDS.replace("LAYOUT", layout)))) == [strided]


# --- what is not understood ------------------------------------------------------------------------------


def _error(make, *args: str) -> str:
    with pytest.raises(InvariantsError) as err:
        make(*args)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_an_unreadable_attribute_is_one_line_naming_file_and_line() -> None:
    message = _error(_gather, "f32[8,16]{1,0}", f"{ROWS}, slice_sizes={{1,x}}")
    assert message == "t.txt:6: g: slice_sizes not understood: {1,x}"


def test_an_unreadable_attribute_in_a_real_dump_names_its_line() -> None:
    name = "jax092_cpu_vmap_segment_sum.txt"
    text = (DATA / name).read_text()
    line = next(n for n, ln in enumerate(text.splitlines(), 1) if " scatter(" in ln)
    message = _error(_structure, name, text.replace("update_window_dims={1,2}", "update_window_dims={1;2}"))
    assert message == f"{name}:{line}: scatter-add.0: update_window_dims not understood: {{1;2}}"


def test_a_rank_2_operand_without_a_layout_is_not_given_the_default_one() -> None:
    message = _error(_gather, "f32[8,16]", f"{ROWS}, slice_sizes={{1,16}}", "s32[5,1]", "f32[5,16]")
    assert message.startswith("t.txt:6: g: operand w f32[8,16] has no layout")


@pytest.mark.parametrize(
    ("operand", "sizes", "what"),
    [
        ("f32[8,16]{1,0:T(8,128)}", "", "slice_sizes missing"),
        ("f32[8,16]{1,1}", ", slice_sizes={1,16}", "f32[8,16]{1,1}: layout not understood"),
        ("f32[8,16]{1,0}", ", slice_sizes={2,16}", "slice_sizes={2,16} against collapsed and batching dims"),
        ("f32[8,16]{1,0}", ", slice_sizes={1,32}", "window [1, 32] does not fit operand w f32[8,16]{1,0}"),
        ("f32[8,16]{1,0}", ", slice_sizes={1}", "window [1] does not fit"),
        ("f32[8,16]{1,0}", ", slice_sizes={1,-16}", "slice_sizes not understood: {1,-16}"),
        ("f32[8,16]{1,0}", ", slice_sizes=[1,16]", "slice_sizes not understood: [1,16]"),
    ],
)
def test_what_the_gather_does_not_let_us_read(operand: str, sizes: str, what: str) -> None:
    message = _error(_gather, operand, ROWS + sizes)
    assert message.startswith("t.txt:6: g: ") and what in message


def test_a_gather_batching_dim_wider_than_1_is_not_understood() -> None:
    dims = (
        "offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, "
        "start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={2,1,16}"
    )
    message = _error(_gather, "f32[4,8,16]{2,1,0}", dims, "s32[4,5,1]{2,1,0}", "f32[4,5,16]{2,1,0}")
    assert message == "t.txt:6: g: slice_sizes={2,1,16} against collapsed and batching dims"


def test_a_scatter_whose_window_does_not_match_its_operand() -> None:
    # Without its input_batching_dims, the window has one operand dimension too many.
    dims = _scatter_dims("2", "1", "1", "index_vector_dim=2")
    message = _error(_scatter, "f32[4,8,16]{2,1,0}", "f32[4,5,16]{2,1,0}", dims, "s32[4,5,1]{2,1,0}")
    assert message.startswith("t.txt:13: sc: update_window_dims={2} against operand rank 3")
