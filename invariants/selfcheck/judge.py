"""Judging one injection: whether its child run caught it, from its exit status and results file.

An injection is caught when its run fails (exit status 1) and each of its ``expect`` entries matches an
item that failed on a verdict (an ``error`` caught nothing). An entry is a kind (``structure``,
``invariant``, ``correctness``, ``throughput``), ``kind:id``, or ``structure:code-only``: a structure item
whose snapshot differs in kernel ``code:`` lines only, the HLO lines equal, as a change of code generation
behind equal HLO does. The baseline (no ``expect``) is caught when its run passes with no failed item."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .._errors import InvariantsError
from ..compile.child import catalog_snapshot_dir
from ..kernels.dump import code_beside
from ..measure.measurement import measure
from ..records.compiled import Compiled
from ..records.results import Record, Results
from ..snapshot.diff import LineChanges, line_changes, structure_part
from ..snapshot.render import render_summary
from .registry import Injection

CODE_ONLY = "structure:code-only"


@dataclasses.dataclass
class Outcome:
    injection: Injection
    exit_status: int
    failed: list[Record]
    missing: list[str]  # expect entries no failed item matched
    seconds: float
    note: str = ""  # why the run could not be judged

    @property
    def caught(self) -> bool:
        if self.note:
            return False
        if self.injection.is_baseline:
            return self.exit_status == 0 and not self.failed
        return self.exit_status == 1 and not self.missing


# ``throughput`` names the throughput tier's records in an expectation.
_KIND_ALIASES = {"ratio": "throughput", "efficiency": "throughput"}


def item_label(item: Record) -> str:
    if item.kind == "structure" and item.get("code_only") is True:
        return CODE_ONLY
    return f"{item.kind}:{item.id}" if item.id else item.kind


def matches(expect: str, item: Record) -> bool:
    label = item_label(item)
    kind = label.split(":")[0]
    if ":" in expect:
        tier_label = label.replace(kind, _KIND_ALIASES.get(kind, kind), 1)
        return expect in (label, tier_label)
    return expect in (kind, _KIND_ALIASES.get(kind))


def snapshot_change(item: Record, dump_dir: Path, snapshot_dir: Path | None = None) -> LineChanges | None:
    """The changed lines of a failed structure item's snapshot, its key rendered again from the child's dump
    against the committed one; structure parts only: no XLA flag changes the jaxpr. None when either is
    missing."""
    # Lazy: it imports pytest, which selfcheck --help and --list start without.
    from ..snapshot.store import snapshot_stem

    program, config, target = str(item.program), str(item.config), str(item.target)
    stem = snapshot_stem(program, config)
    hlo = dump_dir / target / f"{stem}.hlo.txt"
    committed = (snapshot_dir or catalog_snapshot_dir()) / target / f"{stem}.txt"
    if not hlo.is_file() or not committed.is_file():
        return None
    code = {Path(name).name: text for name, text in (code_beside(hlo) or {}).items()}
    compiled = Compiled(program, config, target, "", (), hlo.read_text(), {}, {}, 0.0, code)
    measured = measure(compiled, source=str(hlo), code_folder=str(hlo.parent), no_code="no code dumped")
    now = render_summary(measured)
    return line_changes(structure_part(committed.read_text()), structure_part(now))


def annotate(results: Results, dump_dir: Path, snapshot_dir: Path | None = None) -> list[Record]:
    """The entries, each structure item that failed on its snapshot told ``code_only`` and which lines."""
    items = []
    for it in results.items:
        if it.kind == "structure" and it.failure is not None and it.failure.kind == "snapshot":
            try:
                changes = snapshot_change(it, dump_dir, snapshot_dir)
            except InvariantsError as err:  # a dump the parsers do not understand: said, never a guess
                it = it.with_extra(code_only=False, snapshot_change=f"not read: {err}")
            else:
                if changes is not None:
                    it = it.with_extra(code_only=changes.code_only, snapshot_change=changes.describe())
        items.append(it)
    return items


def outcome_of(injection: Injection, exit_status: int, items: list[Record] | None, seconds: float) -> Outcome:
    if items is None:
        return Outcome(injection, exit_status, [], list(injection.expect), seconds, note="no results file")
    failed = [it for it in items if it.outcome == "failed"]
    judged = [it for it in failed if it.failure is None or it.failure.kind != "error"]
    missing = [e for e in injection.expect if not any(matches(e, it) for it in judged)]
    return Outcome(injection, exit_status, failed, missing, seconds)
