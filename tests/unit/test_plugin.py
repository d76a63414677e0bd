"""The pytest plugin's own logic, in-process: what --programs and --targets select, and the results
entries it collects. (Whole gate runs in child processes are in tests/integration/.)"""

from __future__ import annotations

import pytest

from invariants import _results
from invariants._errors import InvariantsError
from invariants._plugin import select_program_option
from invariants._programs import CATALOG
from invariants._targets import all_targets, select_targets


def test_programs_take_names_patterns_kinds_and_tags():
    assert select_program_option(None) == list(CATALOG)
    assert select_program_option("take,naive") == [n for n in CATALOG if n in ("naive", "take")]
    vmap = select_program_option("vmap_*")
    assert vmap and all(name.startswith("vmap_") for name in vmap)
    assert select_program_option("kind:backward") == [n for n, p in CATALOG.items() if p.kind == "backward"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "--programs: empty selection"),
        (" , ", "--programs: empty selection"),
        ("nave", "--programs: unknown program 'nave' (did you mean 'naive'"),
        ("take,zzz_*", "--programs: unknown program 'zzz_*'"),
    ],
)
def test_programs_refuses_what_selects_nothing(value: str, message: str):
    with pytest.raises(InvariantsError) as err:
        select_program_option(value)
    assert str(err.value).startswith(message)


def test_targets_empty_is_an_error_not_all():
    assert [t.name for t in select_targets(None)] == list(all_targets())
    for value in ("", " ", ","):
        with pytest.raises(InvariantsError, match=r"^--targets: empty selection"):
            select_targets(value)


def test_results_entries_come_from_records_only():
    name, value = _results.record("correctness", id="c", program="take", config="f32", distribution="u",
                                  problem=None)  # fmt: skip
    entry = _results.entry(name, value, "passed", "t::x")
    assert entry == {**value, "outcome": "passed", "nodeid": "t::x"}
    assert _results.entry("selfcheck", {"table": "..."}, "passed", "t::y") is None
    with pytest.raises(InvariantsError, match="a ratio record needs"):
        _results.record("ratio", id="r")
