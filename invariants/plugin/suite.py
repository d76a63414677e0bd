"""What a gate run checks, loaded once before its session: the programs, the spec files checked against
them, the targets and configurations selected. Every mistake in them is one line here, before collection;
the session then holds the run's state, never its set-up.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from .. import _config
from .._errors import InvariantsError, NothingChecked
from .._usercode import set_timeout
from ..catalog.downstream import build_all
from ..catalog.programs import select_configs
from ..catalog.project import Project
from ..catalog.registry import Programs
from ..records.cache import Store, from_settings
from ..records.compiled import Key
from ..scope.placement import configs_for
from ..scope.targets import Target, all_targets, select_targets
from ..specfile.reader import Spec, load_specs
from ..verdict.checks import check_specs
from .options import BUILT_PROGRAMS, PROGRAM_SWAPS


@dataclasses.dataclass(frozen=True)
class Suite:
    """The programs, specs, targets and configurations of one run, checked.

    ``partners``: under ``--no-catalog``, the catalog programs the project's own relations name, compiled
    for those relations alone, so that a downstream run costs what its own programs cost. ``project``: what
    a child that compiles for this run declares. ``store``: the compile cache (None: ``--no-cache``).
    """

    specs: list[Spec]
    all_programs: Programs
    programs: list[str]
    configs: frozenset[str]
    all_targets: dict[str, Target]
    targets: list[Target]
    partners: list[str]
    project: Project
    store: Store | None

    @classmethod
    def load(cls, config: pytest.Config) -> Suite:
        """The suite ``config``'s options select, each mistake one line."""
        targets = select_targets(config.getoption("targets"))
        env_dir = _config.get("INVARIANTS_SPEC_DIR")
        spec_dirs = config.getoption("spec_dir") or ([env_dir] if env_dir else [])
        set_timeout(config.getoption("user_code_timeout"))  # before the project's code runs, below
        _config.check_settings()
        if (threads := config.getoption("compile_threads")) is not None and threads < 0:
            raise InvariantsError(
                f"--compile-threads {threads}: takes a number of threads, 0 or more (0: each item compiles "
                "what it reads)"
            )
        specs = load_specs(*map(Path, spec_dirs))
        all_programs = _programs(config, specs)
        with_catalog = not config.getoption("no_catalog")
        selection = config.getoption("programs")
        project = Project(tuple(Path(d).resolve() for d in spec_dirs), with_catalog, Path.cwd(), selection)
        store = from_settings(config.getoption("cache_dir"), bool(config.getoption("no_cache")))
        if store is not None:
            store.check()
        check_specs(specs, programs=all_programs)
        default = [*(all_programs.catalog if with_catalog else ()), *all_programs.declared]
        programs = all_programs.select(config.getoption("programs"), default)
        if not programs:
            raise InvariantsError("--no-catalog: no [[program]] declared in the spec files; nothing to gate")
        configs = select_configs(config.getoption("configs"))
        partners = [] if with_catalog else relation_partners(specs, programs, all_programs)
        suite = cls(specs, all_programs, programs, configs, all_targets(), targets, partners, project, store)
        suite._check_selection(config)
        return suite

    def configs_for(self, target: Target, program: str) -> list[str]:
        return [c for c in configs_for(target, self.all_programs[program]) if c in self.configs]

    def selects(self, program: str, config: str, partner: bool = False) -> bool:
        """Whether the run selects (program, config); for a relation's side (``partner``) a partner counts."""
        chosen = program in self.programs or (partner and program in self.partners)
        return chosen and config in self.configs

    def structure_keys(self) -> list[Key]:
        return [
            Key(name, config, target.name)
            for target in self.targets
            for name in self.programs
            for config in self.configs_for(target, name)
        ]

    def _check_selection(self, config: pytest.Config) -> None:
        """A selection that compiles nothing, or nothing where it was asked to, is not a green run."""
        if not self.structure_keys():
            given = " ".join(
                f"--{name} {value}"
                for name in ("targets", "programs", "configs")
                if (value := config.getoption(name)) is not None
            )
            raise InvariantsError(
                f"{given}: selects nothing to compile (no selected program has a selected configuration on a "
                "selected target)"
            )
        # Under the default selection such targets skip, and the summary says so.
        option = config.getoption("targets")
        asked = asked_targets(option, self.targets, self.specs, self.project.catalog)
        unavailable = unavailable_targets(asked)
        if unavailable:
            where = f"--targets {option}" if asked is self.targets else "the spec files' targets"
            raise NothingChecked(
                f"{where}: cannot compile here, so nothing would be checked there: {unavailable}"
            )


def _programs(config: pytest.Config, specs: list[Spec]) -> Programs:
    """The catalog's programs, with the self-check's injections, and the project's (built by the ``gate``
    command, else here)."""
    injected = config.stash.get(PROGRAM_SWAPS, {})
    built = config.stash.get(BUILT_PROGRAMS, {})
    decls = [d for spec in specs for d in spec.programs]
    made = [built.get(d) for d in decls]
    fresh = iter(
        build_all([d for d, b in zip(decls, made, strict=True) if b is None], config.getoption("programs"))
    )
    declared = [b if b is not None else next(fresh) for b in made]
    return Programs(declared).replaced(injected)


def relation_partners(specs: list[Spec], programs: list[str], known: Programs) -> list[str]:
    """The catalog programs that the relations of the project's own spec files name beside ``programs``:
    ``take`` for ``structure(mylib_take) == structure(take)`` when ``mylib_take`` is selected."""
    relations = [inv for s in specs if not s.catalog_scope for inv in s.invariants if inv.kind != "absolute"]
    catalog = known.catalog
    chosen = [inv for inv in relations if all(p in programs for p in inv.programs if p not in catalog)]
    return list(
        dict.fromkeys(p for inv in chosen for p in inv.programs if p in catalog and p not in programs)
    )


def asked_targets(
    option: str | None, selected: list[Target], specs: list[Spec], catalog: bool
) -> list[Target]:
    """The selected targets a run was asked for by name: by ``--targets`` (``all`` names none), else, under
    ``--no-catalog``, by the project's spec files without a pattern."""
    if option is not None and option.strip() != "all":
        return selected
    if catalog:
        return []
    named = {
        word
        for spec in specs
        if not spec.catalog_scope
        for word in (
            *spec.targets,
            *(t for inv in spec.invariants for t in inv.targets),
            *(t for c in spec.correctness for t in c.targets),
        )
        if not any(ch in word for ch in "*?[")
    }
    return [t for t in selected if t.name in named]


def unavailable_targets(targets: list[Target]) -> str:
    """The targets that cannot compile here, those that share a reason named together; empty when all can."""
    by_reason: dict[str, list[str]] = {}
    for t in targets:
        reason = t.unavailable_reason()
        if reason is not None:
            by_reason.setdefault(reason.removeprefix(f"{t.name}: "), []).append(t.name)
    return "; ".join(f"{', '.join(names)}: {why}" for why, names in by_reason.items())
