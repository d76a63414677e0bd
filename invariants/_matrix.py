"""``python -m invariants matrix``: how each canonical program's structure evolved across JAX releases.

The structure tier of a few canonical programs (f32) in each release, on ``cpu`` and, where
``jax[tpu]==VERSION`` installs, on ``tpu-v5e`` ahead of time; a markdown table and a PNG. Each release
runs in its own cached environment (:mod:`invariants._releases`), through
:func:`invariants._bisect.run_suite`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._bisect import add_release_options, run_suite
from ._errors import InvariantsError
from ._releases import (
    check_index,
    choose_pins,
    ensure_env,
    gpu_selected,
    list_releases,
    resolve_version,
)

# ---------------------------------------------------------------------------------------------------------
# matrix


MATRIX_PROGRAMS = ("naive", "take", "vmap_naive", "eqx_embedding",
                   "grad_naive", "grad_take", "grad_vmap_naive", "grad_eqx_embedding")  # fmt: skip
MATRIX_METRICS = ("kernels", "while_loops", "dynamic_kernel_launches")
# The predicted-cost row: libtpu's estimate, on the targets whose compiler writes one (see invariants._cost).
PREDICTED_METRIC = "estimated_cycles"
# The structure tier in the seed's configuration only.
MATRIX_K = "test_structure"
MATRIX_CONFIG = "f32"


@dataclasses.dataclass
class MatrixRow:
    version: str
    target: str
    program: str
    metrics: dict[str, int | None]


def matrix_rows(version: str, results: Mapping[str, Any]) -> list[MatrixRow]:
    rows = []
    for it in results.get("items", []):
        if it.get("kind") == "structure" and it.get("config") == MATRIX_CONFIG:
            rows.append(MatrixRow(version, str(it["target"]), str(it["program"]),
                                  {m: it.get(m) for m in (*MATRIX_METRICS, PREDICTED_METRIC)}))  # fmt: skip
    return rows


def render_matrix(rows: Sequence[MatrixRow], versions: Sequence[str], notes: Mapping[str, str]) -> str:
    """Markdown: one table per target; a cell is ``kernels / while loops / dynamic launches``."""
    out = []
    for target in sorted({r.target for r in rows}):
        programs = list(dict.fromkeys(r.program for r in rows if r.target == target))
        cells = {(r.program, r.version): r.metrics for r in rows if r.target == target}
        out.append(f"### {target}: kernels / while loops / dynamic kernel launches (f32)\n")
        out.append("| program | " + " | ".join(versions) + " |")
        out.append("|---|" + "---|" * len(versions))
        for prog in programs:
            row = []
            for v in versions:
                m = cells.get((prog, v))
                row.append(" / ".join("?" if m.get(k) is None else str(m.get(k)) for k in MATRIX_METRICS)
                           if m else "—")  # fmt: skip
            out.append(f"| {prog} | " + " | ".join(row) + " |")
        out.append("")
        if any(m.get(PREDICTED_METRIC) is not None for m in cells.values()):
            out.append(
                f"### {target}: predicted cost, estimated cycles per call (the compiler's own estimate)\n"
            )
            out.append("| program | " + " | ".join(versions) + " |")
            out.append("|---|" + "---:|" * len(versions))
            for prog in programs:
                row = []
                for v in versions:
                    m = cells.get((prog, v))
                    value = m.get(PREDICTED_METRIC) if m else None
                    row.append("—" if not m else "?" if value is None else f"{value:,}")
                out.append(f"| {prog} | " + " | ".join(row) + " |")
            out.append("")
    for key, note in notes.items():
        out.append(f"- {key}: {note}")
    return "\n".join(out).rstrip() + "\n"


def plot_matrix(rows: Sequence[MatrixRow], versions: Sequence[str], path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        raise InvariantsError(f"{path}: matplotlib is not installed (pip install matplotlib)") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [*MATRIX_METRICS]
    if any(r.metrics.get(PREDICTED_METRIC) is not None for r in rows):
        metrics.append(PREDICTED_METRIC)
    fig, axes = plt.subplots(1, len(metrics), figsize=(6 * len(metrics), 4.5))
    series = sorted({(r.target, r.program) for r in rows})
    # One colour per program (the same on every target), one line style per target: 16 series stay legible.
    programs = sorted({p for _, p in series})
    colours = {p: plt.get_cmap("tab10")(i % 10) for i, p in enumerate(programs)}
    for ax, metric in zip(axes, metrics, strict=True):
        for target, program in series:
            by_v = {
                r.version: r.metrics.get(metric) for r in rows if (r.target, r.program) == (target, program)
            }
            xs = [i for i, v in enumerate(versions) if by_v.get(v) is not None]
            ys = [by_v[versions[i]] for i in xs]
            if xs:
                style = "-" if target == "cpu" else "--"
                ax.plot(xs, ys, style, marker="o", color=colours[program], label=f"{target} {program}")
        ax.set_xticks(range(len(versions)), versions)
        ax.set_xlabel("jax release")
        ax.set_title(metric)
        if metric in ("dynamic_kernel_launches", PREDICTED_METRIC):
            ax.set_yscale("symlog")
            ax.set_ylim(bottom=0)  # launches are counts: no negative half of the symlog axis
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main_matrix(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m invariants matrix", description="key metrics across releases")
    p.add_argument("--versions", required=True, help="comma-separated jax releases, e.g. 0.4.30,0.5.3,0.10.2")
    p.add_argument("--out", type=Path, default=Path("artifacts") / "matrix", help="folder for table and PNG")
    p.add_argument("--no-tpu", action="store_true", help="skip the TPU (jax[tpu]) environments")
    add_release_options(p)
    args = p.parse_args(argv)
    if args.programs is None:
        args.programs = ",".join(MATRIX_PROGRAMS)
    start = time.perf_counter()
    check_index(args.index_url)
    jax_releases = list_releases("jax", args.index_url)
    wanted = [w.strip() for w in args.versions.split(",") if w.strip()]
    versions = sorted({resolve_version(w, jax_releases, "--versions") for w in wanted})
    jaxlib_releases = list_releases("jaxlib", args.index_url)
    # The GPU words of --targets ('all' counts as the gpu family): compiled with each release's CUDA plugin.
    gpus = ",".join(
        "gpu" if w.strip() == "all" else w.strip() for w in args.targets.split(",") if gpu_selected(w)
    )
    rows: list[MatrixRow] = []
    notes: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="invariants-matrix-") as tmp:
        workdir = args.keep or Path(tmp)
        for v in versions:
            env = ensure_env(choose_pins(v, jaxlib_releases), args.cache_dir, args.index_url)
            results, seconds = run_suite(env, v, workdir / "cpu", k=MATRIX_K, targets="cpu",
                                         programs=args.programs, configs=MATRIX_CONFIG,
                                         tests="test_structure.py")  # fmt: skip
            rows += matrix_rows(str(v), results)
            print(f"  jax {v}: cpu structures in {seconds:.0f} s")
            # tpu-v5e in a jax[tpu] environment; the GPU targets of --targets in a jax[cuda12-local] one.
            for targets, gpu in ([] if args.no_tpu else [("tpu-v5e", False)]) + (
                [(gpus, True)] if gpus else []
            ):
                try:
                    pins = choose_pins(v, jaxlib_releases, tpu=not gpu, gpu=gpu)
                    xenv = ensure_env(pins, args.cache_dir, args.index_url)
                    results, seconds = run_suite(xenv, v, workdir / ("gpu" if gpu else "tpu"), k=MATRIX_K,
                                                 targets=targets, programs=args.programs,
                                                 configs=MATRIX_CONFIG, tests="test_structure.py",
                                                 timeout=240)  # fmt: skip
                    got = matrix_rows(str(v), results)
                    if not got:
                        raise InvariantsError(
                            f"no {targets} structure items (target unavailable in that release)"
                        )
                    rows += got
                    print(f"  jax {v}: {targets} structures in {seconds:.0f} s")
                except InvariantsError as err:
                    notes[f"{targets}, jax {v}"] = f"skipped: {err}"
                    print(f"  jax {v}: {targets} skipped: {err}")
    names = [str(v) for v in versions]
    table = render_matrix(rows, names, notes)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "matrix.md").write_text(table)
    (args.out / "matrix.json").write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1))
    print(table)
    plot_matrix(rows, names, args.out / "matrix.png")
    print(
        f"matrix: {args.out / 'matrix.md'}, {args.out / 'matrix.png'} ({time.perf_counter() - start:.0f} s)"
    )
    return 0


def main(argv: list[str]) -> int:
    return main_matrix(argv)
