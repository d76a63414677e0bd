"""Checks: expand spec invariants into items and decide each one.

A :class:`Case` is one invariant on one target, for one program (absolute) or the programs its assert names
(relational), in one configuration. :func:`evaluate` decides it from what the compiles measured alone (the
caller supplies them): this stage never compiles.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib.metadata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from .._errors import InvariantsError, did_you_mean
from ..catalog.programs import Program, get_config
from ..catalog.registry import Programs
from ..hlo.cost import Missing
from ..hlo.structure import Structure, modulo_element_type
from ..hlo.tpu_model import chip_model
from ..measure.measurement import Measurement
from ..measure.metrics import METRICS, input_facts
from ..records.compiled import Key
from ..scope.placement import aimed_by, configs_for, misfit
from ..scope.targets import Target, all_targets, device_count, widened
from ..snapshot.render import structure_lines
from ..specfile.asserts import NoValue, Read
from ..specfile.reader import CorrectnessCheck, Invariant, ProgramDecl, Spec, scope_of, select_programs


@dataclasses.dataclass(frozen=True)
class Case:
    """One invariant item. ``program`` is None for relational and throughput invariants."""

    invariant: Invariant
    target: str
    config: str
    program: str | None
    skip: str | None = None

    @property
    def id(self) -> str:
        """A relation across configurations names each side's own."""
        config = "~".join(k.config for k in self.keys) if self.invariant.assertion.pinned else self.config
        return f"{self.target}-{'~'.join(k.program for k in self.keys)}-{config}-{self.invariant.id}"

    @property
    def keys(self) -> list[Key]:
        if pinned := self.invariant.assertion.pinned:
            return [Key(p, c, self.target) for p, c in pinned]
        programs = [self.program] if self.program else list(self.invariant.programs)
        return [Key(p, self.config, self.target) for p in programs]


def config_matches(config: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(config, p) for p in patterns)


def unmet_condition(invariant: Invariant | CorrectnessCheck) -> str | None:
    """None when every ``when`` condition holds for the installed versions, else why not."""
    for req in invariant.when:
        try:
            version = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            return f"when: {req} (not installed)"
        if not req.specifier.contains(version, prereleases=True):
            return f"when: {req} (installed {req.name} {version})"
    return None


def on_targets(target: Target, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(target.name, p) for p in patterns)


def known_targets() -> list[Target]:
    """Every target a spec may name: this process's (the runtime one first), and the CPU runtime's ``cpu``,
    which a TPU or GPU host does not have but whose spec files it reads."""
    targets = all_targets()
    return [*targets.values(), *([] if "cpu" in targets else [Target("cpu", "cpu", "runtime", "all")])]


def check_specs(
    specs: Iterable[Spec], targets: Iterable[Target] | None = None, programs: Programs | None = None
) -> None:
    """Refuse, in one line ``FILE:LINE: ...``, what only the targets show would pass in silence: a
    ``targets`` pattern that matches no target, an entry that makes no item (anywhere, on a target it names
    or for a program it names), a correctness check that runs nothing or calls a program it cannot, and a
    declared program that fits no target its files name. Every case list is made after it.

    ``targets``: every target a spec may name (default :func:`known_targets`); ``programs``: the run's
    (default: the catalog's alone)."""
    known = list(targets) if targets is not None else known_targets()
    programs = programs if programs is not None else Programs()
    for spec in specs:
        _SpecCheck(spec, known, programs).run()


def _named(word: str) -> bool:
    """A program or target written by name, not a pattern or a ``kind:``/``tag:`` selector."""
    return not any(c in word for c in "*?[:")


def _scope_note(target: Target, program: Program) -> str:
    """Why ``target`` does not compile ``program``: its scope, and what would make it compile there."""
    layout = program.layout
    if target.scope == "core":
        note = "a core-scope target: it compiles programs tagged 'core' only"
        return note + ("; this one is sharded" if layout is not None else "")
    if target.scope == "all":
        if layout is None:  # sized for other chips (the SparseCore offload sizes, say)
            return f"its configurations ({', '.join(program.configs)}) compile on other targets only"
        return "it compiles unsharded programs only; this one has a mesh layout"
    if target.scope == "pod":
        return "a pod target: it compiles the pod layouts (vocabulary-parallel, FSDP, tied) only"
    if layout is None:
        return (
            f"a sharded target of {target.device_count} devices: it compiles programs with a mesh layout only"
        )
    if layout.pod:
        return "a sharded target: it compiles the pod layouts on pod targets only"
    return f"a sharded target of {target.device_count} devices; this layout needs {layout.devices}"


class _SpecCheck:
    """One spec against the known targets, each selection and configuration list computed once (a spec of
    20,000 invariants shares a few selectors)."""

    def __init__(self, spec: Spec, known: Sequence[Target], programs: Programs) -> None:
        self.spec = spec
        self.known = known
        self.names = [t.name for t in known]
        self.programs = programs
        self.scope = scope_of(spec, programs)
        self._selected: dict[tuple[str, ...], list[str]] = {}
        self._configs: dict[tuple[str, str], tuple[str, ...]] = {}

    def selected(self, selectors: tuple[str, ...]) -> list[str]:
        if selectors not in self._selected:
            self._selected[selectors] = select_programs(selectors, self.scope)
        return self._selected[selectors]

    def configs(self, target: Target, program: str, patterns: Sequence[str]) -> tuple[str, ...]:
        """The configurations ``program`` compiles in on ``target`` that ``patterns`` select."""
        key = (target.name, program)
        if key not in self._configs:
            self._configs[key] = configs_for(target, self.programs[program])
        return tuple(c for c in self._configs[key] if config_matches(c, patterns))

    def known_patterns(self, where: str, what: str, patterns: Iterable[str]) -> None:
        for pattern in patterns:
            if not any(fnmatch.fnmatchcase(n, pattern) for n in self.names):
                raise InvariantsError(
                    f"{where}: {what} {pattern!r} matches no target{did_you_mean(pattern, self.names)}; "
                    f"known: {', '.join(self.names)}"
                )

    def run(self) -> None:
        spec = self.spec
        where = spec.targets_where or str(spec.path)
        self.known_patterns(where, "targets:", spec.targets)
        for decl in spec.programs:
            self.fits_a_target(decl)
        applying = [t for t in self.known if on_targets(t, spec.targets)]
        for inv in spec.invariants:
            self.invariant(inv, applying)
        for check in spec.correctness:
            self.correctness(check, applying)

    def fits_a_target(self, decl: ProgramDecl) -> None:
        program = self.programs.get(decl.name)
        if program is None:
            return
        misfits = [misfit(t, program) for t in self.known if aimed_by(t, program)]
        if misfits and all(misfits):
            raise InvariantsError(
                f"{decl.where}: {decl.name} fits no target its spec files name, so none of its items would "
                f"run: {'; '.join(str(m) for m in misfits)}"
            )

    def cases(self, inv: Invariant, target: Target, skip: str | None = None) -> list[Case]:
        """The items ``inv`` makes on ``target``, in spec order."""
        if pinned := inv.assertion.pinned:
            compiles = all(c in configs_for(target, self.programs[p]) for p, c in pinned)
            return [Case(inv, target.name, pinned[0][1], None, skip)] if compiles else []
        if inv.kind == "absolute":
            return [
                Case(inv, target.name, config, name, skip)
                for name in self.selected(inv.programs)
                for config in self.configs(target, name, inv.configs)
            ]
        shared = _common(set(self.configs(target, p, inv.configs)) for p in inv.programs)
        return [Case(inv, target.name, c, None, skip) for c in sorted(shared)]

    def why_none(self, inv: Invariant, target: Target, programs: Sequence[str]) -> str:
        """Why ``inv`` makes no item of ``programs`` on ``target``: a program that does not compile there (a
        selection's: only when none does), or the configurations they compile in."""
        pinned = self.pin_missing(inv, target)
        if pinned:
            return pinned
        compiling = [p for p in programs if configs_for(target, self.programs[p])]
        missing = [p for p in programs if p not in compiling]
        if missing and (not compiling or inv.kind != "absolute"):
            return self.not_compiled(target, missing[0])
        return self.no_config(inv, target, compiling)

    def pin_missing(self, inv: Invariant, target: Target) -> str:
        """Why a side of a relation across configurations does not compile on ``target`` ("": each does)."""
        for p, c in inv.assertion.pinned:
            compiles_in = configs_for(target, self.programs[p])
            if not compiles_in:
                return self.not_compiled(target, p)
            if c not in compiles_in:
                there = f"it compiles there in {', '.join(compiles_in)} only"
                return f"program '{p}' does not compile in {c} on {target.name}: {there}"
        return ""

    def no_config(self, inv: Invariant, target: Target, compiling: Sequence[str]) -> str:
        if len(compiling) == 1:
            have = ", ".join(configs_for(target, self.programs[compiling[0]]))
            which = f"'{compiling[0]}' compiles in"
        else:
            have = "; ".join(f"{p} in {', '.join(configs_for(target, self.programs[p]))}" for p in compiling)
            which = "its programs share" if inv.kind != "absolute" else "its programs compile in"
        return f"configs {list(inv.configs)} select no configuration {which} on {target.name} ({have})"

    def not_compiled(self, target: Target, program: str) -> str:
        note = _scope_note(target, self.programs[program])
        return f"program '{program}' does not compile on {target.name} ({note})"

    def invariant(self, inv: Invariant, applying: Sequence[Target]) -> None:
        self.known_patterns(inv.where_of("targets"), f"'{inv.id}': targets", inv.targets)
        if inv.kind == "throughput":
            self.throughput(inv)
            return
        on = [t for t in applying if on_targets(t, inv.targets)]
        programs = list(inv.programs) if inv.kind != "absolute" else self.selected(inv.programs)
        self.named_targets_get_items(inv, on, programs)
        self.named_programs_get_items(inv, on)
        if not any(self.cases(inv, t) for t in on):
            raise self.checks_nothing(inv, on, programs)

    def named_targets_get_items(self, inv: Invariant, on: Sequence[Target], programs: Sequence[str]) -> None:
        for target in (t for t in on if t.name in inv.targets and not self.cases(inv, t)):
            what = self.why_none(inv, target, programs)
            raise InvariantsError(f"{inv.where_of('targets')}: '{inv.id}': {what}")

    def named_programs_get_items(self, inv: Invariant, on: Sequence[Target]) -> None:
        """Each program named by name gets items somewhere; a selector may select nothing on a family (the
        shipped files hold "kind:sharded" beside "kind:forward" on GPUs)."""
        for sel in filter(_named, inv.programs if on else ()):
            if not any(self.configs(t, sel, inv.configs) for t in on):
                there = next((t for t in on if configs_for(t, self.programs[sel])), on[0])
                what = self.why_none(inv, there, [sel])
                raise InvariantsError(f"{inv.where_of('programs')}: '{inv.id}': {what}")

    def checks_nothing(
        self, inv: Invariant, on: Sequence[Target], programs: Sequence[str]
    ) -> InvariantsError:
        if not on:
            return InvariantsError(f"{inv.where}: '{inv.id}' applies to no target: it checks nothing")

        # A selection's programs that compile nowhere here (the offload sizes, say) are not why it is empty.
        def compiles_here(t: Target) -> bool:
            have = [bool(configs_for(t, self.programs[p])) for p in programs]
            return any(have) if inv.kind == "absolute" else all(have)

        compiling = next((t for t in on if compiles_here(t)), None)
        where = inv.where_of("configs") if compiling is not None else inv.where_of("programs")
        shown, first = ", ".join(t.name for t in on), compiling or on[0]
        return InvariantsError(
            f"{where}: '{inv.id}' checks nothing on its targets ({shown}): "
            f"on {first.name}, {self.why_none(inv, first, programs)}"
        )

    def throughput(self, inv: Invariant) -> None:
        """A timed relation runs on the runtime target, whichever it is: in a configuration its programs
        share that is not compile-only."""
        shared = _common(
            {c for c in self.programs[p].configs if config_matches(c, inv.configs)} for p in inv.programs
        )
        if not any(not get_config(c).compile_only for c in shared):
            raise InvariantsError(
                f"{inv.where_of('configs')}: '{inv.id}': configs {list(inv.configs)} select no configuration "
                f"that {' and '.join(inv.programs)} share and run in: it would time nothing"
            )

    def correctness(self, check: CorrectnessCheck, applying: Sequence[Target]) -> None:
        self.known_patterns(check.where_of("targets"), f"'{check.id}': targets", check.targets)
        programs = self.selected(check.programs)
        for p in programs if check.check != "agree" else ():
            if self.programs[p].kind != "forward":
                raise InvariantsError(
                    f"{check.where}: '{check.id}': check '{check.check}' calls a forward lookup "
                    f"(table, indices); '{p}' is a {self.programs[p].kind} program"
                )
        for target in applying:
            if target.mode == "runtime" and on_targets(target, check.targets):
                self.runs_on(check, target, programs)

    def runs_in(self, target: Target, program: str) -> str:
        configs = configs_for(target, self.programs[program])
        if configs:
            return f"it runs on {target.name} in {', '.join(configs)} only"
        return f"it does not compile on {target.name} ({_scope_note(target, self.programs[program])})"

    def runs_on(self, check: CorrectnessCheck, target: Target, programs: Sequence[str]) -> None:
        where = check.where_of("configs")

        def runs(p: str) -> tuple[str, ...]:
            return tuple(c for c in self.configs(target, p, check.configs) if not get_config(c).compile_only)

        for sel in check.programs:
            if _named(sel) and not runs(sel):
                raise InvariantsError(
                    f"{where}: '{check.id}': configs {list(check.configs)} select no configuration "
                    f"program '{sel}' runs in: {self.runs_in(target, sel)}"
                )
        if not any(runs(p) for p in programs):
            raise InvariantsError(
                f"{where}: '{check.id}': configs {list(check.configs)} select no configuration its "
                f"programs run in on {target.name}: it checks nothing"
            )


def expand(
    specs: Iterable[Spec],
    targets: Iterable[Target],
    kinds: Sequence[str] = ("absolute", "relational"),
    programs: Programs | None = None,
) -> list[Case]:
    """Every item the specs define on ``targets``, in spec order, after :func:`check_specs`; an unmet
    ``when`` makes a skipped case. ``programs``: the run's (default: the catalog's alone)."""
    specs = list(specs)
    programs = programs if programs is not None else Programs()
    check_specs(specs, programs=programs)
    cases: list[Case] = []
    targets = list(targets)
    for spec in specs:
        check = _SpecCheck(spec, targets, programs)
        for target in (t for t in targets if on_targets(t, spec.targets)):
            for inv in spec.invariants:
                if inv.kind in kinds and on_targets(target, inv.targets):
                    cases += check.cases(inv, target, unmet_condition(inv))
    return cases


def _common(sets: Iterable[set[str]]) -> set[str]:
    each = list(sets)
    return set.intersection(*each) if each else set()


class WidenedDtype(UserWarning):
    """A dtype-scoped count on a target that computes that dtype in a wider one may pass for the very
    program it guards (``scatters(dtype="bf16") == 0`` on the CPU)."""


def widened_warning(name: str, dtype: str, target: str) -> str | None:
    """What a :class:`WidenedDtype` says of ``name(dtype=...)`` on ``target`` (None: it is not widened)."""
    wide = widened(target, dtype)
    if wide is None:
        return None
    return (
        f"{name}(dtype={dtype!r}) reads the compiled dtype, and {target} computes {dtype} in {wide}: "
        f"the count does not see the {dtype} work it guards there"
    )


@dataclasses.dataclass(frozen=True)
class Decision:
    """The decision on one case: each evaluated term's value, the ratio of a scaled relation, and what the
    verdict cannot see on this target (a dtype filter its compiler widens)."""

    holds: bool
    measured: dict[str, object]
    detail: str = ""
    ratio: float | None = None
    warning: str = ""

    def describe(self, invariant: Invariant) -> str:
        values = ", ".join(f"{k} = {_fmt(v)}" for k, v in self.measured.items())
        line = f"assert {invariant.text}: measured {values}"
        if self.warning:
            line += f"; warning: {self.warning}"
        if self.ratio is not None:
            scaled = invariant.assertion.scaled
            assert scaled is not None  # a ratio is only measured for a scaled relation
            # The compiler's figures are predictions, and the line says so.
            label = "predicted ratio" if METRICS[scaled.metric].source == "compiler" else "ratio"
            ratio = f"{self.ratio:.3g}" if self.ratio < 1000 else f"{self.ratio:,.0f}"
            line += f"; {label} {scaled.a}/{scaled.b} = {ratio} (bound {scaled.factor:g})"
        return line + (f"; {self.detail}" if self.detail else "")


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, tuple) and len(value) > 6:
        return f"<{len(value)} items>"
    return repr(value) if isinstance(value, str) else str(value)


def structural_signature(s: Structure) -> tuple[tuple[object, ...], ...]:
    """What ``structure(a) == structure(b)`` compares: everything the snapshot shows below the jaxpr."""
    return (
        s.kernel_list,
        s.custom_call_targets,
        s.gather_shapes,
        s.scatter_shapes,
        s.collectives,
        s.converts,
        s.aliases,
    )


def _structure_differences(structures: dict[str, Structure]) -> dict[str, str]:
    """Each ``structure(...)`` term that differs from another, as the first snapshot line only it has:
    ``<1 kernels; only here: fusion kLoop {...} -> f32[128,64]{1,0} (and 2 more)>``."""
    lines = {
        label: Counter(ln.strip() for ln in structure_lines(s) if not ln.endswith(":") and ln != "  (none)")
        for label, s in structures.items()
    }
    out = {}
    for label, mine in lines.items():
        other = next((o for lb, o in lines.items() if lb != label and o != mine), None)
        if other is not None:
            text = _only_here(sorted((mine - other).elements()))
            out[label] = f"<{len(structures[label].kernel_list)} kernels; {text}>"
    return out


def _only_here(only: Sequence[str]) -> str:
    if not only:
        return "nothing only here"
    first = only[0] if len(only[0]) <= 120 else only[0][:117] + "..."
    return f"only here: {first}" + (f" (and {len(only) - 1} more)" if len(only) > 1 else "")


def evaluate(
    case: Case, measured: Callable[[Key], Measurement], programs: Programs | None = None
) -> Decision:
    """Decide ``case`` from ``measured(key)``, what the compile of a key measured. A metric or arithmetic
    without a value fails the verdict in one line: an invariant never passes on a number that is not there.
    ``programs``: the run's (default: the catalog's alone), for a program's input facts."""
    config = get_config(case.config)
    devices = device_count(case.target)
    facts = (
        (programs if programs is not None else Programs())[case.program].input_facts(config, devices)
        if case.program is not None
        else input_facts(config)
    )
    measured_terms: dict[str, object] = {}
    structures: dict[str, Structure] = {}
    warnings: list[str] = []
    untyped = across_element_types(case)

    def metric_of(name: str, program: str, dtype: str | None = None, config: str | None = None) -> object:
        key = Key(program, config or case.config, case.target)
        value = measured(key).metrics[name]
        if isinstance(value, Missing):
            raise NoValue(f"{name} of {program} on {case.target}: {value.reason}")
        if value is None:
            raise NoValue(f"{name} of {program} is unknown (a loop trip count could not be derived)")
        if dtype is not None:  # a count scoped to one element type, from the structure itself
            if (warning := widened_warning(name, dtype, case.target)) is not None:
                warnings.append(warning)
            scoped = METRICS[name].by_dtype
            assert scoped is not None  # the assert grammar admits a dtype only where there is one
            return scoped(measured(key).structure, dtype)
        return value

    def read(term: Read) -> object:
        if term.program is None:
            if term.name in facts:
                value: object = facts[term.name]
            else:
                assert case.program is not None  # a bare compiled metric is only in absolute invariants
                value = metric_of(term.name, case.program, term.dtype)
        elif term.name == "structure":
            key = Key(term.program, term.config or case.config, case.target)
            compiled = measured(key).structure
            structures[term.label] = modulo_element_type(compiled) if untyped else compiled
            signature = structural_signature(structures[term.label])
            measured_terms[term.label] = f"<{len(signature[0])} kernels>"
            return signature
        elif METRICS[term.name].source == "throughput":
            # Timed pair by pair by the throughput tier (gate/test_throughput.py), never decided here.
            raise InvariantsError(f"{case.invariant.where}: {term.name}() is decided by the throughput tier")
        else:
            value = metric_of(term.name, term.program, term.dtype, term.config)
        measured_terms[term.label] = value
        return value

    try:
        holds = case.invariant.assertion.holds(read)
    except NoValue as err:
        return Decision(False, measured_terms, str(err), warning="; ".join(dict.fromkeys(warnings)))
    measured_terms.update(_structure_differences(structures))
    ratio = None
    if (scaled := case.invariant.assertion.scaled) is not None:
        a = measured_terms.get(f"{scaled.metric}({scaled.a})")
        b = measured_terms.get(f"{scaled.metric}({scaled.b})")
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b:
            ratio = a / b
    warning = "; ".join(dict.fromkeys(warnings))
    notes = (_uncalibrated(measured_terms, case.target), MODULO_TYPE if untyped else "")
    detail = "; ".join(note for note in notes if note)
    return Decision(holds, measured_terms, detail, ratio, warning)


MODULO_TYPE = (
    "structures of two element types compared modulo element type and the tiling that follows from it"
)


def across_element_types(case: Case) -> bool:
    """Whether ``case``'s structures are compared across element types (``structure(a[bf16]) ==
    structure(a[f32])``), and so modulo them: the kernels alike but for their element type and the
    tiling that follows from it."""
    configs = {r.config or case.config for r in case.invariant.assertion.reads() if r.name == "structure"}
    return len({get_config(c).table.dtype for c in configs}) > 1


def _uncalibrated(measured_terms: dict[str, object], target: str) -> str:
    """The note of a verdict that read ``predicted_seconds`` on a chip nobody measured."""
    if not any(label.startswith("predicted_seconds") for label in measured_terms):
        return ""
    model = chip_model(target)
    return (
        f"predicted_seconds on {target} is uncalibrated: {model.provenance}"
        if model and model.uncalibrated
        else ""
    )
