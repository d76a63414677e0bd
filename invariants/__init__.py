"""Performance invariants for JAX/XLA embedding lookups.

The package is a pipeline; each stage is one private module, and data flows one way::

    _programs  the catalog of canonical embedding programs (Program, Config)
    _registry  the programs of a run: the catalog plus a project's [[program]]s (_downstream builds them)
    _select    the one selection grammar of --programs (names, patterns, kind:, tag:) in every command
    _targets   where they compile: the runtime backend, TPU/GPU ahead of time, 8 host devices
    _compile   (program, config, target) -> Compiled: jaxpr, optimized HLO, kernel code, analyses
    _cost      Compiled -> the compiler's predicted cost and memory (analyses; metrics of source compiler)
    _hlo       optimized-HLO text -> HloModule
    _structure HloModule -> Structure (kernels, loops, trip counts, collectives, ...)
    _metrics   the metric registry: every name an assert, hlo-stats and the report use
    _snapshot  Structure -> the snapshot text      (_snapshot_store: where syrupy keeps it)
    _spec      invariants/*.toml -> Spec            (_checks: Spec x Structure -> Decision)
    _timing    paired A/B throughput ratios with intervals (_stats: the statistics;
               _jax_timing: JAX callables; _baselines: recorded efficiency baselines)
    _results   the results file: record kinds written by the plugin, read by the report
    _report    a run's results -> markdown tables (_report_run: reading; _report_plot: the PNG)

Around it: ``_plugin`` (pytest; ``_outcomes``: what a gate item says when it decides; ``_process``: the
platform and the backend guard; ``_xdist``: which items share a worker), ``_hlo_stats``
(a command), ``_child`` (the gate in a child process), ``_selfcheck`` (+ ``_selfcheck_inject``),
``_releases`` (one environment per JAX release), ``_bisect`` and ``_matrix`` (the suite across
releases), ``_errors`` (the one exception and its one-line form).

``python -m invariants --help`` lists the commands; the pytest plugin is ``invariants._plugin``; the gate's
pytest modules ship in ``invariants.gate`` and ``python -m invariants gate`` (``_gate``) runs them anywhere.
A project's own tests use ``invariants.testing`` (``compile_for``) through the fixtures of
``invariants.pytest_plugin`` (a pytest11 entry point, inert until used; ``_user_snapshots``: their syrupy
extension).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name -> the stage module that defines it: what a user of the library calls (read HLO text, measure
# its structure, load specs, the catalog), each used by tests/unit/test_architecture.py as a user would.
# Imports are lazy so that ``hlo-stats`` and the spec validator start without JAX.
_EXPORTS = {
    "InvariantsError": "_errors",
    "HloModule": "_hlo", "HloParseError": "_hlo", "parse_module": "_hlo",
    "METRICS": "_metrics",
    "CATALOG": "_programs", "get_program": "_programs",
    "Spec": "_spec", "load_spec": "_spec", "load_specs": "_spec",
    "Structure": "_structure", "structure_of": "_structure",
}  # fmt: skip

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'invariants' has no attribute {name!r}")


if TYPE_CHECKING:
    from ._errors import InvariantsError
    from ._hlo import HloModule, HloParseError, parse_module
    from ._metrics import METRICS
    from ._programs import CATALOG, get_program
    from ._spec import Spec, load_spec, load_specs
    from ._structure import Structure, structure_of
