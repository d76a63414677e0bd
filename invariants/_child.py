"""Run the gate in a child process: the one way the self-check and bisect/matrix start it.

A child runs ``python -m pytest`` on the gate from the repository root, with the selection given as explicit
arguments, and writes a results file (:mod:`invariants._results`) and its HLO dumps into a folder of its
own. A child is how an experiment that sets ``XLA_FLAGS`` (some flags abort the process) or runs another
JAX release (another interpreter) stays out of this process. What comes back is :class:`ChildRun`: the
exit status, the results (None when the child wrote none), the seconds, and where its output was saved.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import _results

REPO_ROOT = Path(__file__).resolve().parent.parent
# Set in every child: the slow self-check test skips itself there, so a child never starts children.
CHILD_ENV = "INVARIANTS_SELFCHECK_CHILD"
# Never inherited: an experiment's flags are its own, and another interpreter must not see this one's.
_DROPPED = ("XLA_FLAGS", "INVARIANTS_INJECT", "VIRTUAL_ENV", "PYTHONHOME")

__all__ = ["CHILD_ENV", "REPO_ROOT", "ChildRun", "gate_command", "gate_env", "run_gate"]


@dataclasses.dataclass(frozen=True)
class ChildRun:
    """What one child run of the gate did. ``results`` is None when it wrote no results file."""

    returncode: int
    results: dict[str, Any] | None
    seconds: float
    log: Path
    timed_out: bool = False


def gate_command(
    *,
    targets: str,
    results: Path,
    dump_dir: Path,
    python: str | Path = sys.executable,
    tests: str = "tests/gate",
    programs: Sequence[str] | str | None = None,
    markers: str = "not slow and not throughput",
    k: str | None = None,
    plugins: Sequence[str] = (),
    raw_invariants: bool = False,
) -> list[str]:
    """The command line of one child run: ``python -m pytest TESTS`` with this selection."""
    cmd = [str(python), "-m", "pytest", tests, "-q", "-p", "no:cacheprovider"]
    for plugin in plugins:
        cmd += ["-p", plugin]
    cmd += ["-m", markers, "--targets", targets]
    if programs:
        cmd += ["--programs", programs if isinstance(programs, str) else ",".join(programs)]
    if k:
        cmd += ["-k", k]
    cmd += ["--results-json", str(results), "--hlo-dump-dir", str(dump_dir)]
    if raw_invariants:
        cmd.append("--raw-invariants")
    return cmd


def gate_env(extra: Mapping[str, str] | None = None, *, pythonpath: bool = False) -> dict[str, str]:
    """This process's environment for a child: without inherited experiment flags, on the CPU runtime,
    marked as a child; ``extra`` on top. ``pythonpath`` puts the checkout first (another interpreter)."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    env["JAX_PLATFORMS"] = "cpu"
    env[CHILD_ENV] = "1"
    if pythonpath:
        env["PYTHONPATH"] = str(REPO_ROOT)
    env.update(extra or {})
    return env


def run_gate(command: Sequence[str], *, env: Mapping[str, str], folder: Path, timeout: float) -> ChildRun:
    """Run ``command`` from the repository root; save its output to ``folder/pytest.txt``; read the results
    file named after ``--results-json`` when the child wrote one."""
    folder.mkdir(parents=True, exist_ok=True)
    results = Path(command[list(command).index("--results-json") + 1])
    results.unlink(missing_ok=True)
    log = folder / "pytest.txt"
    start = time.perf_counter()
    try:
        proc = subprocess.run(list(command), cwd=REPO_ROOT, env=dict(env), capture_output=True, text=True,
                              timeout=timeout, check=False)  # fmt: skip
    except subprocess.TimeoutExpired as err:
        out = err.stdout if isinstance(err.stdout, str) else (err.stdout or b"").decode(errors="replace")
        log.write_text(out)
        return ChildRun(-1, None, time.perf_counter() - start, log, timed_out=True)
    seconds = time.perf_counter() - start
    log.write_text(proc.stdout + proc.stderr)
    loaded = _results.read(results) if results.exists() else None
    return ChildRun(proc.returncode, loaded, seconds, log)


def last_line(log: Path) -> str:
    """The last non-empty line a child printed (what it said when it stopped)."""
    lines = [ln for ln in log.read_text().splitlines() if ln.strip()] if log.exists() else []
    return lines[-1].strip()[:200] if lines else "no output"
