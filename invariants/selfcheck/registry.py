"""The self-check's injections: what each one is, the registry of them, and which ones a run selects.

Each :class:`Injection` is one way the suite's subject can regress: a set of XLA flags (``XLA_FLAGS``, which
some flags answer by aborting the process) or a catalog program swapped for a bad one (through the
``invariants.selfcheck.inject`` plugin, see there). The registry is data (``data/injections.toml``: adding one
is a table there, and a bad program in :mod:`invariants.selfcheck.inject` when it swaps one). The baseline
injection ``none`` changes nothing and must pass; a selection always runs it first, widened to every program,
target and tier of the injections it stands behind (:func:`baseline_for`).

On the TPU target, ``XLA_FLAGS`` does not reach the ahead-of-time compile, and libtpu's own
``LIBTPU_INIT_ARGS`` refuses the pass flags, so the TPU injection is a program rewrite.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import tomllib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .. import _config
from .._errors import InvariantsError, did_you_mean
from .._paths import PACKAGE_DIR
from ..catalog.select import selectors
from ..catalog.targets import select_targets

INJECT_MODULE = "invariants.selfcheck.inject"


@dataclasses.dataclass(frozen=True)
class Injection:
    """One regression to inject.

    ``env`` is added to the child's environment (``XLA_FLAGS`` or ``INVARIANTS_INJECT``); ``programs`` and
    ``targets`` restrict the child's run (``--programs``, ``--targets``, and ``--configs`` with ``configs``,
    None: all of them); ``expect`` lists what must fail (see :mod:`invariants.selfcheck.judge`); an empty
    ``expect`` means the run must pass (the baseline).
    ``fast`` injections are the ones the slow pytest test runs by default. The throughput tier (timing)
    runs only for ``timing`` injections, and the correctness tier only for ``correctness`` ones: they are
    what make a child slow (a row loop times at seconds a call, and as a reference it runs for every
    program checked against it). The baseline runs each tier that one of its injections runs.
    """

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
    """One ``[[injection]]`` of ``data/injections.toml``: ``swap`` becomes the child's ``INVARIANTS_INJECT``,
    and a variable of the suite in ``env`` must be one of :mod:`invariants._config`'s."""
    env = {_config.name(k) if k.startswith("INVARIANTS_") else k: v for k, v in row.pop("env", {}).items()}
    if swap := row.pop("swap", None):
        env[_config.name("INVARIANTS_INJECT")] = ";".join(f"{n}={INJECT_MODULE}:{f}" for n, f in swap.items())
    return Injection(env=env, programs=tuple(row.pop("programs")), expect=tuple(row.pop("expect")), **row)


def _registry() -> tuple[Injection, ...]:
    text = (PACKAGE_DIR / "data" / "injections.toml").read_text(encoding="utf-8")
    return tuple(_injection(dict(row)) for row in tomllib.loads(text)["injection"])


INJECTIONS: tuple[Injection, ...] = _registry()


def select(names: str | None, *, fast_only: bool = False) -> list[Injection]:
    """The injections matching ``names`` (comma-separated names or globs; None: all), baseline always first.

    An entry that matches nothing raises one line listing the known names.
    """
    chosen = [i for i in INJECTIONS if i.fast] if fast_only else list(INJECTIONS)
    if names is not None:
        patterns = selectors(names, "-k", "name injections (selfcheck --list), or leave -k out for all")
        _each_matches(patterns)
        chosen = [i for i in INJECTIONS if any(_matches(i, p) for p in patterns)]
    others = [i for i in chosen if not i.is_baseline]
    return [baseline_for(others), *others]


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
    """The clean run the injections are judged against: every program, target and tier they run, so that
    each injection's items are shown to pass first."""
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
    """What one child run covers, in words: its targets, programs and tiers."""
    tiers = "structure, invariants" + (", correctness" if injection.correctness else "")
    tiers += ", throughput" if injection.timing else ""
    return f"targets {injection.targets}; programs {', '.join(injection.programs)}; tiers {tiers}"


def restrict_targets(injections: Sequence[Injection], targets: str | None) -> list[Injection]:
    """Keep the baseline and the injections whose targets ``targets`` selects (None keeps all), in the
    gate's own grammar (:func:`invariants.catalog.targets.select_targets`: names, ``all``, ``runtime``,
    families; an unknown name or an empty selection is one line, with a suggestion).
    """
    if targets is None:
        return list(injections)
    # Lazy: importing compile.process sets JAX's environment in this process (the platform, libtpu's
    # variables); only a --targets selection, which starts JAX, needs that.
    from ..compile.process import held_stderr

    with held_stderr():  # the targets come with the catalog: JAX, and the CUDA plugin's notices
        chosen = {t.name for t in select_targets(targets)}
    others = [i for i in injections if not i.is_baseline and set(i.targets.split(",")) <= chosen]
    return [baseline_for(others), *others]


def check_selected(injections: Sequence[Injection], names: str | None, targets: str | None) -> None:
    """One line when the selection leaves no injection beside the baseline: a self-check that injects
    nothing proves nothing ("0/0 caught")."""
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
