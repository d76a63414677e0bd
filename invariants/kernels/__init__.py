"""Kernel code: what each kernel of a compiled program compiles to, below the HLO (docs/kernels.md).

Two programs with byte-identical optimized HLO can still compile to different code (a native float atomic
add turned into a compare-and-swap retry loop). XLA:GPU's PTX (an entry per kernel) and XLA:CPU's LLVM IR
(a function per kernel), as one compile dumps them (``invariants.compile.artifacts``), are read into
:class:`KernelFacts`. Parsing is strict: a construct not understood is a :class:`KernelCodeError` naming
``FILE:LINE``, never a guess (XLA's text formats are no stable API). No JAX.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .facts import KernelCodeError as KernelCodeError
from .facts import KernelFacts as KernelFacts
from .facts import Language as Language
from .facts import name_key as name_key
from .llvm_ir import parse_llvm_ir
from .ptx import parse_ptx

__all__ = [
    "KernelCodeError",
    "KernelFacts",
    "kernel_files",
    "name_key",
    "parse_kernel_code",
]


def parse_kernel_code(files: Mapping[str, str]) -> list[KernelFacts]:
    """Every kernel in ``files`` (``.ptx`` or ``.ll`` file name -> text), in file-name order."""
    out: list[KernelFacts] = []
    for name in sorted(files):
        text = files[name]
        if _is_ptx(name):
            out += parse_ptx(text, name)
        elif _base(name) == "ir-with-opt.ll" or name.endswith(".ll"):
            out += parse_llvm_ir(text, name)
        else:
            raise KernelCodeError(f"{name}: not kernel code (expected a .ptx or .ll file)")
    return out


def kernel_files(names: Iterable[str]) -> list[str]:
    """The files of one compile's XLA dump that hold its kernel code: the ``.ptx`` files, else the
    ``.ir-with-opt.ll`` ones (a GPU dump has those too: the NVPTX module before PTX)."""
    names = sorted(names)
    ptx = [n for n in names if _is_ptx(n)]
    if ptx:
        return ptx
    return [n for n in names if _base(n) == "ir-with-opt.ll" or n.endswith(".ir-with-opt.ll")]


def _is_ptx(name: str) -> bool:
    # jaxlib 0.10.0 names a module's one PTX file module_NNNN.<name>.ptx (its short name is "ptx"); later
    # releases number one file per LLVM module: module_NNNN.<name>.3.ptx.
    return _base(name) == "ptx" or name.endswith(".ptx")


def _base(name: str) -> str:
    """The file name without its folders (a name may be a path, or ``program.config.target/file``)."""
    return name.replace("\\", "/").rsplit("/", 1)[-1]
