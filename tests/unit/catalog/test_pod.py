"""Pod layouts: which targets compile them, the per-chip facts their byte invariants use, and those
invariants failing when a layout moves a whole table (the structure of FSDP's gather under the name of a
vocabulary-parallel lookup), on TPU pod HLO compiled ahead of time."""

from __future__ import annotations

import functools

import pytest

from invariants.catalog.programs import CATALOG, Layout
from invariants.measure.metrics import input_facts
from invariants.scope.placement import compiles
from invariants.scope.targets import _AOT_TARGETS
from invariants.specfile.reader import load_specs
from invariants.verdict.checks import Case, evaluate

TARGETS = {t.name: t for t in _AOT_TARGETS}
POD_PROGRAMS = sorted(n for n, p in CATALOG.items() if p.layout is not None and p.layout.pod)


def test_mesh_takes_the_rest_of_the_devices():
    layout = Layout((-1, 4), ("data", "model"), ("model", None), ("data",), pod=True)
    assert layout.devices == 4
    assert layout.mesh_for(16) == (4, 4) and layout.mesh_for(8) == (2, 4)
    assert layout.shards(layout.table, 16) == 4 and layout.shards(layout.indices, 8) == 2
    assert layout.shards((None, "model"), 16) == 1  # columns: the rows are whole on every chip
    with pytest.raises(Exception, match="does not divide 6 devices"):
        layout.mesh_for(6)


def test_pod_programs_compile_on_the_pod_targets_and_the_host_mesh_only():
    assert len(POD_PROGRAMS) == 9
    for name, target in TARGETS.items():
        compiled = {n for n, p in CATALOG.items() if compiles(target, p)}
        if name in ("tpu-v5e-4x4", "tpu-v5p-2x2x2"):
            assert compiled == set(POD_PROGRAMS), name  # lean: nothing else on a pod
        elif name == "cpu-8dev":
            assert set(POD_PROGRAMS) < compiled
        else:
            assert not compiled & set(POD_PROGRAMS), name
    assert TARGETS["tpu-v5e-4x4"].device_count == 16 and TARGETS["tpu-v5p-2x2x2"].device_count == 8


def test_per_chip_facts_follow_the_target():
    from invariants.catalog.programs import SEED

    def facts(program: str, target: str) -> dict[str, int]:
        return input_facts(SEED, CATALOG[program].layout, TARGETS[target].device_count)

    f = facts("vocab_parallel_take", "tpu-v5e-4x4")
    assert (f["chips"], f["table_shards"], f["batch_shards"]) == (16, 4, 4)
    assert facts("vocab_parallel_take", "cpu-8dev")["batch_shards"] == 2
    assert facts("fsdp_take", "tpu-v5p-2x2x2")["table_shards"] == 8
    assert input_facts(SEED)["chips"] == 1


@functools.cache
def _pod_structure(program: str, target: str):
    from invariants.compile.artifacts import compile_here
    from invariants.measure.measurement import measure

    return measure(compile_here(program, "f32", TARGETS[target]), TARGETS[target])


def _tpu_invariant(inv_id: str):
    return next(i for s in load_specs() if "tpu-*" in s.targets for i in s.invariants if i.id == inv_id)


@pytest.mark.skipif(TARGETS["tpu-v5e-4x4"].unavailable_reason() is not None, reason="libtpu not installed")
def test_vocab_parallel_bytes_invariant_fails_when_the_table_moves():
    inv = _tpu_invariant("vocab_parallel_moves_activations")
    good = Case(inv, "tpu-v5e-4x4", "f32", "vocab_parallel_take")
    verdict = evaluate(good, lambda key: _pod_structure(*key[::2]))
    assert verdict.holds and verdict.measured["collective_bytes"] == 512 * 1024  # 4096 rows x 128 B
    # A regression that all-gathers the whole table instead: FSDP's structure under the same name.
    bad = evaluate(good, lambda key: _pod_structure("fsdp_take", key[2]))
    assert not bad.holds and bad.measured["collective_bytes"] == 8192 * 32 * 4


@pytest.mark.skipif(TARGETS["tpu-v5p-2x2x2"].unavailable_reason() is not None, reason="libtpu not installed")
def test_gradient_bytes_invariant_fails_on_a_whole_table_all_reduce():
    inv = _tpu_invariant("grad_vocab_parallel_sums_table_shard")
    case = Case(inv, "tpu-v5p-2x2x2", "f32", "grad_vocab_parallel_take")
    assert evaluate(case, lambda key: _pod_structure(*key[::2])).holds  # 256 KiB: one table shard
    # FSDP's gradient (today an all-reduce of the whole 1 MiB table) under the same name.
    bad = evaluate(case, lambda key: _pod_structure("grad_fsdp_take", key[2]))
    assert not bad.holds and bad.measured["collective_bytes"] == 8192 * 32 * 4
    ratchet = _tpu_invariant("grad_fsdp_reduce_scatters").ratchet
    assert ratchet is not None and "whole table" in ratchet.reason
