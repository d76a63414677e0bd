"""Where a program compiles: on which targets, in which configurations.

A catalog program follows the target's scope (:class:`invariants.catalog.targets.Target`): its layout
chooses the sharded and pod targets, its ``core`` tag the core ones, and ``extra_configs`` add the
compile-only sizes it lists. A project's declared program compiles where its spec files aim it, whatever
the scope, in the configurations it lists, and nowhere else (see invariants.catalog.downstream). These
rules live here alone, so a target describes a device and a program describes a program.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import TYPE_CHECKING

from .configs import COMPILE_ONLY, SEED
from .targets import CPU_RUNTIME, Target, all_targets

if TYPE_CHECKING:
    from .programs import Layout, Program


def compiles(target: Target, program: Program) -> bool:
    """Whether ``program`` compiles on ``target`` in the configurations of its scope (a catalog program) or
    of its own (a declared one)."""
    if program.aimed:
        return _compiles_aimed(target, program)
    layout = program.layout
    if target.scope in ("sharded", "pod"):
        return layout is not None and _holds(target, layout)
    if target.scope == "extra" or layout is not None:
        return False
    return target.scope == "all" or "core" in program.tags


def configs_for(target: Target, program: Program) -> tuple[str, ...]:
    """The configurations ``program`` compiles in on ``target``; none where it does not compile there."""
    if program.aimed:  # a project's program compiles in the configurations it lists, where it is aimed
        if not _compiles_aimed(target, program):
            return ()
        return tuple(c for c in program.configs if c not in COMPILE_ONLY or c in target.extra_configs)
    extra = () if program.layout else tuple(c for c in program.configs if c in target.extra_configs)
    if not compiles(target, program):
        return extra
    return _scope_configs(target, program) + extra


def aimed_by(target: Target, program: Program) -> bool:
    """Whether ``program`` is a declared program whose spec files name ``target``: it compiles there in each
    configuration it lists, whatever the target's scope."""
    return any(fnmatch.fnmatchcase(target.name, pattern) for pattern in program.aimed)


def misfit(target: Target, program: Program) -> str | None:
    """Why a project's program cannot compile on ``target`` although its spec files aim it there: its chips
    are not the target's (a one-device program on a pod, a mesh of another size); None when they are, and
    for the catalog's programs (their layouts choose their targets)."""
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
    """The targets the spec files of ``programs`` name (a project's declared programs: where they compile,
    a sharded one on its mesh's target), in the known targets' order; none for the catalog's."""
    chosen = list(programs)
    return [t.name for t in all_targets(CPU_RUNTIME).values() if any(aimed_by(t, p) for p in chosen)]


def _compiles_aimed(target: Target, program: Program) -> bool:
    """A project's program compiles where its spec files name, whatever the target's scope, where the chips
    fit. A file of sharded and single-chip programs names targets of both kinds, and each program picks
    those of its own; one named by name that fits none of them keeps its items there, skipping with
    misfit's reason."""
    if not aimed_by(target, program):
        return False
    return misfit(target, program) is None or (target.name in program.aimed and not _fits_some(program))


def _fits_some(program: Program) -> bool:
    """Whether a known target that ``program``'s spec files name has its chips."""
    chips = _chips(program)
    known = all_targets(CPU_RUNTIME).values()
    return any(t.device_count == chips and aimed_by(t, program) for t in known)


def _holds(target: Target, layout: Layout) -> bool:
    """Whether a sharded or pod target's chips hold a catalog program of ``layout``."""
    if layout.pod:
        return (target.scope == "pod" or target.pods) and target.device_count % layout.devices == 0
    return target.scope == "sharded" and layout.devices <= target.device_count


def _scope_configs(target: Target, program: Program) -> tuple[str, ...]:
    """The configurations a catalog program compiles in on ``target``, besides its extra ones."""
    if target.scope != "all":
        return (SEED.id, *(c for c in target.scope_configs if c in program.configs))
    return tuple(c for c in program.configs if c not in target.skip_configs and c not in COMPILE_ONLY)


def _chips(program: Program) -> int:
    return 1 if program.layout is None else program.layout.devices
