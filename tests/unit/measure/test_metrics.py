"""The metric registry: one list of names, meanings and types, read by the spec loader, hlo-stats, the
report and docs/reference.md (tests/unit/test_reference.py)."""

from __future__ import annotations

import pathlib

import pytest

from invariants.hlo.parse import parse_module
from invariants.hlo.structure import structure_of
from invariants.measure.measurement import measure_text
from invariants.measure.metrics import METRICS, input_facts, names
from invariants.report import markdown as _report

ROOT = pathlib.Path(__file__).parents[3]
DATA = ROOT / "tests" / "data" / "hlo"


def _structure(name: str):
    path = DATA / name
    return structure_of(parse_module(path.read_text(), str(path)))


def test_every_metric_has_a_meaning_a_type_and_a_value() -> None:
    s = _structure("tpu_seed_jit__take.txt")
    for m in METRICS.values():
        assert m.meaning and m.type in ("number", "set", "structure"), m.name
        if m.source == "structure" and m.of is not None:
            value = m.of(s)
            if m.type == "number":
                assert value is None or isinstance(value, int), m.name
            else:
                assert isinstance(value, tuple) and all(isinstance(v, str) for v in value), m.name
    assert METRICS["fusions"].of(s) == METRICS["entry_fusions"].of(s) == 4
    assert METRICS["custom_call_targets"].of(s) == ("AssumeGatherIndicesInBound",)


def test_structure_record_holds_each_numeric_metric_once() -> None:
    """What a structure item records: every numeric metric a compile gives, in registry order, aliases left
    out (one name per quantity), null where the target gives no value."""
    text = (DATA / "tpu_v5e_bwd_vmap_index.txt").read_text()
    measured = measure_text(text, "tpu_v5e_bwd_vmap_index.txt")
    record = measured.numbers()
    compiled_sources = ("structure", "compiler", "kernel", "compile")
    numeric = [n for n, m in METRICS.items() if m.source in compiled_sources and m.type == "number"]
    assert list(record) == [n for n in numeric if METRICS[n].alias_of is None and not METRICS[n].call_only]
    assert record["max_trip_count"] == 16384 and "fusions" not in record and "opcodes" not in record
    assert record["cas_atomics"] is None and record["compile_seconds"] is None  # no code, no compile timed
    assert measured.metrics["fusions"] == measured.metrics["entry_fusions"]  # an alias reads the same


def test_input_facts() -> None:
    from invariants.catalog.programs import get_config

    facts = input_facts(get_config("f32"))
    assert facts == {"table_bytes": 8192 * 32 * 4, "lookups": 16384, "row_bytes": 32 * 4, "vocab": 8192,
                     "chips": 1, "table_shards": 1, "batch_shards": 1}  # fmt: skip
    assert list(facts) == names("input")


def test_report_compares_the_registry_metrics() -> None:
    # What a structure record holds: the structural metrics, the compiler's predictions, the kernel code's.
    text = (DATA / "tpu_seed_jit__take.txt").read_text()
    recorded = measure_text(text, "seed", no_code="no code").numbers()
    assert set(_report._COMPARED) == set(recorded) - {"compile_seconds"}


@pytest.mark.parametrize("name", sorted(METRICS))
def test_every_name_is_accepted_by_the_spec_loader(name: str, tmp_path: pathlib.Path) -> None:
    from invariants.specfile.reader import load_spec

    m = METRICS[name]
    if m.source == "throughput":
        text = f"{name}(naive) / {name}(take) <= 1.1"
    elif m.type == "structure":
        text = f"{name}(naive) == {name}(take)"
    elif m.type == "set":
        text = f"'x' not in {name}"
    else:
        text = f"{name} >= 0"
    programs = "" if m.call_only else 'programs = ["naive"]\n'
    path = tmp_path / "s.toml"
    path.write_text(f'[spec]\ntargets = ["cpu"]\n[[invariant]]\nid = "x"\n{programs}assert = "{text}"\n')
    assert load_spec(path).invariants[0].text == text
