"""Unit tests of the self-check: the registry's shape, judging results files, the table, the hook."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import pytest
from gatekit import made_once

from invariants.__main__ import main as cli
from invariants._errors import InvariantsError
from invariants.catalog.programs import CATALOG
from invariants.compile.child import ChildRun
from invariants.records.results import Failure, Record, Results
from invariants.selfcheck import children, judge, registry
from invariants.selfcheck import command as sc
from invariants.selfcheck import inject as inj


def test_registry_shape() -> None:
    names = [i.name for i in registry.INJECTIONS]
    assert names[0] == "none" and registry.INJECTIONS[0].is_baseline and not registry.INJECTIONS[0].env
    assert len(names) == len(set(names))
    assert sum(i.is_baseline for i in registry.INJECTIONS) == 1
    kinds = {"structure", "invariant", "correctness", "throughput", "versus-timing", "versus-invariant"}
    for i in registry.INJECTIONS:
        assert set(i.programs) <= set(CATALOG), i.name
        assert all(e.split(":")[0] in kinds for e in i.expect), i.name
        assert set(i.env) <= {"XLA_FLAGS", "INVARIANTS_INJECT", "INVARIANTS_VERSUS_SLOWDOWN"}, i.name
        for name, module, function in inj.parse_spec(i.env.get("INVARIANTS_INJECT", "")):
            assert name in i.programs, f"{i.name}: swaps {name} but does not run it"
            assert callable(getattr(importlib.import_module(module), function))
    # the baseline runs every program an injection touches on its target, so a clean run is shown to pass
    base = set(registry.INJECTIONS[0].programs)
    for i in registry.INJECTIONS:
        if i.targets == "cpu":
            swapped = {n for n, _, _ in inj.parse_spec(i.env.get("INVARIANTS_INJECT", ""))}
            assert swapped <= base, i.name
    assert any(i.fast for i in registry.INJECTIONS if not i.is_baseline)
    assert any("XLA_FLAGS" in i.env for i in registry.INJECTIONS)


def test_select_and_restrict() -> None:
    assert [i.name for i in sc.select("eqx*")] == ["none", "eqx_as_take"]
    assert all(i.fast for i in sc.select(None, fast_only=True))
    # --fast narrows a -k selection, and one that keeps nothing but the baseline is refused.
    assert [i.name for i in sc.select("*map_loop", fast_only=True)] == ["none", "take_map_loop"]
    with pytest.raises(
        InvariantsError, match=r"^-k naive_twice --fast: none of these injections is in the fast"
    ):
        sc.select("naive_twice", fast_only=True)
    with pytest.raises(InvariantsError, match=r"^-k: no injection matches 'qqq'; known: none, "):
        sc.select("qqq")
    with pytest.raises(
        InvariantsError,
        match=r"^-k: no injection matches 'naive_twise' \(did you mean 'naive_twice'\?\); known: ",
    ):
        sc.select("naive_twise")
    cpu_only = sc.restrict_targets(registry.INJECTIONS, "cpu")
    assert cpu_only[0].is_baseline and all(i.targets == "cpu" for i in cpu_only)
    tpu = sc.restrict_targets(registry.INJECTIONS, "tpu")
    assert tpu[0].is_baseline and all(i.targets.startswith("tpu") for i in tpu[1:]) and len(tpu) > 1


def _item(kind: str, outcome: str, id_: str | None = None, failed_by: str = "assert") -> Record:
    failure = Failure(failed_by, "what it says") if outcome == "failed" else None  # type: ignore[arg-type]
    return Record(
        kind=kind, outcome=outcome, nodeid=f"t.py::cpu::s.toml::{id_ or kind}::x-f32", id=id_, failure=failure
    )


def test_judge() -> None:
    injection = registry.Injection("x", "doc", {}, ("naive",), ("invariant:one_kernel", "structure"))
    results = [_item("invariant", "failed", "one_kernel"), _item("structure", "failed"),
               _item("invariant", "passed", "no_while")]  # fmt: skip
    assert judge.outcome_of(injection, 1, results, 1.0).caught
    # failing, but not by what was expected: not caught
    partial = [_item("structure", "failed")]
    out = judge.outcome_of(injection, 1, partial, 1.0)
    assert not out.caught and out.missing == ["invariant:one_kernel"]
    # expected items failed but the run did not (exit 0 cannot happen with failures; an abort is -6)
    assert not judge.outcome_of(injection, -6, results, 1.0).caught
    # an item that failed because the suite could not run it caught nothing
    errored = [_item("invariant", "failed", "one_kernel", failed_by="error"), _item("structure", "failed")]
    out = judge.outcome_of(injection, 1, errored, 1.0)
    assert not out.caught and out.missing == ["invariant:one_kernel"]
    assert not judge.outcome_of(injection, 1, None, 1.0).caught
    baseline = registry.INJECTIONS[0]
    assert judge.outcome_of(baseline, 0, [_item("invariant", "passed", "a")], 1.0).caught
    assert not judge.outcome_of(baseline, 1, [_item("invariant", "failed", "a")], 1.0).caught


def test_throughput_expectation_matches_ratio_items() -> None:
    assert judge.matches("throughput", _item("ratio", "failed", "naive_not_slower_than_take"))
    assert judge.matches("throughput", _item("efficiency", "failed", "e"))
    assert not judge.matches("invariant", _item("ratio", "failed", "r"))
    assert judge.matches("correctness:oob_clamp", _item("correctness", "failed", "oob_clamp"))
    assert not judge.matches("correctness:oob_clamp", _item("correctness", "failed", "oob_fill_nan"))
    assert judge.matches(
        "throughput:grad_equal_indices_not_slower", _item("ratio", "failed", "grad_equal_indices_not_slower")
    )
    assert not judge.matches(
        "throughput:grad_equal_indices_not_slower", _item("ratio", "failed", "grad_zipf")
    )
    assert not judge.matches("invariant:grad_zipf", _item("ratio", "failed", "grad_zipf"))


def test_render_table() -> None:
    base = judge.Outcome(registry.INJECTIONS[0], 0, [], [], 3.0)
    inj_ = registry.Injection("x", "doc", {}, ("naive",), ("invariant:one_kernel",))
    caught = judge.Outcome(inj_, 1, [_item("invariant", "failed", "one_kernel")] * 4, [], 2.0)
    missed = judge.Outcome(
        registry.Injection("y", "d", {}, ("naive",), ("structure",)), 0, [], ["structure"], 1.0
    )
    text = sc.render_table([base, caught, missed])
    lines = text.splitlines()
    assert lines[0].startswith("| injection | expected | caught |")
    assert lines[2].startswith("| none | pass | passes | 0")
    assert lines[3].startswith("| x | invariant:one_kernel | yes | 4: invariant:one_kernel |")
    assert "| y | structure | **no** |" in lines[4] and "missing structure" in lines[4]
    assert lines[-2] == "mutation score: 1/2 injections caught; baseline passes"
    assert lines[-1].startswith("baseline ran: targets cpu; programs naive, take,")


def test_the_baseline_covers_what_the_injections_run() -> None:
    """A green baseline is claimed only for what it ran: every program, target and tier of the injections
    it stands behind (a false invariant on another program would otherwise hide behind 'passes')."""
    chosen = sc.select(None)
    base = chosen[0]
    assert base.is_baseline and base.name == "none"
    for inj_ in chosen[1:]:
        assert set(inj_.programs) <= set(base.programs), inj_.name
        assert set(inj_.targets.split(",")) <= set(base.targets.split(",")), inj_.name
    assert base.timing == any(i.timing for i in chosen[1:])
    assert base.correctness == any(i.correctness for i in chosen[1:]) and base.correctness
    assert "tiers structure, invariants, correctness, throughput" in registry.coverage(base)
    cpu = sc.restrict_targets(sc.select(None, fast_only=True), "cpu")
    assert cpu[0].targets == "cpu" and not cpu[0].timing and not cpu[0].correctness
    assert registry.coverage(cpu[0]).endswith("tiers structure, invariants")


def test_each_injection_runs_the_tiers_it_expects_to_fail() -> None:
    """A child runs the correctness tier only when its expectations name it (as the throughput tier only
    when timed): a tier it does not need is seconds of a row loop run as a reference, caught by nothing."""
    for i in registry.INJECTIONS:
        kinds = {e.split(":")[0] for e in i.expect}
        assert i.correctness == ("correctness" in kinds), i.name
        if i.command == "gate":
            assert i.timing == ("throughput" in kinds), i.name


def test_progress_is_one_line_per_child(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import io

    def fake(injection: registry.Injection, workdir: Path) -> judge.Outcome:
        return judge.Outcome(injection, 0 if injection.is_baseline else 1, [], [], 1.0)

    monkeypatch.setattr(children, "run_injection", fake)  # what run_all calls, in its own module
    out = io.StringIO()
    injections = sc.select("eqx*")
    outcomes = sc.run_all(injections, tmp_path, jobs=2, progress=out)
    lines = out.getvalue().splitlines()
    assert [o.injection.name for o in outcomes] == ["none", "eqx_as_take"]
    assert lines[0] == "selfcheck: 2 child runs, 2 at a time: none, eqx_as_take"
    assert {ln.split("] ")[1] for ln in lines[1:]} == {"none: passes (1 s)", "eqx_as_take: caught (1 s)"}


def test_child_command_loads_the_hook_and_skips_timing_unless_asked() -> None:
    i = registry.INJECTIONS[1]
    cmd = children.child_command(i, Path("r.json"), Path("d"))
    assert cmd[cmd.index("-p", 5) + 1] in ("no:cacheprovider", registry.INJECT_MODULE)
    assert registry.INJECT_MODULE in cmd and cmd[cmd.index("-m", 3) + 1] == "not throughput"
    timed = next(i for i in registry.INJECTIONS if i.timing)
    assert "not throughput" not in children.child_command(timed, Path("r"), Path("d"))
    # The correctness items run only where an expectation needs them.
    assert cmd[cmd.index("-k") + 1] == "not test_correctness"
    checked = next(i for i in registry.INJECTIONS if i.correctness)
    assert "-k" not in children.child_command(checked, Path("r"), Path("d"))


def test_inject_parse_and_swap() -> None:
    """The injection swaps a program in the run's programs it is given, never in the catalog."""
    from invariants.catalog.registry import Programs

    assert inj.parse_spec("take=m:f; naive = a.b:c ;") == [("take", "m", "f"), ("naive", "a.b", "c")]
    for bad in ("take", "take=m", "=m:f", "take=:f"):
        with pytest.raises(ValueError, match="is not NAME=module:function"):
            inj.parse_spec(bad)
    swaps = inj.swaps("take=invariants.selfcheck.inject:take_as_map_loop")
    assert swaps == {"take": inj.take_as_map_loop}
    programs = Programs().replaced(swaps)
    assert programs["take"].fn is inj.take_as_map_loop
    assert programs["take"].configs == CATALOG["take"].configs and programs["take"].name == "take"
    assert CATALOG["take"].fn is not inj.take_as_map_loop  # the catalog itself is untouched
    with pytest.raises(InvariantsError, match="nope: not a catalog program"):
        Programs().replaced(inj.swaps("nope=invariants.selfcheck.inject:take_as_map_loop"))
    with pytest.raises(ValueError, match="cannot load"):
        inj.swaps("take=invariants.selfcheck.inject:missing")


def test_bad_programs_keep_the_values() -> None:
    import numpy as np

    from invariants.catalog.arguments import make_arguments
    from invariants.catalog.programs import SEED

    W, x = make_arguments(CATALOG["naive"], SEED)
    W, x = W[:64], x[:32] % 64
    ref = np.asarray(W)[x]
    np.testing.assert_allclose(np.asarray(inj.naive_twice(W, x)), ref, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(inj.take_as_map_loop(W, x)), ref)
    np.testing.assert_allclose(np.asarray(inj.eqx_embedding_as_take(W, x)), ref)
    assert "INVARIANTS_INJECT" not in os.environ


# ------------------------------------------------------------------------ the kernel-code-only injection

_COMPILE = """
import json, sys
from invariants.compile.artifacts import compile_here
from invariants.scope.targets import all_targets
json.dump(compile_here("grad_take", "f32", all_targets()["cpu"]).to_json(), sys.stdout)
"""


def _scalar_and_clean(folder: Path) -> tuple[Any, Any]:
    import json
    import subprocess
    import sys

    from invariants.compile.child import gate_env
    from invariants.records.compiled import Compiled

    inj_ = next(i for i in registry.INJECTIONS if i.name == "xla_cpu_scalar_code")
    children = [
        subprocess.Popen([sys.executable, "-c", _COMPILE], env=gate_env(env), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for env in (inj_.env, {})
    ]  # fmt: skip
    out = []
    for child in children:
        stdout, stderr = child.communicate(timeout=120)
        assert child.returncode == 0, stderr[-2000:]
        out.append(Compiled.from_json(json.loads(stdout)))
    return out[0], out[1]


@pytest.fixture(scope="session")
def scalar_and_clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    """grad_take on the CPU compiled in two children at once (XLA reads its flags when it starts): with the
    injection's XLA_FLAGS, and without; once for the session, whichever xdist worker asks first."""
    return made_once(tmp_path_factory, "scalar_and_clean", _scalar_and_clean)


def _without_metadata(hlo: str) -> str:
    import re

    return re.sub(r", metadata=\{[^}]*\}", "", hlo)


@pytest.mark.e2e
def test_the_scalar_code_injection_changes_kernel_code_only(scalar_and_clean: tuple[Any, Any]) -> None:
    """--xla_cpu_prefer_vector_width=32: the optimized HLO is the same text (metadata aside), the kernel
    code is not (the scatter-add's <8 x float> loop becomes scalar)."""
    from invariants.measure.measurement import measure

    scalar, clean = scalar_and_clean
    assert "metadata={" in clean.hlo_text
    assert _without_metadata(scalar.hlo_text) == _without_metadata(clean.hlo_text)
    assert scalar.kernel_code.keys() == clean.kernel_code.keys() and scalar.kernel_code != clean.kernel_code
    widths = []
    for compiled in (clean, scalar):
        measured = measure(compiled)
        assert measured.code.facts is not None
        widths.append(measured.metrics["vector_width"])
    # The clean width is the host's (256 bits on an AVX2 host, 512 where AVX-512 is used): vector, then not.
    assert widths[0] >= 128 and widths[1] == 0


_KERNELS = Path(__file__).parents[2] / "data" / "kernels"


def _recorded(release: str) -> Any:
    """grad_take [f32] on gpu-a100 as jaxlib ``release`` compiled it (tests/data/kernels): its optimized HLO
    and PTX, as a ``Compiled`` record."""
    from invariants.records.compiled import Compiled

    folder = _KERNELS / f"jaxlib-{release}" / "gpu-a100" / "grad_take.f32"
    (hlo,) = folder.glob("*after_optimizations.txt")
    code = {p.name: p.read_text() for p in sorted(folder.glob("*.ptx"))}
    return Compiled("grad_take", "f32", "gpu-a100", "", (), hlo.read_text(), {}, {}, 0.0, code)


def _dump(compiled: Any, folder: Path) -> Path:
    """What the gate's dump of a key writes (GateSession.dump): the HLO and each kernel-code file."""
    target = folder / compiled.target
    target.mkdir(parents=True, exist_ok=True)
    stem = f"{compiled.program}.{compiled.config}"
    (target / f"{stem}.hlo.txt").write_text(compiled.hlo_text)
    for name, text in compiled.kernel_code.items():
        (target / f"{stem}.{name}").write_text(text)
    return folder


def test_a_change_of_kernel_code_behind_equal_hlo_is_judged_code_only(tmp_path: Path) -> None:
    """A failed structure item, rendered again from its dump against the committed snapshot, that differs
    in code lines only is ``structure:code-only``: jaxlib 0.10.2's A100 scatter-add CAS loops against
    0.10.1's native float atomics, behind the same HLO. An HLO difference, or none, is not code-only."""
    from invariants.measure.measurement import measure
    from invariants.snapshot.render import render_summary

    good, bad = _recorded("0.10.1"), _recorded("0.10.2")
    snapshots = tmp_path / "snapshots" / "gpu-a100"
    snapshots.mkdir(parents=True)
    committed = render_summary(measure(good), CATALOG["grad_take"].doc)
    (snapshots / "grad_take.f32.txt").write_text(committed)
    structure_item = {
        "kind": "structure", "outcome": "failed", "nodeid": "g/test_structure.py::gpu-a100::grad_take-f32",
        "program": "grad_take", "config": "f32", "target": "gpu-a100",
        "failure": {"kind": "snapshot", "what": "code"},
    }  # fmt: skip
    results = Results.from_json({"items": [structure_item]})
    annotated = judge.annotate(results, _dump(bad, tmp_path / "bad"), tmp_path / "snapshots")
    item = annotated[0]
    assert item.get("code_only") is True, item
    assert item.get("snapshot_change").startswith("code lines only (1 changed: fusion kInput {"), item
    assert item.get("snapshot_change").endswith("); the HLO lines are equal")
    assert judge.item_label(item) == judge.CODE_ONLY and judge.matches(judge.CODE_ONLY, item)
    # The committed compile against its own snapshot: nothing differs, nothing is code-only.
    clean_run = judge.annotate(results, _dump(good, tmp_path / "good"), tmp_path / "snapshots")
    assert clean_run[0].get("code_only") is False
    assert not judge.matches(judge.CODE_ONLY, clean_run[0])
    # An HLO line changed too: not code-only.
    (snapshots / "grad_take.f32.txt").write_text(committed.replace("summary: kernels ", "summary: kernels 9"))
    hlo_too = judge.annotate(results, _dump(bad, tmp_path / "bad"), tmp_path / "snapshots")[0]
    assert hlo_too.get("code_only") is False and hlo_too.get("snapshot_change").startswith("HLO lines (")
    # No dump of the key (no invariant failed on it): nothing is claimed.
    assert "code_only" not in judge.annotate(results, tmp_path / "none", tmp_path / "snapshots")[0].extra


@pytest.mark.e2e
def test_the_scalar_code_injection_is_caught_by_the_kernel_invariant_alone(
    scalar_and_clean: tuple[Any, Any], tmp_path: Path
) -> None:
    """XLA:CPU's code is tuned to the compiling host, so a CPU snapshot shows no vector widths: the scalar
    code injection leaves the snapshot equal, and the kernel invariant is what catches it."""
    from invariants.measure.measurement import measure
    from invariants.snapshot.render import render_summary

    scalar, clean = scalar_and_clean
    rendered = [render_summary(measure(c)) for c in (clean, scalar)]
    assert rendered[0] == rendered[1]
    inj_ = next(i for i in registry.INJECTIONS if i.name == "xla_cpu_scalar_code")
    assert inj_.expect == ("invariant:grad_scatter_vectorized",)
    failed = [_item("invariant", "failed", "grad_scatter_vectorized")]
    assert judge.outcome_of(inj_, 1, failed, 1.0).caught
    assert not judge.outcome_of(inj_, 0, [_item("invariant", "passed", "grad_scatter_vectorized")],
                             1.0).caught  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--targets", "nosuch"], "--targets: unknown target 'nosuch'; known: all, runtime, tpu, gpu, cpu,"),
        (["--targets", "tpu-v5"], "--targets: unknown target 'tpu-v5' (did you mean"),
        (["--targets", ","], "--targets: empty selection"),
        (["--targets", "gpu"], "--targets gpu: selects no injection (the baseline 'none' is not one;"),
        (["-k", "tpu", "--targets", "cpu"], "-k tpu --targets cpu: selects no injection"),
        (["-k", "none"], "-k none: selects no injection"),
        (["-k", ","], "-k: empty selection"),
        (["-k", "nomatch"], "-k: no injection matches 'nomatch'; known: none, "),
    ],
)
def test_a_selfcheck_that_selects_no_injection_is_one_line(argv, said) -> None:
    """`selfcheck --targets nosuch` ran the baseline alone and printed '0/0 injections caught' (exit 0):
    a self-check that injects nothing proves nothing. The targets are the gate's grammar (select_targets)."""
    for listing in ([], ["--list"]):
        with pytest.raises(InvariantsError) as err:
            sc.main([*argv, *listing])
        assert str(err.value).startswith(said) and "\n" not in str(err.value), str(err.value)


def test_a_keep_folder_it_cannot_write_is_one_line_before_any_child(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(sc, "run_all", lambda *args, **kwargs: pytest.fail("a child ran"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvariantsError, match=r"^--keep .*file: a file, not a folder; give a folder$"):
        sc.main(["-k", "eqx_as_take", "--keep", str(tmp_path / "file")])


def test_targets_select_in_the_gates_grammar() -> None:
    """Families, `all` and `runtime` as --targets takes them everywhere."""
    names = {i.name for i in sc.restrict_targets(registry.INJECTIONS, "runtime")[1:]}
    assert names == {i.name for i in registry.INJECTIONS[1:] if i.targets == "cpu"}
    assert len(sc.restrict_targets(registry.INJECTIONS, "all")) == len(registry.INJECTIONS)
    assert [i.name for i in sc.restrict_targets(registry.INJECTIONS, "tpu-v5e")[1:]] == [
        "tpu_take_map_loop", "tpu_eqx_map_loop",
    ]  # fmt: skip


# ------------------------------------------------------------------ the command as a user runs it
# `python -m invariants selfcheck ...` end to end, with the one process boundary faked: the gate child
# (children.run_gate). What the command builds for the child, how the results file is judged, the table, the
# score line, the progress lines and the exit status are the real modules at work.


@pytest.fixture
def command_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dispatcher's settings for this process (no bytecode, the CPU), undone after the test."""
    import sys

    monkeypatch.setattr(sys, "dont_write_bytecode", sys.dont_write_bytecode)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("JAX_PLATFORMS", os.environ.get("JAX_PLATFORMS", "cpu"))


def _fake_gate(monkeypatch: pytest.MonkeyPatch, injected: Any) -> list[tuple[list[str], dict[str, str]]]:
    """Replace the gate child: ``injected(folder)`` gives the child run of the injection (the baseline's
    passes); returns the (command, environment) of each child started."""
    started: list[tuple[list[str], dict[str, str]]] = []

    def run_gate(command: Any, *, env: Any, folder: Path, timeout: float) -> ChildRun:
        started.append((list(command), dict(env)))
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / "pytest.txt"
        log.write_text("collected 9 items\nthe child's last words\n")
        if inj.ENV not in env:  # the baseline
            return ChildRun(0, Results([_item("structure", "passed")]), 2.0, log)
        return injected(log)

    monkeypatch.setattr(children, "run_gate", run_gate)
    return started


def _eqx_caught(log: Path) -> ChildRun:
    items = [_item("invariant", "failed", "eqx_is_vmap_naive"), _item("structure", "failed")]
    return ChildRun(1, Results(items), 3.0, log)


def test_the_command_runs_each_injection_in_a_child_and_scores_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], command_env: None
) -> None:
    started = _fake_gate(monkeypatch, _eqx_caught)
    assert cli(["selfcheck", "-k", "eqx*", "--jobs", "1", "--keep", str(tmp_path / "keep")]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[:2] == [
        "| injection | expected | caught | failing items | e.g. | s |",
        "|---|---|---|---|---|---|",
    ]
    assert lines[2] == "| none | pass | passes | 0:  |  | 2 |"
    assert lines[3] == (
        "| eqx_as_take | invariant:eqx_is_vmap_naive, structure | yes | 2: invariant:eqx_is_vmap_naive, "
        "structure | cpu::s.toml::eqx_is_vmap_naive::x-f32, cpu::s.toml::structure::x-f32 | 3 |"
    )
    assert lines[5] == "mutation score: 1/1 injections caught; baseline passes"
    assert lines[6].startswith("baseline ran: targets cpu; programs naive, take, ")
    assert lines[7].startswith("selfcheck: 2 runs in ") and len(lines) == 8
    assert err.splitlines() == [
        "selfcheck: 2 child runs, 1 at a time: none, eqx_as_take",
        "selfcheck: [1/2] none: passes (2 s)",
        "selfcheck: [2/2] eqx_as_take: caught (3 s)",
    ]
    # Each child is the gate restricted to its injection, the swap in its environment only, its files
    # under --keep in a folder of its own.
    (base_cmd, base_env), (eqx_cmd, eqx_env) = started
    assert inj.ENV not in base_env
    assert eqx_env[inj.ENV] == "eqx_embedding=invariants.selfcheck.inject:eqx_embedding_as_take"
    assert eqx_cmd[eqx_cmd.index("--programs") + 1] == "eqx_embedding,vmap_naive"
    assert registry.INJECT_MODULE in eqx_cmd and registry.INJECT_MODULE in base_cmd
    results = eqx_cmd[eqx_cmd.index("--results-json") + 1]
    assert Path(results) == tmp_path / "keep" / "eqx_as_take" / "results.json"


@pytest.mark.parametrize(
    ("injected", "row"),
    [
        # Failing, but not by all it expects: not caught.
        (lambda log: ChildRun(1, Results([_item("structure", "failed")]), 1.0, log),
         "| eqx_as_take | invariant:eqx_is_vmap_naive, structure | **no** | 1: structure; missing "
         "invariant:eqx_is_vmap_naive | cpu::s.toml::structure::x-f32 | 1 |"),
        # A child that never wrote its results file says why, in its last line.
        (lambda log: ChildRun(3, None, 1.0, log),
         "| eqx_as_take | invariant:eqx_is_vmap_naive, structure | **no** | 0: ; missing "
         "invariant:eqx_is_vmap_naive, structure (no results file (exit 3: the child's last words)) "
         "|  | 1 |"),
        (lambda log: ChildRun(-9, None, 600.0, log, timed_out=True),
         "| eqx_as_take | invariant:eqx_is_vmap_naive, structure | **no** | 0: ; missing "
         "invariant:eqx_is_vmap_naive, structure (timed out after 600 s) |  | 600 |"),
    ],
    ids=["missing-one", "no-results-file", "timed-out"],
)  # fmt: skip
def test_an_injection_the_gate_misses_fails_the_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command_env: None,
    injected: Any, row: str,
) -> None:  # fmt: skip
    _fake_gate(monkeypatch, injected)
    assert cli(["selfcheck", "-k", "eqx_as_take", "--jobs", "1"]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[3] == row and lines[5] == "mutation score: 0/1 injections caught; baseline passes"
    assert err.splitlines()[-1].endswith("eqx_as_take: NOT caught (" + row.split("|")[-2].strip() + " s)")


def test_a_failing_baseline_makes_the_score_meaningless(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command_env: None
) -> None:
    def run_gate(command: Any, *, env: Any, folder: Path, timeout: float) -> ChildRun:
        return ChildRun(1, Results([_item("invariant", "failed", "eqx_is_vmap_naive"),
                                    _item("structure", "failed")]), 1.0, folder / "pytest.txt")  # fmt: skip

    monkeypatch.setattr(children, "run_gate", run_gate)
    assert cli(["selfcheck", "-k", "eqx_as_take", "--jobs", "1"]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[2].startswith("| none | pass | **FAILS** | 2: invariant:eqx_is_vmap_naive, structure |")
    assert lines[5] == "mutation score: 1/1 injections caught; baseline FAILS (scores are meaningless)"
    assert err.splitlines()[1:] == [
        "selfcheck: [1/2] none: FAILS (1 s)",
        "selfcheck: [2/2] eqx_as_take: caught (1 s)",
    ]


def test_list_prints_the_selection_and_runs_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command_env: None
) -> None:
    monkeypatch.setattr(children, "run_gate", lambda *a, **k: pytest.fail("a child ran"))
    assert cli(["selfcheck", "-k", "eqx*", "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "none                 [cpu] nothing changed: the suite must pass; expect: pass",
        "eqx_as_take          [cpu] eqx_embedding -> jnp.take-based (breaks structure(eqx) == structure("
        "vmap_naive)); expect: invariant:eqx_is_vmap_naive, structure",
    ]


def test_bad_jobs_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command_env: None
) -> None:
    monkeypatch.setattr(children, "run_gate", lambda *a, **k: pytest.fail("a child ran"))
    assert cli(["selfcheck", "-k", "eqx*", "--jobs", "0"]) == 2
    assert capsys.readouterr().err == "--jobs: must be at least 1, got 0\n"


# ------------------------------------------------------------------------ the pieces the split made


def test_the_snapshot_is_compared_by_its_structure_part() -> None:
    """A dump has no jaxpr: what is compared runs from the summary line to the jaxpr, not included."""
    from invariants.snapshot.diff import structure_part

    snapshot = "# p [f32] on cpu\nsummary: kernels 1\n\nkernels:\n  copy -> s32[]\n\njaxpr:\n  x\n"
    assert structure_part(snapshot) == "summary: kernels 1\n\nkernels:\n  copy -> s32[]\n"
    assert structure_part("no summary here\n") == "\n"


def test_a_timed_out_child_is_never_caught() -> None:
    baseline = registry.INJECTIONS[0]
    out = children._timed_out(baseline, 12.3, 600.0)
    assert out.note == "timed out after 600 s" and out.exit_status == -1 and not out.caught
    injected = next(i for i in registry.INJECTIONS if i.name == "eqx_as_take")
    assert children._timed_out(injected, 1.0, 5.0).missing == list(injected.expect)


def test_a_versus_injection_runs_the_versus_command_with_its_env_for_the_candidate_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], command_env: None
) -> None:
    """The flags reach the candidate's workers through versus's command line, never the child's own
    environment; a versus child that writes no record says so, with its last line."""
    import subprocess

    _fake_gate(monkeypatch, lambda log: pytest.fail("a versus injection ran the gate"))
    seen: list[tuple[list[str], dict[str, str], Any]] = []

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        seen.append((command, kwargs["env"], kwargs["cwd"]))
        return subprocess.CompletedProcess(command, 2, "", "versus: something\nversus: the last words\n")

    monkeypatch.setattr(children.subprocess, "run", run)
    assert cli(["selfcheck", "-k", "versus_no_fusion", "--keep", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    ((command, env, cwd),) = seen
    assert command[1:4] == ["-m", "invariants", "versus"] and cwd == tmp_path / "versus_no_fusion"
    assert "--candidate-env=XLA_FLAGS=--xla_disable_hlo_passes=fusion" in command
    assert command[command.index("--programs") + 1] == "naive,take"
    assert "fusion" not in env.get("XLA_FLAGS", "")
    assert "(no record (exit 2: versus: the last words)) |" in out.splitlines()[3]
    assert (tmp_path / "versus_no_fusion" / "versus.txt").read_text().endswith("the last words\n")
