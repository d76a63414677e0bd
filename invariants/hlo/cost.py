"""What the compiler itself predicts a program will cost, without running it: the metrics of source
``compiler`` (registered in :mod:`invariants.measure.metrics`; docs/specs.md says what each means).

* ``estimated_cycles``: libtpu's per-kernel ``estimated_cycles`` summed over the kernels that run, loops
  expanded as ``dynamic_kernel_launches`` are. Kernels without one (the kCustom gather fusion, custom
  calls) add nothing, so a forward's figure covers the work around its gather; :func:`cycle_estimate`
  counts those launches too.
* ``predicted_seconds``: the TPU cost model's figure (:mod:`invariants.hlo.tpu_model`).
* ``temp_bytes``, ``argument_bytes``, ``output_bytes``, ``peak_bytes``: ``compiled.memory_analysis()``;
  XLA:CPU's peak leaves its temporaries out, so there ``peak_bytes`` is a :class:`Missing`.
* ``flops``, ``bytes_accessed``: ``compiled.cost_analysis()``.

A metric that cannot be computed is a :class:`Missing` with one line saying why, never a zero, so the
invariant that reads it fails with that line. These numbers move with every compiler patch release, so
they stay out of the snapshot text. No JAX.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from . import tpu_model
from .parse import HloModule
from .structure import Structure, expanded_sum, walk_kernels


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
    """What the compiler metrics read: a program's structure, its ``Compiled``'s analysis dicts (empty when
    none), its target's family (empty for a module read from a file), its module and its target."""

    structure: Structure
    cost: Mapping[str, float] = dataclasses.field(default_factory=dict)
    memory: Mapping[str, int] = dataclasses.field(default_factory=dict)
    family: str = ""
    module: HloModule | None = None
    target: str = ""


@dataclasses.dataclass(frozen=True)
class CycleEstimate:
    """The program's predicted cycles (None, with ``reason``, when there is no figure) and its launches
    that carry no estimate."""

    cycles: int | None
    unestimated: int | None
    reason: str | None = None


def cycle_estimate(structure: Structure) -> CycleEstimate:
    """The program's ``estimated_cycles`` (module docstring), or why there is none."""
    if all(k.estimated_cycles is None for k in walk_kernels(structure.kernel_list)):
        return CycleEstimate(
            None, None, "no kernel carries estimated_cycles (only the TPU compiler writes them)"
        )
    expanded = expanded_sum(
        structure.kernel_list, lambda k: (k.estimated_cycles or 0, k.estimated_cycles is None)
    )
    if expanded is None:
        return CycleEstimate(
            None, None, "a while loop's trip count is unknown, so its cycles cannot be summed"
        )
    return CycleEstimate(*expanded)


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
        if value is None and analysis:
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


_Metrics = Mapping[str, int | float | Missing]


def predicted_ratio(a: _Metrics, b: _Metrics) -> float | None:
    """The ratio predicted for ``a / b`` from two ``compiler_metrics`` results, what a time ratio measured
    on a TPU is set beside: ``predicted_seconds`` where both have one, else ``estimated_cycles``."""
    return _ratio(a, b, "predicted_seconds") or _ratio(a, b, "estimated_cycles")


def predicted_by(a: _Metrics, b: _Metrics) -> str:
    """Which metric :func:`predicted_ratio` read: the words a verdict shows beside the ratio."""
    return "cost model" if _ratio(a, b, "predicted_seconds") is not None else "estimated cycles"


def _ratio(a: _Metrics, b: _Metrics, name: str) -> float | None:
    va, vb = a.get(name), b.get(name)
    return va / vb if isinstance(va, (int, float)) and isinstance(vb, (int, float)) and vb > 0 else None
