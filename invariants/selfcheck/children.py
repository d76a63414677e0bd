"""Each injection's gate (or versus command) run in a child process of its own, never in this one: some
XLA flags answer by aborting the process. A child runs only the targets, programs and tiers its injection
needs, and writes the results file :mod:`invariants.selfcheck.judge` decides it from."""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from ..compile.child import GateRun, gate_command, gate_env, last_line, run_gate, scratch
from .judge import Outcome, annotate, outcome_of
from .registry import INJECT_MODULE, Injection


def child_command(injection: Injection, results: Path, dump_dir: Path) -> list[str]:
    if injection.command == "versus":
        versus = ["versus", "--baseline", "current", "--candidate", "current"]
        selection = ["--programs", ",".join(injection.programs), "--targets", injection.targets]
        env = [f"--candidate-env={k}={v}" for k, v in injection.env.items()]
        return [sys.executable, "-m", "invariants", *versus, *selection, "--json", str(results), *env]
    from ..plugin.anchors import CORRECTNESS  # here, not at import: it starts pytest, which --help needs not

    return gate_command(
        GateRun(
            targets=injection.targets,
            programs=injection.programs,
            configs=injection.configs,
            timed=injection.timing,
            k=None if injection.correctness else f"not {CORRECTNESS}",
            plugins=(INJECT_MODULE,),
            results=results,
            dump_dir=dump_dir,
        )
    )


def _timed_out(injection: Injection, seconds: float, timeout: float) -> Outcome:
    return Outcome(
        injection, -1, [], list(injection.expect), seconds, note=f"timed out after {timeout:.0f} s"
    )


def _run_versus(injection: Injection, folder: Path, timeout: float) -> Outcome:
    """Its env goes to the candidate's workers only, in the command line; judged from its record's items."""
    folder.mkdir(parents=True, exist_ok=True)
    record = folder / "versus.json"
    record.unlink(missing_ok=True)
    start = time.perf_counter()
    try:
        with scratch(gate_env(), folder) as env:
            proc = subprocess.run(
                child_command(injection, record, folder / "hlo"),
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
    except subprocess.TimeoutExpired:
        return _timed_out(injection, time.perf_counter() - start, timeout)
    (folder / "versus.txt").write_text(proc.stdout + proc.stderr)
    from ..versus.report import as_items, load_record  # numpy, which selfcheck --help starts without

    loaded = as_items(load_record(record)) if record.exists() else None
    outcome = outcome_of(injection, proc.returncode, loaded, time.perf_counter() - start)
    if loaded is None:
        tail = (proc.stderr.strip() or "no output").splitlines()[-1]
        outcome.note = f"no record (exit {proc.returncode}: {tail[:160]})"
    return outcome


def run_injection(injection: Injection, workdir: Path, timeout: float = 600.0) -> Outcome:
    folder = workdir / injection.name
    if injection.command == "versus":
        return _run_versus(injection, folder, timeout)
    command = child_command(injection, folder / "results.json", folder / "hlo")
    child = run_gate(command, env=gate_env(injection.env), folder=folder, timeout=timeout)
    if child.timed_out:
        return _timed_out(injection, child.seconds, timeout)
    results = None if child.results is None else annotate(child.results, folder / "hlo")
    outcome = outcome_of(injection, child.returncode, results, child.seconds)
    if child.results is None:
        outcome.note = f"no results file (exit {child.returncode}: {last_line(child.log)[:160]})"
    return outcome


def _verdict(outcome: Outcome) -> str:
    if outcome.injection.is_baseline:
        return "passes" if outcome.caught else "FAILS"
    return "caught" if outcome.caught else "NOT caught"


def run_all(
    injections: Sequence[Injection], workdir: Path, jobs: int = 1, progress: TextIO | None = None
) -> list[Outcome]:
    """Outcomes in the order given; ``progress`` gets a line as each child ends: the table comes only at
    the end, and a child takes minutes."""

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
            name, seconds = outcome.injection.name, outcome.seconds
            say(f"[{len(outcomes)}/{len(injections)}] {name}: {_verdict(outcome)} ({seconds:.0f} s)")
    return [outcomes[n] for n in range(len(injections))]
