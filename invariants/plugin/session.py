"""A gate session: the run's state over its :mod:`.suite`, and what the hooks ask of it from start to end.
Its :class:`Recorder` is a plugin object of one session, so that no module state outlives a session; its
hook runs in the process that reports (the xdist controller), so the results file is the same under xdist.

The hooks import this module only after the backend guard has started JAX: the catalog, the compile cache
and the spec checks import it, and JAX must start in the environment :mod:`invariants.compile.process` set.
"""

from __future__ import annotations

import datetime
import fnmatch
import glob
import math
import shlex
import sys
from pathlib import Path
from typing import Any

import jax
import pytest

from .._errors import InvariantsError
from .._paths import check_output_dir, check_output_file, json_file_of, shown, what_is, write_atomic
from ..catalog.arguments import make_arguments
from ..catalog.programs import Distribution, get_config
from ..compile.artifacts import CompileCache, Watch
from ..compile.process import REQUESTED_PLATFORMS
from ..compile.reproducer import reproducer
from ..kernels import kernel_files
from ..measure.measurement import Measurement, measure
from ..records import results as _results
from ..records.compiled import FailedCompile, Key
from ..scope.select import file_stem
from ..scope.targets import versions
from ..specfile.reader import KnownCompileFailure, scope_of, select_programs
from ..verdict.correctness import Correctness
from . import generate, progress
from .outcomes import versions_line
from .sharding import Sharding
from .snapshots import SnapshotFolders, recorded_baselines
from .suite import Suite, unavailable_targets
from .tree import GateItem, of_gate_item


class GateSession:
    """Per-session state over the run's :class:`~.suite.Suite`: the compile cache, what each compile
    measured, the snapshot and dump folders, the records."""

    def __init__(self, config: pytest.Config, suite: Suite, recorder: Recorder | None = None) -> None:
        self.config = config
        self.suite = suite
        self.specs, self.all_programs, self.programs = suite.specs, suite.all_programs, suite.programs
        self.all_targets, self.targets = suite.all_targets, suite.targets
        self.recorder = recorder or Recorder()
        own = self.suite.project if self.suite.project.own else None
        watch = Watch(
            lambda line: progress.say(config, line),
            every=_seconds(config, "compile_progress", "30", zero=False),
            timeout=_seconds(config, "compile_timeout", "1800", zero=True),
        )
        self.cache = CompileCache(self.all_targets, self.all_programs, own, self.suite.store, watch)
        inconclusive = config.getoption("inconclusive", "warn")
        if inconclusive not in ("warn", "fail"):
            raise InvariantsError(f"--inconclusive {inconclusive!r}: takes warn or fail")
        self.inconclusive_fails = inconclusive == "fail"
        self.updating = bool(config.getoption("--snapshot-update", default=False))
        self.record_baselines = bool(config.getoption("record_baselines"))
        self.snapshots = SnapshotFolders.from_options(
            config, self.all_programs, spec_dirs_given=self.suite.project.own, updating=self.updating
        )
        # Checked now, made only when an item fails.
        self.dump_dir = check_output_dir(config.getoption("hlo_dump_dir"), "--hlo-dump-dir", make=False)
        # pytest-benchmark writes it after the timing: a bad path is one line before anything is timed.
        benchmark_json = config.getoption("benchmark_json", default=None)
        if benchmark_json is not None:
            check_output_file(benchmark_json, "--benchmark-json")
            if benchmark_json.is_file() and not json_file_of(benchmark_json, "benchmarks"):
                raise InvariantsError(
                    f"--benchmark-json {shown(benchmark_json)}: a file that is not pytest-benchmark's JSON; "
                    "give another path, or remove the file"
                )
        self.keep_hlo = bool(config.getoption("keep_hlo"))
        self._measured: dict[Key, Measurement] = {}
        # Each failed compile's first item, which reported it whole; the known failures found compiling.
        self._failed: dict[Key, str] = {}
        self._compiles_now: set[Key] = set()
        self.correctness = Correctness(self.all_programs)
        self.raw = bool(config.getoption("raw_invariants"))
        self._arguments: dict[tuple[str, ...], Any] = {}
        self.nothing_selected: str | None = None
        self.sharding = Sharding.from_options(config)

    @classmethod
    def start(cls, config: pytest.Config) -> GateSession:
        """The session of ``config``: the results file claimed first (by the xdist controller, which writes
        it), so that a bad path is one line before anything else."""
        recorder = Recorder()
        if not hasattr(config, "workerinput"):
            recorder.claim_results(Path(config.getoption("results_json")))
        try:
            s = cls(config, Suite.load(config), recorder)
        except BaseException:
            recorder.release()
            raise
        config.pluginmanager.register(s.recorder, "invariants-recorder")
        if not hasattr(config, "workerinput"):
            config.pluginmanager.register(progress.Relay(config), "invariants-progress")
        return s

    def update_command(
        self, test_file: Path, flag: str, programs: str, target: str | None = None, configs: str | None = None
    ) -> str:
        """The command that records ``programs`` with ``flag``, the way this session was started: ``pytest
        FILE`` with the folders it reads, or the ``gate`` command's prefix, which carries them already."""
        prefix = self.config.getoption("gate_command")
        words = [prefix] if prefix else [f"pytest {shlex.quote(shown(test_file))}"]
        if not prefix:
            options = self.config.option
            words += [f"--spec-dir {shlex.quote(d)}" for d in options.spec_dir or ()]
            for name in ("snapshot_dir", "catalog_snapshot_dir"):
                if value := getattr(options, name):
                    words.append(f"--{name.replace('_', '-')} {shlex.quote(str(value))}")
            words += ["--no-catalog"] if options.no_catalog else []
        words += [f"--targets {target}"] if target else []
        words += [f"--programs {programs}"] + ([f"--configs {configs}"] if configs else []) + [flag]
        return " ".join(words)

    def available(self, target: str) -> str | None:
        return self.all_targets[target].unavailable_reason()

    def measured(self, key: Key) -> Measurement:
        """What the compile of ``key`` measures to, measured once."""
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
            if self.keep_hlo:  # every item's, so that working on a passing or ratcheted one needs no rebuild
                self.dump(key)
        return self._measured[key]

    def known_failure(self, key: Key) -> KnownCompileFailure | None:
        """The ``[[known_compile_failure]]`` that names ``key``, else None."""
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
        """What an item stopped by a failed compile says: a known one xfails; else the compile's first item
        says it whole, every other one line naming it. The earlier run's dumps of that key go first."""
        key = err.key
        first = self._failed.get(key)
        saved = self._replace_dumps(err) if first is None and err.kind != "timeout" else []
        self._failed.setdefault(key, nodeid)
        short = err.first if len(err.first) <= 80 else err.first[:77] + "..."
        said = _results.compile_failed(key.target, key.program, key.config, short)
        known = self.known_failure(key)
        if known is not None:
            raise pytest.xfail.Exception(
                f"{said} ({known.id}: {known.ratchet.reason}; {known.ratchet.issue})", pytrace=False
            )
        if first is not None:
            return f"{said} (the same compile as {first.split('::', 1)[-1]}, reported whole there)"
        if err.kind == "timeout":  # nothing to report upstream yet: a bound the run set
            return f"{said}\n{versions_line()}"
        what_next = (
            "what next: report a compiler error upstream (XLA: https://github.com/openxla/xla/issues) with "
            "the HLO and the reproducer (a tracing error is the program's own); until it is fixed, declare "
            "it in a spec file, and its items xfail until it compiles:"
        )
        declaration = (
            f'  [[known_compile_failure]]\n  id = "..."\n  programs = ["{key.program}"]\n'
            f'  targets = ["{key.target}"]\n  ratchet = {{ reason = "...", issue = "https://..." }}'
        )
        return "\n".join([str(err), versions_line(), *saved, what_next, declaration])

    def _replace_dumps(self, err: FailedCompile) -> list[str]:
        """Replace the gate's own dumps of ``err``'s key with the HLO before optimization and a reproducer;
        the lines that say where (or why not)."""
        key = err.key
        try:
            folder = self._dump_folder(key)
            stem = f"{file_stem(key.program)}.{key.config}"
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
            repro = reproducer(key, self.all_targets[key.target], self.suite.project, err.first, versions())
            write_atomic(script, repro, "--hlo-dump-dir")
        except (InvariantsError, OSError) as why:  # the failure is reported whatever the dump folder does
            return [f"dumps: not saved ({why})"]
        return [hlo_line, f"reproducer: python {shown(script)}"]

    def device_arguments(self, program: str, config: str, distribution: Distribution = "uniform") -> Any:
        """The device arguments a timed ``program`` runs on, made once per signature and distribution so that
        both sides of a ratio read the very same memory."""
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

    def write_diff(self, key: Key, diff: str) -> Path:
        path = self._dump_folder(key) / f"{file_stem(key.program)}.{key.config}.snapshot.diff"
        write_atomic(path, diff + "\n", "--hlo-dump-dir")
        return path

    def dump(self, key: Key) -> Path:
        """Write the optimized HLO, jaxpr and kernel code of ``key`` for CI to upload."""
        compiled = self.cache.get(*key)
        stem = self._dump_folder(key) / f"{file_stem(key.program)}.{key.config}"
        texts = {"hlo.txt": compiled.hlo_text, "jaxpr.txt": compiled.jaxpr, **compiled.kernel_code}
        # An atomic write replaces a link planted there, never writes through it.
        for name, text in texts.items():
            write_atomic(Path(f"{stem}.{name}"), text, "--hlo-dump-dir")
        return stem

    def _dump_folder(self, key: Key) -> Path:
        """The dump folder of ``key``'s target, made when missing; a link there is one line."""
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

    def header_lines(self) -> list[str]:
        dev = jax.devices()
        lines = [
            f"runtime: {dev[0].platform} ({dev[0].device_kind}) x{len(dev)}  "
            f"[JAX_PLATFORMS={REQUESTED_PLATFORMS}]",
            versions_line(),
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
        """After collection: compiles started ahead."""
        # What the selected gate items read, in their order (a skipped item reads nothing): a child
        # compiles no more of its target than that, whatever -k, -m or --shard left out.
        ahead = [i for i in items if isinstance(i, GateItem) and i.get_closest_marker("skip") is None]
        keys = [k for item in ahead for k in item.reads if self.available(k.target) is None]
        self.cache.narrow_plan(keys)
        workers = generate.compile_threads(self.config)
        if workers:
            self.cache.prefetch(keys, workers)

    def deselected(self, gate_items: int, items: list[pytest.Item]) -> None:
        """A ``-k`` / ``-m`` that deselects every gate item and leaves nothing is a selection of nothing: exit
        2, not pytest's 5 (which stands under xdist and ``--collect-only``, where bisect counts on it)."""
        option = self.config.option
        if not gate_items or items or hasattr(self.config, "workerinput") or option.collectonly:
            return
        given = (("-k", option.keyword), ("-m", option.markexpr))
        chosen = " ".join(f"{flag} {value!r}" for flag, value in given if value) or "the selection"
        self.nothing_selected = f"{chosen}: deselects every gate item ({gate_items}), leaving nothing to run"

    def summary_lines(self, reporter: pytest.TerminalReporter | None = None) -> list[str]:
        """The gate's lines of the terminal summary; ``reporter``'s short summary then lists xfailed items
        only where ``-rx`` asks."""
        lines = list(self.recorder.notes)
        lines += [self.sharding.summary_line()] if self.sharding is not None else []
        lines += failure_table(self.recorder.items)
        listed = _quiet_xfails(self.config, reporter) if reporter is not None else True
        lines += ratchet_lines(self.recorder.items, listed=listed)
        skipped = unavailable_targets(self.targets)
        if skipped:
            lines.append(f"invariants: skipped, cannot compile here: {skipped}")
        relations, warnings = time_relations(self.recorder.items)
        lines += relations
        lines += self.cache.summary_lines(
            self.recorder.items, sum(m.seconds for m in self._measured.values())
        )
        return lines + warnings

    def finish(self, exitstatus: int, passed: bool) -> None:
        """The run's end: queued compiles dropped and, in the process that reports, the results written."""
        self.cache.close()
        if hasattr(self.config, "workerinput"):
            return
        recorder = self.recorder
        delete = bool(self.config.getoption("delete_obsolete_snapshots", default=False))
        recorder.notes[:] = self.snapshots.obsolete(
            self.all_targets, recorder.items, passed, updating=self.updating, delete=delete
        ) + recorded_baselines(recorder.items)
        recorder.write_results(self.run_facts(exitstatus), empty=self.sharding is not None)

    def run_facts(self, exitstatus: int) -> dict[str, Any]:
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
            "declared": list(self.all_programs.declared),
            "programs": {
                name: {"kind": p.kind, "tags": sorted(p.tags)} for name, p in self.all_programs.items()
            },
            **pytest_counts(self.config),
            **(self.sharding.facts() if self.sharding is not None else {}),
        }

    def close(self) -> None:
        """The results path released; a selection of nothing, or an unwritten results file, said last."""
        self.recorder.release()
        if self.nothing_selected is not None:
            sys.stderr.write(f"error: {self.nothing_selected}\n")
        if self.recorder.write_error is not None:
            sys.stderr.write(f"{self.recorder.write_error}\n")


def _seconds(config: pytest.Config, name: str, default: str, zero: bool) -> float:
    """An option's seconds: positive and finite (``zero``: or 0, for none); else one line."""
    value = config.getoption(name, default)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and (seconds > 0 or (zero and seconds == 0))):
        flag = "--" + name.replace("_", "-")
        raise InvariantsError(
            f"{flag} {value!r}: takes a positive number of seconds" + (" (0: no bound)" if zero else "")
        )
    return seconds


# What the gate writes in its dump folder for a key, beside the kernel code files.
_DUMP_NAMES = ("hlo.txt", "jaxpr.txt", "snapshot.diff", "before_optimizations.txt", "repro.py")


def pytest_counts(config: pytest.Config) -> dict[str, Any]:
    """``{"pytest": {outcome: n}}`` as pytest's last line counts them; empty without its reporter."""
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


def _quiet_xfails(config: pytest.Config, reporter: pytest.TerminalReporter) -> bool:
    """Whether pytest will list each xfailed item: a ``-ra`` would bury the result under them, so only an
    explicit ``x`` or ``A`` does; :func:`ratchet_lines` says them a line per ratchet instead."""
    chars = config.option.reportchars or ""
    if "x" in chars or "A" in chars or "a" not in chars:
        return "x" in chars or "A" in chars
    reporter.reportchars = reporter.reportchars.replace("x", "")
    return False


def ratchet_lines(items: list[_results.Record], listed: bool) -> list[str]:
    """The known regressions the ratchets hold, one line per ratchet: how many items, on which targets."""
    held: dict[str, list[str]] = {}  # each ratchet's items, by their targets
    for it in items:
        if it.outcome == "xfailed":
            failed = _results.compile_failure(it)  # a known compile failure records no target
            name = it.id or ("known compile failures" if failed is not None else it.kind)
            held.setdefault(name, []).append(str(failed.target if failed is not None else it.target))
    if not held:
        return []
    total = sum(map(len, held.values()))
    lines = [
        f"invariants: {total} xfailed, known regressions the ratchets hold"
        + ("" if listed else " (-rx lists each item):")
    ]
    wide = max(map(len, held))
    for name, targets in sorted(held.items()):
        n, on = len(targets), ", ".join(sorted(set(targets)))
        lines.append(f"  {name:<{wide}}  {n:>3} item{'s' if n != 1 else ' '}  {on}")
    return lines


def time_relations(items: list[_results.Record]) -> tuple[list[str], list[str]]:
    """Each time relation's ratio, interval, bound and verdict, a row each; and a warning line for each
    inconclusive one, which passes unless ``--inconclusive fail``."""
    ratios = sorted(
        (i for i in items if isinstance(i, _results.Ratio)), key=lambda r: (r.target, r.a, r.b, r.config)
    )
    rows = [
        (f"time({r.a}) / time({r.b}) [{r.config}]", str(r.target), _interval(r), f"<= {r.threshold:g}")
        for r in ratios
    ]
    if not rows:
        return [], []
    wide = [max(len(row[i]) for row in rows) for i in range(4)]
    table = ["invariants: time relations (median [95% interval], bound, verdict):"] + [
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, wide, strict=True)) + f"  {r.verdict}"
        for r, row in zip(ratios, rows, strict=True)
    ]
    warnings = [
        f"invariants: warning: {text} on {target} is inconclusive: {interval} straddles {bound} "
        f"({'failed' if r.outcome == 'failed' else 'passed'}; --inconclusive fail makes it fail)"
        for r, (text, target, interval, bound) in zip(ratios, rows, strict=True)
        if r.verdict == "inconclusive"
    ]
    return table, warnings


def _interval(r: _results.Ratio) -> str:
    return f"{r.median:.3g} [{r.low:.3g}, {r.high:.3g}]"


def failure_table(items: list[_results.Record]) -> list[str]:
    """One row per failed structure or invariant item: its program, configuration, target and failure."""
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


class Recorder:
    """This run's records and the lines for the terminal summary."""

    def __init__(self) -> None:
        self.items: list[_results.Record] = []
        self.gate = False  # a gate item was selected (so a results file was expected)
        self.notes: list[str] = []
        self.claim: _results.Claim | None = None
        # Why the results file could not be written: the run's last line, and not green.
        self.write_error: str | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not of_gate_item(report):
            return
        self.gate = True
        if report.when != "call" and not (report.when == "setup" and report.skipped):
            return
        outcome = "xfailed" if hasattr(report, "wasxfail") else report.outcome
        reason = failure_reason(report) if report.failed else None
        said = _results.recorded_failure(report.user_properties)
        # A failure the item did not say (an exception of the gate's own) is an error.
        failure = (said or _results.Failure("error", reason or "")) if report.failed else None
        recorded = [
            entry
            for name, value in report.user_properties
            if (entry := _results.entry(name, value, outcome, report.nodeid, reason, failure)) is not None
        ]
        if recorded:
            self.items.extend(recorded)
        elif report.failed:
            self.items.append(_results.error_entry(outcome, report.nodeid, reason, failure))
        elif outcome == "xfailed":  # a known compile failure: nothing compiled to record
            self.items.append(_results.error_entry(outcome, report.nodeid, str(report.wasxfail), said))
        elif report.skipped and outcome == "skipped":
            # So that the file's skips are pytest's: a run of skips alone is seen.
            why = skip_reason(report)
            self.items.append(_results.skipped_entry(report.nodeid, why, report.user_properties))

    def claim_results(self, path: Path) -> None:
        """Check and claim the results path when the run starts: a bad one is one line before anything
        compiles."""
        if not path.is_dir():  # a directory: _results.claim says so, with a file path to give instead
            # A folder that takes no file although os.access says it would (a read-only mount): tried now.
            check_output_file(path, "--results-json")
        self.claim = _results.claim(path)

    def release(self) -> None:
        if self.claim is not None:
            self.claim.release()

    def write_results(self, run: dict[str, Any], empty: bool = False) -> None:
        """Write ``run`` with the items; no file, and a note, when nothing was recorded (unless ``empty``:
        a shard with nothing to do writes that it had none)."""
        claim = self.claim
        if claim is None:
            return
        if claim.note:
            self.notes.append(claim.note)
        if not self.items and not empty:
            if self.gate:
                self.notes.append(
                    f"invariants: no gate item recorded anything; {shown(claim.path)} was not written"
                )
            return
        path = claim.path
        try:
            _results.write(path, run, self.items)
        except InvariantsError as err:
            self.write_error = f"invariants: {err}"


def skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    said = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
    return said.removeprefix("Skipped: ").strip() or "skipped"


def failure_reason(report: pytest.TestReport) -> str:
    """The first line of a failed item's failure, as pytest's ``FAILED`` short line shows it."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    return (text.strip().splitlines() or ["failed"])[0].removeprefix("Failed: ")
