"""Kernel code: what each kernel of a compiled program compiles to, below the HLO.

XLA:GPU emits one PTX entry per kernel (a fusion, a loop body's fusion, ...) and XLA:CPU one LLVM IR function
per kernel. Two programs with byte-identical optimized HLO can still compile to different code (a native float
atomic add turned into a compare-and-swap retry loop). This subpackage reads that code into per-kernel facts
(:class:`KernelFacts`): atomics by operation and type, CAS retry loops, ``.local`` bytes, instruction count,
loops (backward branches) and the widest vector operation. The facts are what the ``kernel`` metrics
(:mod:`invariants.measure.metrics`) and the snapshot's per-kernel code lines are made of.

Parsing is strict: a construct the parser does not know is a :class:`KernelCodeError` naming
``FILE:LINE`` and the construct, never a guess (XLA's text formats are not a stable API).

Layer: this subpackage imports no JAX; it reads text. ``invariants.compile.artifacts`` collects the text of
one compile (``compile(compiler_options={"xla_dump_to": DIR})``) and :func:`kernel_files` picks the files.
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
    """Every kernel in ``files`` (file name -> text; ``.ptx`` or ``.ll``), in file-name order and then in
    order of appearance. Raises :class:`KernelCodeError` on a construct not understood."""
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
    """Which files of one compile's XLA dump hold its kernel code: the ``.ptx`` files of a GPU compile (an
    empty one is a module without kernels); the ``.ir-with-opt.ll`` files of a CPU compile (a GPU dump has
    those too, the NVPTX module before PTX, so ``.ptx`` wins when there is any)."""
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
    """The file name without its folders (a name may be a path, or a key's ``program.config.target/file``)."""
    return name.replace("\\", "/").rsplit("/", 1)[-1]
