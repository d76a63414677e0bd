#!/usr/bin/env python3
"""Paired, interleaved wall-clock timing of the embedding gradient's scatter-add under two JAX installations.

jaxlib 0.10.2 compiles the f32 scatter-add of ``jax.grad(lambda W: jnp.take(W, x, axis=0).sum())`` on
sm_80/86/89 to a compare-and-swap loop where 0.10.1 used a native atomic add (openxla/xla#46225); duplicate
indices make the loop spin. This times that gradient (W f32[8192,32] and bf16, 16384 int32 indices) under
index distributions with many duplicates (all-equal, zipf a=1.1) and few (uniform), on the GPU, in both
installations at once:

* one worker process per installation (``--baseline-python``, ``--candidate-python``: their interpreters),
  each compiling every case and warming it before the first timed call;
* pairs of blocks, one block of each side, in alternating order (AB, BA, AB, ...); a block is a few calls,
  each one timed by the wall clock up to ``block_until_ready``, and counts as the median of its calls;
* per case, the median of the per-pair ratios time(candidate) / time(baseline), with a distribution-free
  95% interval of that median (order statistics), and each side's median time per call.

It writes a JSON record (``--out``) and a markdown table (``--md``). ``--findings FILE --section MD``
replaces the section between ``<!-- device-check:begin -->`` and ``<!-- device-check:end -->`` of FILE
with the text of MD (appending it when FILE has none). ``--platform cpu --smoke`` runs tiny sizes on the CPU
with this interpreter on both sides: what the unit test runs.

It imports no project code (nothing that would start libtpu); the controller imports no JAX; the workers
run with ``JAX_PLATFORMS=--platform`` (``cuda`` by default), without ``XLA_FLAGS``, and without
preallocating GPU memory (two processes share the device).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

DTYPES = ("f32", "bf16")
DISTRIBUTIONS = ("all-equal", "zipf-1.1", "uniform")
FULL = {"vocab": 8192, "width": 32, "indices": 16384}
SMOKE = {"vocab": 64, "width": 4, "indices": 128}
BEGIN = "<!-- device-check:begin -->"
END = "<!-- device-check:end -->"
SEED = 20260101


class TimingError(Exception):
    """One line for the user: what failed and where."""


# ---------------------------------------------------------------------------------------------------------
# The worker (imports JAX).


def _indices(np: Any, dist: str, vocab: int, n: int) -> Any:
    rng = np.random.default_rng(SEED)
    if dist == "all-equal":
        return np.zeros(n, np.int32)
    if dist == "uniform":
        return rng.integers(0, vocab, n).astype(np.int32)
    if dist == "zipf-1.1":
        # Zipf truncated to the vocabulary (ranks past it drawn again): rank r has probability ~ r^-1.1,
        # rank 1 about a tenth of the lookups; the ranks are scattered over the rows.
        ranks = np.empty(0, np.int64)
        while ranks.size < n:
            draw = rng.zipf(1.1, n)
            ranks = np.concatenate([ranks, draw[draw <= vocab] - 1])
        return rng.permutation(vocab)[ranks[:n]].astype(np.int32)
    raise ValueError(dist)


def worker(smoke: bool) -> int:
    import hashlib

    import jax
    import jax.numpy as jnp
    import numpy as np

    size = SMOKE if smoke else FULL
    platform = os.environ.get("JAX_PLATFORMS", "")
    device = jax.devices()[0]
    want = {"cuda": "gpu", "gpu": "gpu", "cpu": "cpu"}.get(platform.split(",")[0], device.platform)
    if device.platform != want:
        raise TimingError(f"JAX_PLATFORMS={platform} but the first device is {device.platform}")
    grad = jax.jit(lambda W, x: jax.grad(lambda W: jnp.take(W, x, axis=0).sum())(W))
    cases: dict[str, Any] = {}
    info: dict[str, Any] = {}
    for dtype in DTYPES:
        table = jnp.asarray(
            np.random.default_rng(SEED).standard_normal((size["vocab"], size["width"]), np.float32),
            dtype=jnp.float32 if dtype == "f32" else jnp.bfloat16,
        )
        for dist in DISTRIBUTIONS:
            idx = _indices(np, dist, size["vocab"], size["indices"])
            x = jnp.asarray(idx)
            start = time.perf_counter()
            out = grad(table, x).block_until_ready()
            compile_s = time.perf_counter() - start
            warm = []
            for _ in range(3):
                t0 = time.perf_counter()
                grad(table, x).block_until_ready()
                warm.append(time.perf_counter() - t0)
            name = f"{dtype}/{dist}"
            cases[name] = (table, x)
            info[name] = {
                "indices_sha1": hashlib.sha1(idx.tobytes()).hexdigest()[:16],
                "distinct_rows": int(np.unique(idx).size),
                "compile_s": round(compile_s, 3),
                "warm_s": statistics.median(warm),
                "grad_sum": float(jnp.sum(out.astype(jnp.float32))),
            }
    hello = {
        "event": "hello",
        "python": sys.executable,
        "jax": jax.__version__,
        "jaxlib": _jaxlib_version(),
        "platform": device.platform,
        "device": device.device_kind,
        "size": size,
        "cases": info,
    }
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("op") == "quit":
            return 0
        table, x = cases[req["case"]]
        times = []
        for _ in range(int(req["calls"])):
            t0 = time.perf_counter()
            grad(table, x).block_until_ready()
            times.append(time.perf_counter() - t0)
        print(json.dumps({"times": times}), flush=True)
    return 0


def _jaxlib_version() -> str | None:
    try:
        import jaxlib

        return str(jaxlib.__version__)
    except (ImportError, AttributeError):
        return None


# ---------------------------------------------------------------------------------------------------------
# The controller (no JAX).


class Side:
    """One installation's worker process."""

    def __init__(self, role: str, python: str, platform: str, smoke: bool) -> None:
        self.role = role
        env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PYTHONPATH", "VIRTUAL_ENV")}
        env.update({"JAX_PLATFORMS": platform, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"})
        cmd = [python, str(Path(__file__).resolve()), "--worker"] + (["--smoke"] if smoke else [])
        self._log: IO[str] = _tempfile()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
                                     text=True, bufsize=1, env=env)  # fmt: skip
        self.hello: dict[str, Any] = {}

    def start(self) -> dict[str, Any]:
        self.hello = self._read()
        if self.hello.get("event") != "hello":
            raise TimingError(f"{self.role}: worker said {self.hello!r} instead of hello")
        return self.hello

    def block(self, case: str, calls: int) -> list[float]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"case": case, "calls": calls}) + "\n")
        self.proc.stdin.flush()
        return list(self._read()["times"])

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise TimingError(f"{self.role}: worker exited {self.proc.returncode} ({self._last_words()})")
        return dict(json.loads(line))

    def _last_words(self) -> str:
        self._log.seek(0)
        lines = [ln.strip() for ln in self._log.read().splitlines() if ln.strip()]
        return lines[-1][:300] if lines else "no output"

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def _tempfile() -> IO[str]:
    import tempfile

    return tempfile.TemporaryFile("w+")


def median_interval(values: Sequence[float], z: float = 1.96) -> tuple[float, float]:
    """A distribution-free ~95% interval of the median: order statistics n/2 -/+ z*sqrt(n)/2."""
    s = sorted(values)
    n = len(s)
    lo = max(0, math.floor((n - z * math.sqrt(n)) / 2))
    hi = min(n - 1, math.ceil((n + z * math.sqrt(n)) / 2))
    return s[lo], s[hi]


@dataclasses.dataclass
class CaseResult:
    case: str
    dtype: str
    distribution: str
    pairs: int
    ratio_median: float
    ratio_ci95: tuple[float, float]
    baseline_us: float
    candidate_us: float
    seconds: float


def _calls_for(warm_s: float, block_s: float) -> int:
    return max(1, min(50, round(block_s / max(warm_s, 1e-7))))


def time_case(sides: Sequence[Side], case: str, seconds: float, min_pairs: int, max_pairs: int,
              block_s: float, deadline: float = math.inf) -> CaseResult:  # fmt: skip
    """Pairs of blocks until ``seconds`` have passed and ``min_pairs`` are in (or ``max_pairs``); past the
    run's ``deadline``, two pairs are enough."""
    calls = [_calls_for(s.hello["cases"][case]["warm_s"], block_s) for s in sides]
    ratios: list[float] = []
    times: list[list[float]] = [[], []]
    start = time.perf_counter()
    while len(ratios) < max_pairs:
        now = time.perf_counter()
        if len(ratios) >= 2 and now > deadline:
            break
        if len(ratios) >= min_pairs and now - start >= seconds:
            break
        order = (0, 1) if len(ratios) % 2 == 0 else (1, 0)
        block: dict[int, float] = {}
        for i in order:
            got = sides[i].block(case, calls[i])
            times[i] += got
            block[i] = statistics.median(got)
        ratios.append(block[1] / block[0])
    dtype, dist = case.split("/")
    return CaseResult(case, dtype, dist, len(ratios), statistics.median(ratios), median_interval(ratios),
                      statistics.median(times[0]) * 1e6, statistics.median(times[1]) * 1e6,
                      time.perf_counter() - start)  # fmt: skip


def render_markdown(record: dict[str, Any]) -> str:
    b, c = record["sides"]["baseline"], record["sides"]["candidate"]
    lines = [
        f"Embedding gradient `jax.grad(lambda W: jnp.take(W, x, axis=0).sum())`, W [{b['size']['vocab']}, "
        f"{b['size']['width']}], {b['size']['indices']} int32 indices, on {b['device']} ({b['platform']}): "
        f"jax {b['jax']} (baseline) against jax {c['jax']} (candidate). Wall clock per call up to "
        "`block_until_ready`; ratio = median over alternating pairs of blocks of time(candidate) / "
        "time(baseline), with a 95% interval of that median.",
        "",
        "| case | distinct rows | baseline µs/call | candidate µs/call | candidate/baseline [95%] | pairs |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for r in record["cases"]:
        distinct = b["cases"][r["case"]]["distinct_rows"]
        lo, hi = r["ratio_ci95"]
        lines.append(f"| {r['dtype']} {r['distribution']} | {distinct} | {r['baseline_us']:.1f} | "
                     f"{r['candidate_us']:.1f} | {r['ratio_median']:.2f} [{lo:.2f}, {hi:.2f}] | "
                     f"{r['pairs']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def compare(args: argparse.Namespace) -> int:
    deadline = time.perf_counter() + args.budget
    sides = [Side("baseline", args.baseline_python, args.platform, args.smoke),
             Side("candidate", args.candidate_python, args.platform, args.smoke)]  # fmt: skip
    try:
        for s in sides:
            s.start()
        for case in sides[0].hello["cases"]:
            digests = {s.role: s.hello["cases"][case]["indices_sha1"] for s in sides}
            if len(set(digests.values())) != 1:
                raise TimingError(f"{case}: the two sides drew different indices ({digests})")
        cases = list(sides[0].hello["cases"])
        results = []
        for i, case in enumerate(cases):
            left = deadline - time.perf_counter()
            per_case = max(0.0, left / (len(cases) - i) - 1.0)
            results.append(
                time_case(sides, case, per_case, args.min_pairs, args.max_pairs, args.block_seconds, deadline)
            )
            r = results[-1]
            lo, hi = r.ratio_ci95
            line = f"{r.ratio_median:.2f} [{lo:.2f}, {hi:.2f}] over {r.pairs} pairs"
            print(
                f"  {case}: {r.baseline_us:.1f} -> {r.candidate_us:.1f} us/call, ratio {line}",
                file=sys.stderr,
            )
    finally:
        for s in sides:
            s.close()
    record = {
        "what": "paired interleaved wall-clock timing of grad(take) scatter-add",
        "settings": {
            "platform": args.platform,
            "smoke": args.smoke,
            "budget_s": args.budget,
            "min_pairs": args.min_pairs,
            "max_pairs": args.max_pairs,
            "block_seconds": args.block_seconds,
            "seed": SEED,
        },
        "sides": {"baseline": sides[0].hello, "candidate": sides[1].hello},
        "cases": [dataclasses.asdict(r) for r in results],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    table = render_markdown(record)
    if args.md:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(table)
    print(table)
    return 0


# ---------------------------------------------------------------------------------------------------------
# docs/findings.md


def replace_section(text: str, section: str) -> str:
    """``text`` with the part between the markers (the markers kept) replaced by ``section``; appended with
    its markers when ``text`` has none. One line when the markers are malformed."""
    body = f"{BEGIN}\n{section.strip()}\n{END}"
    has_begin, has_end = BEGIN in text, END in text
    if not has_begin and not has_end:
        return text.rstrip("\n") + "\n\n" + body + "\n"
    if has_begin != has_end or text.index(BEGIN) > text.index(END):
        raise TimingError(f"the markers {BEGIN} ... {END} are not one pair in order")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + body + tail


def update_findings(path: Path, section: Path) -> int:
    path.write_text(replace_section(path.read_text(), section.read_text()))
    print(f"device_scatter_timing: {path}: device-check section replaced", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--baseline-python", default=sys.executable, help="interpreter of the baseline installation"
    )
    p.add_argument(
        "--candidate-python", default=sys.executable, help="interpreter of the candidate installation"
    )
    p.add_argument("--platform", default="cuda", help="JAX_PLATFORMS of the workers (default: cuda)")
    p.add_argument("--smoke", action="store_true", help="tiny sizes and few pairs: proves the code runs")
    p.add_argument("--budget", type=float, default=None, help="seconds for the timing after start-up")
    p.add_argument("--min-pairs", type=int, default=None)
    p.add_argument("--max-pairs", type=int, default=400)
    p.add_argument("--block-seconds", type=float, default=0.02, help="target length of one block of calls")
    p.add_argument("--out", type=Path, default=Path("artifacts/device-check/scatter-timing.json"))
    p.add_argument("--md", type=Path, help="write the markdown table here too")
    p.add_argument("--findings", type=Path, help="replace the device-check section of this file ...")
    p.add_argument("--section", type=Path, help="... with the text of this file")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.worker:
            return worker(args.smoke)
        if args.findings or args.section:
            if not (args.findings and args.section):
                raise TimingError("--findings and --section go together")
            return update_findings(args.findings, args.section)
        if args.budget is None:
            args.budget = 2.0 if args.smoke else 120.0
        if args.min_pairs is None:
            args.min_pairs = 3 if args.smoke else 20
        return compare(args)
    except TimingError as err:
        print(f"device_scatter_timing: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
