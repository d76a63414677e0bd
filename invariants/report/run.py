"""The report's model of a run: results files (and pytest-benchmark JSON) read and merged into a :class:`Run`.

The records are :mod:`invariants.records.results`'; a :class:`Run` holds them by kind and the throughput rows
the tables and the plot show. Bad input is one line (:class:`InvariantsError`), a timed record whose
verdict is not the one its interval and bound decide included.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace

from .._errors import InvariantsError
from ..records import results as _results
from ..records.results import Record


@dataclass(frozen=True)
class Throughput:
    """A ratio ``t_a / t_b``, or an efficiency against a memory stream: its median and interval, and its
    bound (a ratio's threshold above, an efficiency's floor below; None when only measured)."""

    kind: str  # "ratio" | "efficiency"
    nodeid: str
    target: str
    label: str  # "a / b" for a ratio, the program for an efficiency
    config: str
    value: float
    low: float
    high: float
    bound: float | None
    verdict: str | None
    outcome: str | None  # None from a benchmark JSON
    id: str = ""
    predicted: float | None = None  # the TPU compiler's estimated-cycles ratio
    clock: str = ""
    wall_ratio: float | None = None  # beside a device-clock ratio
    baseline_provenance: str = ""


@dataclass
class Run(_results.Results):
    """A results file's records and what the report adds: the files read, their throughput rows, and the
    programs shown and how they were chosen."""

    sources: list[str] = field(default_factory=list)
    throughput: list[Throughput] = field(default_factory=list)
    focus: tuple[list[str], str] | None = None

    def of_kind(self, kind: str) -> list[Record]:
        return [i for i in self.items if i.kind == kind]

    @property
    def runtime_target(self) -> str:
        runtime = (name for name, t in self.targets.items() if t.get("mode") == "runtime")
        return next(runtime, str(self.runtime.get("platform", "runtime")))


def _read_json(path: str | Path, what: str) -> object:
    p = Path(path)
    if not p.is_file():
        raise InvariantsError(f"{p}: no such {what} file")
    try:
        return json.loads(p.read_text())
    except UnicodeDecodeError:
        raise InvariantsError(f"{p}: not a {what} file (not text)") from None
    except json.JSONDecodeError as err:
        raise InvariantsError(f"{p}:{err.lineno}: not JSON ({err.msg})") from None


def load_results(path: str | Path) -> Run:
    data = _results.read(path)
    timed = [i for i in data.items if isinstance(i, _results.Ratio | _results.Efficiency)]
    try:
        throughput = [_throughput_of(i, i.outcome) for i in timed]
    except InvariantsError as err:
        raise InvariantsError(f"{path}: {err}") from None
    return Run(**vars(data), sources=[str(path)], throughput=throughput)


def merge(runs: Sequence[Run]) -> Run:
    """One run of several results files of one checkout; a version that differs is one line: its numbers
    would not belong in the same tables. The shards of a split run (``--shard``) must all be there, once."""
    check_shards(runs)
    first = runs[0]
    pytest = dict.fromkeys(_results.PYTEST_OUTCOMES, 0)
    merged = Run([], dict(first.versions), dict(first.runtime), pytest=pytest)
    for run in runs:
        for name, version in run.versions.items():
            if merged.versions.setdefault(name, version) != version:
                raise InvariantsError(
                    f"{run.sources[0]}: {name} {version} differs from {merged.versions[name]} in "
                    f"{first.sources[0]}; use --compare for two different runs"
                )
        merged.sources += run.sources
        merged.targets.update(run.targets)
        merged.exitstatus = max(merged.exitstatus, run.run_exitstatus())
        merged.items += run.items
        merged.throughput += run.throughput
        merged.declared += [p for p in run.declared if p not in merged.declared]
        merged.programs.update(run.programs)
        if merged.pytest is not None and run.pytest is not None:
            merged.pytest = {k: merged.pytest[k] + run.pytest.get(k, 0) for k in merged.pytest}
        else:
            merged.pytest = None
    return merged


def check_shards(runs: Sequence[Run]) -> None:
    """Files of a split run: every shard of one selection, each once; a run that is not a shard with none
    of them. Else one line naming the file."""
    sharded = [r for r in runs if r.shard is not None]
    if not sharded:
        return
    first = sharded[0]
    assert first.shard is not None
    seen: dict[int, str] = {}
    for run in runs:
        where, shard = run.sources[0], run.shard
        if shard is None:
            raise InvariantsError(f"{where}: not a shard (no --shard), merged with shards of a split run")
        if (shard.count, shard.selection) != (first.shard.count, first.shard.selection):
            raise InvariantsError(
                f"{where}: shard {shard.index}/{shard.count} of another run than {first.sources[0]}'s "
                f"(selection {shard.selection}, not {first.shard.selection} split {first.shard.count} ways)"
            )
        if shard.index in seen:
            raise InvariantsError(
                f"{where}: shard {shard.index}/{shard.count} again (also {seen[shard.index]})"
            )
        seen[shard.index] = where
    missing = [f"{k}/{first.shard.count}" for k in range(1, first.shard.count + 1) if k not in seen]
    if missing:
        raise InvariantsError(
            f"{', '.join(r.sources[0] for r in runs)}: shard {', '.join(missing)} missing; a split run is "
            "reported whole, from every shard's results file"
        )


def focused(run: Run, programs: Sequence[str], how: str) -> Run:
    """Only the entries about one of ``programs``; error entries, which name no program, always stay."""
    chosen = set(programs)

    def keep(item: Record) -> bool:
        named = item.program_names()
        return not named or bool(chosen & set(named))

    def keep_row(row: Throughput) -> bool:
        sides = [part.strip().split("[", 1)[0] for part in row.label.split("/")]
        return bool(chosen & set(sides))

    return replace(
        run,
        items=[i for i in run.items if keep(i)],
        throughput=[t for t in run.throughput if keep_row(t)],
        focus=(list(programs), how),
        pytest=None,
    )


def known_programs(run: Run) -> dict[str, SimpleNamespace]:
    """The run's programs with a kind and tags, as the selection grammar reads them."""
    known = {
        name: SimpleNamespace(kind=info.get("kind"), tags=frozenset(info.get("tags") or ()))
        for name, info in run.programs.items()
    }
    for item in run.items:
        for name in item.program_names():
            known.setdefault(name, SimpleNamespace(kind=None, tags=frozenset()))
    return known


def load_benchmarks(path: str | Path, default_target: str = "runtime") -> list[Throughput]:
    """Throughput rows from pytest-benchmark's JSON, whose ``extra_info`` holds the gate item's record;
    someone else's benchmarks are skipped."""
    data = _read_json(path, "benchmark JSON")
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise InvariantsError(
            f"{path}: not a pytest-benchmark JSON file (expected an object with a 'benchmarks' list)"
        )
    rows = [_benchmark_row(path, n, bench, default_target) for n, bench in enumerate(data["benchmarks"])]
    return [row for row in rows if row is not None]


def _benchmark_row(path: str | Path, n: int, bench: object, default_target: str) -> Throughput | None:
    if not isinstance(bench, dict) or not isinstance(bench.get("extra_info", {}), dict):
        raise InvariantsError(f"{path}: benchmarks[{n}] is not an object with an 'extra_info' object")
    info = bench.get("extra_info", {})
    if info.get("kind") not in ("ratio", "efficiency"):
        return None
    nodeid = str(bench.get("fullname") or bench.get("name") or f"benchmarks[{n}]")
    try:
        item = _results.from_json({"target": default_target, **info, "outcome": "passed", "nodeid": nodeid})
        assert isinstance(item, _results.Ratio | _results.Efficiency)  # its kind, checked above
        return _throughput_of(item, None)
    except (_results.RecordError, InvariantsError) as err:
        raise InvariantsError(f"{path}: benchmarks[{n}] ({bench.get('name')}): {err}") from None


def _finite(item: _results.Record, key: str) -> float:
    value = item.get(key)
    if not isinstance(value, float) or not math.isfinite(value):
        raise InvariantsError(
            f"{item.nodeid}: {item.kind} record: {key!r} must be a finite number, not {value!r}"
        )
    return value


def _verdict(item: _results.Ratio | _results.Efficiency, low: float, high: float) -> str | None:
    """The record's verdict, once it is the one its interval and bound decide (as the timer decided it): a
    file's word is never shown against its own numbers. An efficiency measured to record its baseline has
    no verdict of its own."""
    if not 0 <= low <= high:
        raise InvariantsError(f"{item.nodeid}: {item.kind} record: interval [{low}, {high}] is no interval")
    bound = item.threshold
    if bound is None or (isinstance(item, _results.Efficiency) and item.verdict in (None, _results.RECORDED)):
        return item.verdict
    if not isinstance(bound, float) or not math.isfinite(bound):
        raise InvariantsError(f"{item.nodeid}: {item.kind} record: 'threshold' must be a finite number")
    from ..timing.paired import decide_lower, decide_upper  # numpy's import, only where a record is timed

    decide = decide_upper if isinstance(item, _results.Ratio) else decide_lower
    decided = decide(low, high, bound) or "inconclusive"
    # A budget spent before a look decided reads "inconclusive" whatever the last interval shows; a pass or
    # a fail is what the interval decides, and no other word is a verdict.
    if item.verdict in ("inconclusive", decided):
        return item.verdict
    side = "<=" if isinstance(item, _results.Ratio) else ">="
    raise InvariantsError(
        f"{item.nodeid}: {item.kind} record: verdict {item.verdict!r} contradicts its interval "
        f"[{low:.6g}, {high:.6g}] against its bound ({side} {bound:.6g}), which decide {decided!r}"
    )


def _throughput_of(item: _results.Ratio | _results.Efficiency, outcome: str | None) -> Throughput:
    a, b = item.get("wall_a_median"), item.get("wall_b_median")
    low, high = _finite(item, "low"), _finite(item, "high")
    return Throughput(
        kind=item.kind,
        nodeid=item.nodeid,
        target=item.target,
        label=f"{item.a} / {item.b}" if isinstance(item, _results.Ratio) else item.program,
        config=item.config,
        value=_finite(item, "median"),
        low=low,
        high=high,
        bound=item.threshold,
        verdict=_verdict(item, low, high),
        outcome=outcome,
        id=item.id,
        predicted=item.predicted if isinstance(item, _results.Ratio) else None,
        clock=item.clock or "",
        wall_ratio=float(a) / float(b)
        if isinstance(a, int | float) and isinstance(b, int | float) and b > 0
        else None,
        baseline_provenance=str(item.get("baseline_provenance", "")),
    )


def add_benchmarks(run: Run, rows: Iterable[Throughput]) -> None:
    """The rows not already in the run: the same node id measured once is reported once."""
    known, runtime = {t.nodeid for t in run.throughput}, run.runtime_target
    new = [row for row in rows if row.nodeid not in known]
    run.throughput += [replace(row, target=runtime) if row.target == "runtime" else row for row in new]
