"""The self-check's injections (``data/injections.toml``), and which ones a run selects.

An injection is one way the subject can regress: XLA flags, or a catalog program swapped for a bad one
(:mod:`invariants.selfcheck.inject`). On the TPU target ``XLA_FLAGS`` does not reach the ahead-of-time
compile, and libtpu's ``LIBTPU_INIT_ARGS`` refuses the pass flags, so the TPU injection is a program
rewrite."""

from __future__ import annotations

import dataclasses
import fnmatch
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .. import _config
from .._errors import InvariantsError, did_you_mean
from .._paths import PACKAGE_DIR
from ..scope.select import selectors
from ..scope.targets import select_targets

INJECT_MODULE = "invariants.selfcheck.inject"


@dataclasses.dataclass(frozen=True)
class Injection:
    """One regression: ``env`` added to its child's, the run restricted to ``programs``, ``targets`` and
    ``configs``, and what must fail (``expect``, empty for the baseline). The throughput and correctness
    tiers run only for the injections that ask (``timing``, ``correctness``): they make a child slow."""

    name: str
    doc: str
    env: Mapping[str, str]
    programs: tuple[str, ...]
    expect: tuple[str, ...]
    targets: str = "cpu"
    fast: bool = False
    timing: bool = False
    correctness: bool = False
    command: Literal["gate", "versus"] = "gate"
    configs: str | None = None

    @property
    def is_baseline(self) -> bool:
        return not self.expect


def _injection(row: dict[str, Any]) -> Injection:
    """``swap`` becomes the child's ``INVARIANTS_INJECT``, the suite's variables their configured names."""
    env = {_config.name(k) if k.startswith("INVARIANTS_") else k: v for k, v in row.pop("env", {}).items()}
    if swap := row.pop("swap", None):
        env[_config.name("INVARIANTS_INJECT")] = ";".join(f"{n}={INJECT_MODULE}:{f}" for n, f in swap.items())
    return Injection(env=env, programs=tuple(row.pop("programs")), expect=tuple(row.pop("expect")), **row)


def _registry() -> tuple[Injection, ...]:
    text = (PACKAGE_DIR / "data" / "injections.toml").read_text(encoding="utf-8")
    return tuple(_injection(dict(row)) for row in tomllib.loads(text)["injection"])


INJECTIONS: tuple[Injection, ...] = _registry()


def select(names: str | None, *, fast_only: bool = False) -> list[Injection]:
    """The injections ``names`` match (names or globs; None: all), the baseline first."""
    chosen = [i for i in INJECTIONS if i.fast or not fast_only]
    if names is not None:
        chosen = _named(chosen, names)
        if fast_only and all(i.is_baseline for i in chosen):
            raise InvariantsError(f"-k {names} --fast: none of these injections is in the fast subset")
    others = [i for i in chosen if not i.is_baseline]
    return [baseline_for(others), *others]


def _named(chosen: list[Injection], names: str) -> list[Injection]:
    patterns = selectors(names, "-k", "name injections (selfcheck --list), or leave -k out for all")
    _each_matches(patterns)
    return [i for i in chosen if any(_matches(i, p) for p in patterns)]


def _each_matches(patterns: Sequence[str]) -> None:
    for p in patterns:
        if not any(_matches(i, p) for i in INJECTIONS):
            known = [i.name for i in INJECTIONS]
            raise InvariantsError(
                f"-k: no injection matches {p!r}{did_you_mean(p, known)}; known: {', '.join(known)}"
            )


def _matches(injection: Injection, pattern: str) -> bool:
    """``-k``'s rule: a glob of the name, or a part of it."""
    return fnmatch.fnmatchcase(injection.name, pattern) or pattern in injection.name


def baseline_for(injections: Sequence[Injection]) -> Injection:
    """The clean run of every program, target and tier the injections run: their items pass there first."""
    base = INJECTIONS[0]
    programs = dict.fromkeys(base.programs)
    targets = dict.fromkeys([base.targets])
    for inj in injections:
        programs.update(dict.fromkeys(inj.programs))
        targets.update(dict.fromkeys(inj.targets.split(",")))
    return dataclasses.replace(
        base,
        programs=tuple(programs),
        targets=",".join(targets),
        timing=base.timing or any(i.timing for i in injections),
        correctness=base.correctness or any(i.correctness for i in injections),
    )


def coverage(injection: Injection) -> str:
    tiers = "structure, invariants" + (", correctness" if injection.correctness else "")
    tiers += ", throughput" if injection.timing else ""
    return f"targets {injection.targets}; programs {', '.join(injection.programs)}; tiers {tiers}"


def restrict_targets(injections: Sequence[Injection], targets: str | None) -> list[Injection]:
    """The baseline and the injections on targets ``targets`` selects in the gate's grammar (None: all)."""
    if targets is None:
        return list(injections)
    # Lazy: importing it sets JAX's environment in this process, which only a --targets selection needs.
    from ..compile.process import held_stderr

    with held_stderr():  # the targets come with the catalog: JAX, and the CUDA plugin's notices
        chosen = {t.name for t in select_targets(targets)}
    others = [i for i in injections if not i.is_baseline and set(i.targets.split(",")) <= chosen]
    return [baseline_for(others), *others]


def check_selected(injections: Sequence[Injection], names: str | None, targets: str | None) -> None:
    """A self-check that injects nothing proves nothing."""
    if any(not i.is_baseline for i in injections):
        return
    given = " ".join(
        f"{option} {value}" for option, value in (("-k", names), ("--targets", targets)) if value
    )
    on = sorted({t for i in INJECTIONS if not i.is_baseline for t in i.targets.split(",")})
    raise InvariantsError(
        f"{given or 'selfcheck'}: selects no injection (the baseline 'none' is not one; it runs beside "
        f"them); injections run on {', '.join(on)}: see selfcheck --list"
    )
