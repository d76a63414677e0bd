"""The catalog's gate as 1, 2 and 4 shards (``--shard K/N``), the shards run one after another, each cold.

    python benchmarks/shards.py [--targets cpu,tpu-v5e] [--programs naive,take,...] [--configs f32]
                                [--steps 2,6] [--shards 1,2,4] [--json artifacts/bench_shards.json]

For each number of programs in ``--steps`` (the first M of ``--programs``) and each N in ``--shards``, it
runs the N shards of that selection one after another, each with an empty compile cache of its own (what
a matrix job has after a JAX upgrade), and keeps per shard: the wall time, the compile threads' time (the
run's own ``invariants: ... compiled (X s of compile threads' time)`` line), the compile cache's misses and
the items it ran. Per N it sums the shards' compile threads' time and misses (a compile that ran in two
shards would show here) and gives the longest shard's wall time (what a matrix waits for).

Then a paper estimate for a zoo of ``--zoo-programs`` programs on ``--zoo-targets`` TPU targets at
``--zoo-shards``, from what was measured: the mean seconds of one TPU compile (the structure records'
``compile_seconds``), a runner's fixed cost (the intercept of the 1-shard wall times against the number of
programs) and how many compiles it overlaps (compile threads' time over the wall time less that fixed
cost). The host is shared: compare figures of one run of this script, never of two days.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_COMPILED = re.compile(r"invariants: \d+ programs: (\d+) compiled \(([\d.]+) s of compile threads' time\)")
_MISSES = re.compile(r"invariants: compile cache: (\d+) hits, (\d+) misses")


def _shard(args: argparse.Namespace, programs: list[str], k: int, n: int, scratch: Path) -> dict[str, Any]:
    """One shard's run, cold: its figures."""
    name = f"{len(programs)}p-{k}of{n}"
    results = scratch / f"{name}.json"
    command = [sys.executable, "-m", "pytest", str(ROOT / "invariants" / "gate"), "-q",
               "-p", "no:cacheprovider", "-p", "no:xdist", "-m", "not throughput", "--targets", args.targets,
               "--programs", ",".join(programs), "--configs", args.configs, "--shard", f"{k}/{n}",
               "--cache-dir", str(scratch / f"cache-{name}"), "--results-json", str(results),
               "--hlo-dump-dir", str(scratch / "hlo")]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    compiled = _COMPILED.search(proc.stdout)
    misses = _MISSES.search(proc.stdout)
    items = json.loads(results.read_text())["items"] if results.is_file() else []
    tpu = [i["compile_seconds"] for i in items if i["kind"] == "structure" and i["target"].startswith("tpu")]
    return {
        "shard": f"{k}/{n}", "rc": proc.returncode, "wall": round(wall, 1), "items": len(items),
        "compile_threads": float(compiled[2]) if compiled else 0.0, "misses": int(misses[2]) if misses else 0,
        "tpu_compile_seconds": tpu, "last": (proc.stdout.strip().splitlines() or [""])[-1][-160:],
    }  # fmt: skip


def estimate(runs: list[dict[str, Any]], zoo: int, targets: int, shards: list[int]) -> dict[str, Any]:
    """The zoo's compile threads' time and the longest shard's wall time at each N, from the runs."""
    whole = [r for r in runs if r["n"] == 1]
    per_compile = statistics.mean(s for r in runs for sh in r["shards"] for s in sh["tpu_compile_seconds"])
    xs, ys = [r["programs"] for r in whole], [r["shards"][0]["wall"] for r in whole]
    slope = (ys[-1] - ys[0]) / (xs[-1] - xs[0]) if len(whole) > 1 and xs[-1] != xs[0] else 0.0
    fixed = max(0.0, ys[0] - slope * xs[0])
    last = whole[-1]["shards"][0]
    overlap = max(1.0, last["compile_threads"] / max(1e-9, last["wall"] - fixed))
    compiles = zoo * targets
    out: dict[str, Any] = {
        "per_tpu_compile_s": round(per_compile, 2),
        "fixed_s": round(fixed, 1),
        "overlap": round(overlap, 2),
        "compiles": compiles,
        "compile_threads_h": round(compiles * per_compile / 3600, 2),
        "by_shards": {},
    }
    for n in shards:
        out["by_shards"][n] = round((fixed + compiles / n * per_compile / overlap) / 60, 1)  # minutes
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    p.add_argument("--targets", default="cpu,tpu-v5e")
    p.add_argument("--programs", default="naive,take,vmap_take,grad_take,grad_naive,take_clip")
    p.add_argument("--configs", default="f32,bf16")
    p.add_argument("--steps", default="2,6", help="numbers of programs, the first M of --programs")
    p.add_argument("--shards", default="1,2,4")
    p.add_argument("--zoo-programs", type=int, default=200)
    p.add_argument("--zoo-targets", type=int, default=4)
    p.add_argument("--zoo-shards", default="1,10,50")
    p.add_argument("--json", default="artifacts/bench_shards.json")
    args = p.parse_args(argv)
    programs = args.programs.split(",")
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-shards-") as tmp:
        for m in (int(s) for s in args.steps.split(",")):
            for n in (int(s) for s in args.shards.split(",")):
                shards = [_shard(args, programs[:m], k, n, Path(tmp)) for k in range(1, n + 1)]
                runs.append({"programs": m, "n": n, "shards": shards})
                threads = sum(s["compile_threads"] for s in shards)
                print(f"{m} programs, {n} shard(s): wall per shard {[s['wall'] for s in shards]} s (longest "
                      f"{max(s['wall'] for s in shards)}), compile threads {threads:.1f} s, "
                      f"misses {sum(s['misses'] for s in shards)}, items {sum(s['items'] for s in shards)}, "
                      f"exit {[s['rc'] for s in shards]}", flush=True)  # fmt: skip
    zoo = estimate(runs, args.zoo_programs, args.zoo_targets, [int(s) for s in args.zoo_shards.split(",")])
    longest = ", ".join(f"N={n}: {m} min" for n, m in zoo["by_shards"].items())
    print(f"paper estimate, {zoo['compiles']} TPU compiles at {zoo['per_tpu_compile_s']} s each "
          f"({zoo['compile_threads_h']} h of compile threads), a runner's fixed {zoo['fixed_s']} s and "
          f"overlap x{zoo['overlap']}: longest shard {longest}")  # fmt: skip
    host = {"cpus": os.cpu_count(), "load": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d")}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(
        json.dumps({"args": vars(args), "host": host, "runs": runs, "zoo": zoo}, indent=1)
    )
    print(f"figures: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
