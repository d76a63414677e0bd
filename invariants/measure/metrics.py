"""The metric registry: every name a spec's ``assert`` may use, with its meaning, type and source.

The one owner of the metric vocabulary: the spec loader checks names and types against it, :func:`metrics_of`
computes a compile's values from it, and ``hlo-stats --help``, the results file, the report and
docs/reference.md list it. Adding a metric is one :class:`Metric` entry here.

A metric's **type** is what a comparison sees: a ``number``; a ``set`` of strings, only on the right of
``in`` / ``not in``; or a whole kernel list, a ``structure``, only compared with ``==`` / ``!=``. Its
**source** is where its value comes from: the optimized HLO's ``structure``; an ``input`` fact known before
compiling; the ``throughput`` tier (only called on a program, ``time(a)``); the ``compiler``'s predictions
(:mod:`invariants.hlo.cost`, which move with every compiler release, so never in a snapshot); the
``kernel`` code (:mod:`invariants.kernels`); or the ``compile`` itself, whose wall time follows the machine,
so it is only written as a relation between two programs. A value a target does not give is a
:class:`~invariants.hlo.cost.Missing`, and an unknown structural one is None: an assert on either fails
saying why, never with a guess.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..hlo.cost import Analyses, Missing, estimated_cycles, from_analysis, peak_bytes, predicted_seconds
from ..hlo.parse import HloModule
from ..hlo.structure import Structure
from ..kernels.program import ProgramCode
from ..records.compiled import Compiled

if TYPE_CHECKING:
    from ..catalog.programs import Layout
    from ..scope.configs import Config

Type = Literal["number", "set", "structure"]
Source = Literal["structure", "input", "throughput", "compiler", "kernel", "compile"]
COMPILED_SOURCES: tuple[Source, ...] = ("structure", "compiler", "kernel", "compile")
Unit = Literal["count", "bytes", "bits", "seconds", "ratio", ""]


@dataclasses.dataclass(frozen=True)
class Metric:
    """One registered metric; ``of`` computes it from its source's object (a Structure, the compiler's
    Analyses, a ProgramCode, the Compiled record or a Config). ``call_only``: only called on a program
    (``time(a)``). ``alias_of``: another name of the same quantity, kept for specs that use it.
    ``by_dtype``: the count scoped to one element type (``scatters(dtype="f32")``). ``sparsecore``: what
    runs on the SparseCore, a Missing that says so on a target without one."""

    name: str
    meaning: str
    type: Type
    source: Source
    unit: Unit = "count"
    of: Callable[[Any], Any] | None = None
    call_only: bool = False
    alias_of: str | None = None
    by_dtype: Callable[[Any, str], Any] | None = None
    sparsecore: bool = False


def _max_trip_count(s: Structure) -> int | None:
    trips = [w.trip_count for w in s.while_loops]
    if any(t is None for t in trips):
        return None
    return max((t for t in trips if t is not None), default=0)


def _collectives(*prefixes: str) -> Callable[[Structure], int]:
    return lambda s: sum(1 for c in s.collectives if c.opcode.startswith(prefixes))


def _indexed(field: str, strided: bool = False, thread: str | None = None) -> Callable[[Structure, str], int]:
    """The count of ``field``'s ops (strided ones, those on ``thread``) of one result dtype."""
    return lambda s, dtype: sum(
        1
        for op in getattr(s, field)
        if op.shape.startswith(f"{dtype}[") and (op.strided or not strided) and thread in (None, op.thread)
    )


def _offloaded(field: str) -> Callable[[Structure], int]:
    return lambda s: sum(1 for op in getattr(s, field) if op.thread == SPARSECORE)


def _offloaded_bytes(s: Structure) -> int:
    return sum(op.bytes for op in (*s.gather_shapes, *s.scatter_shapes) if op.thread == SPARSECORE)


def _sparsecore(
    name: str, meaning: str, of: Callable[[Structure], object], field: str | None = None, unit: Unit = "count"
) -> Metric:
    by_dtype = _indexed(field, thread=SPARSECORE) if field else None
    return _structural(name, meaning, of, unit, by_dtype=by_dtype, sparsecore=True)


# The execution thread libtpu names its SparseCore computations with (``execution_thread="sparsecore"``).
SPARSECORE = "sparsecore"
# Targets whose chips have no SparseCore, by name prefix: v5e, and every CPU and GPU.
_NO_SPARSECORE = ("tpu-v5e", "cpu", "gpu")


def no_sparsecore(target: str) -> str | None:
    """Why ``target`` has no SparseCore; None where it has one or is not known (a module read from a file)."""
    if target.startswith(_NO_SPARSECORE):
        return f"{target} has no SparseCore (TPU v4, v5p and v6e have): nothing can be offloaded there"
    return None


OFFLOAD_COUNTS = {"sparsecore_gathers": "gather", "sparsecore_scatters": "scatter"}


def offload_moves(before: Mapping[str, object], after: Mapping[str, object]) -> str | None:
    """What moved between the TensorCore and the SparseCore from one compile of a key to another, in one
    line (``1 scatter moved to sparsecore; 8 gathers moved off sparsecore``); None where nothing did."""
    moves = []
    for name, word in OFFLOAD_COUNTS.items():
        b, a = before.get(name), after.get(name)
        if isinstance(b, int) and isinstance(a, int) and a != b:
            n = abs(a - b)
            moves.append(f"{n} {word}{'' if n == 1 else 's'} moved {'to' if a > b else 'off'} {SPARSECORE}")
    return "; ".join(moves) or None


def _itemsize(config: Config) -> int:
    import numpy as np  # hlo-stats and the spec validator start without numpy (ALLOWED_LAZY)

    return int(np.dtype(config.table.dtype).itemsize)


def _number(
    source: Source,
    name: str,
    meaning: str,
    of: Callable[..., object] | None = None,
    unit: Unit = "count",
    *,
    by_dtype: Callable[[Structure, str], int] | None = None,
    alias_of: str | None = None,
    sparsecore: bool = False,
) -> Metric:
    """A number; ``of`` by default reads the metric's name from its source (a kernel metric: its total)."""
    if of is None:
        readers: dict[str, Callable[[str], Callable[..., object]]] = {
            "kernel": _total,
            "compiler": from_analysis,
        }
        of = readers.get(source, operator.attrgetter)(name)
    return Metric(name, meaning, "number", source, unit, of, False, alias_of, by_dtype, sparsecore)


_structural = functools.partial(_number, "structure")
_kernel = functools.partial(_number, "kernel")
_input = functools.partial(_number, "input")
_compiler = functools.partial(_number, "compiler")
_compile = functools.partial(_number, "compile")


def _total(field: str) -> Callable[[ProgramCode], int | Missing]:
    return operator.methodcaller("total", field)


_ALL = (
    _structural("kernels", "static kernel count: entry computation plus each while body/condition once"),
    _structural(
        "entry_fusions", "fusions launched by the entry computation (call bodies inlined, loops not)"
    ),
    _structural("fusions", "alias of entry_fusions", lambda s: s.entry_fusions, alias_of="entry_fusions"),
    _structural("while_loops", "while instructions in all computations", lambda s: len(s.while_loops)),
    _structural(
        "max_trip_count",
        "largest trip count of any while loop; 0 without loops, unknown if any is",
        _max_trip_count,
    ),
    _structural(
        "dynamic_kernel_launches",
        "kernel launches with loops expanded by trip count (body x trips); unknown if any trip is",
    ),
    _structural(
        "gathers",
        'gather instructions in all computations, fused included; gathers(dtype="f32"): those of f32 rows',
        by_dtype=_indexed("gather_shapes"),
    ),
    _structural(
        "scatters",
        'scatter instructions in all computations, fused included; scatters(dtype="f32"): '
        "those into an f32 operand",
        by_dtype=_indexed("scatter_shapes"),
    ),
    _sparsecore(
        "sparsecore_ops",
        'kernels that run on the SparseCore (execution_thread="sparsecore"): '
        "what libtpu offloaded from the TensorCore, loops' bodies counted once",
        lambda s: s.thread_kernels.get(SPARSECORE, 0),
    ),
    _sparsecore(
        "sparsecore_gathers",
        "gathers on the SparseCore (also counted by gathers); "
        'sparsecore_gathers(dtype="f32"): those of f32 rows',
        _offloaded("gather_shapes"),
        "gather_shapes",
    ),
    _sparsecore(
        "sparsecore_scatters",
        "scatters on the SparseCore (also counted by scatters); "
        'sparsecore_scatters(dtype="f32"): those into an f32 operand',
        _offloaded("scatter_shapes"),
        "scatter_shapes",
    ),
    _sparsecore(
        "sparsecore_bytes",
        "bytes the SparseCore's gathers and scatters move: each gather's result and each scatter's updates",
        _offloaded_bytes,
        unit="bytes",
    ),
    _structural(
        "strided_gathers",
        "gathers whose slice per index is not contiguous in the operand's layout "
        "(its dimensions larger than 1 are not the minor-most)",
        by_dtype=_indexed("gather_shapes", strided=True),
    ),
    _structural(
        "strided_scatters",
        "scatters whose window per index is not contiguous in the operand's layout "
        "(each index's row written strided)",
        by_dtype=_indexed("scatter_shapes", strided=True),
    ),
    _structural(
        "transposes",
        "transpose instructions in all computations, fused included (a layout-changing "
        "copy is counted by copies)",
    ),
    _structural("dynamic_slices", "dynamic-slice instructions in all computations, fused included"),
    _structural(
        "dynamic_update_slices", "dynamic-update-slice instructions in all computations, fused included"
    ),
    _structural(
        "collectives",
        "collective operations (plain, -start, or async-start wrapping one)",
        lambda s: len(s.collectives),
    ),
    _structural(
        "collective_bytes",
        "sum of the result byte sizes of all collectives",
        lambda s: sum(c.bytes for c in s.collectives),
        unit="bytes",
    ),
    _structural("all_gathers", "all-gather collectives, async forms included", _collectives("all-gather")),
    _structural("all_reduces", "all-reduce collectives, async forms included", _collectives("all-reduce")),
    _structural(
        "reduce_scatters", "reduce-scatter collectives, async forms included", _collectives("reduce-scatter")
    ),
    _structural(
        "all_to_alls",
        "all-to-all collectives (ragged ones included), async forms included",
        _collectives("all-to-all", "ragged-all-to-all"),
    ),
    _structural(
        "collective_permutes",
        "collective-permute collectives, async forms included",
        _collectives("collective-permute"),
    ),
    _structural(
        "aliased_buffers",
        "output buffers that reuse a donated parameter's (the module's input_output_alias)",
        lambda s: len(s.aliases),
    ),
    _structural(
        "converts", "convert instructions (dtype conversions) in all computations", lambda s: len(s.converts)
    ),
    _structural(
        "copies",
        "copy and copy-start instructions in all computations",
        lambda s: s.opcodes.get("copy", 0) + s.opcodes.get("copy-start", 0),
    ),
    _structural(
        "custom_calls",
        "custom-call instructions in all computations, fused included",
        lambda s: s.opcodes.get("custom-call", 0),
    ),
    _structural("sorts", "sort instructions in all computations", lambda s: s.opcodes.get("sort", 0)),
    Metric(
        "custom_call_targets",
        "the custom-call targets called, as in 'T' in custom_call_targets",
        "set",
        "structure",
        "",
        lambda s: tuple(s.custom_call_targets),
    ),
    Metric(
        "opcodes",
        "the opcodes present, as in 'sort' not in opcodes",
        "set",
        "structure",
        "",
        lambda s: tuple(sorted(s.opcodes)),
    ),
    _compiler(
        "estimated_cycles",
        "TPU compiler's predicted cycles: kernels' estimated_cycles summed, loops expanded by trip "
        "count (TPU only)",
        estimated_cycles,
    ),
    _compiler(
        "predicted_seconds",
        "device seconds of one call, predicted from the optimized HLO by the TPU cost model fitted on "
        "a chip (invariants/data/tpu_cost.toml; uncalibrated on a chip never measured; TPU only)",
        predicted_seconds,
        unit="seconds",
    ),
    _compiler(
        "temp_bytes",
        "temporary buffer bytes in the device's main memory, from "
        "compiled.memory_analysis(); on TPU it leaves out the intermediates XLA places in on-chip "
        "memory (VMEM), however large: bound peak_bytes there",
        unit="bytes",
    ),
    _compiler(
        "peak_bytes",
        "bytes live at the peak: arguments, outputs and temporaries of every memory "
        "space, from compiled.memory_analysis() (TPU and GPU; XLA:CPU's figure leaves temporaries out, "
        "so there it is unavailable)",
        peak_bytes,
        unit="bytes",
    ),
    _compiler("argument_bytes", "argument buffer bytes, from compiled.memory_analysis()", unit="bytes"),
    _compiler("output_bytes", "output buffer bytes, from compiled.memory_analysis()", unit="bytes"),
    _compiler("flops", "floating-point operations, from compiled.cost_analysis() (not across releases)"),
    _compiler(
        "bytes_accessed",
        "bytes read and written, from compiled.cost_analysis() (not across releases)",
        unit="bytes",
    ),
    _kernel("cas_atomics", "compare-and-swap atomics in the kernels' code (PTX atom.cas, LLVM cmpxchg)"),
    _kernel(
        "cas_loops", "compare-and-swap atomics inside a loop: CAS retry loops standing in for a native atomic"
    ),
    _kernel(
        "float_atomics", "native floating-point atomic or reduction adds (any width, one per instruction)"
    ),
    _kernel(
        "local_bytes", "stack and spill bytes the kernels declare (PTX .local, LLVM alloca)", unit="bytes"
    ),
    _kernel("code_loops", "loops (backward branches) in the kernels' code", _total("loops")),
    _kernel(
        "code_instructions",
        "instructions in the kernels' code (moves with every compiler release)",
        _total("instructions"),
    ),
    _kernel(
        "vector_width",
        "narrowest widest-vector (bits) of the kernels that gather or scatter: 0 when one is scalar",
        lambda code: code.lookup_vector_width(),
        unit="bits",
    ),
    _compile(
        "compile_seconds",
        "wall time of XLA's trace, lower and compile of the program on the target "
        "(machine-relative: write it as a relation, compile_seconds(a) <= 10 * compile_seconds(b) + 5)",
        lambda c: (
            Missing("no compile was timed: the module was read from a file")
            if c.compile_seconds is None
            else c.compile_seconds
        ),
        unit="seconds",
    ),
    _input(
        "table_bytes",
        "bytes of the embedding table (vocab x width x dtype size)",
        lambda c: c.vocab * c.width * _itemsize(c),
        unit="bytes",
    ),
    _input("lookups", "indices looked up per call", lambda c: math.prod(c.index_shape)),
    _input("row_bytes", "bytes of one table row", lambda c: c.width * _itemsize(c), unit="bytes"),
    _input("vocab", "rows of the embedding table"),
    # Per chip of a sharded program's mesh on the item's target (see sharding_facts); 1 when unsharded.
    Metric(
        "chips", "devices in a sharded program's mesh on the item's target (1 unsharded)", "number", "input"
    ),
    Metric(
        "table_shards", "pieces the table's rows are cut into on that mesh (1 unsharded)", "number", "input"
    ),
    Metric(
        "batch_shards",
        "pieces the batch is cut into on that mesh: lookups * row_bytes / batch_shards "
        "is one chip's activations",
        "number",
        "input",
    ),
    Metric(
        "structure",
        "the whole kernel list (and gathers, scatters, collectives, converts) of a program",
        "structure",
        "structure",
        "",
        call_only=True,
    ),
    Metric(
        "time",
        "run time of a program, only in a paired ratio time(a) / time(b) <= c",
        "number",
        "throughput",
        "seconds",
        call_only=True,
    ),
)

METRICS: dict[str, Metric] = {m.name: m for m in _ALL}


def names(source: Source | None = None, type: Type | None = None) -> list[str]:
    return [
        m.name for m in _ALL if (source is None or m.source == source) and (type is None or m.type == type)
    ]


def metrics_of(
    structure: Structure, code: ProgramCode, compiled: Compiled, module: HloModule | None = None
) -> dict[str, Any]:
    """Every metric one compile gives, by name (aliases too), raw: a Missing or None where there is none."""
    family = compiled.target.split("-", 1)[0]  # empty for none (a module read from a file)
    sources: dict[str, object] = {
        "structure": structure,
        "compiler": Analyses(
            structure,
            compiled.cost or {},
            compiled.memory or {},
            family if family in ("cpu", "tpu", "gpu") else "",
            module,
            compiled.target,
        ),
        "kernel": code,
        "compile": compiled,
    }
    absent = no_sparsecore(compiled.target)
    return {
        m.name: Missing(absent) if m.sparsecore and absent else m.of(sources[m.source])
        for m in _ALL
        if m.source in sources and m.of is not None and not m.call_only
    }


def input_facts(config: Config, layout: Layout | None = None, devices: int = 1) -> dict[str, int]:
    """The input facts of a configuration by name; with a sharded program's ``layout``, its per-chip facts."""
    facts = {m.name: m.of(config) for m in _ALL if m.source == "input" and m.of is not None}
    return {**facts, **sharding_facts(layout, devices)}


def sharding_facts(layout: Layout | None, devices: int) -> dict[str, int]:
    if layout is None:
        return {"chips": 1, "table_shards": 1, "batch_shards": 1}
    return {
        "chips": math.prod(layout.mesh_for(devices)),
        "table_shards": layout.shards(layout.table, devices),
        "batch_shards": layout.shards(layout.indices, devices),
    }


def markdown_table(metrics: Iterable[Metric] = _ALL) -> str:
    rows = ["| metric | type | meaning |", "|---|---|---|"]
    for m in metrics:
        kind = m.type if m.unit in ("count", "") else f"{m.type} ({m.unit})"
        call = f"{m.name}(PROGRAM)" if m.call_only else m.name
        rows.append(f"| `{call}` | {kind} | {m.meaning} |")
    return "\n".join(rows)


_SOURCE_TITLES = (
    ("structure", "structural (also JSON keys of --json)"),
    ("input", "input facts"),
    ("throughput", "throughput tier"),
    ("compiler", "the compiler's predictions (never in snapshots; hlo-stats computes estimated_cycles)"),
    ("kernel", "the kernels' code: PTX on a GPU, LLVM IR on the CPU (hlo-stats reads a dump's .ptx/.ll)"),
    ("compile", "the compile itself (machine-relative: in relations only; hlo-stats has none)"),
)


def help_text() -> str:
    width = max(len(m.name) for m in _ALL) + len("(PROGRAM)")
    lines = []
    for source, title in _SOURCE_TITLES:
        lines.append(f"{title}:")
        for m in _ALL:
            if m.source == source:
                call = f"{m.name}(PROGRAM)" if m.call_only else m.name
                lines.append(f"  {call:<{width}}  {m.type:<9}  {m.meaning}")
    return "\n".join(lines)
