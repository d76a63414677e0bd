"""Predicted cost and memory: what the compiler itself says a program will cost, without running it.

The metrics (registered in :mod:`invariants.measure.metrics` with source ``compiler``) and where each comes
from:

* ``estimated_cycles``: the TPU compiler's prediction of the program's device time. libtpu writes an
  ``estimated_cycles`` into the backend_config of each kernel it schedules (fused computations carry none).
  The program's figure is the sum over the kernels that run: entry kernels once, a while loop's body once
  per trip and its condition once per trip plus one (the condition runs once more than the body; the same
  rule as ``dynamic_kernel_launches``), nested loops multiplied, a ``conditional`` by its costliest branch
  (an upper bound). Kernels without an estimate add nothing; today that is the ``kCustom`` gather fusion
  and custom calls, so a forward's estimate covers the index fix-ups and copies around the gather, not the
  gather itself. :func:`cycle_estimate` counts those launches too.
* ``predicted_seconds``: the device seconds of one call, predicted from the optimized HLO by the TPU cost
  model fitted on a chip (:mod:`invariants.hlo.tpu_model`, whose coefficients per chip and their
  provenance are ``invariants/data/tpu_cost.toml``). Unlike ``estimated_cycles`` it costs the kCustom
  gathers and scatters and each loop trip; it is ``uncalibrated`` on chips nobody measured.
* ``temp_bytes``, ``argument_bytes``, ``output_bytes``, ``peak_bytes``: ``compiled.memory_analysis()``.
  ``temp_bytes`` is XLA's ``temp_size_in_bytes``: the temporaries of the device's main memory alone. The
  TPU compiler places intermediates that fit in the chip's on-chip memory (VMEM, ``S(1)`` in a layout)
  there, and they are not in it: a program whose large intermediates all live there reads next to nothing.
  ``peak_bytes`` is XLA's ``peak_memory_in_bytes``, the arguments, outputs and temporaries of every
  memory space live at once; XLA:CPU's figure leaves its temporaries out, so on the CPU it is a
  :class:`Missing` that says so (there ``temp_bytes`` holds every temporary).
* ``flops``, ``bytes_accessed``: ``compiled.cost_analysis()``.

A metric that cannot be computed is a :class:`Missing` with one line saying why (the target does not
provide it, or a loop's trip count is unknown), never a zero: the invariant that reads it fails with that
line. These numbers move with every compiler patch release, so they stay out of the snapshot text; they go
to the results file, the report, the invariants and the release matrix.

This module reads a :class:`~invariants.hlo.structure.Structure` and the plain analysis dicts of a
``Compiled``; it never imports JAX.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping

from . import tpu_model
from .parse import HloModule
from .structure import Kernel, Structure

__all__ = [
    "ANALYSIS_KEYS",
    "Analyses",
    "CycleEstimate",
    "Missing",
    "cycle_estimate",
    "estimated_cycles",
    "from_analysis",
    "peak_bytes",
    "predicted_by",
    "predicted_ratio",
    "predicted_seconds",
    "value_or_none",
]


@dataclasses.dataclass(frozen=True)
class Missing:
    """A metric this program has no value for, and why (one line)."""

    reason: str

    def __str__(self) -> str:
        return f"unavailable: {self.reason}"


# Metric -> (which analysis, its key there).
ANALYSIS_KEYS: dict[str, tuple[str, str]] = {
    "temp_bytes": ("memory", "temp_size_in_bytes"),
    "argument_bytes": ("memory", "argument_size_in_bytes"),
    "output_bytes": ("memory", "output_size_in_bytes"),
    "peak_bytes": ("memory", "peak_memory_in_bytes"),
    "flops": ("cost", "flops"),
    "bytes_accessed": ("cost", "bytes accessed"),
}
_ANALYSIS_CALL = {"memory": "memory_analysis()", "cost": "cost_analysis()"}


@dataclasses.dataclass(frozen=True)
class Analyses:
    """What the compiler metrics are computed from: a program's structure and the analysis dicts of its
    ``Compiled`` (empty when the backend offered none), the family of the target it was compiled for
    (``cpu``, ``tpu``, ``gpu``; empty for a module read from a file), its parsed module and the target's
    name (what the cost model reads)."""

    structure: Structure
    cost: Mapping[str, float] = dataclasses.field(default_factory=dict)
    memory: Mapping[str, int] = dataclasses.field(default_factory=dict)
    family: str = ""
    module: HloModule | None = None
    target: str = ""


@dataclasses.dataclass(frozen=True)
class CycleEstimate:
    """``cycles``: the program's predicted cycles, None with ``reason`` when there is no figure.
    ``unestimated``: kernel launches (loops expanded) that carry no estimate and so add nothing."""

    cycles: int | None
    unestimated: int | None
    reason: str | None = None


class _UnknownTrip(Exception):
    pass


def _carries_estimate(kernels: Iterable[Kernel]) -> bool:
    for k in kernels:
        if k.estimated_cycles is not None:
            return True
        if _carries_estimate(k.body) or _carries_estimate(k.condition):
            return True
        if any(_carries_estimate(b) for b in k.branches):
            return True
    return False


def _expanded(kernels: Iterable[Kernel]) -> tuple[int, int]:
    """(cycles, launches without an estimate) with loops expanded; raises _UnknownTrip."""
    cycles = missing = 0
    for k in kernels:
        if k.opcode == "while":
            if k.trip_count is None:
                raise _UnknownTrip
            body, cond = _expanded(k.body), _expanded(k.condition)
            cycles += k.trip_count * body[0] + (k.trip_count + 1) * cond[0]
            missing += k.trip_count * body[1] + (k.trip_count + 1) * cond[1]
        elif k.opcode == "conditional":
            branches = [_expanded(b) for b in k.branches] or [(0, 0)]
            costliest = max(branches)
            cycles += costliest[0]
            missing += costliest[1]
        elif k.estimated_cycles is None:
            missing += 1
        else:
            cycles += k.estimated_cycles
    return cycles, missing


def cycle_estimate(structure: Structure) -> CycleEstimate:
    """The program's ``estimated_cycles`` (module docstring), or why there is none."""
    if not _carries_estimate(structure.kernel_list):
        return CycleEstimate(
            None, None, "no kernel carries estimated_cycles (only the TPU compiler writes them)"
        )
    try:
        cycles, missing = _expanded(structure.kernel_list)
    except _UnknownTrip:
        return CycleEstimate(
            None, None, "a while loop's trip count is unknown, so its cycles cannot be summed"
        )
    return CycleEstimate(cycles, missing)


def estimated_cycles(analyses: Analyses) -> int | Missing:
    """The ``estimated_cycles`` metric: :func:`cycle_estimate`'s figure, or why there is none."""
    estimate = cycle_estimate(analyses.structure)
    return estimate.cycles if estimate.cycles is not None else Missing(estimate.reason or "no estimate")


def predicted_seconds(analyses: Analyses) -> float | Missing:
    """The ``predicted_seconds`` metric (module docstring), or why there is none."""
    value = tpu_model.predicted_seconds(analyses.module, analyses.structure, analyses.target)
    return value if isinstance(value, float) else Missing(value)


def from_analysis(name: str) -> Callable[[Analyses], int | float | Missing]:
    """The metric ``name`` of :data:`ANALYSIS_KEYS`, read from the compiled program's analyses."""
    which, key = ANALYSIS_KEYS[name]

    def of(analyses: Analyses) -> int | float | Missing:
        analysis = analyses.memory if which == "memory" else analyses.cost
        value = analysis.get(key)
        if value is None and analysis:  # the analysis without this field: an older compiler, or record
            return Missing(
                f"this compile's {_ANALYSIS_CALL[which]} has no '{key}' (this release's compiler gives none, "
                "or the compile cache's entry was made before it was read: --no-cache compiles it again)"
            )
        if value is None:
            return Missing(f"this target's compiler gives no {_ANALYSIS_CALL[which]} '{key}'")
        return int(value) if float(value).is_integer() else float(value)

    return of


def peak_bytes(analyses: Analyses) -> int | float | Missing:
    """The ``peak_bytes`` metric (module docstring): XLA's ``peak_memory_in_bytes``, except on the CPU."""
    if analyses.family == "cpu":
        return Missing(
            "XLA:CPU's peak_memory_in_bytes counts arguments and outputs, not temporaries: bound temp_bytes "
            "on the CPU"
        )
    return from_analysis("peak_bytes")(analyses)


def value_or_none(value: int | float | Missing) -> int | float | None:
    """The value for a results file: a :class:`Missing` becomes null."""
    return None if isinstance(value, Missing) else value


def predicted_ratio(
    a: Mapping[str, int | float | Missing], b: Mapping[str, int | float | Missing]
) -> float | None:
    """The ratio predicted for ``a / b`` from two ``compiler_metrics`` results: ``predicted_seconds`` where
    both have one (a TPU target with a cost model), else ``estimated_cycles``; None when neither (off
    TPU). What a time ratio measured on a TPU is set beside."""
    return _ratio(a, b, "predicted_seconds") or _ratio(a, b, "estimated_cycles")


def predicted_by(a: Mapping[str, int | float | Missing], b: Mapping[str, int | float | Missing]) -> str:
    """Which metric :func:`predicted_ratio` read: the words a verdict shows beside the ratio."""
    return "cost model" if _ratio(a, b, "predicted_seconds") is not None else "estimated cycles"


def _ratio(
    a: Mapping[str, int | float | Missing], b: Mapping[str, int | float | Missing], name: str
) -> float | None:
    va, vb = a.get(name), b.get(name)
    if isinstance(va, (int, float)) and isinstance(vb, (int, float)) and vb > 0:
        return va / vb
    return None
