"""Performance invariants for JAX/XLA embedding lookups.

The package is a pipeline, one subpackage a stage, and data flows one way (each ``__init__`` says what its
stage owns; the layer contract in ``pyproject.toml`` holds the floors)::

    scope/     where programs compile, no JAX: configs, targets, placement, the one selection grammar of
               --programs and --targets
    records/   what one stage writes and later ones read, no JAX: a compile's record, the compile cache,
               the results file
    catalog/   what is measured: the catalog's programs, a project's [[program]]s, their arguments
    compile/   (program, config, target) -> Compiled: jaxpr, optimized HLO, kernel code, analyses; the
               process a gate runs in; the gate in a child process
    hlo/       optimized-HLO text -> HloModule -> Structure; predicted cost
    kernels/   PTX and LLVM IR -> per-kernel facts (atomics, CAS loops, spills)
    measure/   Compiled -> Measurement (the structure, the kernel facts, every metric); the metric registry
    snapshot/  Compiled -> the snapshot text, and the syrupy extensions that store it
    specfile/  invariants/*.toml -> Spec, and the assert grammar
    verdict/   Spec x Structure -> what the specs decide (checks, correctness)
    timing/    paired A/B throughput ratios with intervals; JAX callables; efficiency baselines
    plugin/    the pytest gate: hooks, the session, the items, xdist grouping (gate/: its anchors)
    report/    a run's results -> markdown and a plot; hlo-stats
    versus/    two installations timed against each other
    releases/  one environment per JAX release; bisect; matrix
    selfcheck/ injected regressions the gate must catch

Below them: ``_errors``, ``_paths``, ``_stats``, ``_cores``, ``_config`` and ``_supported`` (the JAX
releases the suite serves). ``python -m invariants --help`` lists the commands; a project's own tests use
``invariants.testing`` and the fixtures of ``invariants.pytest_plugin``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name -> the stage module that defines it, imported lazily: ``hlo-stats`` starts without JAX.
_EXPORTS = {
    "InvariantsError": "_errors",
    "HloModule": "hlo.parse", "HloParseError": "hlo.parse", "parse_module": "hlo.parse",
    "METRICS": "measure.metrics",
    "CATALOG": "catalog.programs", "get_program": "catalog.registry",
    "Spec": "specfile.reader", "load_spec": "specfile.reader", "load_specs": "specfile.reader",
    "Structure": "hlo.structure", "structure_of": "hlo.structure",
}  # fmt: skip

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'invariants' has no attribute {name!r}")


if TYPE_CHECKING:
    from ._errors import InvariantsError
    from .catalog.programs import CATALOG
    from .catalog.registry import get_program
    from .hlo.parse import HloModule, HloParseError, parse_module
    from .hlo.structure import Structure, structure_of
    from .measure.metrics import METRICS
    from .specfile.reader import Spec, load_spec, load_specs
