"""Fit the TPU cost model (``predicted_seconds``, invariants/hlo/tpu_model.py) on a chip's measurements, and
say how well it predicts programs it never saw.

The measurements are ``tests/data/tpu-v5e-chip/`` (its README says how they were taken): per program, the
device time of one call and each HLO instruction's own device time (the trace's ``XLA Ops`` line), with
the optimized HLO the chip compiled. The fit is a non-negative least squares on relative error over
every kernel's own time outside loops (each a row of its kind's features), plus one row per program (its
time less its async waits) which alone shows what a loop's trips cost; then the bytes per second of an
async transfer, from the waits the chip timed (a wait costs the transfer less the kernels scheduled
while it runs). Nothing is keyed on a program's name.

Held out: each program (all its configurations) left out of the fit in turn, then each family (the
catalog is one family: the probes alone must predict it). For each: Spearman between predicted and chip
time over the held-out programs, the median and worst relative error, and each twin pair's predicted
ratio beside the chip's (the pairs of the catalog's TPU time relations).

Usage::

    python benchmarks/fit_tpu_cost.py            # fit, print the figures
    python benchmarks/fit_tpu_cost.py --write    # and write them to invariants/data/tpu_cost.toml
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip
import json
import math
import re
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import nnls
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from invariants._paths import write_atomic  # noqa: E402
from invariants.hlo.cost import cycle_estimate  # noqa: E402
from invariants.hlo.parse import parse_module  # noqa: E402
from invariants.hlo.structure import structure_of  # noqa: E402
from invariants.hlo.tpu_model import COLUMNS, ChipModel, Launch, compiler_kernel, launches  # noqa: E402

DATA = ROOT / "tests" / "data" / "tpu-v5e-chip"
# Whole model steps and twin pairs the fit never sees, timed on the same chip.
HELD_OUT = DATA / "heldout"
LARGER = DATA / "larger"
# How often the fit is done again with errors relative to its own predictions (see fit).
REWEIGHTS = 1
# A relation's bound, at which a twin pair's predicted verdict is held to the chip's.
TWIN_BOUND = 1.10
COST_FILE = ROOT / "invariants" / "data" / "tpu_cost.toml"
# The catalog's TPU time relations (invariants/tpu.toml): numerator, denominator.
TWINS = (
    ("eqx_embedding", "take"),
    ("grad_vmap_naive", "grad_vmap_take"),
    ("train_eqx_embedding", "train_take"),
)
# A kernel's own time below this (us) is mostly the trace's resolution: relative error is taken against
# at least this much.
FLOOR_US = 2.0


@dataclasses.dataclass(frozen=True)
class Row:
    """One measured program: its chip time (us), its kernels, and each kernel's own time (us per call)."""

    program: str
    config: str
    family: str
    device_us: float
    launches: tuple[Launch, ...]
    ops_us: dict[str, float]
    # libtpu's own estimate of the program (estimated_cycles), for comparison; None without one.
    cycles: int | None = None

    @property
    def key(self) -> str:
        return f"{self.program}.{self.config}"

    def features(self) -> np.ndarray:
        return np.sum([launch.row() for launch in self.launches], axis=0)

    @functools.cached_property
    def design(self) -> Design:
        """Its lines of the least squares and its waits, read from its launches once for every fit."""
        return _row_design(self)


def _hlo_texts(folder: Path) -> dict[str, str]:
    texts: dict[str, str] = {}
    for path in sorted(folder.glob("corpus*-hlo.json.gz")):
        with gzip.open(path, "rt") as f:
            texts.update(json.load(f))
    return texts


# What must agree between two corpus files of one fit: the same chip and software.
_SAME = ("chip", "jax", "jaxlib", "libtpu", "clock")


@functools.cache
def load(folder: Path = DATA) -> tuple[Mapping[str, str], tuple[Row, ...]]:
    """The provenance and rows of a chip's corpus: every ``corpus*.json`` of ``folder``, each with its
    ``corpus*-hlo.json.gz``. Files of another chip or software, or a program measured twice, are refused;
    the provenance's ``date`` lists every file's. Read once per folder: the held-out reports ask again."""
    hlos = _hlo_texts(folder)
    provenance: dict[str, str] = {}
    rows: list[Row] = []
    for path in sorted(folder.glob("corpus*.json")):
        corpus = json.loads(path.read_text())
        prov = corpus["provenance"]
        if provenance and any(prov[k] != provenance[k] for k in _SAME):
            raise SystemExit(f"{path}: another chip or software than the other corpus files ({prov})")
        dates = provenance.get("date", "").split(", ") if provenance else []
        provenance = {**prov, "date": ", ".join(sorted({*dates, prov["date"]} - {""}))}
        for r in corpus["rows"]:
            key = f"{r['program']}.{r['config']}"
            if any(row.key == key for row in rows):
                raise SystemExit(f"{path}: {key} is measured twice")
            module = parse_module(hlos[key], key)
            structure = structure_of(module)
            rows.append(
                Row(r["program"], r["config"], r["family"], r["device_us_median"],
                    tuple(launches(module, structure)), dict(r["ops_us_per_call"]),
                    cycle_estimate(structure).cycles)
            )  # fmt: skip
    return provenance, tuple(rows)


@dataclasses.dataclass(frozen=True)
class Design:
    """What every fit reads of one row, in us: its lines of the least squares (``x``, ``y``); per wait, its
    bytes, the time the chip measured and its count (``waits``), and the features of one launch of each
    kernel scheduled between its start and its wait, whose price is what it hides (``hidden``)."""

    x: np.ndarray
    y: np.ndarray
    waits: np.ndarray
    hidden: np.ndarray


def _row_design(row: Row) -> Design:
    """Every kernel with its own time, and the program's total. A kernel in a loop is held only through its
    program's total: the trace splits a trip's time among its kernels as the scalar unit stalls them, not
    as each costs."""
    xs, ys = [], []
    for launch in row.launches:
        if launch.kind not in ("loop", "wait") and not launch.looped and launch.name in row.ops_us:
            xs.append(launch.row())
            ys.append(row.ops_us[launch.name])
    xs.append(list(row.features()))
    ys.append(row.device_us - sum(row.ops_us.get(w.name, 0.0) for w in row.launches if w.kind == "wait"))
    waits, hidden = [], []
    for w in (x for x in row.launches if x.kind == "wait"):
        between = [
            k.row(1)
            for k in row.launches
            if k.position[0] == w.position[0] and w.position[1] < k.position[1] < w.until
        ]
        waits.append((w.features["bytes"], row.ops_us.get(w.name, 0.0), w.count))
        hidden.append(np.sum(between, axis=0) if between else np.zeros(len(COLUMNS)))
    return Design(
        np.array(xs), np.array(ys), np.array(waits).reshape(-1, 3), np.array(hidden).reshape(-1, len(COLUMNS))
    )


def _design(rows: Sequence[Row]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the least squares (see _row_design), in us."""
    return np.concatenate([r.design.x for r in rows]), np.concatenate([r.design.y for r in rows])


def _model(theta: np.ndarray) -> ChipModel:
    return ChipModel("", dict(zip(COLUMNS, theta, strict=True)), False, "")


def _fit_waits(rows: Sequence[Row], theta: np.ndarray) -> float:
    """us per byte of an async transfer: what makes each wait's exposed part (the transfer less the
    kernels scheduled between its start and its wait) closest to the wait the chip timed."""
    waits = np.concatenate([r.design.waits for r in rows])
    if not len(waits):
        return 0.0
    b, m, n = waits.T
    h = np.concatenate([r.design.hidden for r in rows]) @ theta
    # The loss is flat where every transfer hides and kinks where one stops hiding: a grid, not a descent.
    grid = np.geomspace(1e-8, 1e-4, 801)[:, None]
    loss = ((n * (np.maximum(0.0, grid * b - h) - m) / (n * m + FLOOR_US)) ** 2).sum(axis=1)
    return float(grid[int(np.argmin(loss)), 0])


def fit(rows: Sequence[Row]) -> np.ndarray:
    """Coefficients (us per unit of each of COLUMNS) fitted on ``rows``: NNLS on relative error. An error
    relative to the measured time favours predicting low (an underestimate errs by at most 100%, an
    overestimate without bound), so the fit is done again with each row's error relative to the geometric
    mean of its time and the first fit's prediction."""
    x, y = _design(rows)
    used = np.any(x != 0, axis=0)
    theta = np.zeros(len(COLUMNS))
    scale = y
    for _ in range(1 + REWEIGHTS):
        w = 1.0 / np.maximum(np.sqrt(scale * y), FLOOR_US)
        theta[used], _ = nnls(x[:, used] * w[:, None], y * w, maxiter=50 * len(COLUMNS))
        scale = np.maximum(x @ theta, FLOOR_US)
    theta[COLUMNS.index("wait.bytes")] = _fit_waits(rows, theta)
    return theta


def predict(rows: Sequence[Row], theta: np.ndarray) -> np.ndarray:
    model = _model(theta)
    return np.array([model.seconds(row.launches) for row in rows])


@dataclasses.dataclass(frozen=True)
class Accuracy:
    """Held-out predictions (us, one per row) and their figures."""

    name: str
    predicted: np.ndarray
    measured: np.ndarray
    keys: tuple[str, ...]

    @property
    def spearman(self) -> float:
        return float(spearmanr(self.predicted, self.measured).statistic)

    @property
    def errors(self) -> np.ndarray:
        return np.abs(self.predicted - self.measured) / self.measured

    def twin_ratios(self) -> list[tuple[str, float, float]]:
        """(pair, predicted ratio, chip ratio) for every twin pair measured in one configuration."""
        at = {k: (p, m) for k, p, m in zip(self.keys, self.predicted, self.measured, strict=True)}
        out = []
        for a, b in TWINS:
            for key in sorted(k for k in at if k.startswith(a + ".")):
                other = b + key[len(a) :]
                if other in at and at[other][0] > 0:
                    out.append((f"{key} / {other}", at[key][0] / at[other][0], at[key][1] / at[other][1]))
        return out


def held_out(rows: Sequence[Row], group: Callable[[Row], str], name: str) -> Accuracy:
    """Each group of rows predicted by a fit on all the others."""
    predicted = np.zeros(len(rows))
    for g in sorted({group(r) for r in rows}):
        out = [i for i, r in enumerate(rows) if group(r) == g]
        theta = fit([r for r in rows if group(r) != g])
        predicted[out] = predict([rows[i] for i in out], theta)
    measured = np.array([r.device_us for r in rows])
    return Accuracy(name, predicted, measured, tuple(r.key for r in rows))


def decade(row: Row) -> str:
    """The decade of a program's chip time, as a size group: ``1e2 us`` holds 100 us to 1 ms."""
    return f"1e{math.floor(math.log10(row.device_us))} us"


def report(acc: Accuracy, seconds: bool = True) -> str:
    """Its figures, one line, then a line per twin pair; ``seconds`` False: the predictions are no
    seconds (cycles), so only their ranking and ratios are shown."""
    errors = acc.errors
    worst = int(np.argmax(errors))
    line = f"{acc.name}: Spearman {acc.spearman:.3f} over {len(errors)} programs"
    if seconds:
        line += (
            f"; relative error median {statistics.median(errors):.1%}, worst {errors[worst]:.0%} "
            f"({acc.keys[worst]})"
        )
    lines = [line]
    for pair, predicted, chip in acc.twin_ratios():
        off = predicted / chip - 1
        lines.append(f"  {pair:48} predicted {predicted:9.2f}  chip {chip:9.2f}  ({off:+.0%})")
    return "\n".join(lines)


def largest_left_out(rows: Sequence[Row]) -> Accuracy:
    """Each family's largest program (the longest on the chip, at least 8x its next in size) predicted by a
    fit on everything else: how the model extrapolates in size. The catalog, whose sizes are its
    configurations, is no family of sizes here."""
    largest: dict[str, Row] = {}
    for r in rows:
        if r.family != "catalog" and r.device_us > largest.get(r.family, r).device_us:
            largest[r.family] = r
        largest.setdefault(r.family, r)
    out = sorted((r for f, r in largest.items() if f != "catalog"), key=lambda r: r.key)
    predicted = np.array([predict([r], fit([x for x in rows if x is not r]))[0] for r in out])
    measured = np.array([r.device_us for r in out])
    return Accuracy("each family's largest left out", predicted, measured, tuple(r.key for r in out))


def larger(theta: np.ndarray, folder: Path = LARGER) -> Accuracy:
    """Each family again at several times its largest fitted program, measured after the fit was settled
    (never fitted on), predicted by ``theta``."""
    _, rows = load(folder)
    measured = np.array([r.device_us for r in rows])
    return Accuracy(
        "each family larger, no fit saw", predict(rows, theta), measured, tuple(r.key for r in rows)
    )


def held_out_steps(theta: np.ndarray, folder: Path = HELD_OUT) -> list[Accuracy]:
    """The whole model steps and the twin pairs of ``folder`` (never fitted on), predicted by ``theta``:
    one Accuracy per family there."""
    _, held = load(folder)
    out = []
    for family in sorted({r.family for r in held}):
        these = [r for r in held if r.family == family] if family != "twins" else []
        if these:
            measured = np.array([r.device_us for r in these])
            out.append(Accuracy(family, predict(these, theta), measured, tuple(r.key for r in these)))
    whole = [r for r in held if r.family != "twins"]
    out.insert(0, Accuracy("whole steps", predict(whole, theta), np.array([r.device_us for r in whole]),
                           tuple(r.key for r in whole)))  # fmt: skip
    return out


@dataclasses.dataclass(frozen=True)
class Twin:
    """A twin pair's ratio ``time(a) / time(b)`` on the chip and predicted, and their verdicts at a bound."""

    pair: str
    chip: float
    predicted: float

    @property
    def error(self) -> float:
        return self.predicted / self.chip - 1

    def agrees(self, bound: float = TWIN_BOUND) -> bool:
        return (self.chip <= bound) == (self.predicted <= bound)


def twins(theta: np.ndarray, folder: Path = HELD_OUT) -> list[Twin]:
    """The held-out twin pairs (``steps.TWINS``), each side predicted by ``theta``."""
    _, held = load(folder)
    at = {r.program: (p, r.device_us) for r, p in zip(held, predict(held, theta), strict=True)}
    return [
        Twin(f"{a} / {b}", at[a][1] / at[b][1], at[a][0] / at[b][0])
        for a, b in _steps().TWINS
        if a in at and b in at
    ]


def _steps() -> Any:
    sys.path.insert(0, str(DATA))
    import steps

    return steps


def timed_custom_calls(folder: Path = DATA) -> list[str]:
    """The targets of the custom calls the chip ran as kernels of their own, beside the compiler's own
    kernels that are kinds of their own (an online softmax is a ``tpu_custom_call``, as a Pallas kernel
    is)."""
    found: set[str] = set()
    for key, text in _hlo_texts(folder).items():
        module = parse_module(text, key)
        priced = {i.name for c in module.computations.values() for i in c if compiler_kernel(i) is not None}
        found |= {
            k.custom_call_target
            for k in structure_of(module).kernel_list
            if k.custom_call_target and k.name not in priced
        }
    return sorted(found)


def toml_text(
    theta: np.ndarray, provenance: Mapping[str, str], fitted_on: int, custom_calls: Sequence[str] = ()
) -> str:
    """The coefficients file: the v5e's fitted coefficients (seconds per unit) and the other chips scaled."""
    template = COST_FILE.read_text(encoding="utf-8")
    coefficients = "\n".join(f'"{c}" = {v * 1e-6:.6e}' for c, v in zip(COLUMNS, theta, strict=True))
    p = provenance
    block = (
        f'[chip.v5e]\nchip = "{p["chip"]}"\njax = "{p["jax"]}"\njaxlib = "{p["jaxlib"]}"\nlibtpu = '
        f'"{p["libtpu"]}"\ndate = "{p["date"]}"\nclock = "{p["clock"]}: {p["how"]}"\ndata = '
        f'"tests/data/tpu-v5e-chip ({fitted_on} programs)"\nfitted = "benchmarks/fit_tpu_cost.py: NNLS on '
        f"relative error over each kernel's own device time and each program's\"\nsource = \"fitted on a TPU "
        f'v5e ({p["chip"]}), jax {p["jax"]}, libtpu {p["libtpu"]}, {p["date"]}"\n\n'
        f"timed_custom_calls = {json.dumps(list(custom_calls))}\n\n[chip.v5e.coefficients]\n{coefficients}\n"
    )
    return re.sub(r"\[chip\.v5e\].*?(?=\n# ---|\Z)", lambda _: block, template, count=1, flags=re.DOTALL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, default=DATA, help="folder of corpus.json and corpus-hlo.json.gz"
    )
    parser.add_argument("--write", action="store_true", help=f"write the coefficients to {COST_FILE}")
    opts = parser.parse_args(argv)
    provenance, rows = load(opts.data)
    theta = fit(rows)
    p = provenance
    print(f"{len(rows)} programs, {p['chip']}, jax {p['jax']}, libtpu {p['libtpu']}, {p['date']}")
    for col, v in zip(COLUMNS, theta, strict=True):
        print(f"  {col:22} {v:.4g} us")
    measured = np.array([r.device_us for r in rows])
    cycles = np.array([float(r.cycles or 0) for r in rows])
    print(
        report(
            Accuracy("libtpu's estimated_cycles alone", cycles, measured, tuple(r.key for r in rows)), False
        )
    )
    print(report(Accuracy("in sample", predict(rows, theta), measured, tuple(r.key for r in rows))))
    print(report(held_out(rows, lambda r: r.program, "leave one program out")))
    print(report(held_out(rows, lambda r: r.family, "leave one family out")))
    by_size = held_out(rows, decade, "leave one size decade out")
    print(report(by_size))
    for d in sorted({decade(r) for r in rows}):
        errors = [e for e, r in zip(by_size.errors, rows, strict=True) if decade(r) == d]
        within = sum(e <= 0.25 for e in errors)
        print(
            f"  {d:8} {len(errors):4} programs, median error {statistics.median(errors):.1%}, "
            f"{within} within 25%"
        )
    print(report(largest_left_out(rows)))
    big = larger(theta)
    print(report(big))
    for key, p, m in zip(big.keys, big.predicted, big.measured, strict=True):
        print(f"  {key:48} predicted {p:10.1f} us  chip {m:10.1f} us  ({p / m - 1:+.0%})")
    for acc in held_out_steps(theta):
        print(report(acc))
        if acc.name == "whole steps":
            for key, p, m in zip(acc.keys, acc.predicted, acc.measured, strict=True):
                print(f"  {key:48} predicted {p:10.1f} us  chip {m:10.1f} us  ({p / m - 1:+.0%})")
    for t in twins(theta):
        word = "same verdict" if t.agrees() else f"VERDICTS DIFFER at {TWIN_BOUND}"
        print(
            f"  twin {t.pair:46} predicted {t.predicted:8.3f}  chip {t.chip:8.3f}  ({t.error:+.0%}); {word}"
        )
    if opts.write:
        write_atomic(COST_FILE, toml_text(theta, provenance, len(rows), timed_custom_calls(opts.data)))
        print(f"wrote {COST_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
