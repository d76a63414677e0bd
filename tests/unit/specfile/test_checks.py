"""Every kind of invariant is shown failing on a mutated module or program (and passing on the real one).

Measurements come from real recorded HLO (tests/data/hlo); a "mutation" is handing the check the
measurement of a different, broken program under the name of the one it guards.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from invariants._errors import InvariantsError
from invariants.catalog.programs import CATALOG
from invariants.catalog.registry import Programs
from invariants.measure.measurement import Measurement, measure_text
from invariants.plugin.outcomes import judge
from invariants.specfile.reader import load_spec
from invariants.verdict.checks import Case, evaluate, unmet_condition
from invariants.verdict.correctness import Correctness, CorrectnessCase

DATA = Path(__file__).parents[2] / "data" / "hlo"


def structure(name: str) -> Measurement:
    return measure_text((DATA / name).read_text(), name)


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


def test_a_relation_across_configurations_reads_each_side_in_its_own(tmp_path):
    from invariants.scope.targets import all_targets
    from invariants.verdict.checks import expand

    (inv,) = spec(tmp_path, '[[invariant]]\nid = "x"\n'
                            'assert = "kernels(naive[bf16]) <= kernels(take[f32])"\n').invariants  # fmt: skip
    (made,) = expand([spec(tmp_path, '[[invariant]]\nid = "x"\n'
                                     'assert = "kernels(naive[bf16]) <= kernels(take[f32])"\n')],
                     [all_targets()["cpu"]])  # fmt: skip
    assert made.id == "cpu-naive~take-bf16~f32-x"
    assert [tuple(k) for k in made.keys] == [("naive", "bf16", "cpu"), ("take", "f32", "cpu")]
    real = {("naive", "bf16"): CPU_FWD_NAIVE, ("take", "f32"): CPU_FWD_TAKE}
    verdict = evaluate(made, lambda key: real[key[0], key[1]])
    assert verdict.holds and verdict.measured == {"kernels(naive[bf16])": 1, "kernels(take[f32])": 1}
    mutated = {("naive", "bf16"): OLD_CPU_BWD, ("take", "f32"): CPU_FWD_TAKE}
    assert not evaluate(made, lambda key: mutated[key[0], key[1]]).holds
    assert inv.configs == ("*",)


def test_structural_equality_fails_on_any_kernel_change(tmp_path):
    (inv,) = spec(tmp_path, '[[invariant]]\nid = "e"\n'
                            'assert = "structure(eqx_embedding) == structure(vmap_naive)"\n'
                  ).invariants  # fmt: skip
    assert evaluate(case(inv), lambda key: CPU_FWD_NAIVE).holds
    mutated = {"eqx_embedding": CPU_FWD_TAKE, "vmap_naive": CPU_FWD_NAIVE}
    assert not evaluate(case(inv), lambda key: mutated[key[0]]).holds


def test_a_failed_structural_equality_says_what_differs_in_its_headline(tmp_path):
    """Two one-kernel programs that differ in that kernel: each side reads as what only it has, never as
    two equal-looking ``<1 kernels>``."""
    (inv,) = spec(tmp_path, '[[invariant]]\nid = "e"\n'
                            'assert = "structure(eqx_embedding) == structure(vmap_naive)"\n'
                  ).invariants  # fmt: skip
    mutated = {"eqx_embedding": CPU_FWD_TAKE, "vmap_naive": CPU_FWD_NAIVE}
    verdict = evaluate(case(inv), lambda key: mutated[key[0]])
    line = verdict.describe(inv)
    sides = verdict.measured["structure(eqx_embedding)"], verdict.measured["structure(vmap_naive)"]
    assert sides[0] != sides[1], line
    assert all(side.startswith("<1 kernels; only here: ") for side in sides), line
    assert evaluate(case(inv), lambda key: CPU_FWD_NAIVE).measured["structure(vmap_naive)"] == "<1 kernels>"


def test_unknown_trip_count_fails_rather_than_passing(tmp_path):
    (inv,) = spec(tmp_path, '[[invariant]]\nid = "b"\nprograms = ["grad_take"]\n'
                            'assert = "dynamic_kernel_launches <= 8"\n').invariants  # fmt: skip
    m = TPU_BWD_VMAP
    unknown_structure = dataclasses.replace(m.structure, dynamic_kernel_launches=None)
    unknown = Measurement.of(m.compiled, m.module, unknown_structure, m.code)
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

    from invariants.catalog import programs as _programs

    clip = _correctness(tmp_path, "out_of_bounds", "take_clip", 'expect = "clamp"\n')
    assert Correctness(Programs()).run(clip) is None
    # Mutation: take_clip silently becomes fill mode.
    mutated = dataclasses.replace(_programs.CATALOG["take_clip"], fn=lambda W, x: jnp.take(W, x, axis=0))
    monkeypatch.setitem(_programs.CATALOG, "take_clip", mutated)
    assert "index V gave nan" in Correctness(Programs()).run(clip)


def test_correctness_values_agree(tmp_path, monkeypatch):
    from invariants.catalog import programs as _programs

    agree = _correctness(tmp_path, "agree", "naive", 'reference = "take"\n')
    assert Correctness(Programs()).run(agree) is None
    mutated = dataclasses.replace(_programs.CATALOG["naive"], fn=lambda W, x: W[(x + 1) % W.shape[0]])
    monkeypatch.setitem(_programs.CATALOG, "naive", mutated)
    assert "max |naive - take|" in Correctness(Programs()).run(agree)


def test_a_reference_runs_once_for_every_program_checked_against_it(tmp_path):
    """Within one run; another run (its own Correctness) runs it anew."""
    runs: list[str] = []
    take = CATALOG["take"]

    def counted(W, x):
        import jax

        jax.debug.callback(lambda: runs.append("take"))  # at each execution, not at trace time
        return take.fn(W, x)

    correctness = Correctness(Programs().replaced({"take": counted}))
    for program in ("naive", "vmap_naive", "take"):
        case = _correctness(tmp_path, "agree", program, 'reference = "take"\n')
        assert correctness.run(case) is None
    assert runs == ["take"]
    # Another distribution is other arguments: the reference runs again.
    case = _correctness(tmp_path, "agree", "naive", 'reference = "take"\n')
    assert correctness.run(dataclasses.replace(case, distribution="equal")) is None
    assert runs == ["take", "take"]
    assert Correctness(Programs().replaced({"take": counted})).run(case) is None  # a new run: anew
    assert runs == ["take", "take", "take"]


def test_a_program_that_lowers_to_a_module_already_run_is_not_run_again(tmp_path, monkeypatch):
    """``x.at[].get(mode='clip')`` lowers to the module ``W[x]`` does: on the same arguments it is the same
    executable, and its output is known. A form that lowers otherwise compiles and runs."""
    import jax

    compiled: list[str] = []
    compile_lowered = jax.stages.Lowered.compile

    def counted(self, *args, **kwargs):
        compiled.append(self.as_text().split(" ", 2)[1])  # module @jit_NAME
        return compile_lowered(self, *args, **kwargs)

    monkeypatch.setattr(jax.stages.Lowered, "compile", counted)
    correctness = Correctness(Programs())
    for program in ("naive", "at_get_clip", "vmap_naive"):
        case = _correctness(tmp_path, "agree", program, 'reference = "take"\n')
        assert correctness.run(case) is None
    assert compiled == ["@jit_naive", "@jit_take", "@jit_vmap_naive"]
    # Once it lowers otherwise, it runs, beside a naive already run: the module is the key, not the shapes.
    correctness = Correctness(Programs().replaced({"at_get_clip": lambda W, x: W[(x + 1) % W.shape[0]]}))
    for program in ("naive", "at_get_clip"):
        case = _correctness(tmp_path, "agree", program, 'reference = "take"\n')
        problem = correctness.run(case)
    assert problem is not None and "max |at_get_clip - take|" in problem


class _OwnDraw:
    """A project's :class:`Inputs` of the catalog's shapes, drawn otherwise."""

    def specs(self, config):
        return (config.table, config.indices)

    def draw(self, config, distribution, seed):
        import numpy as np

        rng = np.random.default_rng(99)
        table = rng.random(config.table.shape, dtype=np.float32)
        return table, rng.integers(0, config.vocab, size=config.indices.shape).astype(np.int32)


def test_a_reference_run_on_another_draw_of_the_same_shapes_runs_again(tmp_path):
    """A reference remembered from the catalog's draw is not the reference on a project's own draw."""
    # take_clip's module is its own, so it runs on the project's draw; take must too, not be read back.
    own = dataclasses.replace(CATALOG["take_clip"], name="own_clip", inputs=_OwnDraw())
    correctness = Correctness(Programs([own]))
    case = _correctness(tmp_path, "agree", "naive", 'reference = "take"\n')
    assert correctness.run(case) is None
    assert correctness.run(dataclasses.replace(case, program="own_clip")) is None


def test_correctness_agree_names_a_shape_mismatch(tmp_path, monkeypatch):
    """A program whose output has another shape than its reference's: one line, not a numpy traceback."""
    from invariants.catalog import programs as _programs

    agree = _correctness(tmp_path, "agree", "naive", 'reference = "take"\n')
    mutated = dataclasses.replace(_programs.CATALOG["naive"], fn=lambda W, x: W[x][:, :3])
    monkeypatch.setitem(_programs.CATALOG, "naive", mutated)
    assert Correctness(Programs()).run(agree) == "shape (16384, 3) differs from take's (16384, 32)"


def test_correctness_narrow_index_pin(tmp_path):
    assert (
        Correctness(Programs()).run(
            _correctness(tmp_path, "narrow_index", "naive", 'expect = "overflow_error"\n')
        )
        is None
    )
    assert "got wrong_rows, expected ok" in Correctness(Programs()).run(
        _correctness(tmp_path, "narrow_index", "take", 'expect = "ok"\n')
    )


def test_every_correctness_check_a_spec_may_name_is_implemented():
    from invariants.specfile.reader import CORRECTNESS_CHECKS
    from invariants.verdict.correctness import CORRECTNESS

    assert tuple(CORRECTNESS) == CORRECTNESS_CHECKS


def test_the_out_of_bounds_modes_are_the_specs_vocabulary():
    from invariants.specfile.reader import CORRECTNESS_EXPECT
    from invariants.verdict.correctness import _OOB_EXPECT

    assert tuple(_OOB_EXPECT) == CORRECTNESS_EXPECT["out_of_bounds"]


# -- a zero divisor at run time is a failing verdict with one line, not a ZeroDivisionError -------------


def test_a_zero_divisor_at_run_time_fails_the_verdict_with_one_line(tmp_path):
    (inv,) = spec(tmp_path, '[[invariant]]\nid = "z"\nprograms = ["take"]\n'
                            'assert = "kernels / while_loops <= 2"\n').invariants  # fmt: skip
    verdict = evaluate(case(inv, "take"), lambda key: CPU_FWD_TAKE)  # no loop: while_loops = 0
    assert not verdict.holds
    line = verdict.describe(inv)
    assert "\n" not in line
    assert line.endswith("'kernels / while_loops' divides by zero: while_loops is 0 here")
    with_loop = evaluate(case(inv, "take"), lambda key: OLD_CPU_BWD)  # one loop: a number to compare
    assert "divides by zero" not in with_loop.describe(inv)


# -- what only the targets show: checked where cases are expanded, before any compile --------------------


def _targets_error(tmp_path: Path, text: str) -> str:
    from invariants.verdict.checks import check_specs, expand

    path = tmp_path / "s.toml"
    path.write_text(text)
    loaded = load_spec(path)
    with pytest.raises(InvariantsError) as err:
        check_specs([loaded])
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}:"), message
    with pytest.raises(InvariantsError):  # expand checks first: never an empty case list
        expand([loaded], [])
    return message.removeprefix(str(path))


_TAKE = '[[invariant]]\nid = "g"\nprograms = ["take"]\nassert = "gathers == 1"\n'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[spec]\ntargets = ["cpuu"]\n' + _TAKE,
         ":2: targets: 'cpuu' matches no target (did you mean 'cpu'?); known: cpu, "),
        ('[spec]\ntargets = ["cpu", "tpu-v7*"]\n' + _TAKE, ":2: targets: 'tpu-v7*' matches no target"),
        ('[spec]\ntargets = ["gpu-*"]\n' + _TAKE + 'targets = ["gpu-h200"]\n',
         ":7: 'g': targets 'gpu-h200' matches no target (did you mean 'gpu-h100'?)"),
        # A program that does not compile on the target the invariant names: the tag that would fix it.
        ('[spec]\ntargets = ["tpu-*"]\n[[invariant]]\nid = "g"\nprograms = ["take_clip"]\n'
         'targets = ["tpu-v6e"]\nassert = "while_loops == 0"\n',
         ":6: 'g': program 'take_clip' does not compile on tpu-v6e (a core-scope target: it compiles "
         "programs tagged 'core' only)"),
        ('[spec]\ntargets = ["tpu-v6e"]\n[[invariant]]\nid = "g"\nprograms = ["naive", "take_clip"]\n'
         'assert = "while_loops == 0"\n',
         ":5: 'g': program 'take_clip' does not compile on tpu-v6e (a core-scope target"),
        ('[spec]\ntargets = ["gpu-*"]\n[[invariant]]\nid = "g"\n'
         'assert = "kernels(take_clip) <= kernels(take)"\ntargets = ["gpu-a100"]\n',
         ":6: 'g': program 'take_clip' does not compile on gpu-a100 (a core-scope target"),
        ('[spec]\ntargets = ["cpu"]\n[[invariant]]\nid = "g"\nprograms = ["vocab_parallel_take"]\n'
         'assert = "collectives == 0"\n',
         ":5: 'g': program 'vocab_parallel_take' does not compile on cpu (it compiles unsharded programs "
         "only; this one has a mesh layout)"),
        ('[spec]\ntargets = ["tpu-v5e-4x4"]\n' + _TAKE,
         ":5: 'g': program 'take' does not compile on tpu-v5e-4x4 (a pod target: it compiles the pod"),
        # configs that select none of the configurations the programs compile in there.
        ('[spec]\ntargets = ["cpu"]\n' + _TAKE + 'configs = ["bf16-llm*"]\n',
         ":5: 'g': configs ['bf16-llm*'] select no configuration 'take' compiles in on cpu "
         "(f32, bf16, f32-large, f32-i8, f32-2d)"),
        # A program sized for other chips (the SparseCore offload sizes) is named as such, not as sharded.
        ('[spec]\ntargets = ["cpu"]\n[[invariant]]\nid = "g"\nprograms = ["scatter_min"]\n'
         'assert = "scatters == 1"\n',
         ":5: 'g': program 'scatter_min' does not compile on cpu "
         "(its configurations (f32-offload) compile on other targets only)"),
        ('[spec]\ntargets = ["cpu"]\n[[invariant]]\nid = "g"\nprograms = ["kind:forward"]\n'
         'assert = "gathers == 1"\nconfigs = ["bf16-llm*"]\n',
         ":7: 'g' checks nothing on its targets (cpu): on cpu, configs ['bf16-llm*'] select no configuration "
         "its programs compile in on cpu (naive in f32, bf16,"),
        ('[spec]\ntargets = ["cpu"]\n[[invariant]]\nid = "g"\n'
         'assert = "kernels(take_clip) <= kernels(take)"\nconfigs = ["bf16"]\n',
         ":3: 'g': configs ['bf16'] select no configuration 'take_clip' compiles in on cpu (f32)"),
        ('[spec]\ntargets = ["cpu"]\n[[invariant]]\nid = "g"\n'
         'assert = "kernels(take_clip) <= kernels(take)"\nconfigs = ["f32-large"]\n',
         ":3: 'g': configs ['f32-large'] select no configuration 'take_clip' compiles in on cpu (f32)"),
        ('[spec]\ntargets = ["cpu"]\n[[invariant]]\nid = "g"\nassert = "time(take) / time(naive) <= 1.1"\n'
         'configs = ["bf16-llm"]\n',
         ":6: 'g': configs ['bf16-llm'] select no configuration that take and naive share and run in"),
        # A relation across configurations: a side that does not compile in the configuration it names.
        ('[spec]\ntargets = ["cpu"]\n[[invariant]]\nid = "g"\n'
         'assert = "structure(take_clip[bf16]) == structure(take[f32])"\n',
         ":3: 'g' checks nothing on its targets (cpu): on cpu, program 'take_clip' does not compile in bf16 "
         "on cpu: it compiles there in f32 only"),
        # Correctness: nothing runs on the runtime target, or a check its programs cannot take.
        ('[spec]\ntargets = ["cpu"]\n[[correctness]]\nid = "c"\ncheck = "agree"\nprograms = ["naive"]\n'
         'reference = "take"\nconfigs = ["bf16-llm"]\n',
         ":8: 'c': configs ['bf16-llm'] select no configuration program 'naive' runs in: it runs on cpu in "
         "f32, bf16,"),
        ('[spec]\ntargets = ["cpu"]\n[[correctness]]\nid = "c"\ncheck = "out_of_bounds"\n'
         'programs = ["grad_take"]\nexpect = "clamp"\n',
         ":3: 'c': check 'out_of_bounds' calls a forward lookup (table, indices); 'grad_take' is a backward"),
    ],
)  # fmt: skip
def test_a_spec_that_makes_no_item_is_one_line(tmp_path, text, expected):
    assert _targets_error(tmp_path, text).startswith(expected)


def test_the_shipped_specs_pass_the_target_checks():
    from invariants.specfile.reader import load_specs
    from invariants.verdict.checks import check_specs, known_targets

    specs = load_specs()
    check_specs(specs)
    assert "cpu" in {t.name for t in known_targets()}


def test_a_host_without_a_cpu_target_still_reads_cpu_toml(monkeypatch):
    """On a TPU or GPU host the runtime target is that chip: 'cpu' is still a name a spec may use."""
    from invariants.specfile.reader import load_specs
    from invariants.verdict import checks as _checks

    others = {n: t for n, t in _checks.all_targets().items() if n != "cpu"}
    monkeypatch.setattr(_checks, "all_targets", lambda: others)
    assert "cpu" in {t.name for t in _checks.known_targets()}
    _checks.check_specs(load_specs())


def test_a_pattern_that_selects_nothing_on_one_family_is_allowed(tmp_path):
    """The shipped files list "kind:sharded" beside "kind:forward" on every family; a GPU has no sharded
    target, and that selector alone checking nothing there is not refused (the invariant makes items)."""
    from invariants.verdict.checks import check_specs

    path = tmp_path / "s.toml"
    path.write_text('[spec]\ntargets = ["gpu-*"]\n[[invariant]]\nid = "w"\n'
                    'programs = ["kind:forward", "kind:sharded"]\nassert = "while_loops == 0"\n')  # fmt: skip
    check_specs([load_spec(path)])


def test_a_strided_scatter_fails_the_layout_invariant(tmp_path):
    """The layout metric on both sides of jax#39959 (CPU): contiguous on 0.9.1, strided on 0.9.2, where
    scatters == 1 and while_loops == 0 hold on both."""
    (inv,) = spec(tmp_path, '[[invariant]]\nid = "rows"\nprograms = ["grad_take"]\n'
                            'assert = "strided_scatters == 0"\n').invariants  # fmt: skip
    good, bad = structure("jax091_cpu_vmap_segment_sum.txt"), structure("jax092_cpu_vmap_segment_sum.txt")
    assert evaluate(case(inv, "grad_take"), lambda key: good).holds
    verdict = evaluate(case(inv, "grad_take"), lambda key: bad)
    assert (
        not verdict.holds
        and verdict.describe(inv) == "assert strided_scatters == 0: measured strided_scatters = 1"
    )
    assert good.metrics["scatters"] == bad.metrics["scatters"] == 1
    assert good.metrics["while_loops"] == bad.metrics["while_loops"] == 0


def test_a_scoped_count_reads_one_dtype_and_a_power_bounds(tmp_path):
    """``scatters(dtype="f32")`` counts the scatters of f32 results alone: a bag's f32 segment sum, not
    the s32 scatter that makes its segment ids from the offsets; ``**`` raises as Python does."""
    import jax
    import jax.numpy as jnp

    from invariants.testing import compile_for

    def bag(table, ids, offsets):
        starts = jnp.zeros(ids.shape, jnp.int32).at[offsets].add(1)
        rows = jnp.take(table, ids, axis=0)
        return jax.ops.segment_sum(rows, jnp.cumsum(starts) - 1, num_segments=16)

    f32 = jax.ShapeDtypeStruct
    bag_cpu = compile_for(bag, f32((512, 8), jnp.float32), f32((256,), jnp.int32), f32((16,), jnp.int32),
                          target="cpu").measured  # fmt: skip
    asserts = ['scatters(dtype=\\"f32\\") == 1', 'scatters(dtype=\\"s32\\") == 1', "scatters == 2",
               'gathers(dtype=\\"f32\\") == scatters(dtype=\\"f32\\")', 'gathers(dtype=\\"bf16\\") == 0',
               "temp_bytes <= 2 ** 30", "scatters ** 3 ** 2 == 512"]  # fmt: skip
    body = "".join(
        f'[[invariant]]\nid = "a{i}"\nprograms = ["naive"]\nassert = "{a}"\n\n' for i, a in enumerate(asserts)
    )
    invs = spec(tmp_path, body).invariants
    verdicts = {
        a: evaluate(case(inv, "naive"), lambda key: bag_cpu) for a, inv in zip(asserts, invs, strict=True)
    }
    assert [a for a, v in verdicts.items() if not v.holds] == []
    assert verdicts[asserts[0]].measured == {"scatters(dtype='f32')": 1}


def test_correctness_compares_at_the_highest_matmul_precision(tmp_path):
    """A TPU's default precision rounds a matmul's f32 operands to bf16 passes (one_hot(x, V) @ W misses
    take by 0.002 on a TPU v5e): the checks compare what the forms compute, so they trace at the highest
    precision, whatever the process's default (named ``float32``, the name every supported release takes
    for it)."""
    import jax

    seen: list[object] = []
    take = CATALOG["take"]

    def recording(W, x):
        seen.append(jax.config.jax_default_matmul_precision)  # read while tracing
        return take.fn(W, x)

    correctness = Correctness(Programs().replaced({"naive": recording}))
    case = _correctness(tmp_path, "agree", "naive", 'reference = "take"\n')
    assert correctness.run(case) is None
    assert seen == ["float32"]


def test_a_dtype_filter_the_target_widens_warns_in_its_verdict(tmp_path):
    """On the CPU the bf16 gradient's scatter-add compiles as an f32 one: ``scatters(dtype="bf16") == 0``
    holds there for the very program it guards, and the verdict says so in one line; on a TPU it does not."""
    (inv,) = spec(
        tmp_path,
        '[[invariant]]\nid = "w"\nprograms = ["grad_take"]\nassert = "scatters(dtype=\\"bf16\\") == 0"\n',
    ).invariants
    on_cpu = evaluate(Case(inv, "cpu", "bf16", "grad_take"), lambda key: CPU_BWD)
    assert on_cpu.holds and "\n" not in on_cpu.warning
    assert on_cpu.warning == (
        "scatters(dtype='bf16') reads the compiled dtype, and cpu computes bf16 in f32: the count does not "
        "see the bf16 work it guards there"
    )
    assert "; warning: scatters(dtype='bf16') reads the compiled dtype" in on_cpu.describe(inv)
    assert evaluate(Case(inv, "tpu-v5e", "bf16", "grad_take"), lambda key: TPU_BWD_VMAP).warning == ""
