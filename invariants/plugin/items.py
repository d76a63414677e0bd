"""The gate's structure, invariant and correctness items: each decides in its ``check`` (the callable
pytest runs, with the fixtures it names), records what it measured and fails with its own text, never a
traceback. In a downstream run the catalog's programs are compared with the snapshots the installed package
ships, which no update rewrites.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import pytest

from .._paths import shown
from ..records import results as _results
from ..records.compiled import Key
from ..records.results import Failure
from ..snapshot.diff import older_format
from ..snapshot.render import render_summary
from ..snapshot.store import MARKER
from ..verdict.checks import Case, WidenedDtype, config_matches, evaluate
from ..verdict.correctness import CorrectnessCase
from .outcomes import (
    dumped_line,
    fail,
    judge,
    relation_report,
    snapshot_comparison,
    structure_failure,
    versions_line,
)
from .tree import GateItem, RecordProperty, located

if TYPE_CHECKING:
    from .session import GateSession

# syrupy warns when a snapshot is not named after its test; ours are named by (target, program, config).
_SYRUPY_NAMING = pytest.mark.filterwarnings(r"ignore:\s*Can not relate snapshot (location|name):UserWarning")


class StructureItem(GateItem):
    """A program's compiled structure on a target against its snapshot file."""

    MARKS = ("snapshot",)

    def __init__(self, *, key: Key, snapshot: str, **kw: Any) -> None:
        self.key = key
        super().__init__(located=(snapshot, None), **kw)
        self.add_marker(getattr(pytest.mark, MARKER)(snapshot))
        self.add_marker(_SYRUPY_NAMING)

    @property
    def reads(self) -> list[Key]:
        return [self.key]

    def check(self, gate: GateSession, structure_snapshot: Any, record_property: RecordProperty) -> None:
        key = self.key
        program, config, target = key
        measured = gate.measured(key)
        # Every numeric metric goes to the results file, and only the stable ones into the snapshot text.
        fields = {**key._asdict(), "compile_cache": gate.cache.outcome(key), **measured.numbers()}
        record_property(*_results.record("structure", **fields))
        summary = render_summary(measured, gate.all_programs[program].doc)
        path = gate.snapshots.path(key)
        if not gate.snapshots.writable(program):
            if not path.exists():
                what = f"no snapshot of {program}[{config}] on {target} to compare"
                fail(Failure("snapshot", what, key), f"{path}: {what}")
            if summary != path.read_text():
                what = "no longer compiles to the package's snapshot (read-only; "
                what += "--no-catalog leaves the catalog out)"
                compared = snapshot_comparison(gate, key, summary)
                text = "\n".join(
                    [f"{program}[{config}] on {target} {what}:", *compared, dumped_line(gate, key)]
                )
                fail(Failure("snapshot", what, key), text)
            return
        if not path.exists() and not gate.updating:
            # On every target present (a new program needs them all), with its gradient where it has one.
            programs = ",".join(p for p in (program, f"grad_{program}") if p in gate.all_programs)
            what = f"no snapshot for {program}[{config}] on {target}; record it with: " + gate.update_command(
                self.path, "--snapshot-update", programs
            )
            fail(Failure("snapshot", what, key), f"{path}: {what}")
        if path.exists() and not gate.updating and older_format(path.read_text()):
            accept = gate.update_command(self.path, "--snapshot-update", program, target, config)
            what = (
                "written in the snapshot format before kernels were named by what they are; "
                f"re-record it: {accept}"
            )
            fail(Failure("snapshot", what, key), f"{shown(path)}: {what}")
        # syrupy compares (and, on --snapshot-update, writes); the failure text is ours.
        if structure_snapshot != summary:
            accept = gate.update_command(self.path, "--snapshot-update", program, target, config)
            fail(*structure_failure(gate, key, summary, accept))


class InvariantItem(GateItem):
    """One ``[[invariant]]`` on a target, program (or relation) and configuration."""

    MARKS = ("invariant",)

    def __init__(self, *, case: Case, **kw: Any) -> None:
        self.case = case
        super().__init__(located=located(case.invariant.where), **kw)

    @property
    def reads(self) -> list[Key]:
        return list(self.case.keys)

    def check(self, gate: GateSession, record_property: RecordProperty) -> None:
        case = self.case
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
            compared = snapshot_comparison(gate, keys[0], summary(keys[0]))
            return "\n".join([headline, versions_line(keys[0].target), *compared, dumped_line(gate, keys[0])])

        if verdict.warning:  # shown under this item's id, at the spec's line
            path, line = inv.where.rsplit(":", 1)
            warnings.warn_explicit(f"{inv.id} on {where}: {verdict.warning}", WidenedDtype, path, int(line))
        others: tuple[str, ...] = ()
        if inv.ratchet is not None and case.program is not None and not inv.assertion.pinned:
            declared = gate.all_programs[case.program].configs
            others = tuple(c for c in declared if c != case.config and config_matches(c, inv.configs))
        described = verdict.describe(inv)
        judge(
            inv, verdict.holds, verdict.holds, where, described, failure, case.program, case.keys[0], others
        )


class CorrectnessItem(GateItem):
    """One ``[[correctness]]`` check of a program's values on the runtime target."""

    MARKS = ("correctness",)

    def __init__(self, *, case: CorrectnessCase, **kw: Any) -> None:
        self.case = case
        super().__init__(located=located(case.check.where), **kw)

    def check(self, gate: GateSession, record_property: RecordProperty) -> None:
        c = self.case
        problem = gate.correctness.run(c)
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
            runtime = next(iter(gate.all_targets))
            names = [c.program, *([c.check.reference] if c.check.reference else [])]
            dumped = dumped_line(gate, *(Key(name, c.config, runtime) for name in names))
            fail(
                Failure("assert", problem, Key(c.program, c.config, runtime)),
                f"{c.check.where}: {c.check.id} failed for {c.id}: {problem}\n{dumped}",
            )
