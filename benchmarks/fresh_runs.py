"""The project's test command, N times, each in a fresh clone of one commit with a fresh virtual environment.

    python benchmarks/fresh_runs.py [-n 10] [-c HEAD] [-d DIR]

Each run clones the commit, creates ``.venv``, installs ``.[test,tpu,gpu,libs,dev]`` and runs the test
command as the README states it (read from README.md, so that this checks the command users are told to
run), the way CI runs it. A test command that is red once in three runs is broken, and only repeated fresh
runs show that. One line per run goes to ``DIR/runs.tsv`` (run, exit code, seconds of the test command,
pytest's summary line, load average before and after); each run's whole output is ``DIR/run-N.log``. DIR
defaults to ``artifacts/fresh-runs/<commit>``. pip's cache makes the installs after the first one quick.

Exit status: 0 when every run exited 0, 1 otherwise, 2 for bad input.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_command(readme: Path) -> str:
    """The README's test command: what follows the last ``&&`` of its line that runs ``pytest -n auto``."""
    for line in readme.read_text().splitlines():
        if "pytest -n auto" in line and "&&" in line:
            return line.rsplit("&&", 1)[1].strip()
    raise SystemExit(f"fresh_runs: {readme}: no 'pytest -n auto' test command found")


def _summary(log: str) -> str:
    lines = [ln for ln in log.splitlines() if re.match(r"^=+ .*(passed|failed|error).* in ", ln)]
    return lines[-1].strip("= ") if lines else ""


def one_run(sha: str, command: str, log: Path) -> tuple[int, float, str]:
    """Clone, install and run ``command``; returns its exit code, its seconds and pytest's summary."""
    work = Path(tempfile.mkdtemp(prefix="fresh-run-"))
    try:
        repo = work / "repo"
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(repo)], check=True)
        subprocess.run(["git", "-C", str(repo), "checkout", "-q", sha], check=True)
        install = (
            "python3 -m venv .venv && . .venv/bin/activate && python -m pip install -q --upgrade pip"
            " && pip install -q -e '.[test,tpu,gpu,libs,dev]'"
        )
        with log.open("w") as out:
            rc = subprocess.run(
                ["bash", "-c", install], cwd=repo, stdout=out, stderr=subprocess.STDOUT
            ).returncode
            start = time.perf_counter()
            if rc == 0:
                run = ["bash", "-c", f". .venv/bin/activate && {command}"]
                rc = subprocess.run(run, cwd=repo, stdout=out, stderr=subprocess.STDOUT).returncode
        return rc, time.perf_counter() - start, _summary(log.read_text())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=10, dest="runs", help="runs (default 10)")
    p.add_argument("-c", default="HEAD", dest="commit", help="the commit to clone (default HEAD)")
    p.add_argument("-d", type=Path, dest="out", help="where runs.tsv and the logs go")
    args = p.parse_args(argv)
    verify = ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{args.commit}^{{commit}}"]
    found = subprocess.run(verify, capture_output=True, text=True, check=False)
    if found.returncode != 0:
        print(f"fresh_runs: -c {args.commit}: not a commit of {ROOT}", file=sys.stderr)
        return 2
    sha = found.stdout.strip()
    command = test_command(ROOT / "README.md")
    out = args.out or ROOT / "artifacts" / "fresh-runs" / sha[:7]
    out.mkdir(parents=True, exist_ok=True)
    rows = ["run\texit\tseconds\tsummary\tload_before\tload_after"]
    green = 0
    for i in range(1, args.runs + 1):
        before = os.getloadavg()[0]
        rc, seconds, summary = one_run(sha, command, out / f"run-{i}.log")
        rows.append(f"{i}\t{rc}\t{seconds:.0f}\t{summary}\t{before:.2f}\t{os.getloadavg()[0]:.2f}")
        (out / "runs.tsv").write_text("\n".join(rows) + "\n")
        print(f"run {i}: exit {rc} in {seconds:.0f} s: {summary}", flush=True)
        green += rc == 0
    print(f"fresh_runs: {green} of {args.runs} green at {sha[:7]}; {out / 'runs.tsv'}")
    return 0 if green == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
