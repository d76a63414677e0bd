"""The kernel code of an XLA dump folder (``xla_dump_to``), grouped by HLO module.

XLA names every file of one compiled module ``module_NNNN.<module name>.<what>``: the optimized HLO
(``...after_optimizations.txt``), one ``.ptx`` per emitted LLVM module on a GPU, one ``.ir-with-opt.ll``
per kernel on the CPU. The prefix is what ties a module's kernel code to its HLO.
"""

from __future__ import annotations

import re
from pathlib import Path

from . import KernelCodeError, kernel_files

_PREFIX = re.compile(r"^(module_\d+\.[^.]+)\.(.+)$")


def module_prefix(file_name: str) -> tuple[str, str] | None:
    """``('module_0005.jit_loss', '3.ptx')`` for ``module_0005.jit_loss.3.ptx``; None for a file that is
    not named the way XLA names a module's dump files."""
    match = _PREFIX.match(file_name)
    return (match.group(1), match.group(2)) if match else None


def read_kernel_code(folder: Path) -> dict[str, dict[str, str]]:
    """Module prefix -> {file name without the prefix -> text} of the kernel-code files under ``folder``
    (sub-folders included: some JAX releases dump one folder per module)."""
    by_module: dict[str, dict[str, Path]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        named = module_prefix(path.name)
        if named is not None:
            by_module.setdefault(named[0], {})[named[1]] = path
    out = {prefix: _read(short) for prefix, short in by_module.items()}
    return {prefix: files for prefix, files in out.items() if files}


def code_beside(hlo_path: Path) -> dict[str, str] | None:
    """The kernel code dumped beside one optimized-HLO file, each file's path -> its text: an XLA dump's
    ``module_NNNN.<name>.*after_optimizations.txt`` and its module's ``.ptx``/``.ll`` files, or the gate's
    own dump (``--hlo-dump-dir``), ``<program>.<config>.hlo.txt`` beside ``<program>.<config>.<file>``.
    None when the file is named neither way (kernel code cannot be told apart from another module's)."""
    if hlo_path.name.endswith(".hlo.txt"):
        prefix = hlo_path.name[: -len(".hlo.txt")]
    elif (named := module_prefix(hlo_path.name)) is not None:
        prefix = named[0]
    else:
        return None
    beside = {p.name[len(prefix) + 1 :]: p for p in hlo_path.parent.glob(f"{prefix}.*") if p.is_file()}
    return {str(beside[name]): text for name, text in _read(beside).items()}


def _read(paths: dict[str, Path]) -> dict[str, str]:
    """The text of each kernel-code file of ``paths``; one not UTF-8 is a one-line error."""
    files: dict[str, str] = {}
    for name in kernel_files(paths):
        try:
            files[name] = paths[name].read_text()
        except UnicodeDecodeError as err:
            raise KernelCodeError(f"{paths[name]}: not UTF-8 text (byte {err.start})") from None
    return files
