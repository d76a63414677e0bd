"""The invariant tier: every [[invariant]] of the spec files, one item per target, program and config."""

from __future__ import annotations

import warnings

import pytest

from invariants.compile.record import Key
from invariants.plugin import results as _results
from invariants.plugin.outcomes import dumped_line, fail, failure_report, judge, relation_report
from invariants.plugin.results import Failure
from invariants.snapshot.render import render_summary
from invariants.spec.checks import WidenedDtype, config_matches, evaluate

pytestmark = [pytest.mark.gate, pytest.mark.invariant]


def test_invariant(invariant_case, gate, record_property):
    case = invariant_case
    inv = case.invariant
    verdict = evaluate(case, gate.measured, gate.all_programs)
    if inv.assertion.pinned:  # a relation across configurations: each side in its own
        where = f"{case.target} {'/'.join(f'{k.program}[{k.config}]' for k in case.keys)}"
    else:
        where = f"{case.target} {'/'.join(k.program for k in case.keys)} [{case.config}]"
    record_property(
        *_results.record(
            "invariant",
            id=inv.id,
            target=case.target,
            programs=[k.program for k in case.keys],
            config=case.config,
            holds=verdict.holds,
            ratio=verdict.ratio,
            measured=verdict.measured,
            ratchet=inv.ratchet.reason if inv.ratchet else None,
            where=inv.where,
            warning=verdict.warning or None,
            **{"assert": inv.text},
        )
    )

    def summary(key: Key) -> str:
        return render_summary(gate.measured(key), gate.all_programs[key.program].doc)

    def failure() -> str:
        headline = f"{inv.where}: {inv.id} failed on {where}: {verdict.describe(inv)}"
        if inv.why:
            headline += f"\nwhy it matters: {inv.why}"
        keys = tuple(dict.fromkeys(case.keys))
        if len(keys) > 1:  # a relation: what differs between its programs, not against a snapshot
            return relation_report(gate, keys, headline, [summary(k) for k in keys])
        return failure_report(gate, keys[0], headline, summary(keys[0]))

    if verdict.warning:  # pytest's warnings summary shows it under this item's id, at the spec's line
        path, line = inv.where.rsplit(":", 1)
        warnings.warn_explicit(f"{inv.id} on {where}: {verdict.warning}", WidenedDtype, path, int(line))
    others: tuple[str, ...] = ()
    if inv.ratchet is not None and case.program is not None and not inv.assertion.pinned:
        declared = gate.all_programs[case.program].configs
        others = tuple(c for c in declared if c != case.config and config_matches(c, inv.configs))
    described = verdict.describe(inv)
    judge(inv, verdict.holds, verdict.holds, where, described, failure, case.program, case.keys[0], others)


@pytest.mark.gate
def test_correctness(correctness_case, gate, record_property):
    problem = gate.correctness.run(correctness_case)
    c = correctness_case
    record_property(
        *_results.record(
            "correctness",
            id=c.check.id,
            program=c.program,
            config=c.config,
            distribution=c.distribution,
            problem=problem,
        )
    )
    if problem:
        check = correctness_case.check
        # The programs as the runtime target compiles them, for the failure's reader.
        runtime = next(iter(gate.all_targets))
        names = [c.program, *([check.reference] if check.reference else [])]
        dumped = dumped_line(gate, *(Key(name, c.config, runtime) for name in names))
        fail(
            Failure("assert", problem, Key(c.program, c.config, runtime)),
            f"{check.where}: {check.id} failed for {correctness_case.id}: {problem}\n{dumped}",
        )
