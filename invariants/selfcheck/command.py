"""``python -m invariants selfcheck``: prove the gate can fail by injecting regressions it must catch.

The baseline ``none`` injects nothing and must pass, or every other verdict is meaningless: it runs every
program and target of the selected injections, and the table says what it ran, since it is not the whole
gate. Exit status: 0 when the baseline passes and every selected injection is caught, 1 otherwise."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from .._errors import InvariantsError, Parser
from .._paths import check_output_dir
from .children import run_all
from .judge import Outcome, item_label
from .registry import check_selected, coverage, restrict_targets, select


def _parser() -> Parser:
    p = Parser(
        prog="python -m invariants selfcheck",
        description="prove the gate can fail: inject regressions it must catch, each in a child run",
    )
    p.add_argument(
        "-k", dest="names", help="comma-separated injection names or globs (the baseline always runs)"
    )
    p.add_argument("--targets", help="only injections on these targets (e.g. cpu); default: all")
    p.add_argument("--fast", action="store_true", help="only the fast subset the slow pytest test runs")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="children at a time")
    p.add_argument("--keep", metavar="DIR", help="keep each child's results, output and HLO dumps under DIR")
    p.add_argument("--list", action="store_true", help="list the injections and exit")
    return p


EXAMPLES = 3  # failing items named per injection


def _verdict(o: Outcome) -> str:
    if o.injection.is_baseline:
        return "passes" if o.caught else "**FAILS**"
    return "yes" if o.caught else "**no**"


def _row(o: Outcome) -> str:
    inj = o.injection
    expected = "pass" if inj.is_baseline else ", ".join(inj.expect)
    labels = sorted({item_label(it) for it in o.failed})
    ids = [it.nodeid.split("::", 1)[-1] for it in o.failed[:EXAMPLES]]
    extra = f"; missing {', '.join(o.missing)}" if o.missing and not inj.is_baseline else ""
    note = f" ({o.note})" if o.note else ""
    by = f"{len(o.failed)}: {', '.join(labels)}{extra}{note}"
    return f"| {inj.name} | {expected} | {_verdict(o)} | {by} | {', '.join(ids)} | {o.seconds:.0f} |"


def render_table(outcomes: Sequence[Outcome]) -> str:
    lines = [
        "| injection | expected | caught | failing items | e.g. | s |",
        "|---|---|---|---|---|---|",
        *(_row(o) for o in outcomes),
    ]
    injected = [o for o in outcomes if not o.injection.is_baseline]
    caught = sum(o.caught for o in injected)
    base = next((o for o in outcomes if o.injection.is_baseline), None)
    base_text = "passes" if base and base.caught else "FAILS (scores are meaningless)"
    lines += ["", f"mutation score: {caught}/{len(injected)} injections caught; baseline {base_text}"]
    if base:
        # So that "passes" never reads as "the gate is green".
        lines.append(
            f"baseline ran: {coverage(base.injection)}; the gate's default run (pytest invariants/gate) "
            "covers every program and target"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    injections = restrict_targets(select(args.names, fast_only=args.fast), args.targets)
    check_selected(injections, args.names, args.targets)
    if args.list:
        for inj in injections:
            print(f"{inj.name:20} [{inj.targets}] {inj.doc}; expect: {', '.join(inj.expect) or 'pass'}")
        return 0
    if args.jobs < 1:
        raise InvariantsError(f"--jobs: must be at least 1, got {args.jobs}")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="invariants-selfcheck-") as tmp:
        workdir = check_output_dir(args.keep, "--keep") if args.keep else Path(tmp)
        outcomes = run_all(injections, workdir, args.jobs, progress=sys.stderr)
    print(render_table(outcomes))
    print(f"selfcheck: {len(outcomes)} runs in {time.perf_counter() - start:.0f} s")
    return 0 if all(o.caught for o in outcomes) else 1
