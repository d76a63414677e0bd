"""The pytest plugin: options, the session's compile cache, and item generation (the process it runs in,
backend guard included, is :mod:`invariants.compile.process`).

It ties the stages together for pytest and holds no logic of its own beyond that: which items exist
comes from the catalog, the targets and the specs; what an item decides comes from the checks.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .. import _config
from .._errors import InvariantsError
from .._paths import shown
from ..compile.process import REQUESTED_PLATFORMS, guard_backend, pin_worker

if TYPE_CHECKING:  # _compile imports JAX, which must start after _process has set its environment
    from ..catalog.targets import Target
    from ..compile.artifacts import Key


class GateSession:
    """Per-session state: selected targets, programs, configurations and specs, the compile cache, parsed
    structures, where snapshots are read and written, the dump folder."""

    def __init__(self, config: pytest.Config) -> None:
        from ..catalog.downstream import build_all
        from ..catalog.programs import CATALOG, select_configs
        from ..catalog.registry import declare, declared, select_program_option
        from ..catalog.targets import all_targets, select_targets
        from ..compile.artifacts import CompileCache
        from ..spec.checks import check_specs
        from ..spec.file import load_specs

        self.config = config
        self.rootpath = Path(config.rootpath)
        self.all_targets = all_targets()
        self.targets = select_targets(config.getoption("targets"))
        self.cache = CompileCache(self.all_targets)
        spec_dirs = config.getoption("spec_dir") or _env_spec_dirs()
        self.specs = load_specs(*map(Path, spec_dirs))
        declare(build_all(d for spec in self.specs for d in spec.programs))
        # What only the targets show wrong (a targets pattern that matches none, an invariant that makes no
        # item): one line here, before collection, rather than a collection error's traceback.
        check_specs(self.specs)
        self.with_catalog = not config.getoption("no_catalog")
        default = [*(CATALOG if self.with_catalog else ()), *declared()]
        self.programs = select_program_option(config.getoption("programs"), default)
        if not self.programs:
            raise InvariantsError("--no-catalog: no [[program]] declared in the spec files; nothing to gate")
        self.configs = select_configs(config.getoption("configs"))
        # Under --no-catalog, the catalog programs the project's own relations name (``structure(mine) ==
        # structure(take)``, ``time(mine) / time(take)``) are compiled for those relations and nothing else:
        # no items of their own, so a downstream run costs what its own programs cost.
        self.partners = [] if self.with_catalog else relation_partners(self.specs, self.programs)
        if not self.structure_keys():
            # Each option selected something, but together nothing: a green run would have checked nothing.
            given = " ".join(
                f"--{name} {value}"
                for name in ("targets", "programs", "configs")
                if (value := config.getoption(name)) is not None
            )
            raise InvariantsError(
                f"{given}: selects nothing to compile (no selected program has a selected configuration on a "
                "selected target)"
            )
        # Snapshots: a declared program's in --snapshot-dir; the catalog's in --catalog-snapshot-dir, which
        # is read-only unless it is --snapshot-dir itself (see snapshot_folder).
        from ..snapshot.store import SNAPSHOT_ROOT

        snapshot_dir = config.getoption("snapshot_dir")
        self.snapshot_dir = (Path(snapshot_dir) if snapshot_dir else self.rootpath / SNAPSHOT_ROOT).resolve()
        catalog_dir = config.getoption("catalog_snapshot_dir")
        self.catalog_snapshot_dir = Path(catalog_dir).resolve() if catalog_dir else self.snapshot_dir
        from .._paths import check_output_dir, what_is

        # A snapshot folder that is a file would fail every structure item (or an update's first write)
        # with an OSError: one line now. Read-only is fine for a plain run; an update must write there.
        for option, folder in (("--snapshot-dir", self.snapshot_dir),
                               ("--catalog-snapshot-dir", self.catalog_snapshot_dir)):  # fmt: skip
            if folder.exists() and not folder.is_dir():
                raise InvariantsError(f"{option} {shown(folder)}: {what_is(folder)}, not a folder")
        if config.getoption("--snapshot-update", default=False):
            check_output_dir(self.snapshot_dir, "--snapshot-dir", make=False)
        # Checked now, made only when an item fails: an unwritable folder would otherwise fail that item
        # with a PermissionError in place of its own failure.
        self.dump_dir = check_output_dir(config.getoption("hlo_dump_dir"), "--hlo-dump-dir", make=False)
        self._structures: dict[Any, Any] = {}
        self._codes: dict[Any, Any] = {}
        self.parse_seconds = 0.0
        self.raw = bool(config.getoption("raw_invariants"))
        if config.getoption("programs") is not None or config.getoption("configs") is not None:
            _select_snapshots(self)

    def snapshot_folder(self, program: str, target: str) -> Path:
        """Where ``program``'s snapshots (and efficiency baselines) on ``target`` live."""
        from ..catalog.programs import CATALOG

        root = self.catalog_snapshot_dir if program in CATALOG else self.snapshot_dir
        return root / target

    def snapshot_writable(self, program: str) -> bool:
        """Whether ``--snapshot-update`` may write ``program``'s snapshots: never the catalog's when they are
        read from elsewhere (the package's own, in a downstream run)."""
        from ..catalog.programs import CATALOG

        return program not in CATALOG or self.catalog_snapshot_dir == self.snapshot_dir

    def snapshot_path(self, key: tuple[str, str, str]) -> Path:
        from ..snapshot.store import snapshot_stem

        return self.snapshot_folder(key[0], key[2]) / f"{snapshot_stem(key[0], key[1])}.txt"

    def update_command(
        self, test_file: Path, flag: str, programs: str, target: str | None = None, configs: str | None = None
    ) -> str:
        """The command that records ``programs`` (``flag``: ``--snapshot-update`` or ``--record-baselines``,
        with any options of its own), on ``target`` or on every target present, in ``configs`` or all, the
        way this session was started: ``pytest FILE`` in a checkout, with the folders it reads
        (``--spec-dir``, ``--snapshot-dir``, ...); ``python -m invariants gate ...`` in a downstream
        project, whose prefix carries them already."""
        import shlex

        prefix = self.config.getoption("gate_command")
        words = [prefix] if prefix else [f"pytest {shlex.quote(shown(test_file))}"]
        if not prefix:
            options = self.config.option
            words += [f"--spec-dir {shlex.quote(d)}" for d in options.spec_dir or ()]
            for name, value in (("--snapshot-dir", options.snapshot_dir),
                                ("--catalog-snapshot-dir", options.catalog_snapshot_dir)):  # fmt: skip
                if value:
                    words.append(f"{name} {shlex.quote(str(value))}")
            words += ["--no-catalog"] if options.no_catalog else []
        words += [f"--targets {target}"] if target else []
        words += [f"--programs {programs}"] + ([f"--configs {configs}"] if configs else []) + [flag]
        return " ".join(words)

    def available(self, target: str) -> str | None:
        return self.all_targets[target].unavailable_reason()

    def structure(self, key: Key) -> Any:
        from ..hlo.parse import parse_module
        from ..hlo.structure import structure_of

        if key not in self._structures:
            compiled = self.cache.get(*key)
            start = time.perf_counter()
            self._structures[key] = structure_of(parse_module(compiled.hlo_text, "/".join(key)))
            self.parse_seconds += time.perf_counter() - start
        return self._structures[key]

    def code(self, key: Key) -> Any:
        """The kernel code of ``key`` (an ``invariants.kernels.program.ProgramCode``), parsed once. A
        construct the parser does not know is an ``InvariantsError`` naming FILE:LINE, for that key's
        items."""
        from ..snapshot.render import code_of

        if key not in self._codes:
            compiled = self.cache.get(*key)
            start = time.perf_counter()
            self._codes[key] = code_of(compiled, self.structure(key), self.all_targets[key[2]])
            self.parse_seconds += time.perf_counter() - start
        return self._codes[key]

    def costs(self, key: Key) -> dict[str, Any]:
        """The compiler and kernel-code metrics of ``key`` (``invariants.hlo.metrics.compiler_metrics`` and
        ``kernel_metrics``); never in snapshots."""
        from ..hlo.metrics import compiler_metrics, kernel_metrics

        compiled = self.cache.get(*key)
        return {
            **compiler_metrics(self.structure(key), compiled.cost, compiled.memory),
            **kernel_metrics(self.code(key)),
        }

    def configs_for(self, target: Target, program: str) -> list[str]:
        """The configurations ``program`` compiles in on ``target`` that this session selected."""
        from ..catalog.registry import PROGRAMS

        return [c for c in target.configs_for(PROGRAMS[program]) if c in self.configs]

    def selects(self, program: str, config: str, partner: bool = False) -> bool:
        """Whether ``--programs`` and ``--configs`` both select (program, config). ``partner``: for one side
        of a relation, where a catalog program kept for the project's relations (:attr:`partners`) counts
        as selected too."""
        chosen = program in self.programs or (partner and program in self.partners)
        return chosen and config in self.configs

    def structure_keys(self) -> list[Key]:
        from ..compile.artifacts import Key

        return [
            Key(name, config, target.name)
            for target in self.targets
            for name in self.programs
            for config in self.configs_for(target, name)
        ]

    def dump(self, key: Key) -> Path:
        """Write the optimized HLO and the jaxpr of ``key`` for CI to upload; return the folder."""
        compiled = self.cache.get(*key)
        folder = self.dump_dir / key.target
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"{key.program}.{key.config}"
        (folder / f"{stem}.hlo.txt").write_text(compiled.hlo_text)
        (folder / f"{stem}.jaxpr.txt").write_text(compiled.jaxpr)
        for name, text in compiled.kernel_code.items():  # the code an item on it read: PTX or LLVM IR
            (folder / f"{stem}.{name}").write_text(text)
        return folder / stem


def relation_partners(specs: list[Any], programs: list[str]) -> list[str]:
    """The catalog programs that the relations of the project's own spec files (not the package's) name
    beside programs of ``programs``: ``take`` for ``structure(mylib_take) == structure(take)`` or
    ``time(mylib_take) / time(take) <= 1.1`` when ``mylib_take`` is selected. A relation only between
    catalog programs counts too: a project's spec file named them. (A correctness ``reference`` runs
    outside the compile cache and needs nothing here.)"""
    from ..catalog.programs import CATALOG

    out: dict[str, None] = {}
    for spec in specs:
        if spec.catalog_scope:
            continue
        for inv in spec.invariants:
            if inv.kind == "absolute":
                continue
            if all(name in programs for name in inv.programs if name not in CATALOG):
                out.update((name, None) for name in inv.programs if name in CATALOG and name not in programs)
    return list(out)


def _env_spec_dirs() -> list[str]:
    value = _config.get("INVARIANTS_SPEC_DIR")
    return [value] if value else []


_SESSION = pytest.StashKey[GateSession]()


def pytest_addoption(parser: pytest.Parser) -> None:
    from .options import OPTIONS

    group = parser.getgroup("invariants", "embedding performance invariants")
    for option in OPTIONS:
        group.addoption(option.flag, **option.keywords())


# The gate's own markers, registered here so that an installed gate run without this repository's
# pyproject.toml knows them too.
MARKERS = (
    "gate: the performance gate itself (snapshots, invariants, throughput)",
    "snapshot: structural snapshot items",
    "invariant: declarative invariant items",
    "throughput: paired timing items",
    "snapshot_key(program, config, target, root=FOLDER): the structural snapshot an item owns",
)


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    pin_worker(getattr(config, "workerinput", None), config.getoption("pin_workers", default=False))
    recorder = config.stash[_RECORDER] = Recorder()
    config.pluginmanager.register(recorder, "invariants-recorder")
    try:
        guard_backend()
        config.stash[_SESSION] = GateSession(config)
        _claim_results(config)
    except (InvariantsError, pytest.UsageError) as err:
        line = str(err)
    else:
        return _no_cleanup(config)
    # Bad input: one line, the last, and exit 2 as the README promises (a pytest.UsageError would exit 4).
    pytest.exit(line, returncode=2)


def _no_cleanup(config: pytest.Config) -> None:
    if hasattr(config.option, "no_cleanup"):
        # syrupy deletes nothing: what is obsolete is decided by _obsolete_snapshots (see _snapshot_store).
        config.option.no_cleanup = True


_CLAIM = pytest.StashKey[Any]()


def _claim_results(config: pytest.Config) -> None:
    """Check and claim the results path when the run starts, in the process that writes it (not an xdist
    worker): a directory or an unwritable folder is one line before anything compiles; a path another live
    run holds gives this run a file of its own (see ``invariants.plugin.results.claim``)."""
    if hasattr(config, "workerinput"):
        return
    from .._paths import check_output_file
    from . import results as _results

    path = Path(config.getoption("results_json"))
    if not path.is_dir():  # a directory: _results.claim says so, with a file path to give instead
        # A folder that takes no file although os.access says it would (root on /sys or /proc, a read-only
        # mount): tried now, not found at the end, when the results are lost.
        check_output_file(path, "--results-json")
    config.stash[_CLAIM] = _results.claim(path)


def pytest_unconfigure(config: pytest.Config) -> None:
    claim = config.stash.get(_CLAIM, None)
    if claim is not None:
        claim.release()
    nothing = config.stash.get(_NOTHING_SELECTED, None)
    if nothing is not None:
        sys.stderr.write(f"Exit: {nothing}\n")


def gate_session(config: pytest.Config) -> GateSession:
    return config.stash[_SESSION]


def pytest_report_header(config: pytest.Config) -> list[str]:
    import jax

    from ..catalog.targets import versions

    s = gate_session(config)
    dev = jax.devices()
    lines = [
        f"runtime: {dev[0].platform} ({dev[0].device_kind}) x{len(dev)}  "
        f"[JAX_PLATFORMS={REQUESTED_PLATFORMS}]",
        "versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()),
    ]
    for t in s.targets:
        reason = t.unavailable_reason()
        state = "ok" if reason is None else f"skipped: {reason}"
        lines.append(f"target {t.name}: {t.mode}, {t.scope} — {state}")
    claim = config.stash.get(_CLAIM, None)
    if claim is not None and claim.note:
        lines.append(claim.note)
    return lines


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    s = gate_session(metafunc.config)
    if "structure_key" in metafunc.fixturenames:
        keys = s.structure_keys()
        s.cache.plan(
            k for k in keys if s.available(k.target) is None and _missing_library([k.program]) is None
        )
        params = [_param(s, key, _key_id(key)) for key in keys]
        metafunc.parametrize("structure_key", params or [_none("no program selected")])
    if "invariant_case" in metafunc.fixturenames:
        from ..spec.checks import expand

        cases = expand(s.specs, s.targets)
        cases = [
            c
            for c in cases
            if all(s.selects(k.program, k.config, c.invariant.kind != "absolute") for k in c.keys)
        ]
        if s.raw:
            cases = [dataclasses.replace(c, skip=None, invariant=raw_invariant(c.invariant)) for c in cases]
        # The partners of the project's relations (--no-catalog) have no structure item to plan them.
        s.cache.plan(
            k for c in cases for k in c.keys if k.program in s.partners and s.available(k.target) is None
        )
        params = []
        for case in cases:
            marks = _marks(s, case.keys[0], programs=[k.program for k in case.keys])
            if case.skip:
                marks.append(pytest.mark.skip(reason=case.skip))
            params.append(pytest.param(case, id=case.id, marks=marks))
        metafunc.parametrize("invariant_case", params or [_none("no invariant applies")])
    if "throughput_case" in metafunc.fixturenames or "efficiency_key" in metafunc.fixturenames:
        _parametrize_throughput(metafunc, s)
    if "correctness_case" in metafunc.fixturenames:
        from ..spec.correctness import expand_correctness

        runtime = next(iter(s.all_targets.values()))
        ccases = [c for c in expand_correctness(s.specs, runtime) if s.selects(c.program, c.config)]
        params = []
        for c in ccases:
            reason = c.skip or _missing_library(
                [c.program, *([c.check.reference] if c.check.reference else [])]
            )
            params.append(pytest.param(c, id=c.id, marks=_skip(reason)))
        metafunc.parametrize("correctness_case", params or [_none("no correctness check applies")])


def throughput_cases(s: GateSession) -> list[Any]:
    """Throughput invariants on the runtime target (the only one that runs programs)."""
    from ..spec.checks import expand

    runtime = next(iter(s.all_targets.values()))
    if runtime.name not in {t.name for t in s.targets}:
        return []
    from ..catalog.programs import get_config

    cases = expand(s.specs, [runtime], kinds=("throughput",))
    # Compile-only configurations (LLM scale) are never run, not even on a chip that compiles them.
    return [
        c
        for c in cases
        if all(s.selects(k.program, k.config, partner=True) for k in c.keys)
        and not get_config(c.config).compile_only
    ]


def _parametrize_throughput(metafunc: pytest.Metafunc, s: GateSession) -> None:
    cases = throughput_cases(s)
    if "throughput_case" in metafunc.fixturenames:
        params = []
        for c in cases:
            reason = c.skip or _missing_library([k.program for k in c.keys])
            params.append(pytest.param(c, id=c.id, marks=_skip(reason)))
        metafunc.parametrize("throughput_case", params or [_none("no throughput invariant applies")])
    if "efficiency_key" in metafunc.fixturenames:
        # A partner kept only for the project's relations (--no-catalog) gets no efficiency item of its own.
        keys = sorted({k for c in cases for k in c.keys if k.program in s.programs})
        params = [pytest.param(k, id=_key_id(k), marks=_skip(_missing_library([k.program]))) for k in keys]
        metafunc.parametrize("efficiency_key", params or [_none("no program is timed")])


def raw_invariant(invariant: Any) -> Any:
    """The invariant as its assert is written: no version scope, no ratchet (``--raw-invariants``)."""
    return dataclasses.replace(invariant, when=(), ratchet=None)


def _key_id(key: Key) -> str:
    """The pytest id of a key's items: ``target-program-config``."""
    return f"{key.target}-{key.program}-{key.config}"


def _none(reason: str) -> Any:
    return pytest.param(None, id="none", marks=pytest.mark.skip(reason=reason))


def _missing_library(programs: list[str]) -> str | None:
    """Why one of ``programs`` cannot be traced here (a library of the ``libs`` extra is missing), or None."""
    from ..catalog.registry import PROGRAMS

    return next((r for p in programs if (r := PROGRAMS[p].unavailable_reason()) is not None), None)


def _skip(reason: str | None) -> list[Any]:
    """An item's marks: a skip with ``reason``, or none. (Which worker runs an item under xdist is decided
    from its id: see :mod:`invariants.plugin.xdist`.)"""
    return [pytest.mark.skip(reason=reason)] if reason else []


def _marks(s: GateSession, key: Key, programs: list[str] | None = None) -> list[Any]:
    """A skip when the key's target is not available here or a program's library is not installed."""
    return _skip(s.available(key.target) or _missing_library(programs or [key.program]))


# syrupy warns when a snapshot's file and name do not contain the test's file and test name. Ours are
# named by (target, program, config) on purpose (see _snapshot_store), so the warning never applies.
_SYRUPY_NAMING = pytest.mark.filterwarnings(r"ignore:\s*Can not relate snapshot (location|name):UserWarning")


def _param(s: GateSession, key: Key, id_: str) -> Any:
    """A structure item's parameter, marked with the snapshot it compares (see _snapshot_store)."""
    # A read-only folder (the package's catalog snapshots) is never shown to syrupy: no root.
    root = str(s.snapshot_folder(key[0], key[2]).parent) if s.snapshot_writable(key[0]) else None
    marks = [*_marks(s, key), pytest.mark.snapshot_key(*key, root=root), _SYRUPY_NAMING]
    return pytest.param(key, id=id_, marks=marks)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start compiling ahead of the items; tell the snapshot store which folders this session owns (the
    only ones it shows syrupy) and which programs keep their snapshots there (see
    :mod:`invariants.snapshot.store`)."""
    try:
        from ..snapshot.store import GUARD
    except ImportError:  # syrupy is a test dependency; without it there are no snapshots to guard
        _prefetch(session)
        return

    s = gate_session(session.config)
    _prefetch(session)
    # Per writable folder: the stems of every program whose snapshots live there (the catalog's too under
    # --no-catalog: leaving them out of a run never makes them obsolete). A read-only folder has no entry.
    GUARD.known_stems.clear()
    for target in s.targets:
        if target.unavailable_reason() is None:
            GUARD.known_stems.update({str(f): stems for f, stems in known_stems(s, target.name).items()})


def compile_threads(config: pytest.Config) -> int:
    """How many threads compile ahead of the items: ``--compile-threads``, else the CPU count; 0 under
    xdist, where a worker does not know which items it will get and the other workers use the cores."""
    if hasattr(config, "workerinput") or getattr(config.option, "numprocesses", None):
        return 0
    if config.option.collectonly:
        return 0
    chosen = config.getoption("compile_threads")
    return max(0, chosen) if chosen is not None else (os.cpu_count() or 1)


def _prefetch(session: pytest.Session) -> None:
    """Queue every key the selected items read, in the order they read them (skipped items read none)."""
    s = gate_session(session.config)
    workers = compile_threads(session.config)
    if not workers:
        return
    keys: list[Key] = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or item.get_closest_marker("skip") is not None:
            continue
        key = callspec.params.get("structure_key")
        case = callspec.params.get("invariant_case")
        if key is not None:
            keys.append(key)
        elif case is not None and case.invariant.kind != "throughput":
            keys.extend(case.keys)
    s.cache.prefetch([k for k in keys if s.available(k.target) is None], workers)


def _select_snapshots(s: GateSession) -> None:
    """Tell the snapshot store which programs and configurations this session selected (every process,
    xdist's included)."""
    try:
        from ..snapshot.store import GUARD, snapshot_stem
    except ImportError:
        return

    selected: dict[str, set[str]] = {}
    for t in s.targets:
        for p in s.programs:
            if s.snapshot_writable(p):
                folder = selected.setdefault(str(s.snapshot_folder(p, t.name)), set())
                folder.update(snapshot_stem(p, c) for c in s.configs_for(t, p))
    GUARD.selected = selected


def known_stems(s: GateSession, target: str) -> dict[Path, set[str]]:
    """Per writable snapshot folder of ``target``: the stems of every program that keeps its snapshots
    there, in each of its configurations. The catalog's count even under --no-catalog (leaving them out of
    a run never makes them obsolete); a read-only folder (the package's) has no entry."""
    from ..catalog.registry import PROGRAMS
    from ..snapshot.store import snapshot_stem

    t = s.all_targets[target]
    out: dict[Path, set[str]] = {}
    for p in PROGRAMS.values():
        if s.snapshot_writable(p.name):
            stems = out.setdefault(s.snapshot_folder(p.name, target), set())
            stems.update(snapshot_stem(p.name, c) for c in t.configs_for(p))
    return out


def _owners_known(config: pytest.Config, s: GateSession) -> bool:
    """Whether every program that could keep snapshots in this session's writable folders is known here:
    the catalog's own folder (``--snapshot-dir`` is where the catalog's snapshots are, and no ``--spec-dir``
    declares programs). Given spec folders (a downstream run above all), a spec folder not given this time
    may own a file that no program of this run has."""
    return not (config.getoption("spec_dir") or _env_spec_dirs()) and (
        s.snapshot_dir == s.catalog_snapshot_dir
    )


def _obsolete_snapshots(config: pytest.Config, items: list[dict[str, Any]], passed: bool) -> list[str]:
    """Name the snapshots of programs that no longer exist, and delete them on an update that passed.

    A file is obsolete only when all of these hold (``invariants.snapshot.store.obsolete_snapshots``):
    its target's structure items ran in this session (it compiled here, and the programs were read whole);
    it sits directly in a writable snapshot folder; it is a file this gate wrote (its first line is
    ``# <program> [<config>] on <target>``, matching its name; never a foreign file such as a README.txt);
    and no program, catalog or declared, selected or not, keeps that program and configuration there (a
    program whose snapshots live in another folder is never judged here).

    It is deleted only by ``--snapshot-update``, only when the run passed, and only where every owner is
    known (:func:`_owners_known`). Elsewhere (a downstream ``--snapshot-dir``, any run given ``--spec-dir``)
    the update lists what it would delete and deletes nothing, unless ``--delete-obsolete-snapshots``.
    Runs in the reporting process (the xdist controller), after every item.
    """
    try:
        from ..snapshot.store import obsolete_snapshots, snapshot_header
    except ImportError:  # syrupy is a test dependency; without it there are no snapshots
        return []
    from ..catalog.registry import PROGRAMS

    s = gate_session(config)
    updating = bool(config.getoption("--snapshot-update", default=False))
    ran = sorted({str(i["target"]) for i in items if i.get("kind") == "structure"})
    found: list[tuple[Path, str]] = []
    for target in ran:
        for folder, known in known_stems(s, target).items():
            for path in obsolete_snapshots(folder, known):
                program = (snapshot_header(path) or ("",))[0]
                if program in PROGRAMS and s.snapshot_folder(program, target).resolve() != folder.resolve():
                    continue  # a program of another folder (the package's catalog): not this one's to judge
                found.append((path, target))
    if not found:
        return []
    gone = "no program has it on {} any more"
    provable = _owners_known(config, s)
    if not updating:
        how = "--snapshot-update" if provable else "--snapshot-update --delete-obsolete-snapshots"
        return [f"invariants: {shown(p)} is obsolete ({gone.format(t)}); {how} deletes it" for p, t in found]
    if not passed:
        return [
            f"invariants: kept {shown(p)}, obsolete ({gone.format(t)}): this run failed, and only an "
            "update that passes deletes"
            for p, t in found
        ]
    lines = []
    if not provable:
        flag = bool(config.getoption("delete_obsolete_snapshots", default=False))
        lines.append(
            f"invariants: {len(found)} obsolete snapshot(s) that no program of this run's spec folders has "
            + ("(deleting them: --delete-obsolete-snapshots):" if flag else "(a spec folder not given may):")
        )
        lines += [f"invariants:   {shown(p)}" for p, _ in found]
        if not flag:
            lines.append(
                "invariants: none deleted; give every spec folder that uses this snapshot folder, then add "
                "--delete-obsolete-snapshots to delete them"
            )
            return lines
    for path, target in found:
        try:
            path.unlink(missing_ok=True)
        except OSError as err:
            lines.append(f"invariants: could not delete {shown(path)} ({err.strerror or err})")
            continue
        lines.append(f"invariants: deleted {shown(path)} ({gone.format(target)})")
    return lines


def _recorded_baselines(items: list[dict[str, Any]]) -> list[str]:
    """One line per efficiency baseline this run wrote (every process's, read from the items' records): a
    missing one that ``--snapshot-update`` recorded, or one ``--record-baselines`` re-recorded."""
    lines = []
    for item in items:
        done = item.get("recorded") if item.get("kind") == "efficiency" else None
        if isinstance(done, dict):
            why = "it was missing" if done.get("why") == "missing" else "--record-baselines"
            lines.append(
                f"invariants: recorded efficiency baseline {shown(Path(done['path']))} "
                f"({item['program']}[{item['config']}] on {item['target']}: {done['efficiency']:.3f}; {why})"
            )
    return lines


def _unused_lines(config: pytest.Config) -> list[str]:
    """syrupy's "N snapshots unused" names no file unless asked to: one line that names them."""
    report = getattr(getattr(config, "_syrupy", None), "report", None)
    if report is None or report.disable_unused_snapshots:
        return []
    try:
        unused = sorted(c.location for c in report.unused)
    except Exception:  # syrupy's internals moved: its own count line still stands
        return []
    if not unused:
        return []
    return [f"invariants: syrupy's unused snapshot(s): {', '.join(shown(Path(u)) for u in unused)}"]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if _SESSION not in config.stash:
        return
    s = gate_session(config)
    for line in config.stash[_RECORDER].notes:
        terminalreporter.write_line(line)
    if s.cache.compiled:
        terminalreporter.write_line(
            f"invariants: compiled {len(s.cache.compiled)} programs in {s.cache.total_seconds:.1f} s, "
            f"parsed in {s.parse_seconds:.2f} s"
        )
    for line in _unused_lines(config):
        terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[Any]) -> Any:
    """A ``-k`` / ``-m`` that deselects every gate item and leaves nothing else is a selection of nothing:
    one line and exit 2, as ``--programs`` matching nothing is, not pytest's "no tests ran" (exit 5).
    Under xdist each worker collects for itself, and pytest's exit 5 stands; so it does for
    ``--collect-only``, which runs nothing anyway (bisect counts a selection so, and says it its way)."""
    gate_items = sum(1 for i in items if i.get_closest_marker("gate") is not None)
    result = yield
    if gate_items and not items and not hasattr(config, "workerinput") and not config.option.collectonly:
        given = (("-k", config.option.keyword), ("-m", config.option.markexpr))
        chosen = " ".join(f"{flag} {value!r}" for flag, value in given if value) or "the selection"
        # Said last (pytest_unconfigure, after pytest's own summary line) and exit 2 (pytest_sessionfinish).
        config.stash[_NOTHING_SELECTED] = (
            f"{chosen}: deselects every gate item ({gate_items}), leaving nothing to run"
        )
    return result


_NOTHING_SELECTED = pytest.StashKey[str]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """A gate item stopped by an ``InvariantsError`` (a compile error, kernel code not understood) fails
    with its one line and the versions that decided it, not a page of the gate's own stack: the key, the
    compiler's first error line and the versions are what a compiler engineer needs."""
    try:
        return (yield)
    except InvariantsError as err:
        if item.get_closest_marker("gate") is None:
            raise
        line = str(err)
    item.stash[_STOPPED] = True
    from ..catalog.targets import versions

    stated = ", ".join(f"{k} {v}" for k, v in versions().items())
    pytest.fail(f"{line}\nversions: {stated}", pytrace=False)  # outside the except: no chained stack


_STOPPED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """The report of a gate item stopped by an ``InvariantsError`` leaves out the stderr captured while it
    ran: there XLA and libtpu print their C++ stack traces ("*** Begin stack trace ***"), which the one line
    already sums up."""
    report = yield
    if call.when == "call" and item.stash.get(_STOPPED, False):
        report.sections = [(title, text) for title, text in report.sections if "stderr" not in title]
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    if crash is not None and report.failed and item.get_closest_marker("gate") is not None:
        # pytest's FAILED short line shows this message, cut to the terminal's width: the reason, first
        # and whole, without pytest's "Failed: " before it.
        crash.message = crash.message.removeprefix("Failed: ")
    return report


class Recorder:
    """What this run's items recorded (:func:`invariants.plugin.results.record`), with their outcomes,
    and the lines for the terminal summary: a plugin object of one config (kept on ``config.stash``),
    registered in :func:`pytest_configure`, so that no module state outlives a session (pytester runs
    several in one process).

    Its hook runs in the process that reports, which under xdist is the controller: the results file is
    the same with or without workers.
    """

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.gate = False  # a gate item ran (so a results file was expected)
        self.notes: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from . import results as _results

        if report.when != "call" and not (report.when == "setup" and report.skipped):
            return
        if "gate" in report.keywords:
            self.gate = True
        outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
        reason = failure_reason(report) if report.failed else None
        entries = [
            _results.entry(name, value, outcome, report.nodeid, reason)
            for name, value in report.user_properties
        ]
        self.items.extend(e for e in entries if e is not None)
        if report.failed and not any(entries):
            self.items.append(_results.error_entry(outcome, report.nodeid, reason))


_RECORDER = pytest.StashKey[Recorder]()


def failure_reason(report: pytest.TestReport) -> str:
    """The one line a failed item gives as its reason: the first line of its failure (what pytest's
    ``FAILED`` short line shows)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    return (text.strip().splitlines() or ["failed"])[0].removeprefix("Failed: ")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _NOTHING_SELECTED in config.stash:
        session.exitstatus = 2  # bad input, as every selection of nothing is (not pytest's 5)
    if _SESSION in config.stash:
        gate_session(config).cache.close()  # an interrupted run leaves compiles queued: drop them
    if hasattr(config, "workerinput") or _SESSION not in config.stash:
        return
    import jax

    from ..catalog.registry import PROGRAMS, declared
    from ..catalog.targets import versions
    from . import results as _results

    s = gate_session(config)
    recorder = config.stash[_RECORDER]
    items, notes = recorder.items, recorder.notes
    passed = exitstatus == 0 and session.testsfailed == 0
    notes[:] = _obsolete_snapshots(config, items, passed) + _recorded_baselines(items)
    claim = config.stash.get(_CLAIM, None)
    if claim is None:
        return
    if claim.note:
        notes.append(claim.note)
    if not items:
        if recorder.gate and claim.path.exists():
            notes.append(
                f"invariants: no gate item recorded anything; {shown(claim.path)} was not written (the "
                "file there is an earlier run's)"
            )
        return
    dev = jax.devices()
    payload = {
        "versions": versions(),
        "runtime": {"platform": dev[0].platform, "device_kind": dev[0].device_kind, "count": len(dev)},
        "targets": {
            t.name: {"mode": t.mode, "scope": t.scope, "unavailable": t.unavailable_reason()}
            for t in s.targets
        },
        "exitstatus": int(exitstatus),
        # A downstream project's own programs: what its report shows by default.
        "declared": list(declared()),
        # Every program of the run, as --programs selects them: the report's --programs reads these.
        "programs": {name: {"kind": p.kind, "tags": sorted(p.tags)} for name, p in PROGRAMS.items()},
        "items": items,
    }
    path = claim.path
    if claim.changed():  # another run, one that takes no lock, wrote it meanwhile: keep both
        path = path.with_name(f"{path.stem}.{os.getpid()}{path.suffix}")
        notes.append(
            f"invariants: {shown(claim.path)} was written by another run meanwhile; this run writes "
            f"{shown(path)}"
        )
    try:
        _results.write(path, payload)
    except InvariantsError as err:
        notes.append(f"invariants: {err}")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under xdist's default distribution (and ``loadgroup``), each target's items (its timed items
    included) and the correctness items go to one worker each (see :mod:`invariants.plugin.xdist`); another
    ``--dist`` is left as asked."""
    if config.getoption("dist") not in ("load", "loadgroup"):
        return None
    from .xdist import scheduler

    return scheduler(config, log, gate_session(config).all_targets)


@pytest.fixture(scope="session")
def gate(request: pytest.FixtureRequest) -> GateSession:
    """The session's gate state: compile cache, structures, targets."""
    return gate_session(request.config)


@pytest.fixture
def structure_snapshot(snapshot: Any) -> Any:
    """syrupy's ``snapshot``, stored per target under ``snapshots/<target>/``, written atomically; a snapshot
    file that cannot be read or written fails its item with one line (see ``snapshot.store``)."""
    from ..snapshot.store import structure_assertion

    return structure_assertion(snapshot)
