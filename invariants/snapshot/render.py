"""The snapshot form: a normalized, human-readable summary of what a program compiles to.

It is stable across runs, Python function names and source lines (no metadata, instruction names, module
names or stack frames appear), and sensitive to everything that decides performance: the kernel list in
order, each fusion's kind and opcode multiset, custom-call targets, while loops with their bodies and trip
counts, collectives with bytes, gather/scatter dimension numbers and result layouts, dtype conversions, and
the jaxpr's primitive sequence with gather/scatter modes.

One kernel is one line, so a regression reads as a one-line diff such as
``kernel 3: fusion kLoop {...}`` becoming ``kernel 3: while ×16384 {`` followed by its body.

Where the compile kept its kernel code (GPU PTX, CPU LLVM IR: :mod:`invariants.kernels`), each kernel
with code is followed by one ``code:`` line of its atomics, loops and vector width, so that a change of
code generation behind byte-identical HLO (a native float atomic becoming a CAS retry loop) is a
snapshot diff too. XLA:CPU tunes its code to the compiling host's processor, so a CPU kernel's line shows
its atomics alone, and only when it has some (:data:`invariants.kernels.program.HOST_TUNED`).
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Iterable

from ..hlo.structure import Kernel, Structure
from ..kernels.program import ProgramCode, multiset_text, snapshot_code_line, unmatched_lines
from ..measure.measurement import Measurement


def _runs(items: Iterable[str]) -> list[str]:
    """Collapse consecutive repeats: ``a a a b`` → ``a×3 b``."""
    out: list[str] = []
    last, count = None, 0
    for item in [*items, None]:
        if item == last:
            count += 1
            continue
        if last is not None:
            out.append(last if count == 1 else f"{last}×{count}")
        last, count = item, 1
    return out


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
    # Not kernel.partitions: XLA:CPU splits loop fusions by the host's core count (none under one core),
    # so it would make CPU snapshots differ between a 2-core and a 64-core CI machine.
    return f"{text} -> {kernel.shape}"


def kernel_lines(
    kernels: Iterable[Kernel], prefix: str = "kernel ", indent: str = "", code: ProgramCode | None = None
) -> list[str]:
    lines: list[str] = []
    for i, k in enumerate(kernels, 1):
        label = f"{indent}{prefix}{i}"
        if k.opcode == "while":
            trips = f"×{k.trip_count}" if k.trip_count is not None else "×?"
            lines.append(f"{label}: while {trips} {{")
            lines += kernel_lines(k.condition, "cond ", indent + "    ", code)
            lines += kernel_lines(k.body, "body ", indent + "    ", code)
            lines.append(f"{indent}}}")
        elif k.opcode == "conditional":
            lines.append(f"{label}: conditional {{")
            for b, branch in enumerate(k.branches):
                lines += kernel_lines(branch, f"branch {b}.", indent + "    ", code)
            lines.append(f"{indent}}}")
        else:
            lines.append(f"{label}: {kernel_line(k)}")
            facts = code.of(k) if code is not None else None
            shown = snapshot_code_line(facts) if facts is not None else None
            if shown is not None:
                lines.append(f"{indent}    code {shown}")
    return lines


def summary_line(structure: Structure) -> str:
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(structure.fusion_kinds.items()))
    trips = ", ".join("×?" if w.trip_count is None else f"×{w.trip_count}" for w in structure.while_loops)
    launches = "unknown" if structure.dynamic_kernel_launches is None else structure.dynamic_kernel_launches
    return (
        f"kernels {structure.kernels}; entry fusions {structure.entry_fusions}"
        + (f" ({kinds})" if kinds else "")
        + f"; while loops {len(structure.while_loops)}"
        + (f" ({trips})" if trips else "")
        + f"; dynamic launches {launches}"
    )


def render_summary(measured: Measurement, doc: str = "") -> str:
    """The snapshot text of one measured compile. Deterministic for a given compiler."""
    compiled, structure, code = measured.compiled, measured.structure, measured.code
    out = [f"# {compiled.program} [{compiled.config}] on {compiled.target}"]
    if doc:
        out.append(f"# {doc}")
    out.append("")
    out.append("jaxpr:")
    out += textwrap.wrap(
        " ".join(_runs(compiled.jaxpr_primitives)),
        100,
        initial_indent="  ",
        subsequent_indent="  ",
        break_on_hyphens=False,
    ) or ["  (empty)"]
    out.append("")
    out.append("summary: " + summary_line(structure))
    out.append("kernels:")
    out += ["  " + line for line in kernel_lines(structure.kernel_list, code=code)] or ["  (none)"]
    unmatched = unmatched_lines(code)
    if unmatched:
        out.append("code of no listed kernel:")
        out += ["  " + line for line in unmatched]
    out.append("custom calls: " + (", ".join(structure.custom_call_targets) or "none"))
    out.append("converts: " + (multiset_text(sorted(Counter(structure.converts).items())) or "none"))
    for title, ops in (("gathers", structure.gather_shapes), ("scatters", structure.scatter_shapes)):
        out.append(f"{title}:" + ("" if ops else " none"))
        # A window that is not contiguous in its operand's layout says so on its line: the shapes and
        # dimension numbers alone hide it (the same scatter writes rows or columns by layout).
        out += [
            f"  {op.opcode} -> {op.shape} {{{op.dimension_numbers}}}" + (" strided" if op.strided else "")
            for op in ops
        ]
    out.append("collectives:" + ("" if structure.collectives else " none"))
    out += [
        f"  {c.opcode} {c.bytes} bytes -> {c.shape}"
        + (f" groups={c.replica_groups}" if c.replica_groups else "")
        for c in structure.collectives
    ]
    out.append(f"root: {structure.root_shape}")
    return "\n".join(out) + "\n"
