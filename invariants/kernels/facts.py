"""The facts of one kernel's code, and the error a construct not understood raises: apart from the
package's ``__init__``, which imports the parsers that import these."""

from __future__ import annotations

import dataclasses
import re
from typing import Literal

from .._errors import InvariantsError

Language = Literal["ptx", "llvm"]


class KernelCodeError(InvariantsError):
    """Kernel code that is not understood: ``FILE:LINE: what was not understood: 'the text'``."""


@dataclasses.dataclass(frozen=True)
class KernelFacts:
    """What one kernel's code does, as counted from its PTX entry or LLVM IR function.

    ``atomics`` is the sorted multiset of its atomic and reduction instructions in a normalized spelling
    without memory-ordering and scope qualifiers (PTX ``atom.add.f32``, ``atom.cas.b32``,
    ``atom.add.v4.f32``, ``red.add.noftz.bf16``; LLVM ``atomicrmw fadd float``, ``cmpxchg i32``).
    ``cas_atomics``: compare-and-swap instructions; ``cas_loops``: those inside a loop (a CAS retry loop:
    what XLA emits when the target has no native atomic for the operation). ``float_atomics``: native
    floating-point atomic or reduction adds, one per instruction whatever its vector width.
    ``local_bytes``: ``.local`` (stack and spill) bytes declared by a PTX entry; ``alloca`` bytes of an LLVM
    function. ``instructions``: instructions in its body (volatile: never in a snapshot). ``loops``:
    backward branches. ``vector_width``: the widest vector value an instruction of it reads or writes, in
    bits (0 when it is scalar throughout).
    """

    name: str
    language: Language
    source: str
    atomics: tuple[tuple[str, int], ...] = ()
    cas_atomics: int = 0
    cas_loops: int = 0
    float_atomics: int = 0
    local_bytes: int = 0
    instructions: int = 0
    loops: int = 0
    vector_width: int = 0

    @property
    def key(self) -> str:
        return name_key(self.name)


def name_key(name: str) -> str:
    """The name an HLO instruction and its kernel share: XLA:GPU spells ``input_scatter_fusion.1`` as the
    PTX entry ``input_scatter_fusion_1``; XLA:CPU keeps the dot."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)
