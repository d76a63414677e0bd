"""Run the gate in a child process: the one way the self-check and bisect/matrix start it; and the one
protocol for a child that works on compile keys (:func:`keys_child`).

A child runs ``python -m pytest`` on the gate from the repository root, with the selection given as explicit
arguments, and writes a results file (:mod:`invariants._results`) and its HLO dumps into a folder of its
own. A child is how an experiment that sets ``XLA_FLAGS`` (some flags abort the process) or runs another
JAX release (another interpreter) stays out of this process. What comes back is :class:`ChildRun`: the
exit status, the results (None when the child wrote none), the seconds, and where its output was saved.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import _results
from ._errors import InvariantsError

REPO_ROOT = Path(__file__).resolve().parent.parent
# Set in every child: the slow self-check test skips itself there, so a child never starts children.
CHILD_ENV = "INVARIANTS_SELFCHECK_CHILD"
# Never inherited: an experiment's flags are its own, and another interpreter must not see this one's.
_DROPPED = ("XLA_FLAGS", "INVARIANTS_INJECT", "VIRTUAL_ENV", "PYTHONHOME")

__all__ = ["CHILD_ENV", "REPO_ROOT", "ChildRun", "gate_command", "gate_env", "keys_child", "run_gate"]


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


def keys_child(
    module: str,
    keys: Sequence[Sequence[str]],
    *,
    env: Mapping[str, str],
    what: str,
    python: str | Path = sys.executable,
    args: Sequence[str] = (),
    timeout: float = 600,
) -> Any:
    """Run ``python -m MODULE ARGS`` with ``[[program, config, target], ...]`` as JSON on stdin; return the
    JSON it prints. A child that fails raises :class:`InvariantsError` with ``what`` and its last line.

    The protocol of every child that compiles keys somewhere else: ``_compile`` (a target that needs its own
    process, e.g. 8 host devices) and ``_bisect`` (snapshots rendered in another release's environment).
    """
    try:
        proc = subprocess.run(
            [str(python), "-m", module, *args], input=json.dumps([list(k) for k in keys]), cwd=REPO_ROOT,
            env=dict(env), capture_output=True, text=True, check=False, timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise InvariantsError(f"{what}: child did not finish in {timeout:.0f} s") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
        raise InvariantsError(f"{what}: child exited {proc.returncode}: {last.strip()[:200]}")
    return json.loads(proc.stdout)
