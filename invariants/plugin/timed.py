"""The throughput tier: paired time ratios and memcpy efficiency on the runtime target.

Nothing here asserts an absolute time. A ratio ``time(A) / time(B) <= c`` interleaves A and B call by call
and fails only when its whole confidence interval lies above ``c``. Efficiency is ``t_copy / t_program``
for a device copy of the bytes the lookup must move, failing only when its whole interval lies below its
recorded baseline's floor. Every item is a pytest-benchmark benchmark of the program it judges
(:mod:`invariants.plugin.benchmarks`); with ``--benchmark-disable`` the verdicts still run.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import jax
import pytest

from .. import _config
from ..catalog.programs import Distribution, get_config
from ..hlo.cost import predicted_by, predicted_ratio
from ..records import results as _results
from ..records.compiled import Key
from ..records.results import Failure
from ..scope.targets import versions
from ..timing.baselines import (
    baseline_path,
    baseline_verdict,
    machine,
    max_loss_for,
    provenance,
    read_baseline,
    record_programs,
    write_baseline,
)
from ..timing.calls import MIN_COPY_BYTES, copy_callable, jax_callable
from ..timing.paired import (
    clock_sampling,
    confirmed,
    measure_efficiency,
    measure_ratio,
    runtime_clock,
)
from ..verdict.checks import Case
from . import generate
from .benchmarks import REPLAY, record_samples
from .outcomes import dumped_line, fail, judge
from .tree import GateItem, Group, RecordProperty, by_spec, case_name, group, invariant_table, located

if TYPE_CHECKING:
    from .session import GateSession

_CLOCK_CHOICE = _config.choice("INVARIANTS_CLOCK", _config.CLOCKS, "by backend")
CLOCK_NAME, CLOCK = runtime_clock(jax.devices()[0].platform, _CLOCK_CHOICE, _config.name("INVARIANTS_CLOCK"))
CLOCKED = clock_sampling(CLOCK_NAME, CLOCK)
_BENCHMARK = pytest.mark.benchmark(timer=REPLAY)


def _max_seconds() -> float:
    """The adaptive extension's budget, when an interval straddles the bound: read as an item measures, so
    that each session of a process (the pytest API's, runs in one process) measures within its own."""
    return _config.seconds("INVARIANTS_RATIO_MAX_SECONDS", _config.RATIO_MAX_SECONDS)


def _timed(gate: GateSession, key: tuple[str, str, str], distribution: str = "uniform") -> Any:
    program, config, _ = key
    arguments = gate.device_arguments(program, config, cast(Distribution, distribution))
    executable = gate.cache.executable(*key)
    assert executable is not None  # the runtime target compiles in this process, never in a child
    return jax_callable(executable, *arguments)


class RatioItem(GateItem):
    """A paired time ratio, ``time(a) / time(b) <= c``, of a spec file's throughput invariant."""

    MARKS = ("throughput", "ratio")

    def __init__(self, *, case: Case, **kw: Any) -> None:
        self.case = case
        super().__init__(located=located(case.invariant.where), **kw)
        self.add_marker(_BENCHMARK)

    @property
    def reads(self) -> list[Key]:
        return list(self.case.keys)

    def check(self, gate: GateSession, benchmark: Any, record_property: RecordProperty) -> None:
        case = self.case
        inv = case.invariant
        timed = inv.assertion.timed
        assert timed is not None  # the spec loader admits no other throughput assert
        a_side, b_side, threshold = timed
        key_a, key_b = (Key(side.program, case.config, case.target) for side in (a_side, b_side))
        a, b = _timed(gate, key_a, a_side.distribution), _timed(gate, key_b, b_side.distribution)
        a_name, b_name = a_side.label, b_side.label
        # A failure must repeat to count; for a ratchet, so must a pass.
        result, attempts = confirmed(
            lambda: measure_ratio(a, b, threshold=threshold, max_seconds=_max_seconds(), **CLOCKED),
            verdict="pass" if inv.ratchet else "fail",
        )
        info = {
            "id": inv.id,
            "target": case.target,
            "a": a_name,
            "b": b_name,
            "config": case.config,
            **result.to_dict(),
            "attempts": [r.verdict for r in attempts],
        }
        # What the TPU cost model predicted for the same two programs, beside what the chip did.
        metrics_a, metrics_b = gate.measured(key_a).metrics, gate.measured(key_b).metrics
        info["predicted"] = predicted_ratio(metrics_a, metrics_b)
        name, record = _results.record("ratio", **info)
        record_samples(benchmark, result.samples_a, **record)
        record_property(name, record)
        where = f"{case.target} {a_name}/{b_name} [{case.config}]"
        describe = f"time({a_name}) / time({b_name}) = {result.summary()}"
        if info["predicted"] is not None:
            describe += f"; predicted {info['predicted']:.3g} ({predicted_by(metrics_a, metrics_b)})"
        strict = gate.inconclusive_fails and not inv.ratchet  # a ratchet's pass must be certain already
        beyond = f"> {threshold}" if result.verdict == "fail" else "(--inconclusive fail)"
        judge(
            inv,
            holds=result.verdict == "pass" if strict else result.verdict != "fail",
            tightenable=result.verdict == "pass",
            where=where,
            describe=describe,
            key=key_a,
            failure=lambda: (
                f"{inv.where}: {inv.id} failed on {where}: {describe} {beyond}\n"
                + dumped_line(gate, key_a, key_b)
            ),
        )


class EfficiencyItem(GateItem):
    """A program's memcpy efficiency on the runtime target against its recorded baseline."""

    MARKS = ("throughput", "efficiency")

    def __init__(self, *, key: Key, baseline: Path, **kw: Any) -> None:
        self.key, self.baseline = key, baseline
        super().__init__(located=(baseline, None), **kw)
        self.add_marker(_BENCHMARK)

    @property
    def reads(self) -> list[Key]:
        return [self.key]

    def check(self, gate: GateSession, benchmark: Any, record_property: RecordProperty) -> None:
        _efficiency(self, gate, benchmark, record_property)


def throughput_children(s: GateSession, file: pytest.File) -> list[pytest.Item | pytest.Collector]:
    """The runtime target's collector: per spec file and invariant its ratios, then its efficiencies."""
    ratios, efficiencies = generate.ratio_plan(s), generate.efficiency_plan(s)
    if not ratios and not efficiencies:
        return []
    runtime = next(iter(s.all_targets))

    def ratio(g: Group, case: Case, skip: str | None) -> pytest.Item:
        return RatioItem.from_parent(g, name=case_name(case), case=case, skip=skip)

    def children(g: Group) -> list[pytest.Item | pytest.Collector]:
        made = list(by_spec(ratios, invariant_table, ratio)(g))
        for key, skip in efficiencies:
            folder = s.snapshots.folder(key.program, key.target).parent
            path = baseline_path(folder, key.target, key.program, key.config)
            made.append(
                EfficiencyItem.from_parent(
                    g, name=f"{key.program}-{key.config}", key=key, baseline=path, skip=skip
                )
            )
        return made

    return [group(file, runtime, children)]


def record_command(gate: GateSession, item: EfficiencyItem) -> str:
    """The command that records this item's baseline alone: its program with the other side of its relation
    (without which no efficiency item exists), and a ``-k`` that leaves out programs named around it."""
    program, config, target = item.key
    programs = record_programs(item.key, generate.throughput_cases(gate))
    around = [p for p in programs if p != program and item.name in f"{p}-{config}"]
    only = shlex.quote(" and ".join([f"efficiency and {item.name}", *(f"not {p}-{config}" for p in around)]))
    return gate.update_command(item.path, f"-k {only} --record-baselines", ",".join(programs), target, config)


def _efficiency(
    item: EfficiencyItem, gate: GateSession, benchmark: Any, record_property: RecordProperty
) -> None:
    key, path = item.key, item.baseline
    program, config, target = key
    max_loss = max_loss_for(gate.specs, target)
    here = machine(jax.devices()[0].device_kind, CLOCK_NAME)
    baseline = read_baseline(path)
    # Re-recorded only on request: --snapshot-update must not commit fresh timing noise over a baseline. A
    # missing one it records, else a new program's first update would fail with nothing to compare.
    missing = baseline is None and gate.updating
    writable = gate.snapshots.writable(program)
    updating = (gate.record_baselines or missing) and writable
    if not writable and (baseline is None or baseline.get("machine") != here):
        pytest.skip(
            f"{path}: no baseline of {program}[{config}] for this machine ({here}); efficiency is "
            "machine-relative and the catalog's baselines ship read-only with the package"
        )
    floor = baseline["efficiency"] * (1 - max_loss) if baseline and not updating else None
    facts = gate.all_programs[program].input_facts(get_config(config))
    nbytes = facts["lookups"] * facts["row_bytes"]  # the rows a lookup gathers or scatters, at least
    if nbytes < MIN_COPY_BYTES:
        pytest.skip(
            f"{program}[{config}] moves {nbytes} bytes of rows: too few for a memory copy of them to "
            "time; efficiency means something for a lookup of many rows"
        )
    program_call, copy_call = _timed(gate, key), copy_callable(nbytes)
    result, attempts = confirmed(
        lambda: measure_efficiency(
            program_call, copy_call, min_efficiency=floor, max_seconds=_max_seconds(), **CLOCKED
        )
    )
    info = {
        "id": "efficiency",
        "target": target,
        "program": program,
        "config": config,
        "bytes": nbytes,
        **result.to_dict(),
        "attempts": [r.verdict for r in attempts],
    }
    if baseline:
        info["baseline"] = baseline["efficiency"]
        info["baseline_provenance"] = provenance(baseline)
    # A device-clock measurement that fell back to the wall clock is another machine for a baseline.
    here = machine(jax.devices()[0].device_kind, result.clock)
    if updating:
        # The median of three, so that one lucky run does not move every later verdict.
        runs = [result] + [measure_efficiency(program_call, copy_call, **CLOCKED) for _ in range(2)]
        written = write_baseline(path, runs, here, versions())
        info["recorded"] = {
            "path": str(path),
            "efficiency": written["efficiency"],
            "why": "missing" if baseline is None else "--record-baselines",
        }
        info["verdict"] = _results.RECORDED
    name, record = _results.record("efficiency", **info)
    record_samples(benchmark, result.samples_b, **record)  # the program's: b of t_copy / t_program
    record_property(name, record)
    if updating:
        return
    if baseline is None:
        pytest.skip(
            f"{path}: no efficiency baseline for {program}[{config}] on {target}; record it with: "
            + record_command(gate, item)
        )
    if baseline.get("machine") != here:
        pytest.skip(
            f"{path}: baseline recorded on {baseline.get('machine')}, this is {here}; "
            "efficiency is machine-relative, record one here with --record-baselines"
        )
    verdict = baseline_verdict(result, baseline["efficiency"], max_loss)
    if verdict == "fail":
        what = (
            f"lost efficiency: {result.summary()} against baseline {baseline['efficiency']:.4g} "
            f"({provenance(baseline)}), below the floor {floor:.4g} (max loss {max_loss:.0%}); "
            "a runtime regression, even if the HLO did not change"
        )
        fail(Failure("assert", what, key), f"{path}: {program}[{config}] {what}\n" + dumped_line(gate, key))
