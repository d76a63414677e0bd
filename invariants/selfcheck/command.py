"""``python -m invariants selfcheck``: prove the gate can fail by injecting regressions it must catch.

Each :class:`Injection` is one way the suite's subject can regress: a set of XLA flags (``XLA_FLAGS``,
which some flags answer by aborting the process) or a catalog program swapped for a bad one (through the
``invariants.selfcheck.inject`` plugin, see there). Every injection runs the gate in its own child process,
restricted to the targets and programs it needs, and writes a ``--results-json`` file. An injection is
**caught** when

(a) the child run fails (pytest exit status 1), and
(b) every one of its ``expect`` entries matches at least one failed item of the results file; an entry is
    ``kind`` (``structure``, ``invariant``, ``correctness``, ``throughput``) or ``kind:id`` (an invariant's
    or a correctness check's id, e.g. ``invariant:one_kernel``). ``structure:code-only`` is a failed
    structure item whose snapshot differs from the committed one in kernel ``code:`` lines only, the HLO
    lines equal (:func:`snapshot_change`: the key rendered again from the child's dump of it): an injection
    that changes code generation and never the HLO.

The baseline injection ``none`` changes nothing and must pass; a failing baseline makes every other verdict
meaningless, and the command says so and exits 1. The baseline runs every program and target of the
selected injections (:func:`baseline_for`), and the output says what it ran: it is not the whole gate.
The printed mutation-score table lists, per injection, whether it was caught and by which items (count
and a few ids). Progress goes to stderr, one line per child as it ends. Exit status: 0 when the baseline
passes and every selected injection is caught, 1 otherwise, 2 for bad input.

On the TPU target, ``XLA_FLAGS`` does not reach the ahead-of-time compile: libtpu reads its own flags from
``LIBTPU_INIT_ARGS`` (measured with jax 0.10.2 / libtpu 0.0.42.1: with ``--xla_disable_hlo_passes=fusion``
in ``XLA_FLAGS``, ``take`` on tpu-v5e keeps its 7 kernels, 4 fusions; in ``LIBTPU_INIT_ARGS`` libtpu exits
with ``Unknown command line flag 'xla_disable_hlo_passes'``). The TPU injection is therefore a program
rewrite.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import fnmatch
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TextIO

from .. import _config
from .._errors import InvariantsError
from .._paths import PACKAGE_DIR, check_output_dir
from ..catalog.select import selectors
from ..compile.child import gate_command, gate_env, last_line, run_gate
from ..plugin.items import CORRECTNESS

INJECT_MODULE = "invariants.selfcheck.inject"
KINDS = ("structure", "invariant", "correctness", "throughput")
# A structure item whose snapshot difference is in kernel code lines only (see snapshot_change).
CODE_ONLY = "structure:code-only"


@dataclasses.dataclass(frozen=True)
class Injection:
    """One regression to inject.

    ``env`` is added to the child's environment (``XLA_FLAGS`` or ``INVARIANTS_INJECT``); ``programs`` and
    ``targets`` restrict the child's run (``--programs``, ``--targets``, and ``--configs`` with ``configs``,
    None: all of them); ``expect`` lists what must fail
    (see the module docstring); an empty ``expect`` means the run must pass (the baseline). ``fast``
    injections are the ones the slow pytest test runs by default. The throughput tier (timing) runs only
    for ``timing`` injections, and the correctness tier only for ``correctness`` ones: they are what make a
    child slow (a row loop times at seconds a call, and as a reference it runs for every program checked
    against it). The baseline runs each tier that one of its injections runs.
    """

    name: str
    doc: str
    env: Mapping[str, str]
    programs: tuple[str, ...]
    expect: tuple[str, ...]
    targets: str = "cpu"
    fast: bool = False
    timing: bool = False
    correctness: bool = False
    command: Literal["gate", "versus"] = "gate"
    configs: str | None = None

    @property
    def is_baseline(self) -> bool:
        return not self.expect


def _swap(**swaps: str) -> dict[str, str]:
    return {
        _config.name("INVARIANTS_INJECT"): ";".join(
            f"{name}={INJECT_MODULE}:{fn}" for name, fn in swaps.items()
        )
    }


def _injection(row: dict[str, Any]) -> Injection:
    """One ``[[injection]]`` of ``data/injections.toml``: ``swap`` becomes the child's ``INVARIANTS_INJECT``,
    and a variable of the suite in ``env`` must be one of :mod:`invariants._config`'s."""
    env = {_config.name(k) if k.startswith("INVARIANTS_") else k: v for k, v in row.pop("env", {}).items()}
    swap = row.pop("swap", None)
    if swap:
        env.update(_swap(**swap))
    return Injection(env=env, programs=tuple(row.pop("programs")), expect=tuple(row.pop("expect")), **row)


def _registry() -> tuple[Injection, ...]:
    text = (PACKAGE_DIR / "data" / "injections.toml").read_text(encoding="utf-8")
    return tuple(_injection(dict(row)) for row in tomllib.loads(text)["injection"])


# The injections are data (data/injections.toml): adding one is a table there, and a bad program in
# selfcheck/inject.py when it swaps one.
INJECTIONS: tuple[Injection, ...] = _registry()


def select(names: str | None, *, fast_only: bool = False) -> list[Injection]:
    """The injections matching ``names`` (comma-separated names or globs; None: all), baseline always first.

    An entry that matches nothing raises one line listing the known names.
    """
    chosen = [i for i in INJECTIONS if i.fast] if fast_only else list(INJECTIONS)
    if names is not None:
        patterns = selectors(names, "-k", "name injections (selfcheck --list), or leave -k out for all")
        for p in patterns:
            if not any(fnmatch.fnmatchcase(i.name, p) or p in i.name for i in INJECTIONS):
                known = ", ".join(i.name for i in INJECTIONS)
                raise InvariantsError(f"-k: no injection matches {p!r}; known: {known}")
        chosen = [
            i for i in INJECTIONS if any(fnmatch.fnmatchcase(i.name, p) or p in i.name for p in patterns)
        ]
    others = [i for i in chosen if not i.is_baseline]
    return [baseline_for(others), *others]


def baseline_for(injections: Sequence[Injection]) -> Injection:
    """The clean run the injections are judged against: every program, target and tier they run, so that
    each injection's items are shown to pass first."""
    base = INJECTIONS[0]
    programs = dict.fromkeys(base.programs)
    targets = dict.fromkeys([base.targets])
    for inj in injections:
        programs.update(dict.fromkeys(inj.programs))
        targets.update(dict.fromkeys(inj.targets.split(",")))
    return dataclasses.replace(
        base,
        programs=tuple(programs),
        targets=",".join(targets),
        timing=base.timing or any(i.timing for i in injections),
        correctness=base.correctness or any(i.correctness for i in injections),
    )


def coverage(injection: Injection) -> str:
    """What one child run covers, in words: its targets, programs and tiers."""
    tiers = "structure, invariants" + (", correctness" if injection.correctness else "")
    tiers += ", throughput" if injection.timing else ""
    return f"targets {injection.targets}; programs {', '.join(injection.programs)}; tiers {tiers}"


def restrict_targets(injections: Sequence[Injection], targets: str | None) -> list[Injection]:
    """Keep the baseline and the injections whose targets ``targets`` selects (None keeps all), in the
    gate's own grammar (:func:`invariants.catalog.targets.select_targets`: names, ``all``, ``runtime``,
    families;
    an unknown name or an empty selection is one line, with a suggestion).
    """
    if targets is None:
        return list(injections)
    from ..compile.process import held_stderr

    with held_stderr():  # the targets come with the catalog: JAX, and the CUDA plugin's notices
        from ..catalog.targets import select_targets

        chosen = {t.name for t in select_targets(targets)}
    others = [i for i in injections if not i.is_baseline and set(i.targets.split(",")) <= chosen]
    return [baseline_for(others), *others]


def check_selected(injections: Sequence[Injection], names: str | None, targets: str | None) -> None:
    """One line when the selection leaves no injection beside the baseline: a self-check that injects
    nothing proves nothing ("0/0 caught")."""
    if any(not i.is_baseline for i in injections):
        return
    given = " ".join(
        f"{option} {value}" for option, value in (("-k", names), ("--targets", targets)) if value
    )
    on = sorted({t for i in INJECTIONS if not i.is_baseline for t in i.targets.split(",")})
    raise InvariantsError(
        f"{given or 'selfcheck'}: selects no injection (the baseline 'none' is not one; it runs beside "
        f"them); injections run on {', '.join(on)}: see selfcheck --list"
    )


@dataclasses.dataclass
class Outcome:
    """What one injection's child run did."""

    injection: Injection
    exit_status: int
    failed: list[dict[str, Any]]  # failed items of the results file
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


def item_label(item: Mapping[str, Any]) -> str:
    """``kind:id`` when the item has an id (invariants, correctness checks), ``structure:code-only`` for a
    structure item whose snapshot differs in code lines only, else ``kind``."""
    kind = str(item.get("kind", "?"))
    if kind == "structure" and item.get("code_only") is True:
        return CODE_ONLY
    return f"{kind}:{item['id']}" if item.get("id") else kind


def matches(expect: str, item: Mapping[str, Any]) -> bool:
    """Whether results-file ``item`` satisfies the expectation ``kind`` or ``kind:id``
    (``structure:code-only``: a structure item :func:`annotate` found to differ in code lines only)."""
    if expect == CODE_ONLY:
        return item.get("kind") == "structure" and item.get("code_only") is True
    label = item_label(item)
    kind = label.split(":")[0]
    if ":" in expect:
        # A throughput item is named by its tier too: "throughput:ID" matches the ratio "ratio:ID".
        tier_label = label.replace(kind, _KIND_ALIASES.get(kind, kind), 1)
        return expect in (label, tier_label)
    return expect in (kind, _KIND_ALIASES.get(kind))


def snapshot_change(item: Mapping[str, Any], dump_dir: Path, snapshot_dir: Path | None = None) -> Any:
    """Which lines of a failed structure item's snapshot changed (an
    ``invariants.releases.bisect.LineChanges``):
    its key rendered again from the child's dump (``--hlo-dump-dir``: the optimized HLO and the kernel code
    the gate writes for a key an invariant failed on) against the committed snapshot, from its ``summary:``
    line on (the jaxpr above it is not in a dump; no XLA flag changes it). None when either is missing."""
    from ..compile.artifacts import Compiled
    from ..compile.child import catalog_snapshot_dir
    from ..hlo.parse import parse_module
    from ..hlo.structure import structure_of
    from ..kernels import parse_kernel_code
    from ..kernels.dump import code_beside
    from ..kernels.program import ProgramCode
    from ..releases.bisect import line_changes
    from ..snapshot.render import render_summary
    from ..snapshot.store import snapshot_stem

    program, config, target = (str(item.get(f)) for f in ("program", "config", "target"))
    stem = snapshot_stem(program, config)
    hlo = dump_dir / target / f"{stem}.hlo.txt"
    committed = (snapshot_dir or catalog_snapshot_dir()) / target / f"{stem}.txt"
    if not hlo.is_file() or not committed.is_file():
        return None
    structure = structure_of(parse_module(hlo.read_text(), f"{program}/{config}/{target}"))
    files = code_beside(hlo) or {}
    code = ProgramCode(structure, tuple(parse_kernel_code(files))) if files else None
    compiled = Compiled(program, config, target, "", (), "", {}, {}, 0.0)
    now = render_summary(compiled, structure, "", code)

    def from_summary(text: str) -> str:
        lines = text.splitlines()
        start = next((i for i, ln in enumerate(lines) if ln.startswith("summary: ")), len(lines))
        return "\n".join(lines[start:]) + "\n"

    return line_changes(from_summary(committed.read_text()), from_summary(now))


def annotate(results: Mapping[str, Any], dump_dir: Path, snapshot_dir: Path | None = None) -> dict[str, Any]:
    """``results`` with each failed structure item that has a dump told apart: ``code_only`` (True when its
    snapshot differs in kernel code lines only) and ``snapshot_change`` (which lines, in words)."""
    items = []
    for it in results.get("items", []):
        if it.get("kind") == "structure" and it.get("outcome") == "failed":
            try:
                changes = snapshot_change(it, dump_dir, snapshot_dir)
            except InvariantsError as err:  # a dump the parsers do not understand: said, never a guess
                it = {**it, "code_only": False, "snapshot_change": f"not read: {err}"}
            else:
                if changes is not None:
                    it = {**it, "code_only": changes.code_only, "snapshot_change": changes.describe()}
        items.append(it)
    return {**results, "items": items}


def outcome_of(
    injection: Injection, exit_status: int, results: Mapping[str, Any] | None, seconds: float
) -> Outcome:
    """Decide an injection from its child's exit status and results file (None: there was none)."""
    if results is None:
        return Outcome(injection, exit_status, [], list(injection.expect), seconds, note="no results file")
    failed = [it for it in results.get("items", []) if it.get("outcome") == "failed"]
    missing = [e for e in injection.expect if not any(matches(e, it) for it in failed)]
    return Outcome(injection, exit_status, failed, missing, seconds)


def child_command(injection: Injection, results: Path, dump_dir: Path) -> list[str]:
    """The gate's command line for ``injection`` (see :func:`invariants.compile.child.gate_command`)."""
    if injection.command == "versus":
        return [
            sys.executable, "-m", "invariants", "versus", "--baseline", "current", "--candidate", "current",
            "--programs", ",".join(injection.programs), "--targets", injection.targets,
            "--json", str(results),
            *(f"--candidate-env={k}={v}" for k, v in injection.env.items()),
        ]  # fmt: skip
    return gate_command(
        targets=injection.targets,
        programs=injection.programs,
        configs=injection.configs,
        markers="not slow" if injection.timing else "not slow and not throughput",
        # The correctness items are deselected unless an expectation needs them.
        k=None if injection.correctness else f"not {CORRECTNESS}",
        plugins=(INJECT_MODULE,),
        results=results,
        dump_dir=dump_dir,
    )


def _run_versus(injection: Injection, folder: Path, timeout: float) -> Outcome:
    """A versus injection: the command in a child, its env for the candidate's workers only (in the
    command line, never in this child's environment); judged from its record's items."""
    from ..versus.report import as_items, load_record

    folder.mkdir(parents=True, exist_ok=True)
    record = folder / "versus.json"
    record.unlink(missing_ok=True)
    start = time.perf_counter()
    try:
        proc = subprocess.run(child_command(injection, record, folder / "hlo"), cwd=folder, env=gate_env(),
                              capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        out = Outcome(injection, -1, [], list(injection.expect), time.perf_counter() - start)
        out.note = f"timed out after {timeout:.0f} s"
        return out
    (folder / "versus.txt").write_text(proc.stdout + proc.stderr)
    loaded = {"items": as_items(load_record(record))} if record.exists() else None
    outcome = outcome_of(injection, proc.returncode, loaded, time.perf_counter() - start)
    if loaded is None:
        tail = (proc.stderr.strip() or "no output").splitlines()[-1]
        outcome.note = f"no record (exit {proc.returncode}: {tail[:160]})"
    return outcome


def run_injection(injection: Injection, workdir: Path, timeout: float = 600.0) -> Outcome:
    """Run the gate with ``injection`` in a child process (never in this one: flags can abort it)."""
    folder = workdir / injection.name
    if injection.command == "versus":
        return _run_versus(injection, folder, timeout)
    command = child_command(injection, folder / "results.json", folder / "hlo")
    child = run_gate(command, env=gate_env(injection.env), folder=folder, timeout=timeout)
    if child.timed_out:
        out = Outcome(injection, -1, [], list(injection.expect), child.seconds)
        out.note = f"timed out after {timeout:.0f} s"
        return out
    results = None if child.results is None else annotate(child.results, folder / "hlo")
    outcome = outcome_of(injection, child.returncode, results, child.seconds)
    if child.results is None:
        outcome.note = f"no results file (exit {child.returncode}: {last_line(child.log)[:160]})"
    return outcome


def render_table(outcomes: Sequence[Outcome], examples: int = 3) -> str:
    """The mutation-score table (markdown) and a score line."""
    lines = [
        "| injection | expected | caught | failing items | e.g. | s |",
        "|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        inj = o.injection
        expected = "pass" if inj.is_baseline else ", ".join(inj.expect)
        if inj.is_baseline:
            verdict = "passes" if o.caught else "**FAILS**"
        else:
            verdict = "yes" if o.caught else "**no**"
        labels = sorted({item_label(it) for it in o.failed})
        ids = [str(it.get("nodeid", "")).split("[", 1)[-1].rstrip("]") for it in o.failed[:examples]]
        extra = f"; missing {', '.join(o.missing)}" if o.missing and not inj.is_baseline else ""
        note = f" ({o.note})" if o.note else ""
        by = f"{len(o.failed)}: {', '.join(labels)}{extra}{note}"
        lines.append(f"| {inj.name} | {expected} | {verdict} | {by} | {', '.join(ids)} | {o.seconds:.0f} |")
    injected = [o for o in outcomes if not o.injection.is_baseline]
    caught = sum(o.caught for o in injected)
    base = next((o for o in outcomes if o.injection.is_baseline), None)
    base_text = "passes" if base and base.caught else "FAILS (scores are meaningless)"
    lines.append("")
    lines.append(f"mutation score: {caught}/{len(injected)} injections caught; baseline {base_text}")
    if base:
        # The baseline is not the gate: say what it ran, so that "passes" never reads as "the gate is green".
        lines.append(
            f"baseline ran: {coverage(base.injection)}; the gate's default run (pytest invariants/gate) "
            "covers every program and target"
        )
    return "\n".join(lines)


def run_all(
    injections: Sequence[Injection], workdir: Path, jobs: int = 1, progress: TextIO | None = None
) -> list[Outcome]:
    """Run every injection (``jobs`` children at a time); outcomes in the order given.

    With ``progress``, one line is written there as each child starts being waited on and as it ends (a
    child takes seconds to minutes; the table comes only at the end).
    """

    def say(text: str) -> None:
        if progress is not None:
            print(f"selfcheck: {text}", file=progress, flush=True)

    say(f"{len(injections)} child runs, {max(1, jobs)} at a time: {', '.join(i.name for i in injections)}")
    outcomes: dict[int, Outcome] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(run_injection, inj, workdir): n for n, inj in enumerate(injections)}
        for future in concurrent.futures.as_completed(futures):
            n = futures[future]
            outcome = outcomes[n] = future.result()
            verdict = ("passes" if outcome.caught else "FAILS") if outcome.injection.is_baseline else (
                "caught" if outcome.caught else "NOT caught")  # fmt: skip
            name, seconds = outcome.injection.name, outcome.seconds
            say(f"[{len(outcomes)}/{len(injections)}] {name}: {verdict} ({seconds:.0f} s)")
    return [outcomes[n] for n in range(len(injections))]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
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
    if args.keep:
        workdir = check_output_dir(args.keep, "--keep")
        outcomes = run_all(injections, workdir, args.jobs, progress=sys.stderr)
    else:
        with tempfile.TemporaryDirectory(prefix="invariants-selfcheck-") as tmp:
            outcomes = run_all(injections, Path(tmp), args.jobs, progress=sys.stderr)
    print(render_table(outcomes))
    print(f"selfcheck: {len(outcomes)} runs in {time.perf_counter() - start:.0f} s")
    return 0 if all(o.caught for o in outcomes) else 1
