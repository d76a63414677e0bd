"""Programs beyond the catalog timed on the chip's own clock, as a cost model's corpus.

Run on a TPU host (one process holds the chip), never in CI. Times each program of a probe module's list
(``tests/data/tpu-v5e-chip/probes.py``'s ``probes()``, ``steps.py``'s ``families()`` or ``held_out()``) as
``chip_times.py`` times the catalog's: the optimized HLO the chip compiled, each call's device time (the
profiler's ``XLA Modules`` line) and each HLO op's per call (``XLA Ops``), on random inputs of the stated
sizes. Writes ``OUT/corpus-NAME.json`` (rows and provenance, in ``tests/data/tpu-v5e-chip/README.md``'s
layout) and ``OUT/corpus-NAME-hlo.json.gz``, both again after each program, so a stopped run keeps what it
timed; with ``--seconds S`` no program starts that would likely end past S seconds.

    python scripts/chip_corpus.py --list steps:families --name steps --out DIR [--only GLOB] [--seconds S]
"""

from __future__ import annotations

import argparse
import fnmatch
import gzip
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "tpu-v5e-chip"
sys.path[:0] = [str(ROOT), str(DATA), str(ROOT / "scripts")]

import chip_times  # noqa: E402


def _row(probe: Any, calls: int) -> tuple[dict[str, Any], str]:
    import jax
    import numpy as np

    args = jax.device_put(probe.args(np.random.default_rng(0)))
    compiled = jax.jit(probe.fn).lower(*args).compile()
    got = chip_times.measure_compiled(compiled, args, calls)
    module = got["module"]
    walls = sorted(got["walls"])
    memory = compiled.memory_analysis()
    row = {
        "module": module.name, "calls_traced": module.calls,
        "device_us": [round(s * 1e6, 3) for s in got["device_s"]],
        "device_us_median": round(module.median_s * 1e6, 3),
        "wall_us_median": walls[len(walls) // 2] * 1e6,
        "ops_us_per_call": {op.name: round(op.per_call_s * 1e6, 3) for op in module.ops},
        "ops_count_per_call": {op.name: op.count / module.calls for op in module.ops},
        "peak_bytes": sum(int(getattr(memory, f"{k}_size_in_bytes", 0)) for k in ("temp", "argument",
                                                                                   "output")),
        "program": probe.name, "config": "-", "family": probe.family, "kind": "probe",
    }  # fmt: skip
    return row, got["hlo"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", required=True, help="MODULE:FUNCTION of tests/data/tpu-v5e-chip")
    parser.add_argument("--name", required=True, help="the corpus file's name: corpus-NAME.json")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--only", default="*", help="comma-separated name patterns")
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--seconds", type=float)
    opts = parser.parse_args(argv)
    module_name, _, function = opts.list.partition(":")
    probes = [
        p for p in getattr(importlib.import_module(module_name), function)()
        if any(fnmatch.fnmatchcase(p.name, g) for g in opts.only.split(","))
    ]  # fmt: skip
    if not probes:
        print(f"chip_corpus: {opts.list} holds no program matching {opts.only}", file=sys.stderr)
        return 2
    import jax

    device = jax.devices()[0]
    opts.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    hlos: dict[str, str] = {}
    failed: list[str] = []
    started, longest = time.monotonic(), 0.0
    for n, probe in enumerate(probes):
        begun = time.monotonic()
        if opts.seconds is not None and begun - started + 1.5 * longest > opts.seconds:
            print(f"chip_corpus: budget spent; not timed: {', '.join(p.name for p in probes[n:])}")
            break
        try:
            row, hlo = _row(probe, opts.calls)
        except Exception as err:  # a program the chip cannot run is a line, not the end of the corpus
            failed.append(f"{probe.name}: {type(err).__name__}: {str(err)[:200]}")
            print(f"chip_corpus: {failed[-1]}", flush=True)
            continue
        rows.append(row)
        hlos[f"{probe.name}.-"] = hlo
        longest = max(longest, time.monotonic() - begun)
        print(f"{probe.family:18} {probe.name:48} {row['device_us_median']:>12,.1f} us "
              f"({time.monotonic() - begun:.1f} s)", flush=True)  # fmt: skip
        record = {
            "provenance": {**chip_times.provenance(device, opts.calls),
                           "source": f"scripts/chip_corpus.py --list {opts.list}"},
            "rows": rows, "failed": failed,
        }  # fmt: skip
        (opts.out / f"corpus-{opts.name}.json").write_text(json.dumps(record, indent=1) + "\n")
        with gzip.open(opts.out / f"corpus-{opts.name}-hlo.json.gz", "wt") as f:
            json.dump(hlos, f)
    pairs = getattr(importlib.import_module(module_name), "TWINS", ())
    if pairs:
        timed = [
            {**r, "device_s_median": r["device_us_median"] * 1e-6,
             "predicted_s": chip_times.predicted(hlos[f"{r['program']}.-"], "tpu-v5e")}
            for r in rows
        ]  # fmt: skip
        for line in chip_times.twin_lines(timed, pairs):
            print(line)
    seconds = time.monotonic() - started
    print(f"chip_corpus: {len(rows)} of {len(probes)} timed, {len(failed)} failed, {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
