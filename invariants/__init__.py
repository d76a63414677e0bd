"""Performance invariants for JAX/XLA embedding lookups.

The package is a pipeline; each stage is one private module, and data flows one way::

    _programs  the catalog of canonical embedding programs (Program, Config)
    _targets   where they compile: the runtime backend, TPU/GPU ahead of time, 8 host devices
    _compile   (program, config, target) -> Compiled: jaxpr, StableHLO, optimized HLO, analyses
    _hlo       optimized-HLO text -> HloModule
    _structure HloModule -> Structure (kernels, loops, trip counts, collectives, ...)
    _snapshot  Structure -> the snapshot text      (_snapshot_store: where syrupy keeps it)
    _spec      invariants/*.toml -> Spec            (_checks: Spec x Structure -> Verdict)
    _timing    paired A/B throughput ratios with intervals
    _report    a run's results -> markdown tables and a plot

``python -m invariants --help`` lists the commands; the pytest plugin is ``invariants._plugin``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name -> the stage module that defines it. Imports are lazy so that ``hlo-stats`` and the spec
# validator start without JAX.
_EXPORTS = {
    "Case": "_checks", "Verdict": "_checks", "evaluate": "_checks",
    "Compiled": "_compile", "CompileCache": "_compile",
    "InvariantsError": "_errors",
    "HloModule": "_hlo", "HloParseError": "_hlo", "parse_module": "_hlo",
    "CATALOG": "_programs", "CONFIGS": "_programs", "Config": "_programs", "Program": "_programs",
    "get_program": "_programs",
    "Invariant": "_spec", "Spec": "_spec", "load_spec": "_spec", "load_specs": "_spec",
    "METRICS": "_metrics", "Structure": "_structure", "structure_of": "_structure",
    "Target": "_targets", "all_targets": "_targets", "select_targets": "_targets",
}  # fmt: skip

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'invariants' has no attribute {name!r}")


if TYPE_CHECKING:
    from ._checks import Case, Verdict, evaluate
    from ._compile import CompileCache, Compiled
    from ._errors import InvariantsError
    from ._hlo import HloModule, HloParseError, parse_module
    from ._metrics import METRICS
    from ._programs import CATALOG, CONFIGS, Config, Program, get_program
    from ._spec import Invariant, Spec, load_spec, load_specs
    from ._structure import Structure, structure_of
    from ._targets import Target, all_targets, select_targets
