"""The report's plot: dynamic kernel launches per program and target, a column per group of targets, and the
throughput with intervals."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from .._paths import pyplot, save_figure
from ..records.results import Record
from ..scope.targets import GROUPS, group_of
from .run import Run, Throughput

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import SubFigure


def _fmt(value: object) -> str:
    return "?" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def plot(run: Run, path: str | Path) -> bool:
    """Draw the run; False, writing nothing, when it has no structure or throughput items to draw.

    The structure panels are small multiples: a column per group of targets (:data:`GROUPS`), sharing the
    rows (programs) and the axis, so that each column holds a few targets and a row reads across them.
    Launches on a log axis show the loops at a glance (a per-row loop of 16,384 trips against a handful of
    kernels)."""
    plt = pyplot(path)
    panels, records, timed = _panels(run)
    if not panels:
        return False
    rows_of = _rows_of(records, timed)
    heights = [max(2.0, 0.22 * len(rows_of[p]) + 1.6) for p in panels]
    fig = plt.figure(figsize=(14, sum(heights)), layout="constrained")
    subfigures = fig.subfigures(len(panels), 1, height_ratios=heights, squeeze=False)[:, 0]
    for sub, panel in zip(subfigures, panels, strict=True):
        if panel in timed:
            ax = sub.subplots()
            _throughput(sub, ax, panel, timed[panel], rows_of[panel])
        else:
            _by_group(sub, panel, records[panel], rows_of[panel])
    versions = ", ".join(f"{k} {v}" for k, v in sorted(run.versions.items()))
    fig.suptitle(f"Embedding invariants ({versions})", fontsize=9)
    save_figure(fig, path, "report: --plot", format=Path(path).suffix[1:] or "png")
    return True


def _panels(run: Run) -> tuple[list[str], dict[str, list[Record]], dict[str, list[Throughput]]]:
    """The panels with something to draw, then each one's structure items (a program in one configuration)
    and throughput rows."""
    records = {"launches": _with(run, "dynamic_kernel_launches"), "cycles": _with(run, "estimated_cycles")}
    timed = {kind: [t for t in run.throughput if t.kind == kind] for kind in ("ratio", "efficiency")}
    panels = [p for p, items in {**records, **timed}.items() if items]
    records["launches"], records["cycles"] = _in_one_config(records["launches"], records["cycles"])
    return panels, records, timed


def _rows_of(records: dict[str, list[Record]], timed: dict[str, list[Throughput]]) -> dict[str, list[str]]:
    rows_of = {p: sorted({_row_label(i) for i in items}) for p, items in records.items()}
    return rows_of | {p: sorted({_throughput_row(t) for t in items}) for p, items in timed.items()}


def _by_group(sub: SubFigure, panel: str, items: list[Record], labels: list[str]) -> None:
    """A structure panel: a column per group of targets with something to draw, its targets the series."""
    groups: dict[str, list[Record]] = defaultdict(list)
    for i in items:
        groups[group_of(str(i.target))].append(i)
    order = sorted(groups, key=lambda g: (GROUPS.index(g) if g in GROUPS else len(GROUPS), g))
    axes = sub.subplots(1, len(order), sharex=True, sharey=True, squeeze=False)[0]
    key = "estimated_cycles" if panel == "cycles" else "dynamic_kernel_launches"
    y = {label: n for n, label in enumerate(labels)}
    for ax, name in zip(axes, order, strict=True):
        _scatter_by_target(ax, groups[name], key, y)
        ax.set_xscale("log")
        ax.grid(axis="x", which="both", alpha=0.3)
    _label_rows(axes[0], labels)
    if panel == "cycles":
        sub.suptitle("Predicted TPU cost per program (seed config f32), per TPU target")
        sub.supxlabel("estimated cycles per call (libtpu's estimate, loops expanded; log scale)", fontsize=9)
    else:
        sub.suptitle(_launches_title(items))
        sub.supxlabel(
            "dynamic kernel launches per call (loops expanded by trip count; log scale)", fontsize=9
        )


def _with(run: Run, metric: str) -> list[Record]:
    return [i for i in run.of_kind("structure") if isinstance(i.get(metric), int)]


def _in_one_config(structures: list[Record], cycles: list[Record]) -> tuple[list[Record], list[Record]]:
    """A row per program, in f32 where it has one: the other configurations would triple the rows."""
    configs: dict[str, set[str]] = defaultdict(set)
    for i in structures:
        configs[str(i.program)].add(str(i.config))
    shown = {p: ("f32" if "f32" in c else sorted(c)[0]) for p, c in configs.items()}
    return (
        [i for i in structures if shown[str(i.program)] == str(i.config)],
        [i for i in cycles if shown.get(str(i.program)) == str(i.config)],
    )


def _label_rows(ax: Axes, labels: list[str]) -> None:
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_ylim(-0.7, len(labels) - 0.3)
    ax.invert_yaxis()


def _launches_title(items: list[Record]) -> str:
    title = "Kernel launches per call, per program (seed config f32) and target"
    top = max(items, key=lambda i: int(i.get("dynamic_kernel_launches")))
    launches = int(top.get("dynamic_kernel_launches"))
    if launches >= 100:
        # Said under the title, never drawn over the points (an arrow's text covered the top rows).
        trips = _fmt(top.get("max_trip_count"))
        title += (
            f"\nmost: {launches:,} launches, {top.program} on {top.target}: "
            f"{top.get('while_loops')} while loop(s), max trip count {trips}"
        )
    return title


def _throughput(sub: SubFigure, ax: Axes, panel: str, data: list[Throughput], labels: list[str]) -> None:
    y = {label: n for n, label in enumerate(labels)}
    for t in data:
        row = y[_throughput_row(t)]
        colour = "tab:red" if t.verdict == "fail" else "tab:blue"
        ax.errorbar(
            t.value, row, xerr=[[t.value - t.low], [t.high - t.value]], fmt="o", color=colour, capsize=3
        )
        if t.bound is not None:
            ax.plot([t.bound, t.bound], [row - 0.4, row + 0.4], color="tab:red", lw=2)
    ax.axvline(1.0, color="grey", lw=0.8, ls="--")
    _label_rows(ax, labels)
    ax.grid(axis="x", which="both", alpha=0.3)
    if panel == "ratio":
        sub.suptitle("Time ratio a / b (median, interval; red bar: threshold, a row fails past it)")
        ax.set_xlabel("t_a / t_b (1.0 = as fast)")
    else:
        sub.suptitle("Efficiency vs streaming the same bytes (median, interval; red bar: floor)")
        ax.set_xlabel("t_stream / t_program (1.0 = as fast as the stream)")


def _scatter_by_target(ax: Axes, items: list[Record], key: str, y: dict[str, int]) -> None:
    """Each target a little apart inside its row, so that equal counts do not hide each other; the group's
    name and its targets above the column (inside, the legend covered the largest counts)."""
    targets = sorted({str(i.target) for i in items})
    markers = "osD^v<>p*hX"
    for n, target in enumerate(targets):
        dy = (n - (len(targets) - 1) / 2) * 0.7 / max(len(targets), 1)
        pts = [(max(i.get(key), 1), y[_row_label(i)] + dy) for i in items if i.target == target]
        xs, ys = zip(*pts, strict=True)
        ax.scatter(xs, ys, label=target, marker=markers[n % len(markers)], s=22, color=f"C{n}")
    ax.legend(
        title=group_of(targets[0]), title_fontsize=8, fontsize=7, ncols=1 + (len(targets) > 2),
        loc="lower center", bbox_to_anchor=(0.5, 1.0), borderaxespad=0.3, frameon=False,
    )  # fmt: skip


def _row_label(item: Record) -> str:
    return f"{item.program} [{item.config}]"


def _throughput_row(t: Throughput) -> str:
    return f"{t.label} [{t.config}]"
