"""The snapshot form: a normalized, human-readable summary of what a program compiles to.

It is stable across runs, Python function names and source lines (no metadata, instruction names or stack
frames), and sensitive to everything that decides performance: the kernels, each fusion's kind and opcodes,
custom calls, loops and their trip counts, collectives, gathers and scatters with their layouts, dtype
conversions, donated buffers, and the jaxpr's primitives.

It is written to diff like the change that made it: the ``summary:`` line first; then each section as a
sorted multiset, equal lines once with their count (``×8``: one per table), so that nothing follows XLA's
emission order and removing a kernel changes its line alone; the jaxpr last, one primitive a line. Where the
compile kept its kernel code (GPU PTX, CPU LLVM IR), a kernel line is followed by a ``code:`` line of its
atomics, loops and vector width, so that a change of code generation behind identical HLO is a diff too.
:mod:`invariants.snapshot.diff` is the one reader of this text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ..hlo.parse import MAIN_THREAD
from ..hlo.structure import Collective, IndexedOp, Kernel, Structure
from ..kernels.program import ProgramCode, multiset_text, snapshot_code_line, unmatched_lines
from ..measure.measurement import Measurement
from ..scope.select import bare
from ..scope.targets import libtpu_init_args


def kernel_line(kernel: Kernel) -> str:
    """One kernel as one line (a while or conditional opens a block; see :func:`kernel_lines`)."""
    if kernel.opcode == "fusion":
        text = f"fusion {kernel.fusion_kind} {{{multiset_text(kernel.inner_opcodes)}}}"
    elif kernel.opcode == "custom-call":
        text = f"custom-call {kernel.custom_call_target}"
    else:
        text = kernel.opcode
    if kernel.custom_call_target and kernel.opcode == "fusion":
        text += f" [custom-call {kernel.custom_call_target}]"
    return f"{text} -> {kernel.shape}" + _on_thread(kernel.thread)


def _on_thread(thread: str) -> str:
    return "" if thread == MAIN_THREAD else f" on {thread}"


def kernel_lines(
    kernels: Iterable[Kernel], indent: str = "", code: ProgramCode | None = None, role: str = ""
) -> list[str]:
    """The kernel list as a sorted multiset, each kernel with its distinct code lines, a loop's or a
    conditional's bodies indented in a block, each line led by its ``role``."""
    lead = f"{role}: " if role else ""
    blocks: list[tuple[str, ...]] = []  # a loop or a conditional: its lines, compared whole
    codes: dict[str, list[str | None]] = {}  # a kernel's line: each kernel's code line (None: none)
    for k in kernels:
        if k.opcode in ("while", "conditional"):
            blocks.append(_block(k, indent, lead, code))
            continue
        facts = code.of(k) if code is not None else None
        shown = snapshot_code_line(facts) if facts is not None else None
        codes.setdefault(f"{indent}{lead}{kernel_line(k)}", []).append(shown)
    # The distinct code of equal kernels: XLA:GPU compiles equal fusions once and launches that code for
    # each, so only one of them has code of its own, and which one follows the emission order.
    entries = Counter(blocks)
    for head, found in codes.items():
        distinct = sorted({f"{indent}    code {c}" for c in found if c is not None})
        entries[(head, *distinct)] += len(found)
    lines: list[str] = []
    for entry, n in sorted(entries.items()):
        lines += [_counted(entry[0], n), *entry[1:]]
    return lines


def _block(k: Kernel, indent: str, lead: str, code: ProgramCode | None) -> tuple[str, ...]:
    inner = indent + "    "
    if k.opcode == "while":
        trips = f"×{k.trip_count}" if k.trip_count is not None else "×?"
        head = f"{indent}{lead}while {trips} {{"
        parts = kernel_lines(k.condition, inner, code, "cond") + kernel_lines(k.body, inner, code, "body")
    else:
        head = f"{indent}{lead}conditional {{"
        parts = [
            line
            for b, branch in enumerate(k.branches)
            for line in kernel_lines(branch, inner, code, f"branch {b}")
        ]
    return (head, *parts, f"{indent}}}")


def _counted(line: str, n: int) -> str:
    if n == 1:
        return line
    return f"{line[:-1]}×{n} {{" if line.endswith("{") else f"{line} ×{n}"


def multiset_lines(lines: Iterable[str]) -> list[str]:
    return [_counted(line, n) for line, n in sorted(Counter(lines).items())]


def jaxpr_lines(primitives: Iterable[str]) -> list[str]:
    """The jaxpr's primitives as a multiset, one (``add×3``) a line; those of bodies under ``in bodies:``."""
    top: Counter[str] = Counter()
    inner: Counter[str] = Counter()
    depth = 0
    for item in primitives:
        if item == "{":
            depth += 1
        elif item == "}":
            depth -= 1
        else:
            (inner if depth else top)[item] += 1

    def shown(counts: Counter[str], indent: str) -> list[str]:
        return [indent + (name if n == 1 else f"{name}×{n}") for name, n in sorted(counts.items())]

    return shown(top, "  ") + (["  in bodies:", *shown(inner, "    ")] if inner else [])


def summary_line(structure: Structure) -> str:
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(structure.fusion_kinds.items()))
    counts = sorted((w.trip_count is None, w.trip_count or 0) for w in structure.while_loops)
    trips = ", ".join("×?" if unknown else f"×{n}" for unknown, n in counts)
    launches = "unknown" if structure.dynamic_kernel_launches is None else structure.dynamic_kernel_launches
    return (
        f"kernels {structure.kernels}; entry fusions {structure.entry_fusions}"
        + (f" ({kinds})" if kinds else "")
        + f"; while loops {len(structure.while_loops)}"
        + (f" ({trips})" if trips else "")
        + f"; dynamic launches {launches}"
        + "".join(f"; {thread} kernels {n}" for thread, n in structure.thread_kernels.items())
    )


def structure_lines(structure: Structure, code: ProgramCode | None = None) -> list[str]:
    """The structure sections of a snapshot, from ``kernels:`` to ``root:``."""
    out = ["kernels:"]
    out += kernel_lines(structure.kernel_list, "  ", code) or ["  (none)"]
    out += _unmatched_code(code)
    out.append("custom calls: " + (", ".join(structure.custom_call_targets) or "none"))
    out.append("converts: " + (multiset_text(sorted(Counter(structure.converts).items())) or "none"))
    out += _section("gathers", [_indexed_line(op) for op in structure.gather_shapes])
    out += _section("scatters", [_indexed_line(op) for op in structure.scatter_shapes])
    out += _section("collectives", [_collective_line(c) for c in structure.collectives])
    out.append("aliases: " + (", ".join(structure.aliases) or "none"))
    out.append(f"root: {structure.root_shape}")
    return out


def _unmatched_code(code: ProgramCode | None) -> list[str]:
    unmatched = unmatched_lines(code) if code is not None else []
    return ["code of no listed kernel:", *("  " + line for line in unmatched)] if unmatched else []


def _section(title: str, lines: list[str]) -> list[str]:
    return [f"{title}:" + ("" if lines else " none"), *multiset_lines(lines)]


def _collective_line(c: Collective) -> str:
    groups = f" groups={c.replica_groups}" if c.replica_groups else ""
    return f"  {c.opcode} {c.bytes} bytes -> {c.shape}{groups}"


def _indexed_line(op: IndexedOp) -> str:
    # The shapes and dimension numbers alone hide it: the same scatter writes rows or columns by layout.
    strided = " strided" if op.strided else ""
    return f"  {op.opcode} -> {op.shape} {{{op.dimension_numbers}}}{strided}{_on_thread(op.thread)}"


def render_summary(measured: Measurement, doc: str = "") -> str:
    compiled, structure = measured.compiled, measured.structure
    out = [f"# {bare(compiled.program)} [{compiled.config}] on {compiled.target}"]
    flags = libtpu_init_args(compiled.target)
    if flags:
        out.append(f"# LIBTPU_INIT_ARGS={flags}")
    if doc:
        out.append(f"# {doc}")
    out.append("summary: " + summary_line(structure))
    out.append("")
    out += structure_lines(structure, measured.code)
    out.append("")
    out.append("jaxpr:")
    out += jaxpr_lines(compiled.jaxpr_primitives) or ["  (empty)"]
    return "\n".join(out) + "\n"
