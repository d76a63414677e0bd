"""One compiled program's kernel code, tied to its kernel list: what the ``kernel`` metrics and the
snapshot's ``code:`` lines read.

Each kernel of the optimized HLO (:class:`~invariants.hlo.structure.Kernel`) is found in the code by its
instruction name (:func:`~invariants.kernels.name_key`). A kernel with no code (a custom call such as a
cuBLAS gemm, a copy the runtime does itself) has no line; code that no kernel of the list names is kept
apart (:attr:`ProgramCode.unmatched`), so that nothing is dropped in silence.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Iterator

from ..hlo.cost import Missing
from ..hlo.structure import Kernel, Structure
from .facts import KernelFacts, name_key

__all__ = [
    "HOST_TUNED",
    "ProgramCode",
    "code_line",
    "lookup_kernels",
    "snapshot_code_line",
]


@dataclasses.dataclass(frozen=True)
class ProgramCode:
    """The kernel code of one compiled program. ``facts`` is None, with ``reason``, when the target gives
    none (a TPU compile dumps no kernel code); then every kernel metric is a :class:`Missing`."""

    structure: Structure
    facts: tuple[KernelFacts, ...] | None
    reason: str = ""

    def by_key(self) -> dict[str, KernelFacts]:
        return {f.key: f for f in self.facts or ()}

    def of(self, kernel: Kernel) -> KernelFacts | None:
        """The code of ``kernel``, None when it has none."""
        return self.by_key().get(_key(kernel)) if kernel.name else None

    @property
    def unmatched(self) -> tuple[KernelFacts, ...]:
        named = {_key(k) for k in walk_kernels(self.structure.kernel_list) if k.name}
        return tuple(f for f in self.facts or () if f.key not in named)

    def total(self, field: str) -> int | Missing:
        """The sum of one :class:`KernelFacts` field over every kernel, or why there is none."""
        if self.facts is None:
            return Missing(self.reason)
        return sum(int(getattr(f, field)) for f in self.facts)

    def lookup_vector_width(self) -> int | Missing:
        """The narrowest widest-vector (bits) among the kernels that gather or scatter: 0 when one of them
        is scalar."""
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


def _key(kernel: Kernel) -> str:
    return name_key(kernel.name)


def walk_kernels(kernels: Iterable[Kernel]) -> Iterator[Kernel]:
    """Every kernel of a kernel list, loop conditions and bodies and conditional branches included."""
    for k in kernels:
        yield k
        yield from walk_kernels(k.condition)
        yield from walk_kernels(k.body)
        for branch in k.branches:
            yield from walk_kernels(branch)


def lookup_kernels(structure: Structure) -> list[Kernel]:
    """The kernels, loop bodies included, that hold a gather or a scatter: the lookup's own work."""
    return [
        k
        for k in walk_kernels(structure.kernel_list)
        if k.opcode in ("gather", "scatter") or any(op in ("gather", "scatter") for op, _ in k.inner_opcodes)
    ]


def multiset_text(pairs: Iterable[tuple[str, int]]) -> str:
    """``a, b×3``: a multiset as the snapshot writes one (the kernel-code lines and the HLO ones alike)."""
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


# XLA:CPU optimizes its LLVM IR for the processor of the host that compiles it: the vector widths, the
# vectorized and remainder loops and the stack slots of one program differ between an AVX2 and an AVX-512
# host, while the atomics are what XLA's own emitters write. A snapshot holds what every host compiles
# alike, so the code line of a host-tuned language keeps its atomics alone (none: no line); its other facts
# stay metrics (vector_width, code_loops, local_bytes) and are recorded in the results file.
HOST_TUNED: frozenset[str] = frozenset({"llvm"})


def snapshot_code_line(facts: KernelFacts) -> str | None:
    """One kernel's code as a snapshot shows it: :func:`code_line`, or for a host-tuned language
    (:data:`HOST_TUNED`) its atomics alone, None when it has none."""
    if facts.language not in HOST_TUNED:
        return code_line(facts)
    if not facts.atomics:
        return None
    line = f"{facts.language}: atomics {multiset_text(facts.atomics)}"
    return line + (f" (CAS retry loops {facts.cas_loops})" if facts.cas_loops else "")


def unmatched_lines(code: ProgramCode) -> list[str]:
    """The code that no kernel of the list names, one line each as a snapshot shows it, sorted (their
    names are not shown: they are renumbered as instructions are)."""
    return sorted(line for f in code.unmatched if (line := snapshot_code_line(f)) is not None)


def summary(code: ProgramCode) -> Counter[str]:
    """Atomic instructions of the whole program, by normalized spelling."""
    out: Counter[str] = Counter()
    for f in code.facts or ():
        out.update(dict(f.atomics))
    return out
