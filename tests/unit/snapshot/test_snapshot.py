"""The snapshot form: blind to names and source lines, sensitive to what decides performance."""

from __future__ import annotations

import dataclasses
import difflib
from collections import Counter
from pathlib import Path

import jax.numpy as jnp
import pytest

from invariants.catalog import programs as _programs
from invariants.compile.artifacts import compile_here
from invariants.measure.measurement import measure
from invariants.records.compiled import Compiled
from invariants.scope.targets import Target
from invariants.snapshot.render import render_summary

CPU = Target("cpu", "cpu", "runtime", "all")


def summary_of(monkeypatch, fn) -> str:
    program = dataclasses.replace(_programs.CATALOG["take"], name="probe", fn=fn)
    monkeypatch.setitem(_programs.CATALOG, "probe", program)
    compiled = compile_here("probe", "f32", CPU)
    return render_summary(measure(compiled), "doc")


def a_lookup(W, x):
    return jnp.take(W, x, axis=0)


# Blank lines on purpose: the same program on other source lines and under another name.


def completely_different_name(table, ids):
    return jnp.take(table, ids, axis=0)


def test_stable_across_function_names_and_source_lines(monkeypatch):
    assert summary_of(monkeypatch, a_lookup) == summary_of(monkeypatch, completely_different_name)


def test_no_metadata_or_instruction_names(monkeypatch):
    text = summary_of(monkeypatch, a_lookup)
    for leak in ("metadata", "stack_frame", "op_name", "%", ".py", "a_lookup", "fused_computation"):
        assert leak not in text


def _changed(before: str, after: str) -> list[str]:
    """The changed lines of two renderings (``-``/``+``, no context)."""
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return [d for d in diff if d[:1] in "+-" and not d.startswith(("---", "+++"))]


def test_a_loop_reads_as_a_readable_diff(monkeypatch):
    before = summary_of(monkeypatch, a_lookup)
    after = summary_of(monkeypatch, _programs.lax_map_loop)
    diff = _changed(before, after)
    added = "\n".join(d for d in diff if d.startswith("+"))
    removed = "\n".join(d for d in diff if d.startswith("-"))
    # the kLoop gather fusion -> while x16384 { dynamic-slice ... dynamic-update-slice }
    assert "  fusion kLoop {add, and, bitcast×3, broadcast×6, compare×3, constant×4, gather" in removed
    assert "  while ×16384 {" in added
    assert "dynamic-slice×2, dynamic-update-slice" in added
    assert "while loops 1 (×16384)" in added
    # The summary is the first line that changes: the third line of the file, under its header.
    assert diff[0].startswith("-summary: ") and before.splitlines()[2].startswith("summary: ")


def _bag(tables: int, mode: str | None = None, dtype=jnp.float32, extra: bool = False):
    """An embedding bag over ``tables`` lookups of one table (a library's per-table loop), each gathered with
    ``mode`` (None: jnp.take's fill), in ``dtype``; ``extra``: one more kernel after it (a scale)."""

    def bag(W, x):
        W = W.astype(dtype)
        rows = [
            jnp.take(W, x + t, axis=0) if mode is None else W.at[x + t].get(mode=mode) for t in range(tables)
        ]
        out = sum(rows[1:], rows[0])
        return jnp.exp(out) * 3 if extra else out

    return bag


@pytest.mark.parametrize(
    ("name", "before", "after", "bound"),
    [
        # One kernel fewer per table: each table's bounds fix-up folds away.
        ("gather mode", _bag(8), _bag(8, "promise_in_bounds"), 6),
        ("added kernel", _bag(8), _bag(8, extra=True), 6),
        ("removed kernel", _bag(8, extra=True), _bag(8), 6),
        # The rows' dtype changes: the lines that name it, and a convert.
        ("changed dtype", _bag(8), _bag(8, dtype=jnp.bfloat16), 12),
    ],
)
def test_a_change_diffs_in_a_few_lines(monkeypatch, name, before, after, bound):
    """A change to a program changes the lines of what it changed: the kernels are a multiset by what they
    are (not numbered by position, equal ones one line with their count), and the jaxpr a multiset of its
    primitives, so a change made in each of eight tables' lookups is a change of one line each, and the
    kernels around it keep theirs."""
    a, b = summary_of(monkeypatch, before), summary_of(monkeypatch, after)
    diff = _changed(a, b)
    assert diff, name
    assert len(diff) <= bound, f"{name}: {len(diff)} changed lines\n" + "\n".join(diff)
    assert diff[0].startswith(("-summary: ", "-  ", "-kernels")), name


@pytest.mark.parametrize(
    ("fn", "changed"),
    [
        (lambda W, x: jnp.take(W, x, axis=0, mode="clip"), "  fusion kLoop"),  # fewer fix-up ops
        (lambda W, x: jnp.take(W.astype(jnp.bfloat16), x, axis=0), "f32->bf16"),  # a dtype change
        (lambda W, x: jnp.take(W.T, x, axis=1), "slice_sizes={32,1}"),  # other gather dimension numbers
    ],
)
def test_sensitive_to_fusion_contents_converts_and_dimension_numbers(monkeypatch, fn, changed):
    base = summary_of(monkeypatch, a_lookup)
    other = summary_of(monkeypatch, fn)
    assert base != other
    diff = "\n".join(difflib.unified_diff(base.splitlines(), other.splitlines(), lineterm="", n=0))
    assert changed in diff


_KERNELS = Path(__file__).parents[2] / "data" / "kernels"


def _recorded_a100(release: str) -> Compiled:
    """grad_take [f32] as jaxlib ``release`` compiled it for gpu-a100 (tests/data/kernels): HLO and PTX."""
    folder = _KERNELS / f"jaxlib-{release}" / "gpu-a100" / "grad_take.f32"
    (hlo,) = folder.glob("*after_optimizations.txt")
    code = {p.name: p.read_text() for p in sorted(folder.glob("*.ptx"))}
    return Compiled("grad_take", "f32", "gpu-a100", "", (), hlo.read_text(), {}, {}, 0.0, code)


def test_kernel_code_shows_as_one_line_under_each_kernel_with_code():
    """A code change behind byte-identical HLO is a snapshot diff: jaxlib 0.10.2's A100 scatter-add is a
    CAS retry loop where 0.10.1's was a native float atomic add, and the two snapshots differ in that
    kernel's code line only."""
    good, bad = _recorded_a100("0.10.1"), _recorded_a100("0.10.2")
    texts = [render_summary(measure(c), "doc") for c in (good, bad)]
    lines = texts[0].splitlines()
    scatter = next(i for i, line in enumerate(lines) if line.startswith("  fusion ") and "scatter" in line)
    assert lines[scatter + 1] == "      code ptx: atomics atom.add.f32×4; loops 0; scalar"
    diff = [d for d in difflib.ndiff(lines, texts[1].splitlines()) if d[:1] in "+-"]
    assert diff == [
        f"- {lines[scatter + 1]}",
        "+       code ptx: atomics atom.cas.b32×4 (CAS retry loops 4); loops 4; scalar",
    ]
    no_code = render_summary(measure(dataclasses.replace(good, kernel_code={})), "doc")
    assert "code " not in no_code
    assert no_code.count("\n") == texts[0].count("\n") - texts[0].count("    code ptx: ")


def test_a_cpu_snapshot_shows_kernel_code_only_where_it_is_the_same_on_every_host():
    """XLA:CPU tunes its LLVM IR to the compiling host (vector widths, remainder loops, stack slots), so a
    CPU snapshot shows a kernel's atomics alone, and no line for a kernel without any; the facts stay
    metrics. PTX, compiled for a named device description, shows everything."""
    from invariants.kernels import KernelFacts
    from invariants.kernels.program import snapshot_code_line
    from invariants.scope.targets import all_targets

    compiled = compile_here("grad_take", "f32", all_targets()["cpu"])
    assert compiled.kernel_code  # the compile kept its LLVM IR: the metrics read it
    text = render_summary(measure(compiled), "doc")
    assert "code llvm" not in text
    plain = KernelFacts("f", "llvm", "x.ll", loops=2, vector_width=256, local_bytes=512)
    assert snapshot_code_line(plain) is None
    atomic = dataclasses.replace(plain, atomics=(("cmpxchg i32", 1),), cas_atomics=1, cas_loops=1)
    assert snapshot_code_line(atomic) == "llvm: atomics cmpxchg i32 (CAS retry loops 1)"
    on_gpu = dataclasses.replace(plain, language="ptx")
    assert snapshot_code_line(on_gpu) == "ptx: no atomics; loops 2; vector 256 bits; local 512 bytes"


def test_a_strided_window_says_so_on_its_snapshot_line():
    """jax#39959 on CPU: 0.9.1 scatters each segment's row contiguously and transposes after; 0.9.2 writes
    it along the major dimension. The shapes differ too, but the word says what the diff means."""
    from invariants.measure.measurement import measure_text

    data = Path(__file__).parents[2] / "data" / "hlo"
    lines = {}
    for release in ("091", "092"):
        name = f"jax{release}_cpu_vmap_segment_sum.txt"
        text = render_summary(measure_text((data / name).read_text(), name))
        lines[release] = [line for line in text.splitlines() if line.startswith("  scatter -> ")]
    assert len(lines["091"]) == len(lines["092"]) == 1
    assert not lines["091"][0].endswith(" strided") and lines["092"][0].endswith("} strided")


_SIZES = (100_000, 60_000, 30_000, 12_000, 6_000, 3_000, 1_000, 500)


def _tables_bag(mode: str = "fill", dtype=jnp.float32, sort: bool = False):
    """A recommender's embedding bag: 8 tables of different sizes, each looked up by its own row of ids
    with gather ``mode``, summed into 128 bags by integer offsets (segment_sum); ``sort``: one more kernel
    after it (a sorted column beside the bags)."""
    import jax

    def bag(tables, ids, offsets):
        pooled = []
        for t, table in enumerate(tables):
            starts = jnp.zeros(ids.shape[1:], jnp.int32).at[offsets[t]].add(1)
            rows = table.astype(dtype).at[ids[t]].get(mode=mode)
            pooled.append(jax.ops.segment_sum(rows, jnp.cumsum(starts) - 1, num_segments=128))
        out = jnp.concatenate(pooled, axis=-1)
        return (out, jnp.sort(out[:, 0])) if sort else out

    bag.variant = (mode, jnp.dtype(dtype).name, sort)  # type: ignore[attr-defined]
    return bag


# Each variant's snapshot, compiled once in this process: the cases share their unchanged side.
_BAG_SNAPSHOTS: dict[tuple[str, str, bool], str] = {}


def _bag_snapshot(fn) -> str:
    import jax

    from invariants.testing import compile_for

    if fn.variant not in _BAG_SNAPSHOTS:
        tables = [jax.ShapeDtypeStruct((n, 64), jnp.float32) for n in _SIZES]
        ids, offsets = jax.ShapeDtypeStruct((8, 2048), jnp.int32), jax.ShapeDtypeStruct((8, 128), jnp.int32)
        _BAG_SNAPSHOTS[fn.variant] = compile_for(fn, tables, ids, offsets, target="cpu").snapshot
    return _BAG_SNAPSHOTS[fn.variant]


@pytest.mark.parametrize(
    ("name", "before", "after", "bound"),
    [
        # the bag's gather gains promise_in_bounds: each table's bounds check folds away (one kernel line,
        # its count ×8, and the jaxpr's mode)
        ("gather mode", _tables_bag(), _tables_bag("promise_in_bounds"), 6),
        ("added kernel", _tables_bag(), _tables_bag(sort=True), 16),
        ("removed kernel", _tables_bag(sort=True), _tables_bag(), 16),
        # every line that names the tables' rows' dtype, and the converts
        ("changed dtype", _tables_bag(), _tables_bag(dtype=jnp.bfloat16), 16),
    ],
)
def test_a_change_to_an_eight_table_bag_diffs_like_the_change(name, before, after, bound):
    """Per-table kernels (8 tables of different sizes: kernels XLA does not fuse into one) keep their lines
    when a change touches others: the kernels are named by what they are, equal ones one line with their
    count, sorted, never by position. Where the summary changes, it is the diff's first line."""
    a, b = _bag_snapshot(before), _bag_snapshot(after)
    diff = _changed(a, b)
    assert diff, name
    assert len(diff) <= bound, f"{name}: {len(diff)} changed lines\n" + "\n".join(diff)
    if any(d.startswith("+summary: ") for d in diff):
        assert diff[0].startswith("-summary: "), name


def _layers(extra: bool):
    """A three-layer model's training gradient: a token lookup, then per layer a lookup of its own table
    and a dense residual block. ``extra``: the one-line change, one more op in the second layer, which
    renumbers every instruction XLA emits after it."""
    import jax

    def loss(p, ids):
        h = jnp.take(p["tok"], ids, axis=0)
        for i, w in enumerate(p["w"]):
            h = jnp.tanh(h @ w) + h + jnp.take(p["bias"][i], ids, axis=0)
            if extra and i == 1:
                h = h * 1.5
        return jnp.mean(jax.nn.log_softmax(h @ p["tok"].T))

    return lambda p, ids: jax.grad(loss)(p, ids)


@pytest.mark.parametrize("target", ["cpu", "gpu-h100"])
def test_a_one_line_change_to_a_model_diffs_only_the_kernels_it_changed(target):
    """No line of a snapshot is there twice (equal kernels, gathers and scatters are one line with their
    count, whatever code each kernel kept: XLA:GPU compiles equal fusions once), and a change to one layer
    changes the lines of the kernels whose count it changed, each once, and the jaxpr's: nothing follows
    XLA's instance numbering or its emission order."""
    import jax

    from invariants.snapshot.diff import changed_sections, structure_part
    from invariants.snapshot.render import kernel_line
    from invariants.testing import compile_for

    S, f32 = jax.ShapeDtypeStruct, jnp.float32
    params = {"tok": S((512, 32), f32), "bias": [S((512, 32), f32)] * 3, "w": [S((32, 32), f32)] * 3}
    ids = S((64,), jnp.int32)
    before, after = (compile_for(_layers(x), params, ids, target=target, name="lm") for x in (False, True))
    a, b = before.snapshot, after.snapshot
    for text in (a, b):
        lines = [ln for ln in structure_part(text).splitlines() if not ln.lstrip().startswith("code ")]
        assert len(lines) == len(set(lines)), text
    assert "  gather -> f32[64,1,32]{2,1,0} " in a and " ×" in a.split("gathers:")[1].split("scatters:")[0]

    counts = [Counter(s.structure.kernel_list) for s in (before, after)]
    # The premise: kernels the change left alone are named otherwise (instance numbers, emission order).
    kept = counts[0] & counts[1]
    names = [{(k, k.name) for k in s.structure.kernel_list if k in kept} for s in (before, after)]
    assert names[0] != names[1]
    expected = set()
    for k in counts[0].keys() | counts[1].keys():
        old, new = counts[0][k], counts[1][k]
        if old != new:
            expected |= {f"{sign}  {kernel_line(k)}" + (f" ×{n}" if n > 1 else "") for sign, n in
                         (("-", old), ("+", new)) if n}  # fmt: skip
    assert expected, "the change changed no kernel"
    diff = [d for d in _changed(structure_part(a), structure_part(b)) if not d[1:].startswith("summary: ")]
    assert {d for d in diff if not d[1:].lstrip().startswith("code ")} == expected, "\n".join(diff)
    # A code line moves only with a kernel line that changed.
    assert sum(d[1:].lstrip().startswith("code ") for d in diff) <= len(expected), "\n".join(diff)
    assert [title for title, _ in changed_sections(a, b)] == ["jaxpr"]
