"""Every kind of invariant is shown failing on a mutated module or program (and passing on the real one).

Structures come from real recorded HLO (tests/data/hlo); a "mutation" is handing the check the structure
of a different, broken program under the name of the one it guards.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from invariants._checks import Case, CorrectnessCase, evaluate, run_correctness, unmet_condition
from invariants._hlo import parse_module
from invariants._outcomes import judge
from invariants._spec import load_spec
from invariants._structure import structure_of

DATA = Path(__file__).parents[1] / "data" / "hlo"


def structure(name: str):
    return structure_of(parse_module((DATA / name).read_text(), name))


CPU_BWD = structure("cpu_bwd_index.txt")  # jax 0.10.2: one scatter, no loop
OLD_CPU_BWD = structure("jax0430_cpu_bwd_index.txt")  # jax 0.4.30: a 16384-trip loop
TPU_BWD_VMAP = structure("tpu_v5e_bwd_vmap_index.txt")  # the seed's pathology, alive today
CPU_FWD_NAIVE = structure("cpu_fwd_index.txt")
CPU_FWD_TAKE = structure("cpu_fwd_take.txt")


def spec(tmp_path: Path, body: str):
    path = tmp_path / "s.toml"
    path.write_text('[spec]\ntargets = ["cpu"]\n\n' + body)
    return load_spec(path)


def case(inv, program=None, config="f32"):
    return Case(inv, "cpu", config, program)


def test_absolute_holds_then_fails_on_the_old_loop(tmp_path):
    (inv,) = spec(tmp_path, '[[invariant]]\nid = "no_while"\nprograms = ["grad_naive"]\n'
                            'assert = "while_loops == 0"\n').invariants  # fmt: skip
    assert evaluate(case(inv, "grad_naive"), lambda key: CPU_BWD).holds
    verdict = evaluate(case(inv, "grad_naive"), lambda key: OLD_CPU_BWD)
    assert not verdict.holds
    assert verdict.describe(inv) == "assert while_loops == 0: measured while_loops = 1"


def test_absolute_bounded_launches_fails_on_tpu_loop(tmp_path):
    (inv,) = spec(tmp_path, '[[invariant]]\nid = "b"\nprograms = ["grad_take"]\n'
                            'assert = "dynamic_kernel_launches <= 8"\n').invariants  # fmt: skip
    verdict = evaluate(case(inv, "grad_take"), lambda key: TPU_BWD_VMAP)
    assert not verdict.holds and verdict.measured["dynamic_kernel_launches"] >= 16384


def test_absolute_with_input_facts(tmp_path):
    (inv,) = spec(tmp_path, '[[invariant]]\nid = "b"\nprograms = ["naive"]\n'
                            'assert = "collective_bytes < table_bytes"\n').invariants  # fmt: skip
    verdict = evaluate(case(inv, "naive"), lambda key: CPU_FWD_NAIVE)
    assert verdict.holds and verdict.measured == {"collective_bytes": 0, "table_bytes": 8192 * 32 * 4}


def test_custom_call_membership(tmp_path):
    (inv,) = spec(
        tmp_path,
        '[[invariant]]\nid = "c"\nprograms = ["vmap_naive"]\n'
        "assert = \"'GatherScatterIndicesBitpacked' in custom_call_targets\"\n",
    ).invariants
    seed_gather = structure("tpu_seed_jit_gather.txt")
    assert evaluate(case(inv, "vmap_naive"), lambda key: seed_gather).holds
    assert not evaluate(case(inv, "vmap_naive"), lambda key: structure("tpu_seed_jit__take.txt")).holds


def test_relational_fails_when_naive_gets_more_kernels(tmp_path):
    (inv,) = spec(
        tmp_path, '[[invariant]]\nid = "r"\nassert = "kernels(naive) <= kernels(take)"\n'
    ).invariants
    assert inv.kind == "relational" and inv.programs == ("naive", "take")
    real = {"naive": CPU_FWD_NAIVE, "take": CPU_FWD_TAKE}
    assert evaluate(case(inv), lambda key: real[key[0]]).holds
    mutated = {"naive": OLD_CPU_BWD, "take": CPU_FWD_TAKE}  # naive now compiles to the 9-kernel loop
    verdict = evaluate(case(inv), lambda key: mutated[key[0]])
    assert not verdict.holds and verdict.measured == {"kernels(naive)": 9, "kernels(take)": 1}


def test_structural_equality_fails_on_any_kernel_change(tmp_path):
    (inv,) = spec(tmp_path, '[[invariant]]\nid = "e"\n'
                            'assert = "structure(eqx_embedding) == structure(vmap_naive)"\n'
                  ).invariants  # fmt: skip
    assert evaluate(case(inv), lambda key: CPU_FWD_NAIVE).holds
    mutated = {"eqx_embedding": CPU_FWD_TAKE, "vmap_naive": CPU_FWD_NAIVE}
    assert not evaluate(case(inv), lambda key: mutated[key[0]]).holds


def test_unknown_trip_count_fails_rather_than_passing(tmp_path):
    (inv,) = spec(tmp_path, '[[invariant]]\nid = "b"\nprograms = ["grad_take"]\n'
                            'assert = "dynamic_kernel_launches <= 8"\n').invariants  # fmt: skip
    unknown = dataclasses.replace(TPU_BWD_VMAP, dynamic_kernel_launches=None)
    verdict = evaluate(case(inv, "grad_take"), lambda key: unknown)
    assert not verdict.holds and "unknown" in verdict.detail


def test_version_scoped_invariant_is_skipped_when_condition_fails(tmp_path):
    body = '[[invariant]]\nid = "v"\nprograms = ["naive"]\nassert = "kernels <= 1"\nwhen = "jax < 0.4"\n'
    (inv,) = spec(tmp_path, body).invariants
    assert unmet_condition(inv) is not None and "installed jax" in unmet_condition(inv)
    (inv,) = spec(tmp_path, body.replace("jax < 0.4", "jax >= 0.4")).invariants
    assert unmet_condition(inv) is None
    # Scoped in, it decides like any other invariant, so it can fail.
    assert not evaluate(case(inv, "naive"), lambda key: OLD_CPU_BWD).holds


def test_ratchet_xfails_while_bad_and_fails_loudly_once_fixed(tmp_path):
    (inv,) = spec(
        tmp_path,
        '[[invariant]]\nid = "r"\nprograms = ["grad_vmap_naive"]\n'
        'assert = "while_loops == 0"\n'
        'ratchet = { reason = "loop today", issue = "https://example/1" }\n',
    ).invariants
    bad = evaluate(case(inv, "grad_vmap_naive"), lambda key: TPU_BWD_VMAP)
    with pytest.raises(pytest.xfail.Exception, match="loop today"):
        judge(inv, bad.holds, bad.holds, "cpu", bad.describe(inv), lambda: "unused")
    fixed = evaluate(case(inv, "grad_vmap_naive"), lambda key: CPU_BWD)
    with pytest.raises(pytest.fail.Exception, match="ratchet can be tightened: r now holds"):
        judge(inv, fixed.holds, fixed.holds, "cpu", fixed.describe(inv), lambda: "unused")


def test_plain_invariant_failure_carries_the_diagnosis(tmp_path):
    (inv,) = spec(tmp_path, '[[invariant]]\nid = "n"\nprograms = ["grad_naive"]\n'
                            'assert = "while_loops == 0"\n').invariants  # fmt: skip
    with pytest.raises(pytest.fail.Exception, match="DIAGNOSIS"):
        judge(inv, False, False, "cpu", "d", lambda: "DIAGNOSIS")


# -- correctness: the real program passes, a mutated program fails -------------------------------------


def _correctness(tmp_path, check: str, program: str, extra: str) -> CorrectnessCase:
    (c,) = spec(
        tmp_path, f'[[correctness]]\nid = "c"\ncheck = "{check}"\nprograms = ["{program}"]\n{extra}'
    ).correctness
    return CorrectnessCase(c, program, "f32", "zipf")


def test_correctness_out_of_bounds_pin(tmp_path, monkeypatch):
    import jax.numpy as jnp

    from invariants import _programs

    clip = _correctness(tmp_path, "out_of_bounds", "take_clip", 'expect = "clamp"\n')
    assert run_correctness(clip) is None
    # Mutation: take_clip silently becomes fill mode.
    mutated = dataclasses.replace(_programs.CATALOG["take_clip"], fn=lambda W, x: jnp.take(W, x, axis=0))
    monkeypatch.setitem(_programs.CATALOG, "take_clip", mutated)
    assert "index V gave nan" in run_correctness(clip)


def test_correctness_values_agree(tmp_path, monkeypatch):
    from invariants import _programs

    agree = _correctness(tmp_path, "agree", "naive", 'reference = "take"\n')
    assert run_correctness(agree) is None
    mutated = dataclasses.replace(_programs.CATALOG["naive"], fn=lambda W, x: W[(x + 1) % W.shape[0]])
    monkeypatch.setitem(_programs.CATALOG, "naive", mutated)
    assert "max |naive - take|" in run_correctness(agree)


def test_a_reference_runs_once_for_every_program_checked_against_it(tmp_path, monkeypatch):
    from invariants import _programs

    runs: list[str] = []
    take = _programs.CATALOG["take"]

    def counted(W, x):
        import jax

        jax.debug.callback(lambda: runs.append("take"))  # at each execution, not at trace time
        return take.fn(W, x)

    monkeypatch.setitem(_programs.CATALOG, "take", dataclasses.replace(take, fn=counted))
    for program in ("naive", "vmap_naive", "take"):
        case = _correctness(tmp_path, "agree", program, 'reference = "take"\n')
        assert run_correctness(case) is None
    assert runs == ["take"]
    # Another distribution is other arguments: the reference runs again.
    case = _correctness(tmp_path, "agree", "naive", 'reference = "take"\n')
    assert run_correctness(dataclasses.replace(case, distribution="equal")) is None
    assert runs == ["take", "take"]


def test_correctness_agree_names_a_shape_mismatch(tmp_path, monkeypatch):
    """A program whose output has another shape than its reference's: one line, not a numpy traceback."""
    from invariants import _programs

    agree = _correctness(tmp_path, "agree", "naive", 'reference = "take"\n')
    mutated = dataclasses.replace(_programs.CATALOG["naive"], fn=lambda W, x: W[x][:, :3])
    monkeypatch.setitem(_programs.CATALOG, "naive", mutated)
    assert run_correctness(agree) == "shape (16384, 3) differs from take's (16384, 32)"


def test_correctness_narrow_index_pin(tmp_path):
    assert (
        run_correctness(_correctness(tmp_path, "narrow_index", "naive", 'expect = "overflow_error"\n'))
        is None
    )
    assert "got wrong_rows, expected ok" in run_correctness(
        _correctness(tmp_path, "narrow_index", "take", 'expect = "ok"\n')
    )


def test_every_correctness_check_a_spec_may_name_is_implemented():
    from invariants._checks import CORRECTNESS
    from invariants._spec import CORRECTNESS_CHECKS

    assert tuple(CORRECTNESS) == CORRECTNESS_CHECKS
