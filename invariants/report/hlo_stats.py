"""``hlo-stats``: print the structural metrics of optimized-HLO text files."""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
from collections import Counter

from invariants._errors import InvariantsError, Parser, did_you_mean, visible
from invariants._paths import what_is
from invariants.hlo.cost import Missing, cycle_estimate, value_or_none
from invariants.hlo.parse import MAIN_THREAD
from invariants.hlo.structure import Kernel, to_json
from invariants.hlo.tpu_model import chip_model, heaviest, is_tpu_module
from invariants.kernels.dump import code_beside
from invariants.kernels.program import code_line, multiset_text
from invariants.measure.measurement import Measurement, measure_text
from invariants.measure.metrics import METRICS, help_text
from invariants.scope.targets import CPU_RUNTIME, all_targets

# A dump folder's modules: XLA's (XLA_FLAGS=--xla_dump_to=DIR) and the gate's own (--hlo-dump-dir).
_DUMP_GLOBS = ("*after_optimizations.txt", "*.hlo.txt")

# Keys of a --json object besides the metrics: details a metric summarizes.
_DETAILS = {
    "module": "the HLO module's name",
    "optimized": "false for a module without is_scheduled=true (e.g. a before_optimizations dump)",
    "fusion_kinds": "entry fusions by kind (kLoop, kInput, ...)",
    "trip_counts": "one per while loop, null when unknown",
    "loops": "each while loop: name, trip count, kernels and opcodes per iteration, thread (off main)",
    "opcode_counts": "opcode -> instructions, all computations",
    "collective_counts": "collective opcode -> count",
    "collective_list": "each collective: opcode, shape, bytes, replica groups",
    "gather_shapes": "each gather: result shape, dimension numbers, strided (its window not contiguous), "
    "thread, bytes moved",
    "scatter_shapes": "each scatter: result shape, dimension numbers, strided (its window not contiguous), "
    "thread, bytes moved",
    "convert_pairs": "src->dst dtype pair -> converts",
    "root_shape": "the entry computation's result shape",
    "kernel_list": 'the kernels, as the snapshot lists them ("thread" where one runs off the main thread)',
    "thread_kernels": 'static kernels per execution thread other than main (libtpu\'s "sparsecore")',
    "unestimated_launches": "launches (loops expanded) without an estimated_cycles; they add nothing",
    "estimated_cycles_note": "why estimated_cycles is null (no TPU estimates, or an unknown trip count)",
    "predicted_seconds_note": "the cost model's provenance ('uncalibrated' on a chip never measured), or "
    "why predicted_seconds is null (no --target, an unknown trip count)",
    "predicted_kernels": "with --target: the kernels that carry most of predicted_seconds, each with its "
    "kind and seconds (all its launches, loops expanded)",
    "kernel_code": "each kernel's code facts (PTX or LLVM IR beside the module in its dump folder)",
    "kernel_code_note": "why the kernel metrics are null (no kernel code beside the file)",
}


def _epilog() -> str:
    details = "\n".join(f"  {k:<24}  {v}" for k, v in _DETAILS.items())
    return f"""\
A directory argument stands for its {_DUMP_GLOBS[0]} files, as written by XLA_FLAGS=--xla_dump_to=DIR,
and its {_DUMP_GLOBS[1]} files, as the gate writes them (--hlo-dump-dir, e.g. artifacts/hlo/cpu), sorted by
name. Other files are read as one HLO module each (e.g. compiled.as_text()). Given several paths (e.g.
DIR/*), one that is not an HLO module (buffer assignments, object files, LLVM IR, a folder without
modules such as the per-module sub-folders jax 0.10.2 writes, a path that is not a regular file) is
skipped with a note on stderr. A module without is_scheduled=true in its header (e.g. a
before_optimizations dump) is not what XLA runs: its ops are not fused into kernels yet. It is still
reported, marked "optimized": false in --json and NOT OPTIMIZED in text, with a note on stderr.

The metrics, as a spec's assert names them (invariants/*.toml):
{help_text()}

--json prints, for exactly one input file, that file's object; for several, one object keyed by file path.
Each object has every structural metric above under its own name (null when unknown), estimated_cycles
(the TPU compiler's prediction: each kernel's backend_config "estimated_cycles", summed over the kernels
that run, a while body once per trip and its condition once per trip plus one, nested loops multiplied;
null for modules without estimates, e.g. CPU and GPU, and when a trip count is unknown),
predicted_seconds (with --target TPU: the device seconds of one call, by the cost model fitted on a chip,
invariants/data/tpu_cost.toml; its note says "uncalibrated" for a chip never measured), the kernel
metrics (cas_atomics, float_atomics, local_bytes, vector_width, ...: read from the module's own .ptx files
in a GPU dump and .ir-with-opt.ll files in a CPU dump, found by the module_NNNN.<name> prefix XLA gives
every file of one module; null with a kernel_code_note where there are none, e.g. a TPU dump or a lone
file), and these details:
{details}

Exit status: 0 on success; 2 for a missing file, a path that is not a regular file, text that is not
understood (one line on stderr, FILE:LINE: what was not understood), a number that cannot be (a trip
count below zero or past 2^63-1, a dimension or element count past an int64, a number longer than any XLA
prints), or, with --target, a module that is not optimized TPU HLO.
"""


def _parser() -> Parser:
    parser = Parser(
        prog="hlo-stats",
        description="Structural metrics (kernels, fusions, loops, gathers, collectives) of optimized HLO.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="HLO text file, or a --xla_dump_to directory"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument(
        "--target",
        help="the TPU target the files were compiled for (tpu-v5e, ...): predicts each one's device seconds "
        "(predicted_seconds); a file that is not TPU HLO is then an error",
    )
    return parser


def _tpu_target(name: str | None) -> str:
    """A TPU target the cost model has coefficients for ("" when not given)."""
    if name is None:
        return ""
    tpus = [t for t, target in all_targets(CPU_RUNTIME).items() if target.family == "tpu"]
    if name not in tpus or chip_model(name) is None:
        raise InvariantsError(
            f"--target: {name!r} is not a TPU target with a cost model{did_you_mean(name, tpus, n=2)}; "
            f"known: {', '.join(t for t in tpus if chip_model(t) is not None)}"
        )
    return name


def _prediction(measured: Measurement, target: str) -> tuple[float | None, str | None]:
    """(predicted_seconds, its note): the model's provenance with the value, or why there is none."""
    if not target:
        return None, "no --target given: name the TPU target the module was compiled for"
    value = measured.metrics["predicted_seconds"]
    if isinstance(value, Missing):
        return None, value.reason
    model = chip_model(target)
    assert model is not None  # _tpu_target checked it
    return value, ("uncalibrated: " if model.uncalibrated else "") + model.provenance


def _heaviest(measured: Measurement, target: str) -> list[tuple[str, str, float]]:
    return heaviest(measured.module, measured.structure, target)


def _dump_files(folder: pathlib.Path) -> list[pathlib.Path]:
    return sorted({p for glob in _DUMP_GLOBS for p in folder.glob(glob) if p.is_file()})


def _expand(paths: list[str]) -> list[pathlib.Path]:
    """Among several inputs (``DIR/*``), one without modules is skipped with a note; alone, it is an error."""
    files: list[pathlib.Path] = []
    for raw in paths:
        found, why = _files_at(raw)
        files.extend(found)
        if why is not None and len(paths) == 1:
            raise InvariantsError(why)
        if why is not None:
            print(visible(f"hlo-stats: skipped {why}", one_line=True), file=sys.stderr)
    return files


def _files_at(raw: str) -> tuple[list[pathlib.Path], str | None]:
    path = pathlib.Path(raw)
    if path.is_file():
        return [path], None
    found = _dump_files(path) if path.is_dir() else []
    if found:
        return found, None
    if path.is_dir():
        subs = sorted(p.name for p in path.iterdir() if p.is_dir() and _dump_files(p))
        why = f"{raw}: no {' or '.join(_DUMP_GLOBS)} files in this directory"
        return [], why + (f" (its sub-folders {', '.join(subs[:6])} have some: name one)" if subs else "")
    if path.exists():
        return [], f"{raw}: not a regular file ({what_is(path)})"
    raise InvariantsError(f"{raw}: no such file or directory")


class _NotAModule(InvariantsError):
    """Not a module at all, unlike one the parser does not understand."""


def _module_text(path: pathlib.Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InvariantsError(f"{path}: cannot read: {err.strerror or type(err).__name__}") from None
    except UnicodeDecodeError:
        raise _NotAModule(f"{path}: not text") from None
    first = next((ln for ln in map(str.strip, text.splitlines()) if ln and not ln.startswith("//")), "")
    if not first.startswith("HloModule"):
        raise _NotAModule(f"{path}: not an HLO module (it does not start with 'HloModule')")
    return text


def _metrics_json(measured: Measurement, cycles: int | None, predicted: float | None) -> dict[str, object]:
    values = measured.metrics
    structural = [n for n, m in METRICS.items() if m.source == "structure" and n in values]
    metrics: dict[str, object] = {
        n: list(v) if isinstance(v := values[n], tuple) else value_or_none(v) for n in structural
    }
    # The one compiler metric the HLO text alone decides (the others need the compiled executable).
    metrics["estimated_cycles"] = cycles
    metrics["predicted_seconds"] = predicted
    metrics.update({k: value_or_none(v) for k, v in values.items() if METRICS[k].source == "kernel"})
    return metrics


def summary(measured: Measurement, target: str = "") -> dict[str, object]:
    """The object ``--json`` prints for one file; ``target``: the TPU target costed ("": none)."""
    structure, code = measured.structure, measured.code
    full = to_json(structure)
    estimate = cycle_estimate(structure)
    predicted, note = _prediction(measured, target)
    metrics = _metrics_json(measured, estimate.cycles, predicted)
    details = {
        "module": measured.module.name,
        "fusion_kinds": full["fusion_kinds"],
        "trip_counts": [w.trip_count for w in structure.while_loops],
        "loops": full["while_loops"],
        "opcode_counts": full["opcodes"],
        "collective_counts": dict(sorted(Counter(c.opcode for c in structure.collectives).items())),
        "collective_list": full["collectives"],
        "gather_shapes": full["gather_shapes"],
        "scatter_shapes": full["scatter_shapes"],
        "convert_pairs": full["converts"],
        "root_shape": structure.root_shape,
        "kernel_list": full["kernel_list"],
        "thread_kernels": full["thread_kernels"],
        "unestimated_launches": estimate.unestimated,
        "estimated_cycles_note": estimate.reason,
        "predicted_seconds_note": note,
        "predicted_kernels": [
            {"name": name, "kind": kind, "seconds": seconds}
            for name, kind, seconds in (_heaviest(measured, target) if predicted is not None else [])
        ],
        "kernel_code": None
        if code.facts is None
        else [{**dataclasses.asdict(f), "atomics": dict(f.atomics)} for f in code.facts],
        "kernel_code_note": code.reason or None,
    }
    assert details.keys() == _DETAILS.keys() - {"optimized"} and not metrics.keys() & details.keys()
    return {**metrics, **details}


def _kernel_lines(kernels: tuple[Kernel, ...], indent: str) -> list[str]:
    lines: list[str] = []
    for k in kernels:
        if k.opcode == "while":
            trip = "?" if k.trip_count is None else str(k.trip_count)
            lines.append(f"{indent}while  trips={trip}")
            lines.extend(_kernel_lines(k.condition, indent + "  cond: "))
            lines.extend(_kernel_lines(k.body, indent + "  body: "))
        elif k.opcode == "conditional":
            lines.append(f"{indent}conditional")
            for n, branch in enumerate(k.branches):
                lines.extend(_kernel_lines(branch, f"{indent}  branch {n}: "))
        else:
            what = k.opcode
            if k.fusion_kind:
                # Its fused operations as a snapshot spells them: bitcast×2, one spelling of a count.
                what = f"fusion {k.fusion_kind} {{{multiset_text(k.inner_opcodes)}}}"
            elif k.custom_call_target:
                what = f"custom-call {visible(k.custom_call_target, one_line=True)}"
            cycles = "" if k.estimated_cycles is None else f"  ({k.estimated_cycles} cycles)"
            thread = "" if k.thread == MAIN_THREAD else f"  on {k.thread}"
            lines.append(f"{indent}{what}  -> {k.shape}{cycles}{thread}")
    return lines


def _code_lines(measured: Measurement) -> list[str]:
    code, totals = measured.code, measured.metrics
    if code.facts is None:
        return [f"  kernel code: none ({visible(code.reason, one_line=True)})"]
    lines = [
        f"  kernel code: {len(code.facts)} kernels; cas atomics {totals['cas_atomics']} (in retry loops "
        f"{totals['cas_loops']}), float atomics {totals['float_atomics']}, "
        f"local {totals['local_bytes']} bytes"
    ]
    lines += [f"    {visible(f.name, one_line=True)}: {code_line(f)}" for f in code.facts]
    return lines


def _text_block(path: str, measured: Measurement, target: str = "") -> str:
    module, s = measured.module, measured.structure
    dyn = "unknown" if s.dynamic_kernel_launches is None else str(s.dynamic_kernel_launches)
    kinds = ", ".join(f"{k} {n}" for k, n in s.fusion_kinds.items()) or "none"
    state = "" if module.scheduled else ", NOT OPTIMIZED: ops are not fused into kernels yet"
    lines = [
        f"{visible(path, one_line=True)}  (module {module.name}{state})",
        f"  entry fusions: {s.entry_fusions} ({kinds})",
        f"  kernels: {s.kernels} static, {dyn} dynamic launches",
    ]
    for w in s.while_loops:
        trip = "unknown" if w.trip_count is None else str(w.trip_count)
        lines.append(f"  while {w.name}: trip count {trip}, {w.body_kernels} kernels per iteration")
    lines.append(
        f"  gathers {s.gathers} ({s.strided_gathers} strided), scatters {s.scatters} ({s.strided_scatters} "
        f"strided), transposes {s.transposes}, dynamic-slices {s.dynamic_slices}, "
        f"dynamic-update-slices {s.dynamic_update_slices}"
    )
    lines += _offload_lines(measured)
    lines += [
        f"  collective {c.opcode} {c.shape} ({c.bytes} bytes) groups={c.replica_groups}"
        for c in s.collectives
    ]
    if s.converts:
        lines.append("  converts: " + multiset_text(sorted(Counter(s.converts).items())))
    lines += _estimate_lines(measured, target)
    lines.append(f"  root: {s.root_shape}")
    lines.append("  kernel list:")
    lines.extend(_kernel_lines(s.kernel_list, "    "))
    lines.extend(_code_lines(measured))
    return "\n".join(lines)


def _offload_lines(measured: Measurement) -> list[str]:
    s, m, lines = measured.structure, measured.metrics, []
    if s.thread_kernels:
        threads = ", ".join(f"{t} {n}" for t, n in s.thread_kernels.items())
        lines.append(
            f"  kernels off the main thread: {threads}; sparsecore gathers {m['sparsecore_gathers']}, "
            f"scatters {m['sparsecore_scatters']}, {m['sparsecore_bytes']} bytes moved"
        )
    if s.custom_call_targets:
        lines.append(f"  custom-call targets: {visible(', '.join(s.custom_call_targets), one_line=True)}")
    return lines


def _estimate_lines(measured: Measurement, target: str) -> list[str]:
    estimate = cycle_estimate(measured.structure)
    if estimate.cycles is not None:
        lines = [f"  estimated cycles: {estimate.cycles} ({estimate.unestimated} launches carry no estimate)"]
    else:
        lines = [f"  estimated cycles: none ({estimate.reason})"]
    if target:
        predicted, note = _prediction(measured, target)
        shown = "none" if predicted is None else f"{predicted * 1e6:.4g} us on {target}"
        lines.append(f"  predicted device time: {shown} ({note})")
        if predicted:
            carried = ", ".join(
                f"{visible(name)} ({kind}) {seconds / predicted:.0%}"
                for name, kind, seconds in _heaviest(measured, target)
            )
            lines.append(f"  carried by: {carried}")
    return lines


def _measured(path: pathlib.Path, text: str, target: str = "") -> Measurement:
    files = code_beside(path)
    if files is None:
        no_code = f"{path.name} is not named as a dump file (module_NNNN.<name>.*)"
    else:
        no_code = f"no .ptx or .ir-with-opt.ll of this module beside {path.name}"
    code = {pathlib.Path(name).name: body for name, body in (files or {}).items()}
    return measure_text(
        text, str(path), code=code, code_folder=str(path.parent), no_code=no_code, target=target
    )


def _measured_module(path: pathlib.Path, target: str, alone: bool) -> Measurement | None:
    """None for a file that is no module among several inputs."""
    try:
        text = _module_text(path)
    except _NotAModule as err:
        if alone:
            raise
        print(visible(f"hlo-stats: skipped {err}", one_line=True), file=sys.stderr)
        return None
    measured = _measured(path, text, target)
    if target and not measured.module.scheduled:
        raise InvariantsError(
            f"{path}: not optimized (no is_scheduled=true): --target {target} predicts only the "
            "optimized module XLA runs"
        )
    if target and not is_tpu_module(measured.module):
        raise InvariantsError(
            f"{path}: not TPU HLO (no tiled layouts): --target {target} predicts only what the TPU "
            "compiler wrote"
        )
    if not measured.module.scheduled:
        print(
            visible(
                f"hlo-stats: {path}: not optimized (no is_scheduled=true: a before_optimizations "
                "dump?); its ops are not fused into kernels yet",
                one_line=True,
            ),
            file=sys.stderr,
        )
    return measured


def main(argv: list[str]) -> int:
    opts = _parser().parse_args(argv)
    try:
        target = _tpu_target(opts.target)
        paths = _expand(opts.files)
        alone = len(paths) == 1
        results = [(str(p), m) for p in paths if (m := _measured_module(p, target, alone)) is not None]
        if not results:
            raise InvariantsError(f"{', '.join(opts.files)}: no HLO module among the files given")
    except InvariantsError as err:
        print(visible(str(err), one_line=True), file=sys.stderr)
        return 2
    if opts.json:
        objects = {path: {**summary(m, target), "optimized": m.module.scheduled} for path, m in results}
        payload = next(iter(objects.values())) if len(results) == 1 else objects
        print(json.dumps(payload, indent=2))
    else:
        # Names from the files (custom-call targets, replica groups, kernel code) escaped as they are shown.
        print(visible("\n\n".join(_text_block(path, m, target) for path, m in results)))
    return 0
