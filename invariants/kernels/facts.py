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
    """What one kernel's code does, counted from its PTX entry or LLVM IR function (each parser's module
    docstring says how in its language): ``atomics``, the sorted multiset of its atomic and reduction
    instructions spelled without ordering and scope (``atom.add.f32``, ``atomicrmw fadd float``);
    compare-and-swaps, and those in a loop (a CAS retry loop: XLA's fallback where the target has no native
    atomic for the operation); native float atomic adds; stack bytes; instructions (volatile: never in a
    snapshot); backward branches; the widest vector operation in bits (0: scalar throughout).
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
