"""A gate session: the suite the options selected (:mod:`.suite`), the compile cache and what is parsed
from it, and what the hooks of :mod:`invariants.plugin.hooks` ask of it from the start of a run to its end.

Its neighbours hold the session's other jobs: :mod:`.snapshots` where snapshots live and which are obsolete,
:mod:`.generate` which items exist, :mod:`.recorder` what the items recorded and the results file.

The hooks import this module only after the backend guard has started JAX (``pytest_configure``): the
catalog, the compile cache and the spec checks import it, and JAX must start after
:mod:`invariants.compile.process` has set its environment, inside the guard.
"""

from __future__ import annotations

import datetime
import fnmatch
import glob
import shlex
import sys
from pathlib import Path
from typing import Any

import jax
import pytest

from .._errors import InvariantsError
from .._paths import check_output_dir, shown, what_is, write_atomic
from ..catalog.arguments import make_arguments
from ..catalog.programs import Distribution, get_config
from ..catalog.registry import Programs
from ..catalog.targets import Target, versions
from ..compile.artifacts import CompileCache
from ..compile.process import REQUESTED_PLATFORMS
from ..compile.record import FailedCompile, Key
from ..compile.reproducer import reproducer
from ..kernels import kernel_files
from ..measure.measurement import Measurement, measure
from ..specfile.reader import KnownCompileFailure, Spec, scope_of, select_programs
from ..verdict.correctness import Correctness
from . import generate
from . import results as _results
from .recorder import Recorder
from .snapshots import SnapshotFolders, recorded_baselines
from .suite import Suite, unavailable_targets
from .tree import prefetch_keys


class GateSession:
    """Per-session state over the run's :class:`~.suite.Suite` (its programs, specs, targets and
    configurations, loaded before the session): the compile cache, what each compile measured
    (:meth:`measured`), where snapshots are read and written (:attr:`snapshots`), the dump folder, the
    records (:attr:`recorder`)."""

    def __init__(self, config: pytest.Config, suite: Suite, recorder: Recorder | None = None) -> None:
        self.config = config
        self.suite = suite
        self.recorder = recorder or Recorder()
        own = self.suite.project if self.suite.project.own else None
        self.cache = CompileCache(self.all_targets, self.all_programs, own, self.suite.store)
        # Read once here, for the folders, the items and the run's end (syrupy registers --snapshot-update).
        self.updating = bool(config.getoption("--snapshot-update", default=False))
        self.record_baselines = bool(config.getoption("record_baselines"))
        self.snapshots = SnapshotFolders.from_options(
            config, self.all_programs, spec_dirs_given=self.suite.project.own, updating=self.updating
        )
        # Checked now, made only when an item fails: an unwritable folder would otherwise fail that item
        # with a PermissionError in place of its own failure.
        self.dump_dir = check_output_dir(config.getoption("hlo_dump_dir"), "--hlo-dump-dir", make=False)
        self._measured: dict[Key, Measurement] = {}
        # Each failed compile's first item (its node id), which reported it whole; the known compile
        # failures found compiling, said once each.
        self._failed: dict[Key, str] = {}
        self._compiles_now: set[Key] = set()
        self.correctness = Correctness(self.all_programs)
        self.raw = bool(config.getoption("raw_invariants"))
        self._arguments: dict[tuple[str, ...], Any] = {}
        # Set when -k / -m deselect every gate item (see deselected): said last, and the exit status is 2.
        self.nothing_selected: str | None = None

    @classmethod
    def start(cls, config: pytest.Config) -> GateSession:
        """The session of ``config``, wired into pytest: the results file claimed first (not by an xdist
        worker: the controller writes it), so that bad input found after it leaves no earlier run's file
        there; its recorder registered."""
        recorder = Recorder()
        if not hasattr(config, "workerinput"):
            recorder.claim_results(Path(config.getoption("results_json")))
        try:
            s = cls(config, Suite.load(config), recorder)
        except BaseException:
            try:
                recorder.discard_earlier()
            finally:
                recorder.release()
            raise
        config.pluginmanager.register(s.recorder, "invariants-recorder")
        return s

    # What the suite loaded, as the items and the hooks read it of the session.

    @property
    def specs(self) -> list[Spec]:
        return self.suite.specs

    @property
    def all_programs(self) -> Programs:
        return self.suite.all_programs

    @property
    def programs(self) -> list[str]:
        return self.suite.programs

    @property
    def all_targets(self) -> dict[str, Target]:
        return self.suite.all_targets

    @property
    def targets(self) -> list[Target]:
        return self.suite.targets

    @property
    def partners(self) -> list[str]:
        return self.suite.partners

    # ----------------------------------------------------------------- what the items ask of the session

    def update_command(
        self, test_file: Path, flag: str, programs: str, target: str | None = None, configs: str | None = None
    ) -> str:
        """The command that records ``programs`` (``flag``: ``--snapshot-update`` or ``--record-baselines``,
        with any options of its own), on ``target`` or on every target present, in ``configs`` or all, the
        way this session was started: ``pytest FILE`` in a checkout, with the folders it reads
        (``--spec-dir``, ``--snapshot-dir``, ...); ``python -m invariants gate ...`` in a downstream
        project, whose prefix carries them already."""
        prefix = self.config.getoption("gate_command")
        words = [prefix] if prefix else [f"pytest {shlex.quote(shown(test_file))}"]
        if not prefix:
            options = self.config.option
            words += [f"--spec-dir {shlex.quote(d)}" for d in options.spec_dir or ()]
            for name, value in (
                ("--snapshot-dir", options.snapshot_dir),
                ("--catalog-snapshot-dir", options.catalog_snapshot_dir),
            ):
                if value:
                    words.append(f"{name} {shlex.quote(str(value))}")
            words += ["--no-catalog"] if options.no_catalog else []
        words += [f"--targets {target}"] if target else []
        words += [f"--programs {programs}"] + ([f"--configs {configs}"] if configs else []) + [flag]
        return " ".join(words)

    def available(self, target: str) -> str | None:
        return self.all_targets[target].unavailable_reason()

    def measured(self, key: Key) -> Measurement:
        """What the compile of ``key`` measures to (:func:`invariants.measure.measurement.measure`), measured
        once. HLO or kernel code the parsers do not understand is an ``InvariantsError`` naming FILE:LINE,
        for that key's items."""
        key = Key(*key)
        if key not in self._measured:
            compiled = self.cache.get(*key)
            known = self.known_failure(key)
            if known is not None and key not in self._compiles_now:
                self._compiles_now.add(key)  # one item fails for it; the others read the compile
                pytest.fail(
                    f"known compile failure fixed: {key.program}[{key.config}] on {key.target} now compiles; "
                    f"drop {known.id} in {known.where} ({known.ratchet.issue})",
                    pytrace=False,
                )
            self._measured[key] = measure(compiled, self.all_targets[key.target])
        return self._measured[key]

    def known_failure(self, key: Key) -> KnownCompileFailure | None:
        """The ``[[known_compile_failure]]`` that names ``key`` (its program, configuration and target),
        else None."""
        for spec in self.specs:
            if not any(fnmatch.fnmatchcase(key.target, t) for t in spec.targets):
                continue
            for known in spec.known_compile_failures:
                if (
                    any(fnmatch.fnmatchcase(key.target, t) for t in known.targets)
                    and any(fnmatch.fnmatchcase(key.config, c) for c in known.configs)
                    and key.program in select_programs(known.programs, scope_of(spec, self.all_programs))
                ):
                    return known
        return None

    def compile_failure(self, err: FailedCompile, nodeid: str) -> str:
        """What an item stopped by a failed compile says. A known one (:meth:`known_failure`) xfails with
        its reason. Else the first item of that compile says it whole (the compiler's first line, the
        versions, where the HLO before optimization and a reproducer were saved, what to do next), and
        every other item one line naming that first item. Either way the earlier run's dumps of that key
        are gone (:meth:`_replace_dumps`), so none is taken for this run's."""
        key = err.key
        first = self._failed.get(key)
        saved = self._replace_dumps(err) if first is None else []
        self._failed.setdefault(key, nodeid)
        said = _results.compile_failed(key.target, key.program, key.config, _short(err.first))
        known = self.known_failure(key)
        if known is not None:
            raise pytest.xfail.Exception(
                f"{said} ({known.id}: {known.ratchet.reason}; {known.ratchet.issue})", pytrace=False
            )
        if first is not None:
            return f"{said} (the same compile as {first.split('::', 1)[-1]}, reported whole there)"
        stated = ", ".join(f"{k} {v}" for k, v in versions().items())
        what_next = (
            "what next: report a compiler error upstream (XLA: https://github.com/openxla/xla/issues) with "
            "the HLO and the reproducer (a tracing error is the program's own); until it is fixed, declare "
            "it in a spec file, and its items xfail until it compiles:"
        )
        declaration = (
            f'  [[known_compile_failure]]\n  id = "..."\n  programs = ["{key.program}"]\n'
            f'  targets = ["{key.target}"]\n  ratchet = {{ reason = "...", issue = "https://..." }}'
        )
        return "\n".join([str(err), f"versions: {stated}", *saved, what_next, declaration])

    def _replace_dumps(self, err: FailedCompile) -> list[str]:
        """Remove the gate's own dumps of ``err``'s key (an earlier run's HLO, jaxpr, kernel code, diff),
        then save what this failure leaves: the HLO before optimization and a one-file reproducer. The
        lines that say where (or why not)."""
        key = err.key
        try:
            folder = self._dump_folder(key)
            stem = f"{key.program}.{key.config}"
            for path in folder.glob(f"{glob.escape(stem)}.*"):
                name = path.name[len(stem) + 1 :]
                if name in _DUMP_NAMES or kernel_files([name]):
                    path.unlink(missing_ok=True)  # a link goes, never what it names
            hlo = folder / f"{stem}.before_optimizations.txt"
            if err.unoptimized is not None:
                write_atomic(hlo, err.unoptimized, "--hlo-dump-dir")
                hlo_line = f"HLO before optimization: {shown(hlo)}"
            else:
                hlo_line = "HLO before optimization: none (it failed while tracing, before lowering)"
            script = folder / f"{stem}.repro.py"
            target = self.all_targets[key.target]
            write_atomic(
                script, reproducer(key, target, self.suite.project, err.first, versions()), "--hlo-dump-dir"
            )
        except (InvariantsError, OSError) as why:  # the failure is reported whatever the dump folder does
            return [f"dumps: not saved ({why})"]
        return [hlo_line, f"reproducer: python {shown(script)}"]

    def device_arguments(self, program: str, config: str, distribution: Distribution = "uniform") -> Any:
        """The arguments a timed ``program`` runs on, on the device: one set per argument signature and index
        distribution, made once per run, so that both sides of a ratio of two programs read the very same
        memory (cache and page placement cannot differ between them). A program with params brings its own
        (its parameters and indices)."""
        p = self.all_programs[program]
        key = (p.kind, config, distribution, program if p.inputs else "")
        if key not in self._arguments:
            source = (
                p
                if p.inputs
                else next(q for q in self.all_programs.values() if q.kind == p.kind and not q.inputs)
            )
            self._arguments[key] = jax.device_put(make_arguments(source, get_config(config), distribution))
        return self._arguments[key]

    @property
    def parse_seconds(self) -> float:
        return sum(m.seconds for m in self._measured.values())

    def write_diff(self, key: Key, diff: str) -> Path:
        """Write the whole snapshot diff of a failing ``key`` beside its dumps; return its path."""
        folder = self._dump_folder(key)
        path = folder / f"{key.program}.{key.config}.snapshot.diff"
        write_atomic(path, diff + "\n", "--hlo-dump-dir")
        return path

    def dump(self, key: Key) -> Path:
        """Write the optimized HLO and the jaxpr of ``key`` for CI to upload; return the folder."""
        compiled = self.cache.get(*key)
        folder = self._dump_folder(key)
        stem = f"{key.program}.{key.config}"
        # Atomic writes replace whatever is at each path (a link planted there included), never write
        # through it into a file the gate did not make.
        write_atomic(folder / f"{stem}.hlo.txt", compiled.hlo_text, "--hlo-dump-dir")
        write_atomic(folder / f"{stem}.jaxpr.txt", compiled.jaxpr, "--hlo-dump-dir")
        for name, text in compiled.kernel_code.items():  # the code an item on it read: PTX or LLVM IR
            write_atomic(folder / f"{stem}.{name}", text, "--hlo-dump-dir")
        return folder / stem

    def _dump_folder(self, key: Key) -> Path:
        """The dump folder of ``key``'s target, made when missing; a link there (to a folder the gate did
        not make) is one line, never written into."""
        folder = self.dump_dir / key.target
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            what = "a link" if folder.is_symlink() else what_is(folder)
            raise InvariantsError(f"--hlo-dump-dir {shown(folder)}: {what}, not a folder the gate made")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as err:  # a link to nowhere on the way, a file where a folder should be, a full disk
            why = "a link to a folder that does not exist" if self.dump_dir.is_symlink() else err.strerror
            raise InvariantsError(
                f"--hlo-dump-dir {shown(self.dump_dir)}: cannot make {key.target}/ in it ({why or err})"
            ) from None
        return folder

    # ------------------------------------------------------------------------- what the hooks ask of it

    def header_lines(self) -> list[str]:
        """The lines above the items: the runtime, the versions, each selected target and its state."""
        dev = jax.devices()
        lines = [
            f"runtime: {dev[0].platform} ({dev[0].device_kind}) x{len(dev)}  "
            f"[JAX_PLATFORMS={REQUESTED_PLATFORMS}]",
            "versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()),
        ]
        for t in self.targets:
            reason = t.unavailable_reason()
            state = "ok" if reason is None else f"skipped: {reason}"
            lines.append(f"target {t.name}: {t.mode}, {t.scope} — {state}")
        lines.append(self.cache.header_line())
        claim = self.recorder.claim
        if claim is not None and claim.note:
            lines.append(claim.note)
        return lines

    def collected(self, items: list[pytest.Item]) -> None:
        """After collection: the earlier run's results removed when gate items were collected (a gate run:
        see :meth:`Recorder.discard_earlier`), compiles started ahead of the items."""
        if any(item.get_closest_marker("gate") is not None for item in items):
            self.recorder.discard_earlier()
        workers = generate.compile_threads(self.config)
        if workers:
            keys = prefetch_keys(items)
            self.cache.prefetch([k for k in keys if self.available(k.target) is None], workers)

    def deselected(self, gate_items: int, items: list[pytest.Item]) -> None:
        """A ``-k`` / ``-m`` that deselects every gate item (``gate_items`` before it) and leaves nothing else
        is a selection of nothing: one line and exit 2, as ``--programs`` matching nothing is, not pytest's
        "no tests ran" (exit 5). Under xdist each worker collects for itself, and pytest's exit 5 stands; so
        it does for ``--collect-only``, which runs nothing anyway (bisect counts a selection so)."""
        option = self.config.option
        if not gate_items or items or hasattr(self.config, "workerinput") or option.collectonly:
            return
        given = (("-k", option.keyword), ("-m", option.markexpr))
        chosen = " ".join(f"{flag} {value!r}" for flag, value in given if value) or "the selection"
        self.nothing_selected = f"{chosen}: deselects every gate item ({gate_items}), leaving nothing to run"
        self.recorder.discard_earlier()

    def summary_lines(self, reporter: Any = None) -> list[str]:
        """The gate's lines of the terminal summary: the notes of the run's end, what failed, the known
        regressions the ratchets hold, the targets that could not compile here (their items skipped), the
        compile time. ``reporter``: pytest's terminal reporter, whose short summary (printed after these
        lines) then lists xfailed items only where ``-rx`` asks."""
        lines = list(self.recorder.notes)
        lines += failure_table(self.recorder.items)
        listed = _quiet_xfails(self.config, reporter) if reporter is not None else True
        lines += ratchet_lines(self.recorder.items, listed=listed)
        skipped = unavailable_targets(self.targets)
        if skipped:
            lines.append(f"invariants: skipped, cannot compile here: {skipped}")
        lines += self.cache.summary_lines(self.recorder.items, self.parse_seconds)
        return lines

    def finish(self, exitstatus: int, passed: bool) -> None:
        """The run's end: queued compiles dropped (an interrupted run leaves some) and, in the process that
        reports, the obsolete snapshots and the baselines recorded named, and the results file written."""
        self.cache.close()
        if hasattr(self.config, "workerinput"):
            return
        recorder = self.recorder
        delete = bool(self.config.getoption("delete_obsolete_snapshots", default=False))
        recorder.notes[:] = self.snapshots.obsolete(
            self.all_targets, recorder.items, passed, updating=self.updating, delete=delete
        ) + recorded_baselines(recorder.items)
        recorder.write_results(self.run_facts(exitstatus))

    def run_facts(self, exitstatus: int) -> dict[str, Any]:
        """What the results file says of the run beside its items."""
        dev = jax.devices()
        return {
            "versions": versions(),
            "runtime": {
                "platform": dev[0].platform,
                "device_kind": dev[0].device_kind,
                "count": len(dev),
                "date": datetime.datetime.now(datetime.UTC).date().isoformat(),
            },
            "targets": {
                t.name: {"mode": t.mode, "scope": t.scope, "unavailable": t.unavailable_reason()}
                for t in self.targets
            },
            "exitstatus": int(exitstatus),
            # A downstream project's own programs: what its report shows by default.
            "declared": list(self.all_programs.declared),
            # Every program of the run, as --programs selects them: the report's --programs reads these.
            "programs": {
                name: {"kind": p.kind, "tags": sorted(p.tags)} for name, p in self.all_programs.items()
            },
            **pytest_counts(self.config),
        }

    def close(self) -> None:
        """pytest's unconfigure: the results path released, and the selection of nothing, or the results
        file that could not be written, said last (after pytest's own summary line)."""
        self.recorder.release()
        if self.nothing_selected is not None:
            sys.stderr.write(f"Exit: {self.nothing_selected}\n")
        if self.recorder.write_error is not None:
            sys.stderr.write(f"{self.recorder.write_error}\n")


# What the gate writes in its dump folder for a key, beside the kernel code files (kernel_files): see
# GateSession.dump, write_diff and _replace_dumps.
_DUMP_NAMES = ("hlo.txt", "jaxpr.txt", "snapshot.diff", "before_optimizations.txt", "repro.py")


def _short(first: str, width: int = 80) -> str:
    """A compiler's first line, cut to ``width`` characters for a line that repeats it."""
    return first if len(first) <= width else first[: width - 3] + "..."


def pytest_counts(config: pytest.Config) -> dict[str, Any]:
    """``{"pytest": {outcome: n}}``: each outcome as pytest's last line counts it (its terminal reporter's
    reports, skipped modules included); empty without the terminal reporter."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    stats = getattr(reporter, "stats", None)
    if not isinstance(stats, dict):
        return {}
    return {
        "pytest": {
            key: sum(1 for r in stats.get(key, []) if getattr(r, "count_towards_summary", True))
            for key in _results.PYTEST_OUTCOMES
        }
    }


def _quiet_xfails(config: pytest.Config, reporter: Any) -> bool:
    """A ``-ra`` (the project's addopts, or the user's) lists every xfailed item, a hundred and more lines
    of known regressions that bury the result: the gate says them in a line per ratchet instead
    (:func:`ratchet_lines`), and an explicit ``x`` (``-rx``, ``-rfx``) or ``-rA`` (everything) still lists
    each. Whether pytest will list them."""
    chars = config.option.reportchars or ""
    if "x" in chars or "A" in chars or "a" not in chars:
        return "x" in chars or "A" in chars
    reporter.reportchars = reporter.reportchars.replace("x", "")
    return False


def ratchet_lines(items: list[_results.Record], listed: bool) -> list[str]:
    """The known regressions the ratchets hold (xfailed items), one line per ratchet: how many items, on
    which targets. ``listed``: pytest lists each item too (``-rx``); else the last line says how to."""
    held: dict[str, list[_results.Record]] = {}
    where: dict[str, set[str]] = {}
    for it in items:
        if it.outcome == "xfailed":
            failed = _results.compile_failure(it)  # a known compile failure's item records no target
            name = it.id or ("known compile failures" if failed is not None else it.kind)
            held.setdefault(name, []).append(it)
            where.setdefault(name, set()).add(str(failed.target if failed is not None else it.target))
    if not held:
        return []
    total = sum(map(len, held.values()))
    lines = [
        f"invariants: {total} xfailed, known regressions the ratchets hold"
        + ("" if listed else " (-rx lists each item):")
    ]
    wide = max(map(len, held))
    for name, its in sorted(held.items()):
        targets = ", ".join(sorted(where[name]))
        lines.append(f"  {name:<{wide}}  {len(its):>3} item{'s' if len(its) != 1 else ' '}  {targets}")
    return lines


def failure_table(items: list[_results.Record]) -> list[str]:
    """The run's end, when items failed: one row per failed structure or invariant item, its program,
    configuration and target, and what its :class:`~invariants.plugin.results.Failure` says."""
    rows = []
    for it in items:
        if it.outcome != "failed" or it.kind not in ("structure", "invariant"):
            continue
        said = it.failure.what if it.failure is not None else it.reason or ""
        what = f"structure: {said}" if it.kind == "structure" else f"{it.id}: {said}"
        what = what if len(what) <= 120 else what[:117] + "..."
        rows.append((f"{'~'.join(it.program_names())} [{it.config}]", str(it.target), what))
    if not rows:
        return []
    wide = [max(len(r[i]) for r in rows) for i in (0, 1)]
    return ["invariants: what failed, by program and target:"] + [
        f"  {p:<{wide[0]}}  {t:<{wide[1]}}  {w}" for p, t, w in sorted(rows)
    ]
