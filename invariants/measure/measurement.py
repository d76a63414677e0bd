"""Compiled -> measured: the one stage that turns a compile's record into everything a verdict reads.

:func:`measure` parses the optimized HLO once (:func:`invariants.hlo.parse.parse_module`), derives its
:class:`~invariants.hlo.structure.Structure`, reads the kernels' code (:mod:`invariants.kernels`) and
computes every metric of the registry (:data:`invariants.measure.metrics.METRICS`) that a compile gives:
structural, the compiler's own, the kernels' code, and the compile's time. The gate, the pytest API,
``versus``, ``bisect``, ``matrix``, the self-check and ``hlo-stats`` all measure through it, so a metric
registered once reaches every one of them.

No JAX: a :class:`~invariants.compile.record.Compiled` is text and numbers.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..compile.record import Compiled
from ..hlo.cost import Missing
from ..hlo.parse import HloModule, parse_module
from ..hlo.structure import Structure, structure_of
from ..kernels import parse_kernel_code
from ..kernels.program import ProgramCode
from .metrics import METRICS, metrics_of

if TYPE_CHECKING:
    from ..catalog.targets import Target

__all__ = ["Measurement", "measure", "measure_text", "no_code_reason"]


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One compile, measured: its record, the parsed module, its structure, its kernels' code, and every
    metric a compile gives, by name (``metrics``: raw, a :class:`~invariants.hlo.cost.Missing` where the
    target gives no value, None where a structural one is unknown). ``seconds``: the time measuring took."""

    compiled: Compiled
    module: HloModule
    structure: Structure
    code: ProgramCode
    metrics: Mapping[str, Any]
    seconds: float = 0.0

    @classmethod
    def of(
        cls,
        compiled: Compiled,
        module: HloModule,
        structure: Structure,
        code: ProgramCode,
        seconds: float = 0.0,
    ) -> Measurement:
        """The measurement of these parts, its metrics computed from them (the one place they are)."""
        return cls(compiled, module, structure, code, metrics_of(structure, code, compiled, module), seconds)

    def numbers(self) -> dict[str, int | float | None]:
        """The numeric metrics, null where there is no value, one name per quantity (no aliases): what a
        results file records of a compile."""
        return {
            name: (None if isinstance(value, Missing) else value)
            for name, value in self.metrics.items()
            if METRICS[name].type == "number" and METRICS[name].alias_of is None
        }


def no_code_reason(target: Target) -> str:
    """Why a compile for ``target`` has no kernel code: the one wording, for every stage."""
    if target.family == "tpu":
        return f"{target.name}: the TPU compiler writes no kernel code (libtpu dumps no LLO)"
    if target.family == "cpu" and not target.keeps_kernel_code:
        return f"{target.name}: its kernels are the CPU runtime target's; read them there"
    return f"{target.name}: the compile kept no kernel code"


def measure(
    compiled: Compiled,
    target: Target | None = None,
    *,
    source: str | None = None,
    code_folder: str | None = None,
    no_code: str | None = None,
) -> Measurement:
    """Measure one compile. ``source`` names the HLO text in parse errors (default
    ``program/config/target``) and ``code_folder`` the folder of its kernel-code files (default
    ``program.config.target``); without kernel code in ``compiled``, ``no_code`` (or, from ``target``,
    :func:`no_code_reason`) says why, and every kernel metric is a ``Missing`` with that reason.

    Raises :class:`~invariants.hlo.parse.HloParseError` or :class:`~invariants.kernels.KernelCodeError`
    (each an ``InvariantsError`` naming ``FILE:LINE``) on text that is not understood."""
    start = time.perf_counter()
    module = parse_module(compiled.hlo_text, source or "/".join(compiled.key))
    structure = structure_of(module)
    if compiled.kernel_code:
        folder = code_folder or ".".join(compiled.key)
        files = {f"{folder}/{name}": text for name, text in compiled.kernel_code.items()}
        code = ProgramCode(structure, tuple(parse_kernel_code(files)))
    else:
        why = no_code or (no_code_reason(target) if target is not None else "the compile kept no kernel code")
        code = ProgramCode(structure, None, why)
    return Measurement.of(compiled, module, structure, code, time.perf_counter() - start)


def measure_text(
    text: str,
    source: str,
    *,
    code: Mapping[str, str] | None = None,
    code_folder: str | None = None,
    no_code: str | None = None,
    cost: Mapping[str, float] | None = None,
    memory: Mapping[str, int] | None = None,
    target: str = "",
) -> Measurement:
    """A module read as text (a file, a dump folder), not compiled here, measured as its compile would be:
    ``code`` its kernel-code files by name, ``cost`` and ``memory`` its analyses where known, ``target``
    the target it was compiled for where known (what ``predicted_seconds`` is costed for). No compile
    timed it, so ``compile_seconds`` is a ``Missing``."""
    compiled = Compiled(
        source, "", target, "", (), text, dict(cost or {}), dict(memory or {}), None, dict(code or {})
    )
    return measure(compiled, source=source, code_folder=code_folder, no_code=no_code)
