"""One placement: the gate's compile and the pytest API's ``compile_for`` place a program's arguments alike,
so every catalog program and every program the examples declare traces to the same jaxpr through both
entry points, on every ahead-of-time target: the same primitives, the same jaxpr section of the snapshot.

A trace only: the one compile both entry points call (``compile_function``) is replaced by one that traces
what it is handed, under the mesh it is handed it in, and stops. ``compile_for`` is called as a user would:
a one-chip program with its abstract arguments, a sharded one with a mesh of ``mesh_for`` and a
PartitionSpec per argument."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import pytest
from jax.sharding import PartitionSpec

from invariants.catalog.downstream import build
from invariants.catalog.programs import CATALOG, Program
from invariants.compile import artifacts
from invariants.scope.configs import get_config
from invariants.scope.placement import configs_for
from invariants.scope.targets import Target, all_targets
from invariants.snapshot.render import jaxpr_lines
from invariants.specfile.reader import load_specs
from invariants.testing import compile_for, mesh_for

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted(p.parent.parent for p in (ROOT / "examples").glob("*/specs/*.toml"))
# compile_for compiles in this process: a target that compiles in a child (libtpu flags of its own) is not
# one of its targets.
AOT = [
    t for t in all_targets().values() if t.mode == "aot" and not t.in_child and t.unavailable_reason() is None
]


class _Traced(Exception):
    def __init__(self, closed: Any) -> None:
        self.closed = closed


def _trace_only(fn: Any, args: Any, *_: Any, **__: Any) -> Any:
    raise _Traced(jax.make_jaxpr(fn)(*args))


@pytest.fixture(autouse=True)
def _no_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(artifacts, "compile_function", _trace_only)


def _jaxpr(call: Any) -> tuple[tuple[str, ...], list[str]]:
    """The primitives of what ``call`` handed the compile, and the snapshot's jaxpr section of them."""
    with pytest.raises(_Traced) as traced:
        call()
    primitives = artifacts.jaxpr_primitives(traced.value.closed)
    return primitives, jaxpr_lines(primitives)


def _user_call(program: Program, config_id: str, target: Target) -> Any:
    """``compile_for`` of ``program`` as a user writes it."""
    config = get_config(config_id)
    specs = program.argument_specs(config)
    options: dict[str, Any] = {}
    layout = program.layout
    if layout is not None:
        axes = dict(zip(layout.axes, layout.mesh_for(target.device_count), strict=True))
        options["mesh"] = mesh_for(target.name, axis_types=layout.axis_types, **axes)
        options["in_shardings"] = tuple(PartitionSpec(*p) for p in program.argument_specs_sharded(config))
    return lambda: compile_for(program.fn, *specs, target=target.name, name=program.name, **options)


def _disagreements(programs: list[Program], target: Target) -> Iterator[str]:
    for program in programs:
        if program.layout is not None and not program.layout.pod:
            continue  # on a part of the target's chips: no pytest API call compiles one so
        for config_id in configs_for(target, program):
            gate = _jaxpr(lambda p=program, c=config_id: artifacts.compile_here(p, c, target))
            user = _jaxpr(_user_call(program, config_id, target))
            if user != gate:
                yield f"{program.name}[{config_id}] on {target.name}: {sorted(set(user[0]) ^ set(gate[0]))}"


@pytest.mark.parametrize("target", AOT, ids=lambda t: t.name)
def test_the_catalog_traces_alike_through_both_entry_points(target: Target) -> None:
    programs = [p for p in CATALOG.values() if configs_for(target, p)]
    assert programs, f"{target.name}: no catalog program to compare"
    assert list(_disagreements(programs, target)) == []


@pytest.fixture
def declared(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Program]]:
    """Every program the examples declare, each built in its example's folder (its modules import from
    there); the modules are forgotten afterwards."""
    before = set(sys.modules)
    programs = []
    for example in EXAMPLES:
        monkeypatch.chdir(example)
        programs += [build(d) for spec in load_specs(example / "specs") for d in spec.programs]
    yield programs
    for name in set(sys.modules) - before:
        if str(ROOT / "examples") in (getattr(sys.modules[name], "__file__", None) or ""):
            del sys.modules[name]


def test_the_examples_programs_trace_alike_through_both_entry_points(declared: list[Program]) -> None:
    aimed = [(p, t) for t in AOT for p in declared if configs_for(t, p)]
    assert {p.name for p, _ in aimed} == {p.name for p in declared}, "a declared program on no AOT target"
    found = [line for p, t in aimed for line in _disagreements([p], t)]
    assert found == []
