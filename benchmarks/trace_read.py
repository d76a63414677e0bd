"""Reading a large profiler trace: peak memory and time, against a base commit, in alternating runs.

    python benchmarks/trace_read.py [--base main] [--events 4000000] [--rounds 2]

Writes a trace of ``--events`` op events in 10 module calls (tests/integration/xspace.py, in a child of its
own), then per round, for the base commit (a git worktree made for it) and this checkout in turn:

- ``read``: a fresh interpreter imports the reader and jaxlib's decoder, then reads the trace and its stats;
  its resident memory's peak (VmHWM) in all, the same over its resident memory just before reading, and the
  read's wall and CPU seconds;
- ``trace-stats``: ``python -m invariants trace-stats FILE --json`` end to end: its peak resident memory
  (the child's ru_maxrss) and wall seconds.

Each peak is also given as a multiple of the file's size. Both sides must print the same module and op stats.
Linux only (/proc/self/status).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_WRITE = """
import sys
sys.path.insert(0, "tests/integration")
from xspace import xspace
n = int(sys.argv[2])
names = [f"%fusion.{k} = f32[8,128]{{1,0}} fusion(%p)" for k in range(20)]
span = n * 100 + 1000
ops = ((names[i % 20], i * 1000 + 1, 500) for i in range(n))
open(sys.argv[1], "wb").write(xspace([("jit_f", c * span, span) for c in range(10)], ops))
"""

_READ = """
import json, sys, time
from invariants.timing.trace import _decoder, read_trace, stats

def status(key):
    lines = open("/proc/self/status").read().splitlines()
    return next(int(line.split()[1]) for line in lines if line.startswith(key + ":")) * 1024

_decoder()
before = status("VmRSS")
wall, cpu = time.perf_counter(), time.process_time()
modules = [m.to_json() for m in stats(read_trace(sys.argv[1]))]
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"peak": status("VmHWM"), "before": before, "wall": wall, "cpu": cpu, "modules": modules}))
"""


def _read(side: Path, trace: Path) -> tuple[float, float, float, float, str]:
    """(peak, resident before reading, wall, CPU, the stats' digest) of reading ``trace`` in a child."""
    import json

    done = subprocess.run([sys.executable, "-c", _READ, str(trace)], cwd=side, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(side)}, check=True)  # fmt: skip
    out = json.loads(done.stdout)
    digest = hashlib.sha256(json.dumps(out["modules"]).encode()).hexdigest()[:12]
    return out["peak"], out["before"], out["wall"], out["cpu"], digest


def _cli(side: Path, trace: Path) -> tuple[float, float, str]:
    """(peak, wall, the output's digest) of ``trace-stats --json`` on ``trace``."""
    printed = trace.with_suffix(".json")
    start = time.perf_counter()
    with printed.open("wb") as out:
        command = [sys.executable, "-m", "invariants", "trace-stats", str(trace), "--json"]
        proc = subprocess.Popen(command, cwd=side, env={**os.environ, "PYTHONPATH": str(side)}, stdout=out)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own usage, not every child's
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"trace-stats failed in {side}")
    return (
        usage.ru_maxrss * 1024,
        time.perf_counter() - start,
        hashlib.sha256(printed.read_bytes()).hexdigest()[:12],
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", help="the commit to compare with (e.g. main); without it, this checkout only")
    ap.add_argument("--events", type=int, default=4_000_000, help="op events in the trace (default 4000000)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds (default 2)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="trace-read-") as scratch:
        trace = Path(scratch) / "t.xplane.pb"
        subprocess.run([sys.executable, "-c", _WRITE, str(trace), str(args.events)], cwd=ROOT, check=True)
        size = trace.stat().st_size
        print(f"trace: {args.events} op events, {size / 1e6:.1f} MB")
        sides = [("current", ROOT)]
        if args.base:
            base = Path(scratch) / "base"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.base],
                           check=True, capture_output=True)  # fmt: skip
            sides.insert(0, ("base", base))
        try:
            print("| round | side | read: peak MB (x file) | over before MB (x file) | wall s | CPU s "
                  "| trace-stats: peak MB (x file) | wall s | stats |")  # fmt: skip
            print("|---|---|---|---|---|---|---|---|---|")
            for r in range(args.rounds):
                for name, side in sides if r % 2 == 0 else sides[::-1]:
                    peak, before, wall, cpu, digest = _read(side, trace)
                    cli_peak, cli_wall, cli_digest = _cli(side, trace)
                    cells = [
                        f"{peak / 1e6:.0f} ({peak / size:.1f})",
                        f"{(peak - before) / 1e6:.0f} ({(peak - before) / size:.1f})",
                        f"{wall:.2f}",
                        f"{cpu:.2f}",
                        f"{cli_peak / 1e6:.0f} ({cli_peak / size:.1f})",
                        f"{cli_wall:.2f}",
                        f"{digest} {cli_digest}",
                    ]
                    print(f"| {r + 1} | {name} | " + " | ".join(cells) + " |", flush=True)
        finally:
            if args.base:
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
