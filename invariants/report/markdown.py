"""``python -m invariants report``: a run's results as markdown (for ``$GITHUB_STEP_SUMMARY``) and a plot.

:mod:`invariants.report.run` reads and merges the results files and the pytest-benchmark JSON, and
:mod:`invariants.report.plot` draws them; this module writes the markdown and is the command. A run reads
as passed only when its exit status is 0, no item failed or exploded and some item passed: otherwise the
markdown is written all the same and the exit status is 1. Every text taken from a results file is user
text, escaped by :func:`_md` so that it shows as written and forms no markup.
"""

from __future__ import annotations

import argparse
import heapq
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NoReturn

from .._errors import InvariantsError, Parser, visible
from .._paths import check_distinct, check_output_file, check_plot_path, write_atomic
from ..hlo.tpu_model import chip_model
from ..measure.metrics import METRICS, names
from ..records import results as _results
from ..records.results import Record
from ..scope.select import select_program_words
from .plot import plot
from .run import (
    Run,
    Throughput,
    add_benchmarks,
    focused,
    known_programs,
    load_benchmarks,
    load_results,
    merge,
)

# Structure columns of the per-target tables: (results key, header).
_COLUMNS = (
    ("kernels", "kernels"),
    ("entry_fusions", "entry fusions"),
    ("while_loops", "while (max trip)"),
    ("dynamic_kernel_launches", "dynamic launches"),
    ("collectives", "collectives (bytes)"),
)
# What a structure record holds: its numeric structural metrics (aliases left out), the compilers'
# predictions and the kernel-code metrics.
_COMPARED = (
    *(n for n in names(source="structure", type="number") if METRICS[n].alias_of is None),
    *names(source="compiler"),
    *names(source="kernel"),
)
_OUTCOMES = ("passed", "failed", "xfailed", "skipped", "error")


# GitHub's markup in running text, each written backslash-escaped; <, >, & as entities, so no HTML tag forms.
_MARKUP = re.compile(r"[\\`*_\[\]|~]")
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def _md(value: object, code: bool = False) -> str:
    """User text on one line (a newline would end a table row), escaped; ``code``: as a code span, fenced
    longer than any run of backticks in it, its pipes escaped (they would end a table cell)."""
    text = visible(str(value)).replace("\n", " ").replace("\t", " ")
    if code:
        fence = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
        pad = " " if text.startswith("`") or text.endswith("`") else ""
        return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"
    text = _MARKUP.sub(lambda m: "\\" + m[0], text)
    return re.sub("[<>&]", lambda m: _ENTITIES[m[0]], text)


def _fmt(value: object) -> str:
    if value is None:
        return "?"  # a metric the structure could not decide (e.g. an unknown trip count)
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.3g}"
    return _md(value)


def _bytes(n: object) -> str:
    if not isinstance(n, int) or isinstance(n, bool):
        return "?"
    if abs(n) < 1024:
        return f"{n:,} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if abs(value) < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} TiB"


def _cell(item: Record, key: str) -> str:
    if key == "while_loops":
        loops = item.get("while_loops")
        return _fmt(loops) if not loops else f"{_fmt(loops)} ({_fmt(item.get('max_trip_count'))})"
    if key == "collectives":
        count = item.get("collectives")
        return _fmt(count) if not count else f"{_fmt(count)} ({_bytes(item.get('collective_bytes'))})"
    return _fmt(item.get(key))


_OUTCOME_WORDS = (("passed", "pass"), ("failed", "**fail**"), ("xfailed", "xfail"), ("skipped", "skip"))


def _invariant_status(items: list[Record]) -> str:
    counts = Counter(i.outcome for i in items)
    parts = [f"{counts[outcome]} {word}" for outcome, word in _OUTCOME_WORDS if counts[outcome]]
    failed = sorted({str(i.id) for i in items if i.outcome == "failed"})
    if failed:
        parts.append("✗ " + ", ".join(_md(f, code=True) for f in failed))
    return ", ".join(parts) or "—"


def _result(run: Run) -> str:
    if run.exitstatus != 0:
        return f"**failed** (pytest exit status {run.exitstatus})"
    bad = Counter(i.outcome for i in run.items if i.outcome not in ("passed", "xfailed", "skipped"))
    if bad:
        said = ", ".join(f"{n:,} {_md(o)}" for o, n in sorted(bad.items()))
        return f"**failed** ({said}, although the exit status recorded is 0)"
    if run.items and not any(i.outcome == "passed" for i in run.items):
        return "**nothing passed** (every item was skipped or xfailed)"
    return "passed"


def _header(run: Run) -> list[str]:
    rt = run.runtime
    sources = ", ".join(_md(s, code=True) for s in run.sources)
    versions = ", ".join(f"{_md(k)} {_md(v)}" for k, v in sorted(run.versions.items())) or "unknown"
    targets = []
    for name, t in run.targets.items():
        note = f"{_md(t.get('mode', '?'))}, {_md(t.get('scope', '?'))}"
        if t.get("unavailable"):
            note += ", **unavailable**"
        targets.append(f"{_md(name, code=True)} ({note})")
    return [
        "# Embedding performance invariants",
        "",
        f"- **result**: {_result(run)}; {len(run.items):,} items from {sources}" + _pytest_said(run),
        f"- **versions**: {versions}",
        f"- **runtime**: {_md(rt.get('platform', '?'))} ({_md(rt.get('device_kind', '?'))}) "
        f"x{_md(rt.get('count', '?'))}" + (f", run on {_md(rt['date'])} (UTC)" if rt.get("date") else ""),
        f"- **targets**: {', '.join(targets) or 'none recorded'}",
        *([f"- **programs**: {_first(run.focus[0], 12)} ({_md(run.focus[1])})"] if run.focus else []),
        "",
    ]


def _pytest_said(run: Run) -> str:
    if not run.pytest:
        return ""
    said = ", ".join(f"{n:,} {_md(k)}" for k, n in run.pytest.items() if n)
    return f"; pytest: {said or 'no tests ran'}"


def _unrecorded(run: Run) -> dict[str, int]:
    """What pytest counted beyond the entries (items skipped before they ran, modules skipped whole)."""
    if not run.pytest:
        return {}
    recorded = Counter(i.outcome for i in run.items)
    pytest = {**run.pytest, "xfailed": run.pytest.get("xfailed", 0) + run.pytest.get("xpassed", 0)}
    beyond = {o: pytest.get(o, 0) - recorded.get(o, 0) for o in _OUTCOMES}
    return {o: n for o, n in beyond.items() if n > 0}


def _first(names: Sequence[str], n: int) -> str:
    """The first ``n`` names, and how many more there are."""
    more = f" and {len(names) - n} more" if len(names) > n else ""
    return ", ".join(_md(name, code=True) for name in names[:n]) + more


def _tier_summary(run: Run) -> list[str]:
    """A row per record kind, in the results module's order, unknown kinds under "other"."""
    by_tier: dict[str, Counter[str]] = defaultdict(Counter)
    for item in run.items:
        by_tier[item.tier][item.outcome] += 1
    tiers = (*(kind.tier for kind in _results.KINDS.values()), "other")
    rows = [_outcome_row(tier, by_tier[tier]) for tier in tiers if tier in by_tier]
    beyond = _unrecorded(run)
    if beyond:
        rows.append(_outcome_row("not recorded (skipped before they ran, or a module skipped whole)", beyond))
    if not rows:
        return []
    lines = ["| tier | " + " | ".join(_OUTCOMES) + " |", "|---|" + "---:|" * len(_OUTCOMES), *rows, ""]
    return lines + _failed_lines(run) + _skipped_lines(run)


def _outcome_row(tier: str, counts: Mapping[str, int]) -> str:
    """An outcome without a column counts as an error."""
    cells = {o: counts.get(o, 0) for o in _OUTCOMES}
    cells["error"] += sum(n for o, n in counts.items() if o not in _OUTCOMES)
    return f"| {tier} | " + " | ".join(_fmt(n) for n in cells.values()) + " |"


def _failed_lines(run: Run) -> list[str]:
    failed = [i for i in run.items if i.outcome in ("failed", "error")]
    if not failed:
        return []
    lines = ["**Failed items**", ""]
    for i in sorted(failed, key=lambda i: i.nodeid):
        kind = f" ({i.failure.kind})" if i.failure is not None else ""
        lines.append(f"- {_md(i.nodeid, code=True)}{kind}" + (f": {_md(i.reason)}" if i.reason else ""))
    return [*lines, ""]


def _skipped_lines(run: Run) -> list[str]:
    """The skips by reason: a skip checks nothing, so the summary says what and why."""
    by_reason: dict[str, list[str]] = defaultdict(list)
    for i in run.items:
        if i.outcome == "skipped":
            by_reason[i.reason or "no reason given"].append(i.nodeid)
    if not by_reason:
        return []
    lines = ["**Skipped items**, by reason", ""]
    for reason, nodeids in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(f"- {len(nodeids)} × {_md(reason)}: {_first(sorted(nodeids), 3)}")
    return [*lines, ""]


# Invariant items by (target, program, config), as structure items are in _estimates.
_Invariants = dict[tuple[str, str, str], list[Record]]


def _target_tables(run: Run) -> list[str]:
    structures = _estimates(run)
    invariants: _Invariants = defaultdict(list)
    for item in run.of_kind("invariant"):
        # A comparison of several programs belongs to its first one, as in the plugin.
        invariants[(str(item.target), (item.program_names() or ["?"])[0], str(item.config))].append(item)
    targets = {k[0] for k in (*invariants, *structures)}
    order = [t for t in run.targets if t in targets]
    order += sorted(targets - set(order))
    lines: list[str] = []
    for target in order:
        lines += _target_heading(target, run.targets.get(target, {}))
        lines += _target_table(target, structures, invariants)
        lines += _warnings(target, invariants)
    return lines


def _target_table(target: str, structures: _Estimates, invariants: _Invariants) -> list[str]:
    keys = {(k[1], k[2]) for k in (*structures, *invariants) if k[0] == target}
    head = ["program", "config", *(h for _, h in _COLUMNS), "invariants"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * len(_COLUMNS) + "---|"]
    for program, config in sorted(keys):
        found = structures.get((target, program, config))
        cells = [_cell(found, k) if found is not None else "" for k, _ in _COLUMNS]
        status = _invariant_status(invariants.get((target, program, config), []))
        lines.append("| " + " | ".join([_md(program, code=True), _md(config), *cells, status]) + " |")
    return [*lines, ""]


def _warnings(target: str, invariants: _Invariants) -> list[str]:
    warned = [
        i for k, items in sorted(invariants.items()) if k[0] == target for i in items if i.get("warning")
    ]
    lines = [f"- warning: {_md(i.id, code=True)} on {_md(i.nodeid)}: {_md(i.get('warning'))}" for i in warned]
    return [*lines, ""] if warned else []


def _target_heading(target: str, info: Mapping[str, object]) -> list[str]:
    lines = [
        f"## Target {_md(target, code=True)}"
        + (f" ({_md(info['mode'])}, {_md(info.get('scope', '?'))})" if "mode" in info else ""),
        "",
    ]
    if info.get("unavailable"):
        lines += [f"Unavailable: {_md(info['unavailable'])}", ""]
    return lines


def _interval(t: Throughput) -> str:
    return f"{_figure(t.value)} [{_figure(t.low)}, {_figure(t.high)}]"


def _figure(v: float) -> str:
    """Four significant figures below 0.01: a loop-bound program's efficiency is not 0."""
    return f"{v:.3f}" if abs(v) >= 0.01 else f"{v:.4g}"


def _throughput_tables(rows: list[Throughput]) -> list[str]:
    """Ratios and efficiencies are one kind of record, so they share columns; the bound says its side."""
    if not rows:
        return []
    lines = [
        "## Throughput: paired ratios (median, 95% interval; a verdict fails only when the whole interval is "
        "past the bound)",
        "",
        "Ratios are `time(a) / time(b)`, bounded above; efficiencies are `time(stream) / time(program)` for "
        "the bytes the program must move, bounded below (1.0: as fast as the stream).",
        "",
        "The clock column names what timed it: `device` is the chip's own time per call (a profiler trace), "
        "with the same pairs' wall-time ratio beside it, the host's round trip included.",
        "",
        "| target | measured | config | median [interval] | clock | bound | verdict | outcome | predicted |",
        "|---|---|---|---|---|---:|---|---|---:|",
    ]
    lines += [
        _throughput_row(t)
        for t in sorted(rows, key=lambda t: (t.kind != "ratio", t.target, t.label, t.config))
    ]
    baselines = sorted(
        {(t.target, t.label, t.config, t.baseline_provenance) for t in rows if t.baseline_provenance}
    )
    if baselines:
        lines += ["", "Efficiency baselines compared with:", ""]
        lines += [
            f"- {_md(f'{label} [{config}]', code=True)} on {_md(target, code=True)}: {_md(where)}"
            for target, label, config, where in baselines
        ]
    return [*lines, ""]


def _throughput_row(t: Throughput) -> str:
    ratio = t.kind == "ratio"
    bound = f"{'≤' if ratio else '≥'} {t.bound:.3g}" if t.bound is not None else "—"
    predicted = "—" if t.predicted is None else f"{t.predicted:.3g}"
    what = _md(t.label, code=True) if ratio else f"efficiency of {_md(t.label, code=True)}"
    clock = _md(t.clock or "—") + (f" (wall {t.wall_ratio:.3g})" if t.wall_ratio is not None else "")
    return (
        f"| {_md(t.target, code=True)} | {what} | {_md(t.config)} | {_interval(t)} | {clock} | {bound} | "
        f"{_md(t.verdict or '—')} | {_md(t.outcome or '—')} | {predicted} |"
    )


_Estimates = Mapping[tuple[str, str, str], Record]


def _estimates(run: Run) -> dict[tuple[str, str, str], Record]:
    return {(str(i.target), str(i.program), str(i.config)): i for i in run.of_kind("structure")}


def _predicted_ratio(items: _Estimates, target: str, a: str, b: str, config: str) -> str:
    ca, cb = (e.get("estimated_cycles") if (e := items.get((target, p, config))) else None for p in (a, b))
    return f"{ca / cb:.3g}" if isinstance(ca, int) and isinstance(cb, int) and cb > 0 else "—"


def _microseconds(seconds: object) -> str:
    return f"{seconds * 1e6:,.4g}" if isinstance(seconds, int | float) else "?"


def _predicted_tables(run: Run) -> list[str]:
    items = _estimates(run)
    timed = _targets_with(items, "predicted_seconds", float)
    guessed = ", ".join(f"`{t}`" for t in timed if (m := chip_model(t)) is None or m.uncalibrated)
    uncalibrated = f" **Uncalibrated** (a chip nobody measured, scaled by published bandwidth): {guessed}."
    # A table per metric: its type, the format of a cell, its heading and its note.
    tables: tuple[tuple[str, type, Callable[[object], str], str, str], ...] = (
        (
            "estimated_cycles",
            int,
            _fmt,
            "## Predicted TPU cost: estimated cycles per call (libtpu's own estimate; loops expanded)",
            "Kernels without an estimate add nothing (today the kCustom gather and custom calls), so a "
            "forward's figure is the work around its gather. `?`: not compiled there, or no estimate.",
        ),
        (
            "predicted_seconds",
            float,
            _microseconds,
            "## Predicted TPU device time: predicted_seconds per call, in microseconds",
            "The cost model fitted on a chip's own device times (invariants/data/tpu_cost.toml) reads each "
            "program's optimized HLO; its accuracy on programs it never saw is in docs/specs.md."
            + (uncalibrated if guessed else ""),
        ),
        (
            "temp_bytes",
            int,
            lambda c: "—" if c is None else _bytes(c),
            "## Predicted memory: temporary bytes per call (compiled.memory_analysis())",
            "",
        ),
    )
    lines = _predicted_ratios(run, items)
    for table in tables:
        lines += _metric_by_target_table(items, *table)
    return lines


def _targets_with(items: _Estimates, metric: str, kind: type) -> list[str]:
    return sorted({k[0] for k, i in items.items() if isinstance(i.get(metric), kind)})


def _predicted_ratios(run: Run, items: _Estimates) -> list[str]:
    ratios = [t for t in run.throughput if t.kind == "ratio"]
    tpus = _targets_with(items, "estimated_cycles", int)
    if not ratios or not tpus:
        return []
    lines = [
        "## Predicted beside measured: time ratios and the TPU compiler's estimated-cycles ratios",
        "",
        "A measured ratio is timed on the runtime target; a predicted one is "
        "`estimated_cycles(a) / estimated_cycles(b)` from the optimized HLO of each TPU target (same "
        "config). On a TPU host the runtime target is the chip, and its column is the estimate the "
        "measurement checks.",
        "",
        "| a / b | config | measured on | measured [interval] | "
        + " | ".join(_md(t, code=True) for t in tpus)
        + " |",
        "|---|---|---|---|" + "---:|" * len(tpus),
    ]
    for t in sorted(ratios, key=lambda t: (t.label, t.config, t.target)):
        a, _, b = t.label.partition(" / ")
        cells = [_predicted_ratio(items, tpu, a, b, t.config) for tpu in tpus]
        lines.append(
            f"| {_md(t.label, code=True)} | {_md(t.config)} | {_md(t.target, code=True)} | "
            f"{_interval(t)} | " + " | ".join(cells) + " |"
        )
    return [*lines, ""]


def _metric_by_target_table(
    items: _Estimates, metric: str, kind: type, fmt: Callable[[object], str], heading: str, note: str
) -> list[str]:
    """A row per (program, config), a column per target where some item recorded ``metric`` as a ``kind``;
    nothing where none did."""
    targets = _targets_with(items, metric, kind)
    if not targets:
        return []
    lines = [heading, "", *([note, ""] if note else [])]
    lines += [
        "| program | config | " + " | ".join(_md(t, code=True) for t in targets) + " |",
        "|---|---|" + "---:|" * len(targets),
    ]
    for program, config in sorted({(k[1], k[2]) for k in items if k[0] in targets}):
        cells = [e.get(metric) if (e := items.get((t, program, config))) else None for t in targets]
        row = [_md(program, code=True), _md(config), *(fmt(c) for c in cells)]
        lines.append("| " + " | ".join(row) + " |")
    return [*lines, ""]


def _slowest_compiles(run: Run) -> list[str]:
    """A compile that takes minutes is a regression of its own; its time moves with the machine, so it is
    shown here and bounded only by relations in a spec."""
    structures = run.of_kind("structure")
    seconds = ((float(s), i) for i in structures if isinstance(s := i.get("compile_seconds"), (int, float)))
    timed = heapq.nlargest(10, seconds, key=lambda pair: pair[0])
    if not timed:
        return []
    lines = [
        f"## Slowest compiles ({len(timed)} of {len(structures)})",
        "",
        "Wall time of the trace, lower and compile of each program on the machine that compiled it (a "
        "figure from the compile cache is that of the compile that made its entry). Machine-relative: a "
        "spec bounds it as a relation, `compile_seconds(a) <= 10 * compile_seconds(b) + 5`.",
        "",
        "| program | config | target | seconds |",
        "|---|---|---|---:|",
    ]
    lines += [
        f"| {_md(i.program, code=True)} | {_md(i.config)} | {_md(i.target, code=True)} | {s:.2f} |"
        for s, i in timed
    ]
    return [*lines, ""]


def render(run: Run) -> str:
    lines = (
        _header(run)
        + _tier_summary(run)
        + _throughput_tables(run.throughput)
        + _predicted_tables(run)
        + _slowest_compiles(run)
        + _target_tables(run)
    )
    return "\n".join(lines).rstrip() + "\n"


def compare_markdown(a: Run, b: Run) -> str:
    side_a, side_b = (_md(", ".join(run.sources), code=True) for run in (a, b))
    lines = [
        f"# Changes from {side_a} (A) to {side_b} (B)",
        "",
        *_version_changes(a, b),
        *_structure_changes(a, b),
        *_outcome_changes(a, b),
        *_throughput_changes(a, b),
    ]
    return "\n".join(lines).rstrip() + "\n"


def _version_changes(a: Run, b: Run) -> list[str]:
    keys = sorted(set(a.versions) | set(b.versions))
    changed = [(k, a.versions.get(k, "—"), b.versions.get(k, "—")) for k in keys]
    changed = [v for v in changed if v[1] != v[2]]
    if not changed:
        return ["Same versions.", ""]
    rows = (f"| {_md(k)} | {_md(x)} | {_md(y)} |" for k, x, y in changed)
    return ["| package | A | B |", "|---|---|---|", *rows, ""]


def _structure_changes(a: Run, b: Run) -> list[str]:
    sa, sb = _estimates(a), _estimates(b)
    rows = [
        f"| {_md(key[0], code=True)} | {_md(key[1], code=True)} | {_md(key[2])} | {metric} | {_fmt(va)} | "
        f"{_fmt(vb)} |"
        for key in sorted(set(sa) & set(sb))
        for metric, va, vb in ((m, sa[key].get(m), sb[key].get(m)) for m in _COMPARED)
        if va != vb
    ]
    lines = [f"## Structure: {len(rows)} metric(s) changed", ""]
    if rows:
        lines += ["| target | program | config | metric | A | B |", "|---|---|---|---|---:|---:|", *rows, ""]
    return lines + _keys_in_one_run(sorted(set(sa) - set(sb)), sorted(set(sb) - set(sa)))


def _keys_in_one_run(only_a: list[tuple[str, str, str]], only_b: list[tuple[str, str, str]]) -> list[str]:
    """Listed, or counted past ten (a run of the invariant tier alone against a whole gate)."""
    only = [f"{_md('/'.join(k), code=True)} only in A" for k in only_a]
    only += [f"{_md('/'.join(k), code=True)} only in B" for k in only_b]
    if len(only) > 10:
        return [f"{len(only_a)} structure item(s) only in A, {len(only_b)} only in B.", ""]
    if only:
        return [*(f"- {o}" for o in only), ""]
    return []


def _outcomes(run: Run) -> dict[str, str]:
    """By node id; structure items left out: their metrics are compared."""
    return {i.nodeid: i.outcome for i in run.items if i.kind != "structure"}


def _outcome_changes(a: Run, b: Run) -> list[str]:
    oa, ob = _outcomes(a), _outcomes(b)
    changed = [(n, oa[n], ob[n]) for n in sorted(set(oa) & set(ob)) if oa[n] != ob[n]]
    lines = [f"## Outcomes: {len(changed)} item(s) changed", ""]
    if changed:
        rows = (f"| {_md(n, code=True)} | {_md(x)} | {_md(y)} |" for n, x, y in changed)
        lines += ["| item | A | B |", "|---|---|---|", *rows, ""]
    new, gone = len(set(ob) - set(oa)), len(set(oa) - set(ob))
    if new or gone:
        lines += [f"{new} item(s) only in B, {gone} only in A.", ""]
    return lines


def _moved(x: Throughput, y: Throughput) -> bool:
    """Disjoint intervals (a change beyond what either run's noise allows), or another verdict."""
    return x.high < y.low or y.high < x.low or x.verdict != y.verdict


def _throughput_changes(a: Run, b: Run) -> list[str]:
    ta = {(t.kind, t.target, t.label, t.config): t for t in a.throughput}
    tb = {(t.kind, t.target, t.label, t.config): t for t in b.throughput}
    if not ta and not tb:
        return []
    moved = [
        f"| {_md(key[0])} | {_md(key[2], code=True)} | {_md(key[3])} | {_interval(ta[key])} | "
        f"{_interval(tb[key])} | {_md(tb[key].verdict or '—')} |"
        for key in sorted(set(ta) & set(tb))
        if _moved(ta[key], tb[key])
    ]
    lines = [f"## Throughput: {len(moved)} measurement(s) moved beyond their intervals", ""]
    if moved:
        lines += ["| kind | what | config | A | B | B verdict |", "|---|---|---|---|---|---|", *moved, ""]
    return lines


class _Parser(Parser):
    def error(self, message: str) -> NoReturn:
        raise InvariantsError(f"report: {message} (see {self.prog} --help)")


def _parser() -> Parser:
    p = _Parser(
        prog="python -m invariants report",
        description="Markdown tables (for $GITHUB_STEP_SUMMARY) and a plot from the gate's results file(s).",
    )
    p.add_argument("results", nargs="*", help="results file(s) written by pytest --results-json (merged)")
    p.add_argument(
        "--benchmark-json", help="pytest-benchmark --benchmark-json output with the throughput tier"
    )
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        help="two results files: what changed from A to B (a split run's shards as one side: their files "
        "joined with commas)",
    )
    p.add_argument("--plot", metavar="FILE.png", help="write a PNG: launches per program and target, ratios")
    p.add_argument("--out", metavar="FILE.md", help="write the markdown here instead of stdout")
    p.add_argument(
        "--programs",
        metavar="WORDS",
        help="only these programs' items, selected as the gate's --programs selects (names, patterns such "
        "as 'vmap_*', kind:backward, tag:user); default: a downstream run's own programs, else all; "
        "'*' shows all",
    )
    return p


def _focus(run: Run, value: str | None) -> Run:
    if value is not None:
        chosen = select_program_words(value, known_programs(run), "report: --programs")
        return focused(run, chosen, f"--programs {value}")
    if run.declared:
        return focused(
            run, run.declared, "the project's own, declared in its spec files; --programs '*' for all"
        )
    return run


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _check_arguments(args)
    _check_outputs(args)
    parts, passed = _run_parts(args) if args.results else ([], True)
    if args.compare:
        a, b = (merge([load_results(p) for p in side.split(",")]) for side in args.compare)
        parts.append(compare_markdown(a, b))
    text = "\n".join(parts)
    if args.out:
        write_atomic(args.out, text, "report: --out")
    else:
        print(text, end="")
    return 0 if passed else 1


def _check_arguments(args: argparse.Namespace) -> None:
    if not args.results and not args.compare:
        raise InvariantsError("report: give a results file (artifacts/results.json) or --compare A B")
    for given, needs in (
        (args.benchmark_json, "--benchmark-json needs a results file to go with it"),
        (args.plot, "--plot draws a results file; give one"),
        (args.programs is not None, "--programs selects from a results file; give one"),
    ):
        if given and not args.results:
            raise InvariantsError(f"report: {needs}")


def _check_outputs(args: argparse.Namespace) -> None:
    """Where it writes, checked before any reading: one line now, not a traceback after the work."""
    outputs = [(option, value) for option, value in (("--out", args.out), ("--plot", args.plot)) if value]
    for option, value in outputs:
        check_output_file(value, f"report: {option}")
    if len(outputs) == 2 and Path(outputs[0][1]).resolve() == Path(outputs[1][1]).resolve():
        raise InvariantsError(f"report: --out and --plot are the same file ({args.out}); give two")
    inputs = [("results file", r) for r in args.results] + [("--benchmark-json", args.benchmark_json)]
    inputs += [("--compare", c) for side in (args.compare or ()) for c in side.split(",")]
    check_distinct(outputs, inputs, "report")
    if args.plot:
        check_plot_path(args.plot, "report: --plot")


def _run_parts(args: argparse.Namespace) -> tuple[list[str], bool]:
    """The report's parts and whether the run passed; a run that recorded nothing checked nothing."""
    run = merge([load_results(p) for p in args.results])
    if not run.items:
        raise InvariantsError(
            f"report: {', '.join(run.sources)}: no item recorded; a run that checked nothing has no result"
        )
    if args.benchmark_json:
        add_benchmarks(run, load_benchmarks(args.benchmark_json, run.runtime_target))
    run = _focus(run, args.programs)
    parts = [render(run)]
    if args.plot:
        if plot(run, args.plot):
            parts.append(f"Plot: {_md(args.plot, code=True)}\n")
        else:
            # The markdown is still written: a run of the invariant tier alone has tables, not points.
            print(
                f"report: {args.plot} not written: nothing to plot (no structure or throughput items)",
                file=sys.stderr,
            )
    return parts, _result(run) == "passed"
