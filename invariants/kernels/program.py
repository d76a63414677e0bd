"""One compiled program's kernel code tied to its kernel list, what the ``kernel`` metrics and the
snapshot's ``code:`` lines read. A kernel is found in the code by its instruction name; one with no code (a
cuBLAS gemm, a copy the runtime does) has no line, and code no kernel names is kept apart
(:attr:`ProgramCode.unmatched`): nothing is dropped in silence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..hlo.cost import Missing
from ..hlo.structure import Kernel, Structure, walk_kernels
from .facts import KernelFacts, name_key


@dataclasses.dataclass(frozen=True)
class ProgramCode:
    """The kernel code of one compiled program; ``facts`` is None, with ``reason``, when the target gives
    none (a TPU compile dumps no kernel code)."""

    structure: Structure
    facts: tuple[KernelFacts, ...] | None
    reason: str = ""

    def of(self, kernel: Kernel) -> KernelFacts | None:
        """The code of ``kernel``, None when it has none."""
        by_key = {f.key: f for f in self.facts or ()}
        found = (by_key.get(name_key(name)) for name in (kernel.name, kernel.caller) if name)
        return next((f for f in found if f is not None), None)

    @property
    def unmatched(self) -> tuple[KernelFacts, ...]:
        kernels = walk_kernels(self.structure.kernel_list)
        named = {name_key(name) for k in kernels for name in (k.name, k.caller) if name}
        return tuple(f for f in self.facts or () if f.key not in named)

    def total(self, field: str) -> int | Missing:
        """One :class:`KernelFacts` field summed over every kernel."""
        if self.facts is None:
            return Missing(self.reason)
        return sum(int(getattr(f, field)) for f in self.facts)

    def lookup_vector_width(self) -> int | Missing:
        """The narrowest widest-vector (bits) among the kernels that gather or scatter."""
        if self.facts is None:
            return Missing(self.reason)
        kernels = lookup_kernels(self.structure)
        if not kernels:
            return Missing("no kernel of this program gathers or scatters")
        widths = []
        for k in kernels:
            facts = self.of(k)
            if facts is None:
                return Missing(f"the {k.opcode} kernel -> {k.shape} that gathers or scatters has no code")
            widths.append(facts.vector_width)
        return min(widths)


def lookup_kernels(structure: Structure) -> list[Kernel]:
    """The kernels, loop bodies included, that hold a gather or a scatter: the lookup's own work."""
    return [
        k
        for k in walk_kernels(structure.kernel_list)
        if k.opcode in ("gather", "scatter") or any(op in ("gather", "scatter") for op, _ in k.inner_opcodes)
    ]


def multiset_text(pairs: Iterable[tuple[str, int]]) -> str:
    """``a, b×3``: a multiset as the snapshot writes one."""
    return ", ".join(name if n == 1 else f"{name}×{n}" for name, n in pairs)


def code_line(facts: KernelFacts) -> str:
    """One kernel's code as the snapshot shows it: atomics by instruction, CAS retry loops, loops, the
    widest vector, ``.local`` bytes. Nothing volatile: no register names, no instruction count."""
    parts = [f"atomics {multiset_text(facts.atomics)}" if facts.atomics else "no atomics"]
    if facts.cas_loops:
        parts[0] += f" (CAS retry loops {facts.cas_loops})"
    parts.append(f"loops {facts.loops}")
    parts.append(f"vector {facts.vector_width} bits" if facts.vector_width else "scalar")
    if facts.local_bytes:
        parts.append(f"local {facts.local_bytes} bytes")
    return f"{facts.language}: " + "; ".join(parts)


# XLA:CPU tunes its LLVM IR to the compiling host (vector widths, loops and stack slots differ between AVX2
# and AVX-512), while its atomics are XLA's own; a snapshot holds what every host compiles alike, so a
# host-tuned language's code line keeps its atomics alone, its other facts staying metrics.
HOST_TUNED: frozenset[str] = frozenset({"llvm"})


def snapshot_code_line(facts: KernelFacts) -> str | None:
    """:func:`code_line`, or for a host-tuned language its atomics alone (None when it has none)."""
    if facts.language not in HOST_TUNED:
        return code_line(facts)
    if not facts.atomics:
        return None
    line = f"{facts.language}: atomics {multiset_text(facts.atomics)}"
    return line + (f" (CAS retry loops {facts.cas_loops})" if facts.cas_loops else "")


def unmatched_lines(code: ProgramCode) -> list[str]:
    """The code no kernel names, a snapshot line each, sorted (names are renumbered: never shown)."""
    return sorted(line for f in code.unmatched if (line := snapshot_code_line(f)) is not None)
