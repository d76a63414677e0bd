"""Compiled -> measured: the one stage that turns a compile's record into everything a verdict reads.

:func:`measure` parses the optimized HLO once, derives its structure, reads the kernels' code and computes
every metric of the registry a compile gives. Every command measures through it, so a metric registered
once reaches all of them. No JAX: a :class:`~invariants.records.compiled.Compiled` is text and numbers.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..hlo.cost import Missing
from ..hlo.parse import HloModule, parse_module
from ..hlo.structure import Structure, structure_of
from ..kernels import parse_kernel_code
from ..kernels.program import ProgramCode
from ..records.compiled import Compiled
from .metrics import METRICS, metrics_of

if TYPE_CHECKING:
    from ..scope.targets import Target


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One compile, measured; ``metrics`` raw (a Missing or None where there is no value)."""

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
        return cls(compiled, module, structure, code, metrics_of(structure, code, compiled, module), seconds)

    def numbers(self) -> dict[str, int | float | None]:
        """The numeric metrics, no aliases, None where there is no value: what a results file records."""
        return {
            name: (None if isinstance(value, Missing) else value)
            for name, value in self.metrics.items()
            if METRICS[name].type == "number" and METRICS[name].alias_of is None
        }


def no_code_reason(target: Target) -> str:
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
    """Measure one compile. ``source`` names the HLO text in parse errors, ``code_folder`` the folder of its
    kernel-code files; without kernel code, ``no_code`` (else :func:`no_code_reason`) says why."""
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
    """A module read as text (a file, a dump folder), measured as its compile would be."""
    compiled = Compiled(
        source, "", target, "", (), text, dict(cost or {}), dict(memory or {}), None, dict(code or {})
    )
    return measure(compiled, source=source, code_folder=code_folder, no_code=no_code)
