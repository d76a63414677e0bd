"""``python -m invariants selfcheck``: prove the gate can fail by injecting regressions it must catch.

This module is the command line: it parses the arguments, selects the injections
(:mod:`~invariants.selfcheck.registry`), runs each in a child (:mod:`~invariants.selfcheck.children`),
which :mod:`~invariants.selfcheck.judge` decides, and prints the table (:mod:`~invariants.selfcheck.score`).

The baseline injection ``none`` changes nothing and must pass; a failing baseline makes every other verdict
meaningless, and the command says so and exits 1. The baseline runs every program and target of the
selected injections (:func:`~invariants.selfcheck.registry.baseline_for`), and the output says what it
ran: it is not the whole gate.
The printed mutation-score table lists, per injection, whether it was caught and by which items (count
and a few ids). Progress goes to stderr, one line per child as it ends. Exit status: 0 when the baseline
passes and every selected injection is caught, 1 otherwise, 2 for bad input.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from .._errors import InvariantsError, Parser
from .._paths import check_output_dir
from .children import run_all
from .registry import Injection, check_selected, restrict_targets, select
from .score import render_table


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


def _list(injections: list[Injection]) -> None:
    for inj in injections:
        print(f"{inj.name:20} [{inj.targets}] {inj.doc}; expect: {', '.join(inj.expect) or 'pass'}")


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    injections = restrict_targets(select(args.names, fast_only=args.fast), args.targets)
    check_selected(injections, args.names, args.targets)
    if args.list:
        _list(injections)
        return 0
    if args.jobs < 1:
        raise InvariantsError(f"--jobs: must be at least 1, got {args.jobs}")
    start = time.perf_counter()
    if args.keep:
        workdir = check_output_dir(args.keep, "--keep")
        outcomes = run_all(injections, workdir, args.jobs, progress=sys.stderr)
    else:
        with tempfile.TemporaryDirectory(prefix="invariants-selfcheck-") as tmp:
            outcomes = run_all(injections, Path(tmp), args.jobs, progress=sys.stderr)
    print(render_table(outcomes))
    print(f"selfcheck: {len(outcomes)} runs in {time.perf_counter() - start:.0f} s")
    return 0 if all(o.caught for o in outcomes) else 1
