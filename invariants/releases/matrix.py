"""``python -m invariants matrix``: how each canonical program's structure evolved across JAX releases.

The structure tier (f32) of each release, run in its cached environment through
:func:`invariants.releases.bisect.run_suite`: on ``cpu``, on ``tpu-v5e`` where ``jax[tpu]==VERSION``
installs, and on the GPU targets of ``--targets`` with that release's CUDA plugin; a markdown table and a
PNG. The kernels' code metrics get a table of their own, a change from the release before in bold: a
change of code generation behind identical HLO (a native float atomic turned into CAS retry loops) shows
only there. A move to or off the SparseCore gets a line under the tables. A target asked for (tpu-v5e
unless ``--no-tpu``, the GPU targets of ``--targets``) that a release cannot compile is a note, and the
command exits 4 with one line naming them: a table with a hole is no full answer. So is a program whose
structure the tool's limit on a release skipped (an API of JAX it lacks): its cell says skipped and the API,
its line under the tables the rest."""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import json
import math
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.version import Version

from .._errors import InvariantsError, NothingChecked, Parser
from .._paths import check_output_dir, pyplot, save_figure, write_atomic
from ..catalog.project import Project, project_from
from ..measure.metrics import OFFLOAD_COUNTS, offload_moves
from ..records.results import Results, compile_failure
from ..scope.select import selectors
from ..scope.targets import TARGETS_HINT, all_targets, select_targets
from .bisect import add_release_options, check_selection, run_suite
from .environments import check_index, choose_pins, ensure_env, list_releases, resolve_version, selected

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MATRIX_PROGRAMS = (
    "naive",
    "take",
    "vmap_naive",
    "eqx_embedding",
    "grad_naive",
    "grad_take",
    "grad_vmap_naive",
    "grad_eqx_embedding",
)
MATRIX_METRICS = ("kernels", "while_loops", "dynamic_kernel_launches")
PREDICTED_METRIC = "estimated_cycles"
KERNEL_METRICS = ("cas_atomics", "float_atomics", "vector_width")
KERNEL_TITLE = "CAS atomics / native float atomics / vector width (bits) in the kernels' code"
MATRIX_K = "test_structure"
MATRIX_CONFIG = "f32"


@dataclasses.dataclass
class MatrixRow:
    version: str
    target: str
    program: str
    metrics: dict[str, int | None]


def matrix_rows(version: str, results: Results) -> list[MatrixRow]:
    rows = []
    for it in results.items:
        if it.kind == "structure" and it.config == MATRIX_CONFIG:
            metrics = (*MATRIX_METRICS, PREDICTED_METRIC, *KERNEL_METRICS, *OFFLOAD_COUNTS)
            rows.append(MatrixRow(version, str(it.target), str(it.program), {m: it.get(m) for m in metrics}))
    return rows


def matrix_failures(version: str, results: Results) -> dict[tuple[str, str, str], str]:
    """``(release, target, program) -> the compile's first line``: its verdict there, never "unavailable"."""
    failed = ((key, it) for it in results.items if (key := compile_failure(it)) is not None)
    return {(version, k.target, k.program): it.reason or "" for k, it in failed if k.config == MATRIX_CONFIG}


def matrix_limits(version: str, results: Results) -> dict[tuple[str, str, str], tuple[str, str]]:
    """``(release, target, program) -> (the API, the line)`` of each structure the tool's limit on that
    release skipped (an API of JAX it lacks): not a verdict on the program, and not compiled there."""
    skipped = (it for it in results.items if it.kind == "skipped" and it.get("lacks") and it.program)
    return {
        (version, str(it.target), str(it.program)): (str(it.get("lacks")), it.reason or "")
        for it in skipped
        if it.config == MATRIX_CONFIG
    }


def why_nothing(targets: str, results: Results) -> str:
    """Why a release's run recorded no structure item: the target's reason, else an item's error."""
    for name, state in results.targets.items():
        if state.get("unavailable"):
            return f"{name} unavailable in that release: {state['unavailable']}"
    for it in results.items:
        if it.outcome == "failed" and it.reason:
            return f"{it.nodeid} failed: {it.reason}"
    return f"no {targets} structure item ran in that release"


_Metrics = Mapping[str, int | None]
_NO_KERNEL_METRICS = (
    "no kernel metrics recorded (its compiles kept no kernel code this checkout reads): the kernel-code "
    "table shows ? for it"
)


def _has_code(metrics: _Metrics) -> bool:
    return any(metrics.get(k) is not None for k in KERNEL_METRICS)


def kernel_notes(rows: Sequence[MatrixRow], versions: Sequence[str]) -> dict[str, str]:
    """A note per target and release without kernel metrics where another release of it has some."""
    notes = {}
    for target in sorted({r.target for r in rows}):
        mine = [r for r in rows if r.target == target]
        if any(_has_code(r.metrics) for r in mine):
            notes.update({f"{target}, jax {v}": _NO_KERNEL_METRICS for v in _without_code(mine, versions)})
    return notes


def _without_code(rows: Sequence[MatrixRow], versions: Sequence[str]) -> list[str]:
    compiled = [v for v in versions if any(r.version == v for r in rows)]
    return [v for v in compiled if not any(_has_code(r.metrics) for r in rows if r.version == v)]


def render_matrix(
    rows: Sequence[MatrixRow],
    versions: Sequence[str],
    notes: Mapping[str, str],
    failures: Mapping[tuple[str, str, str], str] | None = None,
    limits: Mapping[tuple[str, str, str], tuple[str, str]] | None = None,
) -> str:
    """Markdown: the tables of each target, then the notes, the compile failures' first lines and the lines
    of the cells the tool's limit on a release skipped (:func:`matrix_limits`)."""
    failures, limits = failures or {}, limits or {}
    out = []
    for target in sorted({r.target for r in rows} | {t for _, t, _ in [*failures, *limits]}):
        out += _target_tables(target, rows, versions, failures, limits)
    out += offload_lines(rows, versions)
    out += [f"- {key}: {note}" for key, note in notes.items()]
    out += [f"- {prog} on {target}, jax {v}: {why}" for (v, target, prog), why in failures.items()]
    out += [
        f"- {prog} on {target}, jax {v}: skipped: {why}" for (v, target, prog), (_, why) in limits.items()
    ]
    return "\n".join(out).rstrip() + "\n"


# A table's title, its columns' alignment, the metrics of a cell and the format of one value.
_Table = tuple[str, str, tuple[str, ...], str]


def _target_tables(
    target: str,
    rows: Sequence[MatrixRow],
    versions: Sequence[str],
    failed: Mapping[tuple[str, str, str], str],
    limits: Mapping[tuple[str, str, str], tuple[str, str]],
) -> list[str]:
    """A row per program, a column per release; the predicted cost and kernel-code tables where some cell has
    them."""
    programs, cells = _cells(target, rows, failed, limits)
    compiled = [m for m in cells.values() if not isinstance(m, str)]
    tables: list[_Table] = [
        (f"{target}: kernels / while loops / dynamic kernel launches (f32)", "---|", MATRIX_METRICS, "{}")
    ]
    if any(m.get(PREDICTED_METRIC) is not None for m in compiled):
        title = f"{target}: predicted cost, estimated cycles per call (the compiler's own estimate)"
        tables.append((title, "---:|", (PREDICTED_METRIC,), "{:,}"))
    if any(_has_code(m) for m in compiled):
        tables.append((f"{target}: {KERNEL_TITLE} (f32)", "---|", KERNEL_METRICS, "{}"))
    out = []
    for title, align, names, spec in tables:
        out += [
            f"### {title}\n",
            "| program | " + " | ".join(versions) + " |",
            "|---|" + align * len(versions),
        ]
        for prog in programs:
            out.append(
                f"| {prog} | "
                + " | ".join(_row([cells.get((prog, v)) for v in versions], names, spec))
                + " |"
            )
        out.append("")
    return out


def _cells(
    target: str,
    rows: Sequence[MatrixRow],
    failures: Mapping[tuple[str, str, str], str],
    limits: Mapping[tuple[str, str, str], tuple[str, str]],
) -> tuple[list[str], dict[tuple[str, str], _Cell]]:
    """The programs of ``target``'s rows, and each cell: its metrics, or the words of one not compiled."""
    unmade = {(p, v): "compile failed" for v, t, p in failures if t == target}
    unmade |= {(p, v): f"skipped: no {api}" for (v, t, p), (api, _) in limits.items() if t == target}
    mine = [r for r in rows if r.target == target]
    programs = list(dict.fromkeys([*(r.program for r in mine), *(p for p, _ in unmade)]))
    cells: dict[tuple[str, str], _Cell] = {(r.program, r.version): r.metrics for r in mine}
    cells.update(unmade)
    return programs, cells


def _row(row: list[_Cell | None], names: Sequence[str], spec: str) -> list[str]:
    """A kernel-code cell that differs from the release before it is in bold."""
    out, before = [], None
    for m in row:
        if isinstance(m, str) or not m:
            out.append(m if isinstance(m, str) else "—")
            continue
        text = _text(m, names, spec)
        changed = names == KERNEL_METRICS and before not in (None, text) and _has_code(m)
        out.append(f"**{text}**" if changed else text)
        before = text if _has_code(m) else before
    return out


def _text(m: _Metrics, names: Sequence[str], spec: str) -> str:
    return " / ".join("?" if (v := m.get(k)) is None else spec.format(v) for k in names)


def offload_lines(rows: Sequence[MatrixRow], versions: Sequence[str]) -> list[str]:
    """A line per program, target and release whose gathers or scatters moved to or off the SparseCore."""
    out = []
    for target, program in dict.fromkeys((r.target, r.program) for r in rows):
        by_v = {r.version: r.metrics for r in rows if (r.target, r.program) == (target, program)}
        compiled = [v for v in versions if v in by_v]
        for before, after in itertools.pairwise(compiled):
            moved = offload_moves(by_v[before], by_v[after])
            if moved:
                out.append(f"- {program}[{MATRIX_CONFIG}] on {target}, jax {before} → {after}: {moved}")
    return out


# A cell: the metrics of a compile, or the words of a program not compiled in that release, in every table
# (its compile failed, or the tool's limit on the release skipped it; the line why is under the tables).
_Cell = _Metrics | str


def plot_matrix(rows: Sequence[MatrixRow], versions: Sequence[str], path: Path) -> None:
    """A panel per metric; a colour per program and a line style per target: 16 series stay legible."""
    plt = pyplot(path)
    metrics = _plotted_metrics(rows)
    ncols = min(4, len(metrics))
    nrows = math.ceil(len(metrics) / ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(5.5 * ncols, 4.2 * nrows), squeeze=False)
    axes = list(grid.flat)
    programs = sorted({r.program for r in rows})
    colours = {p: plt.get_cmap("tab10")(i % 10) for i, p in enumerate(programs)}
    for ax, metric in zip(axes, metrics, strict=False):
        for target, program, xs, ys in _series(rows, versions, metric):
            style = "-" if target == "cpu" else "--" if target.startswith("gpu") else ":"
            ax.plot(xs, ys, style, marker="o", color=colours[program], label=f"{target} {program}")
        _metric_axes(ax, metric, versions)
    for ax in axes[len(metrics) :]:
        ax.set_visible(False)
    fig.tight_layout()
    _legend(fig, axes[: len(metrics)])
    save_figure(fig, path, "--out", bbox_inches="tight", format="png")  # the legend sits right of the panels


def _legend(fig: Figure, axes: list[Axes]) -> None:
    handles: dict[str, Artist] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
    fig.legend(list(handles.values()), list(handles), fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _plotted_metrics(rows: Sequence[MatrixRow]) -> list[str]:
    """The structure metrics, and the predicted cost and the kernel-code metrics where some row has them."""
    optional = (PREDICTED_METRIC, *KERNEL_METRICS)
    return [*MATRIX_METRICS, *(k for k in optional if any(r.metrics.get(k) is not None for r in rows))]


_ATOMICS = ("cas_atomics", "float_atomics")


def _series(
    rows: Sequence[MatrixRow], versions: Sequence[str], metric: str
) -> list[tuple[str, str, list[int], list[float]]]:
    """Each target and program's points. Atomic counts are small integers that several programs share: a
    series at 0 throughout is left out (it would hide those that move), and each is drawn a little apart."""
    drawn = []
    for target, program in sorted({(r.target, r.program) for r in rows}):
        xs, ys = _points(rows, (target, program), versions, metric)
        if xs and (any(ys) or metric not in _ATOMICS):
            drawn.append((target, program, xs, ys))
    step = 0.06 if metric in _ATOMICS else 0.0
    middle = (len(drawn) - 1) / 2
    return [(t, p, xs, [y + (n - middle) * step for y in ys]) for n, (t, p, xs, ys) in enumerate(drawn)]


def _points(
    rows: Sequence[MatrixRow], series: tuple[str, str], versions: Sequence[str], metric: str
) -> tuple[list[int], list[float]]:
    by_v = {r.version: r.metrics.get(metric) for r in rows if (r.target, r.program) == series}
    xs = [i for i, v in enumerate(versions) if by_v.get(v) is not None]
    return xs, [float(by_v[versions[i]] or 0) for i in xs]


def _metric_axes(ax: Axes, metric: str, versions: Sequence[str]) -> None:
    ax.set_xticks(range(len(versions)), versions)
    ax.set_xlabel("jax release")
    title = f"{metric} (kernel code; series at 0 throughout not drawn)" if metric in _ATOMICS else metric
    ax.set_title(title, fontsize=9)
    if metric in ("dynamic_kernel_launches", PREDICTED_METRIC):
        ax.set_yscale("symlog")
        ax.set_ylim(bottom=0)  # launches are counts: no negative half of the symlog axis
    if metric in _ATOMICS:
        ax.set_ylim(bottom=-0.5)


def matrix_gpus(targets: str) -> str:
    """The GPU targets of ``--targets`` ('all': the gpu family); a word that names only a target matrix
    does not run is one line, never ignored."""
    from ..compile.process import held_stderr  # it imports pytest (the test extra), which --help needs not

    words = selectors(targets, "--targets", TARGETS_HINT)
    with held_stderr():  # the targets come with the catalog: JAX, and the CUDA plugin's notices
        gpus = [name for name in all_targets() if name.startswith("gpu-")]
        chosen = {word: {t.name for t in select_targets(word)} for word in words}
    for word in words:
        if not chosen[word] & {"cpu", "tpu-v5e", *gpus}:
            raise InvariantsError(
                f"--targets {targets}: matrix does not run {word}; it runs cpu, tpu-v5e (unless --no-tpu) "
                f"and the GPU targets named here (gpu, {', '.join(gpus)})"
            )
    return ",".join("gpu" if w == "all" else w for w in words if selected(w, "gpu"))


def main_matrix(argv: list[str]) -> int:
    p = Parser(
        prog="python -m invariants matrix",
        description="key metrics across releases",
        epilog="Exit status: 0 every release compiled for every target asked for, 2 bad input, 4 a release "
        "could not compile a target asked for, or a program for the tool's want of an API of JAX in it (each "
        "named under the tables; the last line names them).",
    )
    p.add_argument("--versions", required=True, help="comma-separated jax releases, e.g. 0.4.30,0.5.3,0.10.2")
    p.add_argument("--out", type=Path, default=Path("artifacts") / "matrix", help="folder for table and PNG")
    p.add_argument("--no-tpu", action="store_true", help="skip the TPU (jax[tpu]) environments")
    add_release_options(p)
    args = p.parse_args(argv)
    project = project_from(args)
    if args.programs is None:  # a project's own programs, where it names a spec folder; else the catalog's
        args.programs = "tag:user" if project.own else ",".join(MATRIX_PROGRAMS)
    # Everything the command line can get wrong, before any release installs; the folders are made only
    # when there is something to write: a command stopped by bad input leaves none.
    check_output_dir(args.out, "--out", make=False)
    if args.keep is not None:
        check_output_dir(args.keep, "--keep", make=False)
    wanted = selectors(args.versions, "--versions", "name jax releases, e.g. 0.4.30,0.10.2")
    gpus = matrix_gpus(args.targets)
    check_selection(
        MATRIX_K,
        "cpu",
        args.programs,
        MATRIX_CONFIG,
        tests="test_structure.py",
        kinds=("structure",),
        project=project,
    )
    start = time.perf_counter()
    check_index(args.index_url)
    jax_releases = list_releases("jax", args.index_url)
    versions = sorted({resolve_version(w, jax_releases, "--versions") for w in wanted})
    jaxlib_releases = list_releases("jaxlib", args.index_url)
    matrix = _Matrix()
    with tempfile.TemporaryDirectory(prefix="invariants-matrix-") as tmp:
        workdir = check_output_dir(args.keep, "--keep") if args.keep is not None else Path(tmp)
        for v in versions:
            _release(matrix, v, jaxlib_releases, workdir, gpus, args, project)
    names = [str(v) for v in versions]
    for key, note in kernel_notes(matrix.rows, names).items():
        matrix.notes.setdefault(key, note)
        print(f"  {key}: {note}")
    table = render_matrix(matrix.rows, names, matrix.notes, matrix.failures, matrix.limits)
    check_output_dir(args.out, "--out")
    write_atomic(args.out / "matrix.md", table, "--out")
    write_atomic(
        args.out / "matrix.json", json.dumps([dataclasses.asdict(r) for r in matrix.rows], indent=1), "--out"
    )
    print(table)
    plot_matrix(matrix.rows, names, args.out / "matrix.png")
    print(
        f"matrix: {args.out / 'matrix.md'}, {args.out / 'matrix.png'} ({time.perf_counter() - start:.0f} s)"
    )
    if matrix.skipped:
        raise NothingChecked(f"matrix: not compiled: {'; '.join(matrix.skipped)}")
    return 0


@dataclasses.dataclass
class _Matrix:
    rows: list[MatrixRow] = dataclasses.field(default_factory=list)
    notes: dict[str, str] = dataclasses.field(default_factory=dict)
    failures: dict[tuple[str, str, str], str] = dataclasses.field(default_factory=dict)
    limits: dict[tuple[str, str, str], tuple[str, str]] = dataclasses.field(default_factory=dict)
    skipped: list[str] = dataclasses.field(default_factory=list)  # "TARGETS, jax V", each a note or line

    def add(self, version: str, results: Results) -> bool:
        """Whether the run had any rows, compile failures or cells the tool's limit skipped."""
        got, failed = matrix_rows(version, results), matrix_failures(version, results)
        limited = matrix_limits(version, results)
        self.rows += got
        self.failures.update(failed)
        self.limits.update(limited)
        self.skipped += [f"{p} on {t}, jax {v}" for v, t, p in limited]
        for _, why in limited.values():
            print(f"  jax {version}: skipped: {why}")
        return bool(got or failed or limited)


def _release(
    matrix: _Matrix,
    v: Version,
    jaxlib_releases: Sequence[Version],
    workdir: Path,
    gpus: str,
    args: argparse.Namespace,
    project: Project,
) -> None:
    """On the CPU, then on tpu-v5e and the GPU targets in environments of their own, each skipped with a
    note when it cannot run."""
    structures = functools.partial(
        run_suite,
        k=MATRIX_K,
        programs=args.programs,
        configs=MATRIX_CONFIG,
        tests="test_structure.py",
        project=project,
        kept=args.keep is not None,
    )
    env = ensure_env(choose_pins(v, jaxlib_releases), args.cache_dir, args.index_url)
    results, seconds = structures(env, v, workdir / "cpu", targets="cpu")
    matrix.add(str(v), results)
    print(f"  jax {v}: cpu structures in {seconds:.0f} s")
    accelerators = ([] if args.no_tpu else [("tpu-v5e", False)]) + ([(gpus, True)] if gpus else [])
    for targets, gpu in accelerators:
        try:
            xenv = ensure_env(
                choose_pins(v, jaxlib_releases, tpu=not gpu, gpu=gpu), args.cache_dir, args.index_url
            )
            folder = workdir / ("gpu" if gpu else "tpu")
            results, seconds = structures(xenv, v, folder, targets=targets, timeout=240)
            if not matrix.add(str(v), results):
                raise InvariantsError(why_nothing(targets, results))
            print(f"  jax {v}: {targets} structures in {seconds:.0f} s")
        except InvariantsError as err:
            matrix.notes[f"{targets}, jax {v}"] = f"skipped: {err}"
            matrix.skipped.append(f"{targets}, jax {v}")
            print(f"  jax {v}: {targets} skipped: {err}")
