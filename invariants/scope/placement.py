"""Where a program compiles: on which targets, in which configurations.

A catalog program follows the target's scope: its layout chooses the sharded and pod targets, its ``core``
tag the core ones, and ``extra_configs`` add the compile-only sizes it lists. A project's declared program
compiles where its spec files aim it, whatever the scope, in the configurations it lists. These rules live
here alone, so a target describes a device and a program describes a program.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .configs import COMPILE_ONLY, SEED
from .targets import CPU_RUNTIME, Target, all_targets

if TYPE_CHECKING:
    from ..catalog.programs import Layout, Program


def compiles(target: Target, program: Program) -> bool:
    if program.aimed:
        return _compiles_aimed(target, program)
    layout = program.layout
    if target.scope in ("sharded", "pod"):
        return layout is not None and _holds(target, layout)
    if target.scope == "extra" or layout is not None:
        return False
    return target.scope == "all" or "core" in program.tags


def configs_for(target: Target, program: Program) -> tuple[str, ...]:
    if program.aimed:
        if not _compiles_aimed(target, program):
            return ()
        return tuple(c for c in program.configs if c not in COMPILE_ONLY or c in target.extra_configs)
    extra = () if program.layout else tuple(c for c in program.configs if c in target.extra_configs)
    if not compiles(target, program):
        return extra
    return _scope_configs(target, program) + extra


def aimed_by(target: Target, program: Program) -> bool:
    return any(fnmatch.fnmatchcase(target.name, pattern) for pattern in program.aimed)


def misfit(target: Target, program: Program) -> str | None:
    """Why a project's program cannot compile on ``target`` although its spec files aim it there (its chips
    are not the target's); None when it can, and for the catalog's programs."""
    if not program.aimed:
        return None
    layout = program.layout
    needs = _chips(program)
    if needs == target.device_count:
        return None
    chips = f"{target.device_count} chip" + ("s" if target.device_count > 1 else "")
    if layout is None:
        return (
            f"{target.name} has {chips} and {program.name} declares no mesh: give it a mesh = {{...}} of "
            f"{chips} and its shardings"
        )
    mesh = ", ".join(f"{a} = {n}" for a, n in zip(layout.axes, layout.mesh_shape, strict=True))
    return f"{target.name} has {chips}; the mesh of {program.name} ({mesh}) has {needs}"


def aimed_targets(programs: Iterable[Program]) -> list[str]:
    """The targets the spec files of ``programs`` name, in the known targets' order."""
    chosen = list(programs)
    return [t.name for t in all_targets(CPU_RUNTIME).values() if any(aimed_by(t, p) for p in chosen)]


def _compiles_aimed(target: Target, program: Program) -> bool:
    """Where its chips fit; a target named by name that fits none keeps its items, to skip with misfit's
    reason."""
    if not aimed_by(target, program):
        return False
    return misfit(target, program) is None or (target.name in program.aimed and not _fits_some(program))


def _fits_some(program: Program) -> bool:
    known = all_targets(CPU_RUNTIME).values()
    return any(t.device_count == _chips(program) and aimed_by(t, program) for t in known)


def _holds(target: Target, layout: Layout) -> bool:
    if layout.pod:
        return (target.scope == "pod" or target.pods) and target.device_count % layout.devices == 0
    return target.scope == "sharded" and layout.devices <= target.device_count


def _scope_configs(target: Target, program: Program) -> tuple[str, ...]:
    if target.scope != "all":
        return (SEED.id, *(c for c in target.scope_configs if c in program.configs))
    return tuple(c for c in program.configs if c not in target.skip_configs and c not in COMPILE_ONLY)


def _chips(program: Program) -> int:
    return 1 if program.layout is None else program.layout.devices
