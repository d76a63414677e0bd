"""The catalog's programs timed on the chip's own clock, in the form a cost model is fitted on.

Run by ``scripts/chip_run.sh`` on a TPU host (one process holds the chip). For each program of the catalog
that runs on one chip, in each configuration asked for: the optimized HLO the chip compiled, the device
time of each of ``--calls`` blocking calls (a JAX profiler trace: plane ``/device:*``, line ``XLA Modules``)
and of each HLO op per call (line ``XLA Ops``), the wall time of the same calls (the host's round trip),
and the cost model's prediction from the same HLO. Writes ``OUT/device-times.json`` (one record, its
provenance beside its rows), ``OUT/hlo/<program>.<config>.hlo.txt``, and prints one table.

The record is written again after each program, so a run that is stopped keeps what it timed. With
``--seconds S`` no program starts that would likely end past S seconds (the longest so far is the guess):
the record says ``complete: false`` and lists what it did not time, and so does the last line.

``--traces DIR`` rehearses it on a host without a chip: the recorded traces
``DIR/<program>.<config>.<target>.xplane.pb`` stand in for the chip's, and only their programs are read.

    python scripts/chip_times.py --out DIR [--configs f32,bf16] [--programs GLOB,...] [--calls 20]
                                 [--seconds S]
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import platform
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1


def _versions() -> dict[str, str]:
    out = {}
    for name in ("jax", "jaxlib", "libtpu"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def predicted(hlo: str, target: str) -> float | None:
    """The cost model's device seconds for ``hlo`` on ``target`` (None where it has no figure)."""
    from invariants.hlo.parse import parse_module
    from invariants.hlo.structure import structure_of
    from invariants.hlo.tpu_model import predicted_seconds

    module = parse_module(hlo, "chip")
    value = predicted_seconds(module, structure_of(module), target)
    return value if isinstance(value, float) else None


# The time relations of tpu.toml, ``time(a) / time(b) <= bound``, held to the chip beside their twins.
TWINS = (
    ("eqx_embedding", "take"),
    ("grad_vmap_naive", "grad_vmap_take"),
    ("train_eqx_embedding", "train_take"),
)
TWIN_BOUND = 1.10


def twin_lines(rows: list[dict[str, Any]], pairs: tuple[tuple[str, str], ...] = TWINS) -> list[str]:
    """One line per twin pair timed in one configuration: the ratio the chip measured, the cost model's,
    and whether a relation's bound gives both the same verdict; a disagreement is a ``finding:`` line."""
    by_key = {(r["program"], r["config"]): r for r in rows}
    out = []
    for (a, b), config in ((pair, c) for pair in pairs for c in sorted({r["config"] for r in rows})):
        ra, rb = by_key.get((a, config)), by_key.get((b, config))
        if not ra or not rb:
            continue
        measured = ra["device_s_median"] / rb["device_s_median"]
        if not ra["predicted_s"] or not rb["predicted_s"]:
            out.append(f"twin {a} / {b} [{config}]: chip {measured:.3g}, no prediction")
            continue
        predicted = ra["predicted_s"] / rb["predicted_s"]
        if (measured <= TWIN_BOUND) != (predicted <= TWIN_BOUND):
            out.append(
                f"finding: {a} / {b} [{config}] measures {measured:.3g} on the chip and the cost model "
                f"predicts {predicted:.3g}: their verdicts against {TWIN_BOUND} disagree"
            )
        else:
            out.append(
                f"twin {a} / {b} [{config}]: chip {measured:.3g}, predicted {predicted:.3g} "
                f"({predicted / measured - 1:+.0%}): the same verdict against {TWIN_BOUND}"
            )
    return out


def _programs(patterns: list[str], configs: list[str]) -> list[tuple[str, str]]:
    from invariants.catalog.programs import CATALOG

    chosen = []
    for name, program in CATALOG.items():
        if program.layout is not None or program.unavailable_reason() or program.kind == "sharded":
            continue
        if not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        chosen += [(name, c) for c in program.configs if c in configs]
    return chosen


def _measure(name: str, config_id: str, calls: int) -> dict[str, Any]:
    import jax

    from invariants.catalog.arguments import make_arguments
    from invariants.catalog.programs import CATALOG, get_config

    program, config = CATALOG[name], get_config(config_id)
    args = [jax.device_put(a) for a in make_arguments(program, config, "uniform", 0)]
    return measure_compiled(jax.jit(program.fn).lower(*args).compile(), args, calls)


def measure_compiled(compiled: Any, args: Any, calls: int) -> dict[str, Any]:
    """One compiled program timed on the chip: its HLO, its module's device stats (per op too), each
    traced call's device seconds and each call's wall seconds."""
    import jax

    from invariants.timing.device import DeviceRecorder
    from invariants.timing.trace import read_trace, stats

    def call() -> None:
        jax.block_until_ready(compiled(*args))

    for _ in range(3):
        call()
    t0 = time.perf_counter()
    call()
    # A slow program's calls fill the trace with its ops (a per-row loop: thousands per call): fewer of them.
    calls = max(3, min(calls, int(0.5 / (time.perf_counter() - t0))))
    walls: list[float] = []

    def batch() -> int:
        for _ in range(calls):
            t0 = time.perf_counter()
            call()
            walls.append(time.perf_counter() - t0)
        return calls

    traces = DeviceRecorder(reader=read_trace).record_traces(batch)
    (module, *_) = stats(traces[0])
    device_s = [e.duration_ns * 1e-9 for e in traces[0].modules if e.name == module.name]
    return {"hlo": compiled.as_text(), "module": module, "walls": walls, "device_s": device_s}


def _from_trace(path: Path) -> dict[str, Any]:
    from invariants.timing.trace import read_trace, stats

    (module, *_) = stats(read_trace(path))
    return {"hlo": None, "module": module, "walls": []}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--configs", default="f32,bf16")
    parser.add_argument("--programs", default="*", help="comma-separated name patterns")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--target", default="tpu-v5e", help="the target the chip is (its predictions)")
    parser.add_argument("--traces", type=Path, help="recorded traces standing in for the chip")
    parser.add_argument("--seconds", type=float, help="start no program likely to end past this budget")
    opts = parser.parse_args(argv)
    opts.out.mkdir(parents=True, exist_ok=True)
    (opts.out / "hlo").mkdir(exist_ok=True)
    jobs = _programs(opts.programs.split(","), opts.configs.split(","))
    if opts.traces is not None:
        jobs = [(p, c) for p, c in jobs if (opts.traces / f"{p}.{c}.{opts.target}.xplane.pb").is_file()]
    if not jobs:
        print("chip_times: the selection holds no program that runs on one chip", file=sys.stderr)
        return 2
    import jax

    device = jax.devices()[0]
    rows: list[dict[str, Any]] = []
    print(f"{'program':<26} {'config':<10} {'device us':>11} {'wall us':>9} {'host share':>10} "
          f"{'predicted us':>12} {'pred/meas':>9}")  # fmt: skip
    started, longest, not_timed = time.monotonic(), 0.0, []
    for n, (name, config) in enumerate(jobs):
        begun = time.monotonic()
        if opts.seconds is not None and rows and begun - started + 1.25 * longest > opts.seconds:
            not_timed = [f"{p}.{c}" for p, c in jobs[n:]]
            break
        if opts.traces is not None:
            got = _from_trace(opts.traces / f"{name}.{config}.{opts.target}.xplane.pb")
            hlo_file = opts.traces / f"{name}.{config}.{opts.target}.hlo.txt"
            got["hlo"] = hlo_file.read_text() if hlo_file.is_file() else None
        else:
            got = _measure(name, config, opts.calls)
        module = got["module"]
        wall = sorted(got["walls"])[len(got["walls"]) // 2] if got["walls"] else None
        guess = predicted(got["hlo"], opts.target) if got["hlo"] else None
        if got["hlo"]:
            (opts.out / "hlo" / f"{name}.{config}.hlo.txt").write_text(got["hlo"])
        rows.append({
            "program": name, "config": config, "calls": module.calls, "device_s_median": module.median_s,
            "device_s_min": module.min_s, "device_s_max": module.max_s, "wall_s_median": wall,
            "predicted_s": guess, "hlo": f"hlo/{name}.{config}.hlo.txt" if got["hlo"] else None,
            "ops_s_per_call": {op.name: op.per_call_s for op in module.ops},
        })  # fmt: skip
        share = f"{1 - module.median_s / wall:.0%}" if wall else "-"
        pred = f"{guess * 1e6:,.1f}" if guess else "-"
        ratio = f"{guess / module.median_s:.2f}" if guess else "-"
        wall_us = f"{wall * 1e6:,.0f}" if wall else "-"
        device_us = f"{module.median_s * 1e6:,.1f}"
        print(f"{name:<26} {config:<10} {device_us:>11} {wall_us:>9} {share:>10} {pred:>12} {ratio:>9}")
        longest = max(longest, time.monotonic() - begun)
        _write(opts, device, rows, [f"{p}.{c}" for p, c in jobs[n + 1 :]])
    for line in twin_lines(rows):
        print(line)
    where = opts.out / "device-times.json"
    print(f"chip_times: {len(rows)} programs, device clock ({device.device_kind}); {where}")
    if not_timed:
        print(
            f"chip_times: the budget of {opts.seconds:.0f} s is spent: {len(rows)} of {len(jobs)} timed; not "
            f"timed: {', '.join(not_timed)} (time them with --programs, or give the run more seconds)"
        )
    return 0


def provenance(device: Any, calls: int = 20) -> dict[str, str]:
    """Where and how a chip's times were taken: the chip, the software, the clock and the date."""
    return {
        "chip": device.device_kind, "platform": device.platform, **_versions(), "clock": "device",
        "python": platform.python_version(), "date": datetime.date.today().isoformat(),
        "how": f"median of up to {calls} blocking calls after 3 warm-up calls; jax.profiler trace, "
               "'XLA Modules' per call, 'XLA Ops' summed per call",
    }  # fmt: skip


def _write(opts: argparse.Namespace, device: Any, rows: list[dict[str, Any]], not_timed: list[str]) -> None:
    """The record as it stands, written whole (a stopped run leaves the last one)."""
    from invariants._paths import write_atomic

    record = {
        "format_version": FORMAT_VERSION,
        "provenance": {
            **provenance(device, opts.calls),
            "source": f"recorded traces in {opts.traces}" if opts.traces else "this run",
        },
        "complete": not not_timed,
        "not_timed": not_timed,
        "rows": rows,
    }  # fmt: skip
    write_atomic(opts.out / "device-times.json", json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
