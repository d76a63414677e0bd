"""Which items a gate session has, and what it compiles ahead of them.

An item that cannot run here (its target unavailable, a program's library missing, a case the spec skips)
is made all the same, with the reason it skips, so that a run says what it did not check.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

import pytest

from ..compile.artifacts import Key
from ..scope.configs import get_config
from ..scope.placement import aimed_by, misfit
from ..verdict.checks import Case, expand
from ..verdict.correctness import CorrectnessCase, expand_correctness

if TYPE_CHECKING:
    from .session import GateSession


def structure_plan(s: GateSession) -> list[tuple[Key, str | None]]:
    """The structure items: each selected key, then the declared programs the run's targets leave out."""
    keys = s.suite.structure_keys()
    planned = [(key, _skip_reason(s, key)) for key in keys]
    s.cache.plan(k for k, skip in planned if skip is None)
    return planned + _left_out(s, keys)


def invariant_plan(s: GateSession) -> list[tuple[Case, str | None]]:
    cases = [
        c
        for c in expand(s.specs, s.targets, programs=s.all_programs)
        if all(s.suite.selects(k.program, k.config, c.invariant.kind != "absolute") for k in c.keys)
    ]
    if s.raw:
        raw = [dataclasses.replace(c.invariant, when=(), ratchet=None) for c in cases]  # no scope, no ratchet
        cases = [dataclasses.replace(c, skip=None, invariant=inv) for c, inv in zip(cases, raw, strict=True)]
    # The partners of the project's relations (--no-catalog) have no structure item to plan them.
    partners = s.suite.partners
    s.cache.plan(k for c in cases for k in c.keys if k.program in partners and _skip_reason(s, k) is None)
    return [(c, _skip_reason(s, c.keys[0], [k.program for k in c.keys]) or c.skip) for c in cases]


def correctness_plan(s: GateSession) -> list[tuple[CorrectnessCase, str | None]]:
    runtime = next(iter(s.all_targets.values()))
    return [
        (c, c.skip or _missing_library(s, [c.program, *([c.check.reference] if c.check.reference else [])]))
        for c in expand_correctness(s.specs, runtime, s.all_programs)
        if s.suite.selects(c.program, c.config)
    ]


def throughput_cases(s: GateSession) -> list[Case]:
    runtime = next(iter(s.all_targets.values()))
    if runtime.name not in {t.name for t in s.targets}:
        return []
    return [
        c
        for c in expand(s.specs, [runtime], kinds=("throughput",), programs=s.all_programs)
        if all(s.suite.selects(k.program, k.config, partner=True) for k in c.keys)
        and not get_config(c.config).compile_only
    ]


def ratio_plan(s: GateSession) -> list[tuple[Case, str | None]]:
    return [
        (c, c.skip or _missing_library(s, names) or _untimed(s, names))
        for c in throughput_cases(s)
        for names in [[k.program for k in c.keys]]
    ]


def efficiency_plan(s: GateSession) -> list[tuple[Key, str | None]]:
    # A partner kept only for the project's relations gets no efficiency item of its own.
    keys = sorted(
        {
            k
            for c in throughput_cases(s)
            for k in c.keys
            if k.program in s.programs
            and ((d := s.all_programs[k.program].declaration) is None or d.efficiency is not False)
        }
    )
    return [
        (k, _missing_library(s, [k.program]) or _untimed(s, [k.program]) or _not_a_lookup(s, k.program))
        for k in keys
    ]


def _left_out(s: GateSession, keys: list[Key]) -> list[tuple[Key, str | None]]:
    """A skipped item for each declared program aimed at the run's targets whose chips do not fit it."""
    have = {k.program for k in keys}
    out: list[tuple[Key, str | None]] = []
    for name in (p for p in s.programs if p not in have and s.all_programs[p].aimed):
        program = s.all_programs[name]
        misfits = [(t, why) for t in s.targets if aimed_by(t, program) and (why := misfit(t, program))]
        if not misfits:
            continue
        fits = [t.name for t in s.all_targets.values() if aimed_by(t, program) and misfit(t, program) is None]
        target, why = misfits[0]
        where = f"; it compiles on {', '.join(fits)}, which the run's targets leave out" if fits else ""
        out.append((Key(name, program.configs[0], target.name), why + where))
    return out


def _not_a_lookup(s: GateSession, program: str) -> str | None:
    """Why efficiency means nothing for a declared program that is not a lookup and did not ask for it."""
    decl = s.all_programs[program].declaration
    if decl is None or decl.efficiency or decl.lookup_shaped:
        return None
    what = {"train": "a train step", "step": "a step"}.get(
        decl.kind, "a program with arguments" if decl.arguments else "a program with params"
    )
    return (
        f"{program} is {what}, not a lookup (table, indices): efficiency compares a lookup's time with a "
        f"copy of the rows it moves; set efficiency = true in its [[program]] ({decl.where}) to compare it so"
    )


def _missing_library(s: GateSession, programs: list[str]) -> str | None:
    return next((r for p in programs if (r := s.all_programs[p].unavailable_reason()) is not None), None)


def _untimed(s: GateSession, programs: list[str]) -> str | None:
    donating = next((p for p in programs if s.all_programs[p].donates), None)
    if donating is None:
        return None
    return f"{donating} donates its parameters' buffers (donate = true): no second call can read them to time"


def _skip_reason(s: GateSession, key: Key, programs: list[str] | None = None) -> str | None:
    names = programs or [key.program]
    target = s.all_targets[key.target]
    unfit = next((r for p in names if (r := misfit(target, s.all_programs[p])) is not None), None)
    return s.available(key.target) or unfit or _missing_library(s, names)


def compile_threads(config: pytest.Config) -> int:
    """How many threads compile ahead of the items: 0 under xdist, where a worker does not know its items."""
    if hasattr(config, "workerinput") or getattr(config.option, "numprocesses", None):
        return 0
    if config.option.collectonly:
        return 0
    chosen = config.getoption("compile_threads")
    return max(0, chosen) if chosen is not None else (os.cpu_count() or 1)
