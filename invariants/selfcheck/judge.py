"""Judging one injection: whether its child run caught it, from its exit status and results file.

An injection is **caught** when

(a) the child run fails (pytest exit status 1), and
(b) every one of its ``expect`` entries matches at least one item of the results file that failed on a
    verdict (its :class:`~invariants.plugin.results.Failure` is not an ``error``: an item the suite could
    not run caught nothing); an entry is
    ``kind`` (``structure``, ``invariant``, ``correctness``, ``throughput``) or ``kind:id`` (an invariant's
    or a correctness check's id, e.g. ``invariant:one_kernel``). ``structure:code-only`` is a failed
    structure item whose snapshot differs from the committed one in kernel ``code:`` lines only, the HLO
    lines equal (:func:`snapshot_change`: the key rendered again from the child's dump of it): an injection
    that changes code generation and never the HLO.

The baseline (an injection with no ``expect``) is "caught" when its run passes with no failed item.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .._errors import InvariantsError
from ..compile.child import catalog_snapshot_dir
from ..compile.record import Compiled
from ..kernels.dump import code_beside
from ..measure.measurement import measure
from ..plugin.results import Record, Results
from ..snapshot.diff import LineChanges, line_changes, structure_part
from ..snapshot.render import render_summary
from .registry import Injection

KINDS = ("structure", "invariant", "correctness", "throughput")
# A structure item whose snapshot difference is in kernel code lines only (see snapshot_change).
CODE_ONLY = "structure:code-only"


@dataclasses.dataclass
class Outcome:
    """What one injection's child run did."""

    injection: Injection
    exit_status: int
    failed: list[Record]  # failed items of the results file
    missing: list[str]  # expect entries no failed item matched
    seconds: float
    note: str = ""  # why the run could not be judged (child died, no results file)

    @property
    def caught(self) -> bool:
        """For the baseline: it passed. For an injection: the run failed and every expectation matched."""
        if self.note:
            return False
        if self.injection.is_baseline:
            return self.exit_status == 0 and not self.failed
        return self.exit_status == 1 and not self.missing


# The throughput tier records its items as ``ratio`` and ``efficiency`` (see invariants.plugin.results);
# ``throughput`` names them all in an expectation.
_KIND_ALIASES = {"ratio": "throughput", "efficiency": "throughput"}


def item_label(item: Record) -> str:
    """``kind:id`` when the item has an id (invariants, correctness checks), ``structure:code-only`` for a
    structure item whose snapshot differs in code lines only, else ``kind``."""
    if item.kind == "structure" and item.get("code_only") is True:
        return CODE_ONLY
    return f"{item.kind}:{item.id}" if item.id else item.kind


def matches(expect: str, item: Record) -> bool:
    """Whether results-file ``item`` satisfies the expectation ``kind`` or ``kind:id``
    (``structure:code-only``: a structure item :func:`annotate` found to differ in code lines only)."""
    if expect == CODE_ONLY:
        return item.kind == "structure" and item.get("code_only") is True
    label = item_label(item)
    kind = label.split(":")[0]
    if ":" in expect:
        # A throughput item is named by its tier too: "throughput:ID" matches the ratio "ratio:ID".
        tier_label = label.replace(kind, _KIND_ALIASES.get(kind, kind), 1)
        return expect in (label, tier_label)
    return expect in (kind, _KIND_ALIASES.get(kind))


def snapshot_change(item: Record, dump_dir: Path, snapshot_dir: Path | None = None) -> LineChanges | None:
    """Which lines of a failed structure item's snapshot changed: its key rendered again from the child's
    dump (``--hlo-dump-dir``: the optimized HLO and the kernel code the gate writes for a key an invariant
    failed on) against the committed snapshot, their structure parts
    (:func:`invariants.snapshot.diff.structure_part`: the jaxpr is not in a dump, and no XLA flag changes
    it). None when either is missing."""
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
    """The entries of ``results``, each structure item that failed on its snapshot and has a dump told
    apart: ``code_only`` (True when its snapshot differs in kernel code lines only) and ``snapshot_change``
    (which lines, in words)."""
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
    """Decide an injection from its child's exit status and its entries (None: it wrote no results)."""
    if items is None:
        return Outcome(injection, exit_status, [], list(injection.expect), seconds, note="no results file")
    failed = [it for it in items if it.outcome == "failed"]
    judged = [it for it in failed if it.failure is None or it.failure.kind != "error"]
    missing = [e for e in injection.expect if not any(matches(e, it) for it in judged)]
    return Outcome(injection, exit_status, failed, missing, seconds)
