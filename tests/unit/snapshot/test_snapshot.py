"""The snapshot form: blind to names and source lines, sensitive to what decides performance."""

from __future__ import annotations

import dataclasses
import difflib

import jax.numpy as jnp
import pytest

from invariants.catalog import programs as _programs
from invariants.catalog.targets import Target
from invariants.compile.artifacts import compile_here
from invariants.hlo.parse import parse_module
from invariants.hlo.structure import structure_of
from invariants.snapshot.render import render_summary

CPU = Target("cpu", "cpu", "runtime", "all")


def summary_of(monkeypatch, fn) -> str:
    program = dataclasses.replace(_programs.CATALOG["take"], name="probe", fn=fn)
    monkeypatch.setitem(_programs.CATALOG, "probe", program)
    compiled = compile_here("probe", "f32", CPU)
    return render_summary(compiled, structure_of(parse_module(compiled.hlo_text)), "doc")


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


def test_a_loop_reads_as_a_readable_diff(monkeypatch):
    before = summary_of(monkeypatch, a_lookup).splitlines()
    after = summary_of(monkeypatch, _programs.lax_map_loop).splitlines()
    diff = [d for d in difflib.unified_diff(before, after, lineterm="", n=0) if d[:1] in "+-"]
    added = "\n".join(d for d in diff if d.startswith("+"))
    removed = "\n".join(d for d in diff if d.startswith("-"))
    # kernel 1 (a kLoop gather fusion) -> while x16384 { dynamic-slice ... dynamic-update-slice }
    assert (
        "kernel 1: fusion kLoop {add, and, bitcast×3, broadcast×6, compare×3, constant×4, gather" in removed
    )
    assert "kernel 3: while ×16384 {" in added
    assert "dynamic-slice×2, dynamic-update-slice" in added
    assert "while loops 1 (×16384)" in added


@pytest.mark.parametrize(
    ("fn", "changed"),
    [
        (lambda W, x: jnp.take(W, x, axis=0, mode="clip"), "kernel 1: fusion kLoop"),  # fewer fix-up ops
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


def test_kernel_code_shows_as_one_line_under_each_kernel_with_code():
    """A code change behind byte-identical HLO is a snapshot diff: the CPU gradient's scatter kernel shows
    its vector width, and a copy of the compile whose code is scalar differs in that line only."""
    from invariants.catalog.targets import all_targets
    from invariants.compile.artifacts import compile_here

    compiled = compile_here("grad_take", "f32", all_targets()["cpu"])
    structure = structure_of(parse_module(compiled.hlo_text))
    text = render_summary(compiled, structure, "doc")
    lines = text.splitlines()
    scatter = next(i for i, line in enumerate(lines) if "fusion kLoop {scatter}" in line)
    assert lines[scatter + 1] == "      code llvm: no atomics; loops 2; vector 256 bits"
    scalar = {n: t.replace("<8 x float>", "float") for n, t in compiled.kernel_code.items()}
    other = render_summary(dataclasses.replace(compiled, kernel_code=scalar), structure, "doc")
    diff = [d for d in difflib.ndiff(lines, other.splitlines()) if d[:1] in "+-"]
    assert diff == [f"- {lines[scatter + 1]}", "+       code llvm: no atomics; loops 2; scalar"]
    no_code = render_summary(dataclasses.replace(compiled, kernel_code={}), structure, "doc")
    assert "code " not in no_code and no_code.count("\n") == text.count("\n") - 3
