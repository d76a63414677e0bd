"""The versus record (owner of its JSON), and its markdown and plot.

:func:`make_record` builds a :class:`Record`, :func:`write_json` writes it and :func:`load_record` reads it
back. Its ``timing`` holds :meth:`~invariants.versus.stats.ProgramVerdict.to_dict` entries; its ``structure``
one entry per key: each side's answer (``versus.worker``), the ``diff`` and what ``changed``, the
``offload`` moves, the ``metrics`` paired by name and the ``invariants`` paired by id. An invariant's
``change`` is ``regressed`` (exit 1, ratchets included: a ratchet is a known failure of *some* release, and
the question is whether the candidate is it), ``improved``, ``fails on both``, ``holds on both``, ``only on
the baseline|candidate``, or ``not evaluated: REASON``, which never fails the run. ``improved`` means the
relation now holds with none of its terms worse: one that holds only because a term got worse (``a <= b``
from 10 > 0 to 10 <= 10, ``b`` gaining 10) is ``regressed``, and ``worse`` names those terms.

A target that was asked for (``--targets``, or a project's spec files) and that a side could not compile is
``not_compared``: exit 4 where nothing regressed, never a pass for a comparison that was not made. So is a
key of such a target that a side's release could not compile for the tool's want of an API (its answer
``lacks`` it): the tool's limit on that release, never a regression of the program.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

from .._errors import InvariantsError
from .._paths import PACKAGE_DIR, pyplot, save_figure, shown, write_atomic
from ..compile.child import stage
from ..records import results as _results
from .protocol import Json
from .stats import ALL_CORES, ALL_CORES_THREADS, FAILED

if TYPE_CHECKING:
    from matplotlib.axes import Axes

FORMAT = "invariants-versus"
FORMAT_VERSION = 1
REGRESSED, NOT_COMPARED = 1, 4  # the exit statuses
DIFF_LINES = 40  # of a key's diff in the markdown, sized for $GITHUB_STEP_SUMMARY
CHANGES = {
    (True, False): "regressed",
    (False, True): "improved",
    (False, False): "fails on both",
    (True, True): "holds on both",
}


def invariant_changes(base: Sequence[Json], cand: Sequence[Json]) -> list[Json]:
    """The invariant verdicts of one key, paired by id."""
    by_id_b = {v["id"]: v for v in base}
    by_id_c = {v["id"]: v for v in cand}
    return [_paired(i, by_id_b.get(i), by_id_c.get(i)) for i in dict.fromkeys([*by_id_b, *by_id_c])]


def _paired(inv_id: str, b: Json | None, c: Json | None) -> Json:
    base, cand = b or {}, c or {}
    change, worse = _change(b, c), []
    if change == "improved":
        worse = worse_terms(base, cand)
        change = "regressed" if worse else change
    return {
        "id": inv_id,
        "where": (b or cand).get("where", ""),
        "baseline": base.get("holds"),
        "candidate": cand.get("holds"),
        "describe": {"baseline": base.get("describe"), "candidate": cand.get("describe")},
        "ratchet": base.get("ratchet") or cand.get("ratchet"),
        "change": change,
        "worse": worse,
    }


def worse_terms(base: Json, cand: Json) -> list[str]:
    """``cas_loops(x[f32]) 0 → 10`` for each term of a relation that moved the way its assert calls worse
    (its ``worse`` direction, from the worker), with the same direction on both sides."""
    direction = base.get("worse")
    if direction is None or cand.get("worse") != direction:
        return []
    b, c = base.get("terms") or {}, cand.get("terms") or {}
    return [f"{t} {b[t]:g} → {c[t]:g}" for t in b if t in c and (c[t] - b[t]) * direction > 0]


def _change(b: Json | None, c: Json | None) -> str:
    if b is None or c is None:
        return "only on the " + ("candidate" if b is None else "baseline")
    if b["holds"] is None or c["holds"] is None:
        return _not_evaluated(b, c)
    return CHANGES[(bool(b["holds"]), bool(c["holds"]))]


def _not_evaluated(b: Json, c: Json) -> str:
    """``not evaluated: REASON``: the reason once when both sides give it, else each side's."""
    why = {
        side: v.get("not_evaluated") or "no value"
        for side, v in (("baseline", b), ("candidate", c))
        if v["holds"] is None
    }
    if len(why) == 2 and why["baseline"] == why["candidate"]:
        return f"not evaluated: {why['baseline']}"
    return "not evaluated: " + "; ".join(f"on the {side}: {reason}" for side, reason in why.items())


def is_not_evaluated(change: str) -> bool:
    return change.startswith("not evaluated")


def metric_rows(base: Json, cand: Json) -> list[Json]:
    """The two sides' kernel, compiler and SparseCore metrics of one key, paired by name."""
    rows = []
    for source in ("kernel", "compiler", "sparsecore"):
        b, c = base.get(f"{source}_metrics") or {}, cand.get(f"{source}_metrics") or {}
        for name in dict.fromkeys([*b, *c]):
            pair = {"baseline": b.get(name), "candidate": c.get(name)}
            rows.append({"metric": name, "source": source, **pair, "differs": b.get(name) != c.get(name)})
    return rows


@dataclass(frozen=True)
class SideRecord:
    """One installation: its SPEC, interpreter, versions, its workers' variables and JAX's ``device_kind``."""

    spec: str
    python: str
    versions: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    device: str = ""


@dataclass(frozen=True)
class Record:
    """A versus run; ``targets``: why a side could not compare a target (name -> side -> reason);
    ``not_compared``: a line per target that was asked for and not compared."""

    baseline: SideRecord
    candidate: SideRecord
    settings: Json
    timing: list[Json]
    structure: list[Json]
    targets: Json
    exit: int
    reasons: list[str]
    seconds: float
    date: str = ""  # UTC
    not_compared: list[str] = field(default_factory=list)

    def to_json(self) -> Json:
        return {"format": FORMAT, "format_version": FORMAT_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_json(cls, data: Json, where: str) -> Record:
        optional = ("date", "not_compared")
        names = [f.name for f in dataclasses.fields(cls) if f.name not in optional]
        missing = [n for n in names if n not in data]
        if missing:
            raise InvariantsError(f"{where}: the versus record has no {', '.join(missing)}")
        try:
            baseline, candidate = (SideRecord(**data[role]) for role in ("baseline", "candidate"))
        except TypeError:
            raise InvariantsError(
                f"{where}: a side of the versus record is not {{spec, python, versions, env, device}}"
            ) from None
        rest = {n: data[n] for n in names if n not in ("baseline", "candidate")}
        missing = data.get("not_compared", [])
        if not (isinstance(missing, list) and all(isinstance(m, str) for m in missing)):
            raise InvariantsError(f"{where}: the versus record's not_compared is not a list of lines")
        return cls(baseline, candidate, **rest, date=str(data.get("date", "")), not_compared=missing)


def make_record(
    baseline: SideRecord,
    candidate: SideRecord,
    settings: Json,
    timing: Sequence[Json],
    structure: Sequence[Json],
    targets: Json,
    seconds: float,
    asked: Sequence[str] = (),
) -> Record:
    """``asked``: the targets the user named; one of them that a side could not compile is not compared."""
    reasons = [r for t in timing if (r := _timing_reason(t))] + [
        r for s in structure for r in _structure_reasons(s)
    ]
    missing = _not_compared({name: why for name, why in targets.items() if name in asked})
    missing += [line for s in structure if s["key"].rsplit("/", 1)[-1] in asked for line in _limited(s)]
    return Record(
        baseline,
        candidate,
        settings=dict(settings),
        timing=[dict(t) for t in timing],
        structure=[dict(x) for x in structure],
        targets=dict(targets),
        exit=REGRESSED if reasons else NOT_COMPARED if missing else 0,
        reasons=reasons,
        seconds=seconds,
        date=datetime.datetime.now(datetime.UTC).date().isoformat(),
        not_compared=missing,
    )


def _timing_reason(t: Json) -> str | None:
    if t["verdict"] == "fail":
        r = t["results"][t["clock"]]
        return f"{t['program']}: fail: {t['clock']} ratio {_interval(r)} > {r['threshold']:g}"
    if t["verdict"] != "lost-parallelism":
        return None
    r = t["results"].get(ALL_CORES) or t["results"]["wall"]
    th = t["results"].get(ALL_CORES_THREADS)
    if th and r["low"] <= r["threshold"]:  # the threads witness decided (invariants.versus.stats)
        wall = (
            f"threads ratio with all cores {_interval(th)} < {th['threshold']:.3g} (fewer "
            f"threads busy), wall ratio {_interval(r)}, estimate above {r['threshold']:g}"
        )
    else:
        wall = f"wall ratio with all cores {_interval(r)} > {r['threshold']:g}"
    c = t["results"][t["clock"]]
    return (
        f"{t['program']}: lost-parallelism: {wall}, {t['clock']} ratio {_interval(c)} did "
        "not fail: the same work on fewer threads"
    )


def _structure_reasons(s: Json) -> list[str]:
    base, cand = s.get("baseline") or {}, s.get("candidate") or {}
    reasons = []
    if "snapshot" in base and "error" in cand and "lacks" not in cand:
        reasons.append(f"{s['key']}: compiles on the baseline, fails on the candidate: {cand['error']}")
    for inv in s.get("invariants", []):
        if inv["change"] == "regressed" and inv.get("worse"):
            reasons.append(
                f"{s['key']}: invariant {inv['id']} holds on the candidate only because a side of it got "
                f"worse: {', '.join(inv['worse'])}"
            )
        elif inv["change"] == "regressed":
            ratchet = inv.get("ratchet")
            known = f" (a ratchet in the specs: {ratchet['issue']})" if ratchet else ""
            reasons.append(
                f"{s['key']}: invariant {inv['id']} holds on the baseline, fails on the candidate{known}"
            )
    return reasons


def as_items(record: Record) -> list[_results.Record]:
    """The record as results-file records, for ``selfcheck``: a timed program, and an invariant and key
    that holds on the baseline and fails on the candidate."""
    rows = [
        ("versus-timing", "failed" if t["verdict"] in FAILED else "passed", t["program"], t["program"])
        for t in record.timing
    ]
    rows += [
        ("versus-invariant", "failed", s["key"], inv["id"])
        for s in record.structure
        for inv in s.get("invariants", [])
        if inv.get("change") == "regressed"
    ]
    return [_results.Record(kind=k, outcome=o, nodeid=f"versus[{key}]", id=i) for k, o, key, i in rows]


_Reply = TypeVar("_Reply")


def write_json(record: Record, path: Path, option: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(record.to_json(), indent=1) + "\n", option)


def repository_paths(reply: _Reply) -> _Reply:
    """A worker's reply with every path into the staged package copy it imported shown as this package's:
    in every string value, so locations, descriptions and errors alike."""
    staged, here = (f"{p}{os.sep}" for p in (stage() / "invariants", shown(PACKAGE_DIR)))

    def fix(value: object) -> object:
        if isinstance(value, str):
            return value.replace(staged, here)
        if isinstance(value, list):
            return [fix(v) for v in value]
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        return value

    return cast(_Reply, fix(reply))


def load_record(path: Path) -> Record:
    try:
        data = json.loads(Path(path).read_text())
    except OSError as err:
        raise InvariantsError(f"{path}: cannot read ({err.strerror})") from None
    except ValueError:
        raise InvariantsError(f"{path}: not JSON") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InvariantsError(f"{path}: not a versus record")
    if data.get("format_version") != FORMAT_VERSION:
        raise InvariantsError(
            f"{path}: versus record version {data.get('format_version')}, expected {FORMAT_VERSION}"
        )
    return Record.from_json(data, str(path))


def _side_line(name: str, side: SideRecord) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in side.versions.items())
    env = " ".join(f"`{k}={v}`" for k, v in side.env.items())
    device = f" on {side.device}" if side.device else ""
    return f"- **{name}** `{side.spec}`{device}: {versions}" + (f"; env {env}" if env else "")


def _interval(r: Json) -> str:
    return f"{r['median']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"


def _threads(t: Json) -> str:
    """``; threads 1.8 → 1.0``: each side's CPU time / wall time in the all-cores blocks."""
    th = t.get("threads_all_cores") or {}
    if th.get("baseline") is None or th.get("candidate") is None:
        return ""
    ratio = t["results"].get(ALL_CORES_THREADS)
    return f"; threads {th['baseline']:.1f} → {th['candidate']:.1f}" + (
        f", ratio {_interval(ratio)}" if ratio else ""
    )


def render_markdown(record: Record) -> str:
    """The report, sized for ``$GITHUB_STEP_SUMMARY``: an identical key is one line, a diff is cut."""
    word = {REGRESSED: "**REGRESSED**", NOT_COMPARED: "**NOT COMPARED**"}.get(record.exit, "no regression")
    out = [
        f"## versus: candidate `{record.candidate.spec}` against baseline `{record.baseline.spec}`: {word}",
        "",
    ]
    out += [_side_line("baseline", record.baseline), _side_line("candidate", record.candidate)]
    out += [f"- **date** {record.date} (UTC)", ""] if record.date else [""]
    said = [*record.reasons, *record.not_compared]
    out += [f"- {reason}" for reason in said] + ([""] if said else [])
    if record.timing:
        out += _timing_section(record.timing, record.settings)
    if record.structure:
        out += _structure_section(record)
    out.append(f"versus: {record.seconds:.0f} s; exit {record.exit}")
    return "\n".join(out) + "\n"


_ROUNDS_NOTE = (
    "Each round is a fresh pair of worker processes; a round's ratio is the median of its per-pair ratios, "
    "the interval is Student's t over rounds (the spread between process pairs counts)."
)
_DEVICE_NOTE = (
    "The device ratio is the chip's own time of each call (JAX's profiler). There a fresh pair runs one "
    "side's worker, then the other's, each tracing several blocks, and a round is block k of each side, "
    "their calls paired in order; pairs that disagree are the rounds themselves (the attempts say which). "
    "The wall ratio beside it is the host's round trip of the same calls."
)


def _timing_section(timing: Sequence[Json], s: Json) -> list[str]:
    cores = any(ALL_CORES in t["results"] for t in timing)
    first = "device" if any("device" in t["results"] for t in timing) else "cpu"
    out = [
        f"### time(candidate) / time(baseline), {s['confidence']:.0%} interval, "
        f"fails above {s['threshold']:g} (verdict clock: {s['clock']})",
        "",
        f"| program | verdict | {first} ratio | wall ratio | "
        + ("wall, all cores | " if cores else "")
        + "rounds | pairs | s | baseline per call | attempts |",
        "|---|---|---|---|" + ("---|" if cores else "") + "---|---|---|---|---|",
    ]
    out += [_timing_row(t, cores, first) for t in timing]
    out += ["", _ROUNDS_NOTE]
    if first == "device":
        out.append(_DEVICE_NOTE)
    if cores:
        out.append(_cores_note(timing))
    out.append("")
    return out


def _cores_note(timing: Sequence[Json]) -> str:
    par_threshold = next(t["results"][ALL_CORES]["threshold"] for t in timing if ALL_CORES in t["results"])
    return (
        f"The cpu and wall ratios come from rounds with both workers on one core; `wall, all cores` "
        f"from rounds with every core for each worker, one at a time, failing above "
        f"{par_threshold:g}; `threads`: CPU time / wall time of each side's blocks there, baseline → "
        "candidate (about 1 where a side ran on one thread, or other load held the other cores), "
        "and their paired ratio, candidate / baseline. `lost-parallelism`: the CPU time did not fail "
        "while that wall ratio did (its whole interval above the bound), or its estimate was above "
        "the bound and the threads ratio's whole interval below 1 / bound (the same work on fewer "
        "threads)."
    )


def _timing_row(t: Json, cores: bool, first: str) -> str:
    res = t["results"]
    cpu, wall, par = res.get(first), res.get("wall"), res.get(ALL_CORES)
    main = res[t["clock"]]
    verdict = f"**{t['verdict']}**" if t["verdict"] in FAILED else t["verdict"]
    attempts = " → ".join(t["attempts"])
    par_cell = ""
    if cores:
        par_cell = f"{_interval(par)} ({len(par['round_ratios'])} rounds{_threads(t)}) | " if par else "— | "
    return (
        f"| {t['program']} | {verdict} | {_interval(cpu) if cpu else '—'} "
        f"| {_interval(wall) if wall else '—'} | {par_cell}"
        f"{len(main['round_ratios'])} | {main['pairs']} | {main['seconds']:.1f} "
        f"| {_per_call(main)} | {attempts} |"
    )


def _per_call(result: Json) -> str:
    cell = f"{result['t_b_median'] * 1e3:.3f} ms"
    if result.get("clock") == "device" and result.get("wall_b_median"):
        cell += f" (wall {result['wall_b_median'] * 1e3:.3f} ms)"
    return cell


def _structure_section(record: Record) -> list[str]:
    listed = _listed(record)
    out = ["### structure and invariants, side by side", "", *listed, *([""] if listed else [])]
    for x in record.structure:
        if _shown(x):
            out += _key_section(x)
    return out


def _listed(record: Record) -> list[str]:
    limited = [line for x in record.structure for line in _limited(x)]
    said = [*_not_compared(record.targets), *limited]
    listed = [f"- {line}" for line in said if line not in record.not_compared]
    listed += [f"- {x['offload']}" for x in record.structure if x.get("offload")]
    same = [x for x in record.structure if not _shown(x)]
    if same:
        listed.append(f"- identical on both sides: {', '.join(x['key'] for x in same)}")
    listed += [
        f"- {x['key']}: invariant `{inv['id']}` {inv['change']}"
        for x in same
        for inv in x.get("invariants", [])
        if is_not_evaluated(inv["change"])
    ]
    return listed


def _not_compared(targets: Json) -> list[str]:
    """``target NAME not compared (SIDE: why; ...)`` for each target a side could not compile."""
    missing = {name: [f"{side}: {why}" for side, why in r.items() if why] for name, r in targets.items()}
    return [f"target {name} not compared ({'; '.join(m)})" for name, m in missing.items() if m]


def _limited(x: Json) -> list[str]:
    """``KEY not compared (SIDE: why)`` where a side's release lacks an API the tool needs for that key."""
    said = [f"{side}: {x[side]['error']}" for side in ("baseline", "candidate") if x[side].get("lacks")]
    return [f"{x['key']} not compared ({'; '.join(said)})"] if said else []


def _key_section(x: Json) -> list[str]:
    out = [f"#### {x['key']}"]
    out += [line for inv in x.get("invariants", []) if (line := _invariant_line(inv))]
    out += [f"- {side}: {x[side]['error']}" for side in ("baseline", "candidate") if x[side].get("error")]
    if x.get("changed"):
        out.append(f"- snapshot: {x['changed']}")
    out += _metric_table(x.get("metrics") or [])
    if x["diff"]:
        lines = x["diff"].splitlines()
        more = [f"... {len(lines) - DIFF_LINES} more lines in the JSON"] if len(lines) > DIFF_LINES else []
        out += ["", "```diff", *lines[:DIFF_LINES], *more, "```"]
    out.append("")
    return out


def _invariant_line(inv: Json) -> str | None:
    if is_not_evaluated(inv["change"]):
        return f"- invariant `{inv['id']}` ({inv['where']}): {inv['change']}"
    if inv["change"] == "holds on both":
        return None
    desc = inv["describe"].get("candidate") or inv["describe"].get("baseline") or ""
    known = " (ratchet)" if inv.get("ratchet") else ""
    worse = f" (holds only because a side got worse: {', '.join(inv['worse'])})" if inv.get("worse") else ""
    return f"- invariant `{inv['id']}`{known} ({inv['where']}): **{inv['change']}**{worse}: {desc}"


def _shown(x: Json) -> bool:
    """Whether a key gets a section: its renderings, an invariant or a kernel metric differ, or an error."""
    return (
        x["diff"] is not None
        or any(x[side].get("error") for side in ("baseline", "candidate"))
        or any(r["differs"] for r in x.get("metrics") or [] if r["source"] == "kernel")
        or any(
            inv["change"] != "holds on both" and not is_not_evaluated(inv["change"])
            for inv in x.get("invariants", [])
        )
    )


def _cell(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:.4g}"


def _metric_table(rows: Sequence[Json]) -> list[str]:
    valued = [r for r in rows if r["baseline"] is not None or r["candidate"] is not None]
    if not valued:
        return []
    out = ["", "| metric | source | baseline | candidate | |", "|---|---|---:|---:|---|"]
    for r in valued:
        mark = "**differs**" if r["differs"] else ""
        out.append(
            f"| {r['metric']} | {r['source']} | {_cell(r['baseline'])} | {_cell(r['candidate'])} | {mark} |"
        )
    return out


def plot(record: Record, path: Path) -> None:
    plt = pyplot(path)
    timing = record.timing
    if not timing:
        raise InvariantsError(f"{path}: nothing was timed, nothing to plot")
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(timing) + 1.8))
    clocks = [c for c in _STYLE if any(c in t["results"] for t in timing)]
    for j, clock in enumerate(clocks):
        for i, t in enumerate(timing):
            _draw(ax, t, clock, y=i + (j - (len(clocks) - 1) / 2) * 0.25, first=i == 0)
    _thresholds(ax, record)
    ax.set_yticks(range(len(timing)), [t["program"] for t in timing])
    ax.invert_yaxis()
    ax.set_xlabel(f"time(candidate {record.candidate.spec}) / time(baseline {record.baseline.spec})")
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, "--plot")


def _thresholds(ax: Axes, record: Record) -> None:
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.axvline(record.settings["threshold"], color="tab:red", linestyle="--", label="threshold")
    par = [t["results"][ALL_CORES]["threshold"] for t in record.timing if ALL_CORES in t["results"]]
    if par:
        ax.axvline(par[0], color="tab:green", linestyle=":", label="all-cores threshold")


_STYLE = {
    "device": ("D", "tab:purple"),
    "cpu": ("o", "tab:blue"),
    "wall": ("s", "tab:gray"),
    ALL_CORES: ("^", "tab:green"),
}


def _draw(ax: Axes, t: Json, clock: str, y: float, first: bool) -> None:
    r = t["results"].get(clock)
    if r is None or not math.isfinite(r["median"]):
        return
    failed = (t["verdict"] == "fail" and clock == t["clock"]) or (
        t["verdict"] == "lost-parallelism" and clock == ALL_CORES
    )
    marker, color = _STYLE[clock]
    ax.errorbar(
        r["median"],
        y,
        xerr=[[r["median"] - r["low"]], [r["high"] - r["median"]]],
        fmt=marker,
        color="tab:red" if failed else color,
        capsize=3,
        label=clock.replace("_", " ") if first else None,
    )
