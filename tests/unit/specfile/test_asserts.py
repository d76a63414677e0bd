"""The assert language's typed form: what each assert lowers to, and that the tree means what Python's
expression syntax says it means (the language borrows that syntax, so a reader expects its arithmetic)."""

from __future__ import annotations

import ast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invariants._errors import InvariantsError
from invariants.measure.metrics import METRICS
from invariants.specfile.asserts import (
    Arithmetic,
    Assertion,
    Negated,
    NoValue,
    Number,
    Quoted,
    Read,
    Scaled,
    TimedRatio,
    TimedSide,
    paired,
    parse,
)

PROGRAMS = ("naive", "take", "grad_take")


def _parse(text: str) -> Assertion:
    return parse(text, InvariantsError, PROGRAMS)


def _error(text: str) -> str:
    with pytest.raises(InvariantsError) as err:
        _parse(text)
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("text", "left", "op", "right", "kind", "programs"),
    [
        ("kernels <= 2", Read("kernels"), "<=", Number(2), "absolute", ()),
        ("-while_loops >= -1", Negated(Read("while_loops")), ">=", Negated(Number(1)), "absolute", ()),
        ("'sort' not in custom_call_targets", Quoted("sort"), "not in", Read("custom_call_targets"),
         "absolute", ()),
        ("kernels(naive) <= 2 * kernels(take)", Read("kernels", "naive"), "<=",
         Arithmetic("*", Number(2), Read("kernels", "take")), "relational", ("naive", "take")),
        ("structure(naive) == structure(take)", Read("structure", "naive"), "==", Read("structure", "take"),
         "relational", ("naive", "take")),
        ("time(grad_take[zipf]) / time(grad_take) <= 1.25",
         Arithmetic("/", Read("time", "grad_take", "zipf"), Read("time", "grad_take")), "<=", Number(1.25),
         "throughput", ("grad_take",)),
        ("(kernels + fusions) / table_bytes < 1", Arithmetic("/", Arithmetic("+", Read("kernels"),
         Read("fusions")), Read("table_bytes")), "<", Number(1), "absolute", ()),
    ],
)  # fmt: skip
def test_each_assert_lowers_to_its_tree(text, left, op, right, kind, programs):
    a = _parse(text)
    assert (a.left, a.op, a.right, a.kind, a.programs, a.text) == (left, op, right, kind, programs, text)


def test_terms_keep_the_words_they_were_written_in():
    a = _parse("kernels / (while_loops - 1) <= 4")
    assert isinstance(a.left, Arithmetic)
    assert (a.left.text, a.left.right.text) == ("kernels / (while_loops - 1)", "while_loops - 1")


def test_the_throughput_and_scaled_shapes_are_read_once_at_parse():
    timed = _parse("time(grad_take[equal]) / time(take) <= 1.1").timed
    assert timed == TimedRatio(TimedSide("grad_take", "equal"), TimedSide("take"), 1.1)
    assert (timed.a.label, timed.b.label) == ("grad_take[equal]", "take")
    assert _parse("kernels(naive) <= kernels(take) * 3").scaled == Scaled("kernels", "naive", "take", 3.0)
    assert _parse("fusions(naive) == fusions(take)").scaled == Scaled("fusions", "naive", "take", 1.0)
    # Not scaled: two metrics, a factor on the left, a set, or a bare metric.
    for text in ("kernels(naive) <= fusions(take)", "2 * kernels(naive) <= kernels(take)",
                 "structure(naive) == structure(take)", "kernels <= 2 * kernels"):  # fmt: skip
        assert _parse(text).scaled is None, text
    assert _parse("kernels(naive) <= 2").timed is None


def test_a_relation_across_configurations_names_each_side_s():
    a = _parse("structure(take[bf16]) == structure(take[f32])")
    assert (a.kind, a.programs, a.pinned) == ("relational", ("take",), (("take", "bf16"), ("take", "f32")))
    assert [r.label for r in a.reads()] == ["structure(take[bf16])", "structure(take[f32])"]
    scaled = _parse("kernels(naive[bf16]) <= 2 * kernels(take['f32-2d'])")
    assert scaled.pinned == (("naive", "bf16"), ("take", "f32-2d"))
    assert scaled.scaled == Scaled("kernels", "naive[bf16]", "take[f32-2d]", 2.0)
    assert _parse("kernels(naive[bf16-llm]) <= 2").pinned == (("naive", "bf16-llm"),)
    assert _parse("kernels(naive) <= kernels(take)").pinned == ()


def test_and_joins_comparisons_each_of_which_must_hold():
    a = _parse("scatters == 1 and gathers == 1")
    assert (a.kind, len(a.clauses), a.scaled) == ("absolute", 2, None)
    assert [r.label for r in a.reads()] == ["scatters", "gathers"]
    assert a.holds(lambda r: 1) and not a.holds(lambda r: {"scatters": 1, "gathers": 2}[r.name])
    relation = _parse("structure(naive) == structure(take) and kernels(naive) <= kernels(take)")
    assert (relation.kind, relation.programs) == ("relational", ("naive", "take"))
    assert "a time ratio stands alone" in _error("time(naive) / time(take) <= 1.1 and kernels(take) <= 1")
    assert "'or' is not part of the language" in _error("kernels <= 1 or gathers <= 1")
    assert "mixes program calls with a bare metric 'gathers'" in _error("kernels(take) <= 1 and gathers <= 1")


def test_catalog_names_the_catalogs_program_in_either_namespace():
    """``catalog:take`` is the catalog's take: its own name where the project shadows it, else ``take``."""
    shadowed = parse("structure(take) == structure(catalog:take)", InvariantsError, ("take", "catalog:take"))
    assert shadowed.programs == ("take", "catalog:take") and shadowed.text.endswith("structure(catalog:take)")
    assert _parse("kernels(catalog:naive[bf16]) <= kernels(take[f32])").pinned == (
        ("naive", "bf16"),
        ("take", "f32"),
    )
    assert "unknown program 'catalog:nope'" in _error("kernels(catalog:nope) <= 1")


def test_paired_pins_each_side_to_its_programs_configuration():
    a = paired(_parse("structure(naive) == structure(take) and kernels(naive) <= kernels(take)"),
               {"naive": "bf16", "take": "f32"})  # fmt: skip
    assert a.pinned == (("naive", "bf16"), ("take", "f32"))
    assert [r.label for r in a.reads()] == ["structure(naive[bf16])", "structure(take[f32])",
                                            "kernels(naive[bf16])", "kernels(take[f32])"]  # fmt: skip


def test_reads_lists_every_metric_read_left_to_right():
    a = _parse("kernels(naive) + fusions(naive) <= 2 * kernels(take) - -fusions(take)")
    labels = ["kernels(naive)", "fusions(naive)", "kernels(take)", "fusions(take)"]
    assert [r.label for r in a.reads()] == labels


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 <= 2", "assert '1 <= 2' reads no metric: it is the same on every program"),
        ("'a' in 'abc'", "assert \"'a' in 'abc'\": 'in' takes a quoted name on its left"),
        ("kernels <= 2 / (1 - 1)", "divides by zero ('2 / (1 - 1)'): it can never be computed"),
        ("kernels % 2 == 0", "'kernels % 2' is not understood"),
        ("kernels <= True", "'True' is not understood"),
        ("time(take) / time(take) <= 1.1", "times take against itself: it could never fail"),
        ("time(take) <= 1.1 * time(naive)", "a throughput assert reads 'time(A) / time(B) <= NUMBER'"),
        ("kernels(take) <= kernels", "mixes program calls with a bare metric 'kernels'"),
        ("kernels(take[zipf]) <= 2", "only time() takes an index distribution"),
        ("kernels(take[f33]) <= 2", "unknown configuration 'f33' in 'take[f33]' (did you mean 'f32'?)"),
        (
            "structure(take[bf16]) == structure(naive)",
            "names the configuration of some sides but not of naive: name every side's (naive[bf16]) or none",
        ),
        ("-custom_call_targets == 1", "arithmetic on a set ('-custom_call_targets')"),
        ("kernels is 2", "assert 'kernels is 2': compare with one of ==, !=, <, <=, >, >=, in, not in"),
        ("kernels is not 2", "compare with one of ==, !="),
        ("(kernels + fusions) * 'a' == 1", "arithmetic on a string (''a'')"),
    ],
)
def test_shapes_the_language_lacks_are_one_line(text, expected):
    assert expected in _error(text)


_NUMBER_METRICS = sorted(m.name for m in METRICS.values() if m.type == "number" and not m.call_only)[:6]
_OPS = ("==", "!=", "<", "<=", ">", ">=")


def _expressions() -> st.SearchStrategy[str]:
    """Arithmetic over bare number metrics and literals, parenthesised as Python would need."""
    leaves = st.one_of(
        st.sampled_from(_NUMBER_METRICS),
        st.integers(min_value=0, max_value=50).map(str),
        st.sampled_from(["0.5", "1e308", "2.5"]),
    )
    # A power's exponent: a small integer or a metric (0 to 4 here), as a bound is written (2 ** 20); a
    # fractional power of a negative number is complex in Python, never a bound.
    exponents = st.one_of(st.integers(min_value=0, max_value=3).map(str), st.sampled_from(_NUMBER_METRICS))
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from("+-*/"), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(inner, exponents).map(lambda t: f"({t[0]} ** {t[1]})"),
            inner.map(lambda e: f"-{e}"),
        ),
        max_leaves=8,
    )


# 3/5 of the Hypothesis profile's examples (tests/conftest.py): 300 with HYPOTHESIS_PROFILE=full.
@settings(
    max_examples=max(1, settings.default.max_examples * 3 // 5),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    left=_expressions(),
    op=st.sampled_from(_OPS),
    right=_expressions(),
    values=st.lists(st.integers(min_value=0, max_value=4), min_size=len(_NUMBER_METRICS),
                    max_size=len(_NUMBER_METRICS)),
)  # fmt: skip
def test_the_tree_computes_what_python_computes(left, op, right, values):
    """Any assert the language takes holds exactly where Python's evaluation of the same text is true, and
    has no value exactly where Python's arithmetic fails (a division by a metric that is 0 here)."""
    text = f"{left} {op} {right}"
    bound = dict(zip(_NUMBER_METRICS, values, strict=True))
    try:
        assertion = _parse(text)
    except InvariantsError as err:
        # Refused at parse: only for reasons the parse can see (no metric read, a constant zero divisor,
        # a constant that overflows), always in one line.
        message = str(err)
        assert "\n" not in message
        seen = ("reads no metric", "divides by zero", "cannot be computed")
        assert any(w in message for w in seen), message
        return
    try:
        expected = eval(text, {"__builtins__": {}}, bound)  # the oracle: Python's own reading
    except (ZeroDivisionError, OverflowError):
        with pytest.raises(NoValue):
            assertion.holds(lambda r: bound[r.name])
        return
    assert assertion.holds(lambda r: bound[r.name]) == expected
    # Each side keeps its words as Python writes them back, built from its parts.
    written = [ast.unparse(ast.parse(side, mode="eval").body) for side in (left, right)]
    assert [assertion.left.text, assertion.right.text] == written
    assert {r.name for r in assertion.reads()} <= set(_NUMBER_METRICS)


def test_a_power_is_a_bound_as_it_is_written():
    """``2 ** 20`` (a mebibyte) is exact; a power binds as Python binds it, and keeps its words."""
    assertion = _parse("temp_bytes <= 64 * 2 ** 20")
    assert assertion.right.text == "64 * 2 ** 20"
    assert assertion.holds(lambda r: 64 * 1048576) and not assertion.holds(lambda r: 64 * 1048576 + 1)
    assert _parse("kernels <= -2 ** 2 + 9").holds(lambda r: 5)  # -(2 ** 2) + 9
    assert not _parse("kernels <= -2 ** 2 + 9").holds(lambda r: 6)
    with pytest.raises(NoValue, match="cannot be computed"):
        _parse("kernels <= 10.0 ** 400").holds(lambda r: 1)
