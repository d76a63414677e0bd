"""The compiler's predictions: estimated_cycles on real TPU HLO (hand-counted), memory and cost analyses,
scaled relations, and the rule that a metric a target does not provide fails its item in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from invariants._errors import InvariantsError
from invariants.hlo.cost import Missing, cycle_estimate
from invariants.hlo.parse import parse_module
from invariants.hlo.structure import structure_of
from invariants.measure.measurement import measure_text
from invariants.plugin.outcomes import judge
from invariants.specfile.reader import load_spec
from invariants.verdict.checks import Case, evaluate

DATA = Path(__file__).parents[2] / "data" / "hlo"


def structure(name: str, text: str | None = None):
    return structure_of(parse_module(text if text is not None else (DATA / name).read_text(), name))


# Hand count of tpu_v5e_bwd_vmap_index.txt (grad of vmap(W[i]), v5e, libtpu 0.0.42.1), from its
# backend_configs. Entry kernels with an estimate: compare_select_fusion 1977, pad_clamp_fusion 3191,
# copy.3 300, copy.2 400, broadcast_in_dim.5 272, copy.4 5932. The while body (16384 trips): fusion.3 1832,
# slice.13 1826, constant_dynamic-slice_fusion.4 1832, and_reduce_fusion.2 1827, broadcast_select_fusion.2
# 1833. The condition's compare carries none.
HAND_ENTRY = 1977 + 3191 + 300 + 400 + 272 + 5932  # 12,072
HAND_BODY = 1832 + 1826 + 1832 + 1827 + 1833  # 9,150 per trip
HAND_TOTAL = HAND_ENTRY + 16384 * HAND_BODY  # 149,925,672
# Without an estimate: entry copy.6, slice-start x4, custom-call ConcatBitcast, copy-start (7); per trip
# copy.8, add.15, dynamic-update-slice.3 (3); the condition's compare, 16385 times.
HAND_UNESTIMATED = 7 + 16384 * 3 + 16385


def test_hand_count_of_the_looped_tpu_backward():
    assert HAND_TOTAL == 149_925_672
    estimate = cycle_estimate(structure("tpu_v5e_bwd_vmap_index.txt"))
    assert (estimate.cycles, estimate.unestimated, estimate.reason) == (HAND_TOTAL, HAND_UNESTIMATED, None)


@pytest.mark.parametrize(
    ("name", "cycles", "unestimated"),
    [
        # jit__take: copy 5932, convert.0 1857, fusion.2 1969, fusion.3 1881, fusion.1 38214, copy.1 11864;
        # none on copy-start and the kCustom gather.
        ("tpu_seed_jit__take.txt", 5932 + 1857 + 1969 + 1881 + 38214 + 11864, 2),
        # jit_gather: convert 2013, fusion.3 2733, copy.2 5932, copy.3 11864; none on the kCustom gather.
        ("tpu_seed_jit_gather.txt", 2013 + 2733 + 5932 + 11864, 1),
        ("tpu_v5e_fwd_take.txt", 60125, 2),
        ("tpu_v5e_2x2_sharded_fwd_index.txt", 56638, 5),
    ],
)
def test_seed_and_fixture_estimates(name, cycles, unestimated):
    estimate = cycle_estimate(structure(name))
    assert (estimate.cycles, estimate.unestimated) == (cycles, unestimated)


def test_no_estimate_outside_tpu_says_why():
    estimate = cycle_estimate(structure("cpu_fwd_index.txt"))
    assert estimate.cycles is None and "only the TPU compiler" in (estimate.reason or "")


def test_unknown_trip_count_gives_no_estimate():
    text = (DATA / "tpu_v5e_bwd_vmap_index.txt").read_text().replace("direction=LT", "direction=NE")
    estimate = cycle_estimate(structure("mutated", text))
    assert estimate.cycles is None and "trip count is unknown" in (estimate.reason or "")


def test_an_estimate_that_is_not_a_number_is_an_error():
    text = (
        (DATA / "tpu_v5e_fwd_take.txt")
        .read_text()
        .replace('"estimated_cycles":"11864"', '"estimated_cycles":"x"', 1)
    )
    # Named by the source it was read from, as the parser names its errors.
    with pytest.raises(InvariantsError, match=r"^mutated:\d+: .*: estimated_cycles not understood: x$"):
        structure("mutated", text)


def test_estimates_are_not_part_of_structural_equality():
    # structure(a) == structure(b) compares what runs; a libtpu patch that moves an estimate changes nothing.
    real = structure("tpu_v5e_fwd_take.txt")
    moved = structure(
        "moved",
        (DATA / "tpu_v5e_fwd_take.txt")
        .read_text()
        .replace('"estimated_cycles":"11864"', '"estimated_cycles":"9"'),
    )
    assert real.kernel_list == moved.kernel_list
    assert cycle_estimate(real).cycles != cycle_estimate(moved).cycles


def test_cost_metrics_from_analyses_and_missing_ones():
    got = measured(
        "cpu_fwd_index.txt",
        cost={"flops": 65536.0, "bytes accessed": 9.5e7},
        memory={"temp_size_in_bytes": 0},
    ).metrics
    assert got["flops"] == 65536 and got["bytes_accessed"] == 95_000_000 and got["temp_bytes"] == 0
    assert isinstance(got["argument_bytes"], Missing) and "memory_analysis()" in got["argument_bytes"].reason
    assert isinstance(got["estimated_cycles"], Missing)


# -- items -----------------------------------------------------------------------------------------------


def spec(tmp_path: Path, body: str, targets: str = "tpu-*"):
    path = tmp_path / "s.toml"
    path.write_text(f'[spec]\ntargets = ["{targets}"]\n\n' + body)
    return load_spec(path)


def measured(name: str, text: str | None = None, cost=None, memory=None):
    """The fixture ``name`` (or ``text``) measured, with the analyses a compile of it would carry."""
    text = text if text is not None else (DATA / name).read_text()
    return measure_text(
        text, name, cost=cost, memory={"temp_size_in_bytes": 387072} if memory is None else memory
    )


TPU_BWD_VMAP = measured("tpu_v5e_bwd_vmap_index.txt")
TPU_FWD_TAKE = measured("tpu_v5e_fwd_take.txt")
CPU_FWD = measured("cpu_fwd_index.txt")


def test_scaled_relation_reports_its_ratio_and_the_ratchet_xfails_with_it(tmp_path):
    (inv,) = spec(
        tmp_path,
        '[[invariant]]\nid = "c"\n'
        'assert = "estimated_cycles(grad_vmap_naive) <= 1.1 * estimated_cycles(grad_vmap_take)"\n'
        'ratchet = { reason = "a loop per row", issue = "https://example/1" }\n',
    ).invariants
    assert inv.kind == "relational" and inv.programs == ("grad_vmap_naive", "grad_vmap_take")
    # Stand-ins: the real looped TPU backward against a loop-free TPU module.
    structures = {"grad_vmap_naive": TPU_BWD_VMAP, "grad_vmap_take": TPU_FWD_TAKE}
    verdict = evaluate(Case(inv, "tpu-v5e", "f32", None), lambda k: structures[k[0]])
    assert not verdict.holds
    assert verdict.ratio == pytest.approx(149_925_672 / 60125)
    with pytest.raises(
        pytest.xfail.Exception, match=r"predicted ratio grad_vmap_naive/grad_vmap_take = 2,494 \(bound 1.1\)"
    ):
        judge(inv, verdict.holds, verdict.holds, "tpu-v5e", verdict.describe(inv), lambda: "unused")
    # The other way round it holds: the relation can pass as well as fail.
    swapped = {"grad_vmap_naive": TPU_FWD_TAKE, "grad_vmap_take": TPU_BWD_VMAP}
    assert evaluate(Case(inv, "tpu-v5e", "f32", None), lambda k: swapped[k[0]]).holds


def test_a_metric_the_target_does_not_provide_fails_in_one_line(tmp_path):
    (inv,) = spec(
        tmp_path,
        '[[invariant]]\nid = "c"\nassert = "estimated_cycles(naive) <= 1.1 * estimated_cycles(take)"\n',
        targets="cpu",
    ).invariants
    structures = {"naive": CPU_FWD, "take": CPU_FWD}
    verdict = evaluate(Case(inv, "cpu", "f32", None), lambda k: structures[k[0]])
    assert not verdict.holds
    assert verdict.detail == (
        "estimated_cycles of naive on cpu: "
        "no kernel carries estimated_cycles (only the TPU compiler writes them)"
    )
    assert "\n" not in verdict.describe(inv)


def test_an_unknown_trip_count_fails_the_item(tmp_path):
    (inv,) = spec(tmp_path, '[[invariant]]\nid = "c"\nprograms = ["grad_vmap_naive"]\n'
                            'assert = "estimated_cycles <= 1000000000"\n').invariants  # fmt: skip
    looped = measured(
        "m", (DATA / "tpu_v5e_bwd_vmap_index.txt").read_text().replace("direction=LT", "direction=NE")
    )
    verdict = evaluate(Case(inv, "tpu-v5e", "f32", "grad_vmap_naive"), lambda k: looped)
    assert not verdict.holds and "trip count is unknown" in verdict.detail
    # With the trip count known the same item passes: the failure above is the unknown count, nothing else.
    assert evaluate(Case(inv, "tpu-v5e", "f32", "grad_vmap_naive"), lambda k: TPU_BWD_VMAP).holds


def test_memory_bound_against_the_table(tmp_path):
    (inv,) = spec(tmp_path, '[[invariant]]\nid = "m"\nprograms = ["grad_vmap_naive"]\n'
                            'assert = "temp_bytes <= 2 * table_bytes"\n').invariants  # fmt: skip
    c = Case(inv, "tpu-v5e", "f32", "grad_vmap_naive")
    assert evaluate(c, lambda k: TPU_BWD_VMAP).holds
    big = measured("tpu_v5e_bwd_vmap_index.txt", memory={"temp_size_in_bytes": 3 * 8192 * 32 * 4})
    verdict = evaluate(c, lambda k: big)
    assert not verdict.holds and verdict.measured["temp_bytes"] == 3 * 8192 * 32 * 4


def test_spec_rejects_a_misspelt_cost_metric(tmp_path):
    with pytest.raises(InvariantsError, match=r"unknown metric 'temp_byte' \(did you mean 'temp_bytes'\?\)"):
        spec(tmp_path, '[[invariant]]\nid = "m"\nprograms = ["naive"]\nassert = "temp_byte <= 1"\n')


def test_predicted_ratio_for_a_time_twin():
    # What a ratio item (invariants.plugin.timed) records beside a ratio timed on a TPU host.
    from invariants.hlo.cost import predicted_ratio

    looped, plain = TPU_BWD_VMAP.metrics, TPU_FWD_TAKE.metrics
    assert predicted_ratio(looped, plain) == pytest.approx(149_925_672 / 60125)
    # Off TPU there is no estimate, so no predicted ratio (the report shows a dash).
    assert predicted_ratio(CPU_FWD.metrics, plain) is None


# -- what each memory metric measures, on the compiles themselves ----------------------------------------

MIB = 2**20


def _keeps_two_intermediates(x):
    """Two 16 MiB intermediates of a 16 MiB argument, both live until the product reads them."""
    import jax.numpy as jnp

    a, b = jnp.sin(x), jnp.cos(x)
    return (a * 2.0).sum() + (b * 3.0).sum() + (a @ b.T).sum()


def _compile_keeping_16_mib(target: str):
    import jax
    import jax.numpy as jnp

    from invariants.scope.targets import all_targets
    from invariants.testing import compile_for

    if (why := all_targets()[target].unavailable_reason()) is not None:
        pytest.skip(why)
    return compile_for(
        _keeps_two_intermediates, jax.ShapeDtypeStruct((2048, 2048), jnp.float32), target=target
    )


def test_peak_bytes_on_tpu_counts_the_intermediates_temp_bytes_leaves_out(tmp_path):
    """On tpu-v5e XLA places both intermediates in on-chip memory (VMEM), which temp_size_in_bytes does not
    count: temp_bytes reads far less than one of them. peak_bytes counts the argument and both, so a TPU
    memory bound on it no longer holds whatever the program keeps."""
    s = _compile_keeping_16_mib("tpu-v5e")
    assert s.metric("temp_bytes") < 16 * MIB
    assert s.metric("peak_bytes") >= s.metric("argument_bytes") + 2 * 16 * MIB
    body = '[[invariant]]\nid = "m"\nprograms = ["take"]\nassert = "peak_bytes <= 16 * 2 ** 20"\n'
    (inv,) = spec(tmp_path, body, targets="tpu-v5e").invariants
    verdict = evaluate(Case(inv, "tpu-v5e", "f32", "take"), lambda k: s.measured)
    assert not verdict.holds and verdict.measured["peak_bytes"] >= 48 * MIB


def test_peak_bytes_on_the_cpu_fails_in_one_line_saying_why(tmp_path):
    """XLA:CPU's peak_memory_in_bytes leaves its temporaries out (it reads about the argument alone for
    this program, whose temp_bytes is 32 MiB): there the metric is unavailable, and an item on it fails
    saying so rather than holding on the argument's size."""
    s = _compile_keeping_16_mib("cpu")
    assert s.compiled.memory["peak_memory_in_bytes"] < s.metric("temp_bytes")  # what XLA:CPU says
    body = '[[invariant]]\nid = "m"\nprograms = ["take"]\nassert = "peak_bytes <= 2 ** 40"\n'
    (inv,) = spec(tmp_path, body, targets="cpu").invariants
    verdict = evaluate(Case(inv, "cpu", "f32", "take"), lambda k: s.measured)
    assert not verdict.holds
    assert verdict.detail == (
        "peak_bytes of take on cpu: XLA:CPU's peak_memory_in_bytes counts arguments and outputs, not "
        "temporaries: bound temp_bytes on the CPU"
    )


def test_a_record_without_the_peak_says_how_to_get_one():
    """A record whose memory analysis lacks the peak (a compile cached before the field was read) is a
    Missing naming --no-cache, not a peak of 0."""
    got = measured("tpu_v5e_fwd_take.txt", memory={"temp_size_in_bytes": 0}).metrics
    assert isinstance(got["peak_bytes"], Missing) and "--no-cache" in got["peak_bytes"].reason
