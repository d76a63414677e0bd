"""``python -m invariants versus``: time the catalog under two JAX installations, paired in one run.

A stored baseline drifts between runs on a shared machine far more than within one; the other installation,
measured on the same machine at the same moment, does not. So each side runs in worker processes of its
own, one worker at a time, in alternating blocks of calls (ABBA...), judged by ``versus.stats``. On the CPU
backend the CPU time decides, with both workers of a round on one core, then an all-cores phase for lost
parallelism. On an accelerator the chip's own clock decides (:mod:`invariants.timing.device`): a TPU chip
belongs to one process, so a fresh pair there runs one side's worker, then the other's, each tracing
several blocks (a pair's rounds) before it closes.

Before timing, a worker of each side compiles the programs for every selected target it can, and the
report sets the snapshot renderings, metrics and invariant verdicts side by side. Exit status: 1 when a
confirmed timing verdict fails or an invariant holds on the baseline and fails on the candidate; 2 for bad
input, said in one line before any worker starts; 4 when nothing regressed but a target that was asked for
was not compared (a side could not compile for it, or, for a program there, its release lacks an API of JAX
this tool needs), the last line on stderr saying which and why.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import _config
from .._cores import freed, usable
from .._errors import InvariantsError, Parser
from .._paths import absolute_path, check_distinct, check_output_file, check_plot_path, write_atomic
from ..catalog.project import Project, add_project_options, project_from
from ..measure.metrics import offload_moves
from ..releases import environments as envs  # a module: a test replaces its functions
from ..releases.environments import DEFAULT_CACHE, DEFAULT_INDEX
from ..scope.placement import aimed_targets, configs_for
from ..scope.targets import CPU_RUNTIME, select_targets
from ..snapshot.diff import structural_diff, what_changed
from ..timing.paired import RatioResult, runtime_clock
from .protocol import Json
from .report import (
    NOT_COMPARED,
    Record,
    SideRecord,
    invariant_changes,
    make_record,
    metric_rows,
    plot,
    render_markdown,
    repository_paths,
    write_json,
)
from .sides import Side, WorkerProcess, one_process_per_chip, parse_env, resolve, start_pair
from .stats import (
    ALL_CORES,
    ALL_CORES_CPU,
    ALL_CORES_THREADS,
    CLOCKS,
    DEVICE,
    FAILED,
    MIN_ROUNDS_FOR_INTERVAL,
    THREADS,
    ProgramVerdict,
    Round,
    all_cores_word,
    combine,
    judge_rounds,
    pairs_agree,
    pooled,
    threads_of,
)

if TYPE_CHECKING:
    from packaging.version import Version

    from ..catalog.registry import Programs

# The lookups users write, forward and backward.
DEFAULT_PROGRAMS = (
    "naive",
    "take",
    "vmap_naive",
    "eqx_embedding",
    "grad_naive",
    "grad_take",
    "grad_eqx_embedding",
)
DEFAULT_TARGETS = "cpu,tpu-v5e,gpu-h100"
CONFIG = "f32"
SLOW_CALL = 0.25  # seconds a call: a program this slow is timed one call a block without measuring it
DEVICE_CALLS = 64  # traced calls of a program per block, at most: a device interval is set by the processes
# A worker's blocks share one trace, whose events the profiler buffers and whose stop exports them: a
# program's calls in it last about this long (a program of many tiny kernels fills the buffer fastest, and
# its events cost the stop seconds a call; see device_share).
DEVICE_TRACE_SECONDS = 0.06
MIN_DEVICE_BLOCKS = 2
# Two workers of one installation agree closely on a chip: the host clocks' bound would hide a slowdown.
DEVICE_THRESHOLD = 1.01


@dataclasses.dataclass(frozen=True)
class Settings:
    """How the timing is run and judged (see ``--help``)."""

    threshold: float = 1.03
    confidence: float = 0.95
    clock: str = "cpu"
    min_rounds: int = 6
    max_rounds: int = 14
    round_seconds: float = 0.2
    block_seconds: float = 2e-3
    min_pairs: int = 8
    pin: bool = False
    # The all-cores phase: its own bound, rounds and blocks (see all_cores).
    parallel_threshold: float = 1.10
    parallel: bool = True
    parallel_min_rounds: int = 4
    parallel_max_rounds: int = 9
    # A kernel split over threads gains only in a steady stream of calls: short blocks hide the loss.
    parallel_block_seconds: float = 20e-3
    # A phase whose baseline kept fewer threads busy stops inconclusive (see _cannot_lose); 0: never.
    min_threads: float = 0.0
    parallel_min_threads: float = 0.9
    # Untimed calls before a block, as a fraction of its calls: a worker woken for its block finds its pool
    # threads asleep. The pinned phase has one thread, nothing to wake.
    warm_fraction: float = 0.0
    parallel_warm_fraction: float = 0.25
    # The device clock (see measure_device): each fresh worker pair traces this many blocks of every program
    # per side (a worker's start costs libtpu's start), from this many pairs (the spread between processes
    # needs two) to this many while the pairs disagree (at least 3: the interval is then over the pairs).
    device_blocks: int = 6
    device_pairs: int = 2
    device_max_pairs: int = 4

    def sampling(self, pairs: int, blocks: int | None = None) -> str:
        """How ``pairs`` fresh pairs of the device clock were taken, as the record and progress say it (a
        program in ``blocks`` of each worker's blocks: see device_share)."""
        some = f" (this program in {blocks}: a slow call)" if blocks and blocks < self.device_blocks else ""
        return f"{pairs} fresh worker pairs x {self.device_blocks} blocks each{some}"

    def all_cores(self) -> Settings:
        """The all-cores phase: unpinned, the wall clock deciding, its rounds within the main phase's."""
        low = max(MIN_ROUNDS_FOR_INTERVAL, min(self.min_rounds, self.parallel_min_rounds))
        high = max(low, min(self.max_rounds, self.parallel_max_rounds))
        return dataclasses.replace(
            self,
            pin=False,
            clock="wall",
            threshold=self.parallel_threshold,
            min_rounds=low,
            max_rounds=high,
            block_seconds=self.parallel_block_seconds,
            min_threads=self.parallel_min_threads,
            warm_fraction=self.parallel_warm_fraction,
        )


Progress = Callable[[str], None]
# Starts one round's workers, on the given cores (None: wherever the scheduler puts them).
Starter = Callable[[Sequence[Side], "frozenset[int] | None"], list[WorkerProcess]]


def _both(workers: Sequence[WorkerProcess], op: str, **fields: object) -> list[Json]:
    """``op`` to every worker, then every reply: the workers work at the same time."""
    for w in workers:
        w.send(op, **fields)
    return [w.receive(op) for w in workers]


def time_round(
    workers: Sequence[WorkerProcess],
    key: str,
    calls: int,
    settings: Settings,
    first: int,
    clock: Callable[[], float] = time.perf_counter,
) -> Round:
    """One program's pairs of blocks in one round, in ABBA order (``first`` opens), until ``round_seconds``
    and ``min_pairs``, in an even number: an odd one would leave one more of either order in the median."""
    rd = Round(calls)
    warm = round(calls * settings.warm_fraction)
    start = clock()
    i = 0
    while i < settings.min_pairs or clock() - start < settings.round_seconds or i % 2:
        order = (first, 1 - first) if i % 2 == 0 else (1 - first, first)
        got = {side: workers[side].request("time", key=key, calls=calls, warm=warm) for side in order}
        rd.add(got[0], got[1])
        i += 1
    rd.seconds = clock() - start
    return rd


def calls_per_block(worker: WorkerProcess, key: str, estimate: float, seconds: float) -> int:
    """How many calls of ``key`` make a block of about ``seconds``: blocks of 1, 4, 16, ... calls on the
    baseline's worker until one lasts a quarter of ``seconds``, then scaled. The ``prepare`` estimate was
    taken while the other side compiled beside it, so it decides only a program slower than SLOW_CALL."""
    if estimate >= max(SLOW_CALL, 4 * seconds):
        return 1
    calls = 1
    while True:
        wall = worker.request("time", key=key, calls=calls)["wall"]
        if wall >= seconds / 4 or calls >= 1 << 16:
            return max(1, round(calls * seconds / wall)) if wall > 0 else calls
        calls *= 4


def look_at(min_rounds: int, max_rounds: int) -> list[int]:
    """The round counts at which an interval is judged: few, since each look spends part of the error rate."""
    out = [min_rounds]
    while out[-1] < max_rounds:
        out.append(min(max_rounds, max(out[-1] + 1, math.ceil(out[-1] * 1.5))))
    return out


def _cannot_lose(base: float | None, settings: Settings) -> str:
    """Why an all-cores phase can tell nothing, from the baseline's threads alone (empty when it can): other
    load held the cores, or a candidate on one thread could be at most that many times slower."""
    if settings.min_threads <= 0 or base is None:
        return ""
    if base < settings.min_threads:
        return f"crowded: baseline threads {base:.2f}"
    if base < settings.threshold:
        return f"no parallelism to lose: baseline threads {base:.2f}"
    return ""


def device_pair(
    sides: Sequence[Side],
    configs: Mapping[str, str],
    settings: Settings,
    j: int,
    start: Starter,
    phases: list[str] | None = None,
    pads: dict[str, Json] | None = None,
) -> dict[str, list[Round]]:
    """Fresh pair ``j`` on the device clock: one side's worker, then the other's (the order swaps every
    pair), each preparing every program, then tracing ``device_blocks`` blocks, a block being the same
    number of calls of each program in turn (shared out by :func:`device_share` from the first side's
    calls). Block k of one side pairs with block k of the other, call by call in order: a round each.
    ``phases`` gets, per worker, where its time went (its start, prepare, trace and close); ``pads``, per
    side, the device passes of the slowdown switch its first worker sized, for its later ones."""
    order = (0, 1) if j % 2 else (1, 0)
    keys = {p: f"{p}/{c}" for p, c in configs.items()}
    calls: dict[str, int] = {}
    until: dict[str, int] = {}
    got: dict[int, list[Json]] = {}
    for side in order:
        t = [time.perf_counter()]
        (worker,) = start([sides[side]], None)
        traces = 0
        try:
            t.append(time.perf_counter())
            role = sides[side].role
            prepared = worker.request(
                "prepare", programs=[[p, c] for p, c in configs.items()], pads=(pads or {}).get(role, {})
            )
            if pads is not None:
                for key, pad in prepared.get("pads", {}).items():
                    pads.setdefault(role, {}).setdefault(key, pad)
            t.append(time.perf_counter())
            for p, key in keys.items():
                if p not in calls:
                    calls[p], until[p] = device_share(prepared["per_call"][key], settings.device_blocks)
            reply = worker.request(
                "trace",
                calls={keys[p]: n for p, n in calls.items()},
                blocks=settings.device_blocks,
                until={keys[p]: n for p, n in until.items() if n < settings.device_blocks},
            )
            got[side], traces = reply["blocks"], reply.get("traces", 0)
            t.append(time.perf_counter())
        finally:
            worker.close()
        if phases is not None and len(t) == 4:
            spent = [b - a for a, b in zip(t, [*t[1:], time.perf_counter()], strict=True)]
            phases.append(
                f"{sides[side].role} start {spent[0]:.1f} s, prepare {spent[1]:.1f} s, "
                f"trace {spent[2]:.1f} s ({traces} trace{'s' if traces != 1 else ''}), close {spent[3]:.1f} s"
            )
    return {
        p: [_paired(b, c, key, calls[p]) for b, c in zip(got[0][: until[p]], got[1][: until[p]], strict=True)]
        for p, key in keys.items()
    }


def device_share(per_call: float, blocks: int) -> tuple[int, int]:
    """A program's calls a block, and in how many of a worker's ``blocks`` blocks (the first ones), for a
    call of ``per_call`` seconds: its calls in the trace last about ``DEVICE_TRACE_SECONDS``, at most
    ``DEVICE_CALLS`` a block; a call too slow for one in every block takes part in fewer blocks, two at
    least (with two pairs, the rounds an interval needs)."""
    fill = DEVICE_TRACE_SECONDS / per_call
    if fill >= blocks:
        return min(DEVICE_CALLS, round(fill / blocks)), blocks
    return 1, max(MIN_DEVICE_BLOCKS, round(fill))


def _paired(base: Json, cand: Json, key: str, n: int) -> Round:
    """One block of each side as a round: their calls' device seconds paired in order."""
    rd = Round(1)
    for b, c in zip(base["device"][key], cand["device"][key], strict=False):
        rd.add(
            {DEVICE: b, "wall": base["wall"][key] / n, "cpu": base["cpu"][key] / n},
            {DEVICE: c, "wall": cand["wall"][key] / n, "cpu": cand["cpu"][key] / n},
        )
    rd.seconds = sum(base["device"][key]) + sum(cand["device"][key])
    return rd


@dataclasses.dataclass(frozen=True)
class Judged:
    """One program's attempt: its ratios, its word, its threads per side, and :func:`_cannot_lose`'s note."""

    results: dict[str, RatioResult]
    word: str
    threads: dict[str, float | None]
    note: str
    sampling: str | None = None  # the device clock's: see Settings.sampling


def measure(
    sides: Sequence[Side],
    programs: Sequence[str],
    settings: Settings,
    progress: Progress,
    label: str,
    start: Starter = start_pair,
    configs: Mapping[str, str] | None = None,
    pads: dict[str, Json] | None = None,
) -> dict[str, Judged]:
    """Rounds of fresh worker pairs until every program is decided or ``max_rounds`` are spent (on the
    device clock, :func:`measure_device`, its workers reusing ``pads``)."""
    if settings.clock == DEVICE:
        return measure_device(sides, programs, settings, progress, label, start, configs, pads)
    config_of = {p: (configs or {}).get(p, CONFIG) for p in programs}
    rounds: dict[str, list[Round]] = {p: [] for p in programs}
    done: dict[str, Judged] = {}
    active = list(programs)
    k = looks = 0  # every program still active has been looked at as often
    while active:
        k += 1
        t0 = time.perf_counter()
        cpus, where = _placement(k, settings.pin)
        t1, t2 = _round(sides, {p: config_of[p] for p in active}, rounds, settings, k, start, cpus)
        line = ", ".join(_said(p, rounds[p][-1].ratio(settings.clock)) for p in active)
        if k in look_at(settings.min_rounds, settings.max_rounds):
            looks += 1
            done |= _look(active, rounds, looks, settings, last=k >= settings.max_rounds)
            active = [p for p in active if p not in done]
        progress(
            f"  {label} round {k} ({where}start {t1 - t0:.1f} s, prepare {t2 - t1:.1f} s): "
            f"{settings.clock} ratio {line}"
        )
    return done


def measure_device(
    sides: Sequence[Side],
    programs: Sequence[str],
    settings: Settings,
    progress: Progress,
    label: str,
    start: Starter = start_pair,
    configs: Mapping[str, str] | None = None,
    pads: dict[str, Json] | None = None,
) -> dict[str, Judged]:
    """Fresh worker pairs on the device clock, each giving ``device_blocks`` rounds of every program still
    active (:func:`device_pair`). From ``device_pairs`` pairs on, a program whose pairs agree
    (:func:`pairs_agree`) is judged over all their rounds; pairs that disagree get another fresh pair, and
    at ``device_max_pairs`` the interval is over the pairs themselves, one round each, so the spread between
    processes counts in full. ``pads``: the slowdown switch's passes sized so far, kept across pairs."""
    config_of = {p: (configs or {}).get(p, CONFIG) for p in programs}
    pairs: dict[str, list[list[Round]]] = {p: [] for p in programs}
    looks = dict.fromkeys(programs, 0)
    done: dict[str, Judged] = {}
    active = list(programs)
    j = 0
    pads = {} if pads is None else pads
    while active:
        j += 1
        t0 = time.perf_counter()
        phases: list[str] = []
        sized = {(role, key) for role, by_key in pads.items() for key in by_key}
        for p, blocks in device_pair(
            sides, {p: config_of[p] for p in active}, settings, j, start, phases, pads
        ).items():
            pairs[p].append(blocks)
        last = j >= settings.device_max_pairs
        said = []
        for p in active:
            said.append(_said(p, pooled(pairs[p][-1]).ratio(DEVICE)))
            if j < settings.device_pairs:
                continue
            agree = pairs_agree(pairs[p], DEVICE, settings.confidence)
            if not (agree or last):
                said[-1] += " (the pairs disagree: another fresh pair)"
                continue
            looks[p] += 1
            rounds = (
                [rd for pair in pairs[p] for rd in pair] if agree else [pooled(pair) for pair in pairs[p]]
            )
            judged = _judged(p, rounds, looks[p], settings, last)
            if judged is not None:
                how = settings.sampling(j, len(pairs[p][0])) + (
                    "" if agree else f"; the pairs disagree: interval over the {j} pairs"
                )
                done[p] = dataclasses.replace(judged, sampling=how)
        active = [p for p in active if p not in done]
        new = [
            f"{role} {key.split('/')[0]} {pad['reached']:+.2%}"
            for role, by_key in pads.items()
            for key, pad in by_key.items()
            if (role, key) not in sized
        ]
        progress(
            f"  {label} fresh pair {j} ({time.perf_counter() - t0:.1f} s, {settings.device_blocks} blocks "
            f"each side; {'; '.join(phases)}): device ratio {', '.join(said)}"
            + (f"; the slowdown switch's passes reached {', '.join(new)}" if new else "")
        )
    return done


def _look(
    active: Sequence[str], rounds: dict[str, list[Round]], look: int, settings: Settings, last: bool
) -> dict[str, Judged]:
    judged = {p: _judged(p, rounds[p], look, settings, last) for p in active}
    return {p: j for p, j in judged.items() if j is not None}


def _said(p: str, ratio: float | None) -> str:
    return f"{p} {ratio:.3f}" if ratio else f"{p} ?"


def _placement(k: int, pin: bool) -> tuple[frozenset[int] | None, str]:
    """The one core of pinned round ``k``, and how the progress line names it."""
    if not pin:
        return None, ""
    cores = usable()
    core = cores[(k - 1) % len(cores)]
    return frozenset({core}), f"core {core}, "


def _round(
    sides: Sequence[Side],
    config_of: Mapping[str, str],
    rounds: dict[str, list[Round]],
    settings: Settings,
    k: int,
    start: Starter,
    cpus: frozenset[int] | None,
) -> tuple[float, float]:
    """Round ``k`` of each program, appended to ``rounds``; when the workers had started and prepared."""
    workers = start(sides, cpus)
    try:
        t1 = time.perf_counter()
        prepared = _both(workers, "prepare", programs=[[p, c] for p, c in config_of.items()])
        t2 = time.perf_counter()
        for p, c in config_of.items():
            key = f"{p}/{c}"
            calls = calls_per_block(workers[0], key, prepared[0]["per_call"][key], settings.block_seconds)
            rounds[p].append(time_round(workers, key, calls, settings, first=k % 2))
    finally:
        for w in workers:
            w.close()
    return t1, t2


def _ratios(rounds: list[Round], look: int, settings: Settings) -> dict[str, RatioResult]:
    level = settings.confidence
    clocks = (DEVICE, "wall") if settings.clock == DEVICE else CLOCKS
    results = {c: judge_rounds(rounds, c, settings.threshold, level, look) for c in clocks}
    unpinned = settings.clock == "cpu" and not settings.pin
    if unpinned:
        # --no-pin rounds are all-cores rounds themselves: their wall clock is judged for lost parallelism.
        results[ALL_CORES] = judge_rounds(rounds, "wall", settings.parallel_threshold, level, look)
    if unpinned or settings.min_threads > 0:  # every round with all cores: the threads witness
        bound = settings.parallel_threshold if unpinned else settings.threshold
        results[ALL_CORES_THREADS] = judge_rounds(rounds, THREADS, 1.0 / bound, level, look, floor=True)
    return results


def _judged(p: str, rounds: list[Round], look: int, settings: Settings, last: bool) -> Judged | None:
    """Program ``p``'s verdict at its ``look``-th look, or None while it straddles and rounds are left."""
    results = _ratios(rounds, look, settings)
    threads = threads_of(rounds)
    note = _cannot_lose(threads["baseline"], settings)
    decided = _decided(results, settings)
    if decided is None and not last and not note:
        return None  # straddles: more rounds
    # With a note, nothing this phase measures decides (see _cannot_lose): its threads witness neither.
    undecided = (settings.clock, ALL_CORES_THREADS) if note else ()
    results = {c: _inconclusive(r, c in undecided) for c, r in results.items()}
    word = combine(p, settings.clock, results)
    if settings.min_threads > 0 and not note:
        word = decided or "inconclusive"  # the all-cores word the loop judged by
    return Judged(results, word, threads, note)


def _decided(results: dict[str, RatioResult], settings: Settings) -> str | None:
    if settings.min_threads > 0:
        return all_cores_word(results["wall"], results[ALL_CORES_THREADS])
    return results[settings.clock].verdict


def _inconclusive(r: RatioResult, undecided: bool) -> RatioResult:
    return dataclasses.replace(r, verdict="inconclusive") if undecided or not r.verdict else r


def measure_confirmed(
    sides: Sequence[Side],
    programs: Sequence[str],
    settings: Settings,
    progress: Progress,
    start: Starter = start_pair,
    configs: Mapping[str, str] | None = None,
) -> list[ProgramVerdict]:
    """:func:`measure`, once more for the programs that failed (a failure must repeat), then the all-cores
    phase for those whose CPU time did not fail, confirmed alike: each phase's words are the attempts. The
    slowdown switch's passes, sized by a side's first worker, serve every later one, the confirmation's
    too: it repeats the slowdown the failure met."""
    pads: dict[str, Json] = {}

    def confirmed(todo: Sequence[str], phase: Settings, labels: tuple[str, str]) -> dict[str, list[Judged]]:
        first = measure(sides, todo, phase, progress, labels[0], start, configs, pads)
        failing = [p for p in todo if first[p].word in FAILED]
        second = measure(sides, failing, phase, progress, labels[1], start, configs, pads) if failing else {}
        return {p: [first[p], *([second[p]] if p in second else [])] for p in todo}

    attempts = confirmed(programs, settings, ("measure", "confirm"))
    todo = [p for p in programs if attempts[p][-1].word != "fail"]
    phase: dict[str, list[Judged]] = {}
    if _all_cores(settings, progress):
        phase = confirmed(todo, settings.all_cores(), ("all cores", "all cores, confirm"))
    every_core = not settings.pin and settings.clock == "cpu"  # --no-pin: its rounds use every core
    return [
        dataclasses.replace(
            _verdict(p, settings.clock, attempts[p], phase.get(p), every_core), slowed=_slowed(p, pads)
        )
        for p in programs
    ]


def _slowed(program: str, pads: Mapping[str, Json]) -> dict[str, float] | None:
    """The slowdown each slowed side's passes reached on ``program``'s calls, by role (None: no pass)."""
    got = {
        role: float(pad["reached"])
        for role, by_key in pads.items()
        for key, pad in by_key.items()
        if key.split("/")[0] == program
    }
    return got or None


def _all_cores(settings: Settings, progress: Progress) -> bool:
    """Whether the all-cores phase runs: after pinned rounds on the CPU clock, with more than one core."""
    if not (settings.pin and settings.parallel and settings.clock == "cpu"):
        return False
    if len(freed()) < 2:
        progress(
            "  all cores: this run has one core (taskset?); nothing runs in parallel, so lost "
            "parallelism cannot show: the phase is left out"
        )
        return False
    return True


def _verdict(
    p: str, clock: str, attempts: list[Judged], phase: list[Judged] | None, every_core: bool
) -> ProgramVerdict:
    last, words = attempts[-1], [a.word + (f" ({a.sampling})" if a.sampling else "") for a in attempts]
    threads = last.threads if every_core else None
    if phase is not None:
        got = phase[-1].results
        results = {
            **last.results,
            ALL_CORES: got["wall"],
            ALL_CORES_CPU: got["cpu"],
            ALL_CORES_THREADS: got[ALL_CORES_THREADS],
        }
        last = dataclasses.replace(last, results=results, word=combine(p, clock, results))
        words += [f"all cores: {a.word}" + (f" ({a.note})" if a.note else "") for a in phase]
        threads = phase[-1].threads
    return ProgramVerdict(p, clock, last.word, last.results, words, threads, last.sampling)


def structure_keys(
    programs: Sequence[str], targets: str, known: Programs | None = None
) -> list[tuple[str, str, str]]:
    """``(program, config, target)`` on each selected target that compiles the program: the catalog's in
    the seed configuration, a project's in every configuration it lists."""
    from ..catalog.registry import Programs  # it imports JAX: not when the command loads

    known = known if known is not None else Programs()
    # The controller starts no JAX: a TPU or GPU host's runtime target is the AOT target of its name here.
    chosen = select_targets(targets, runtime=CPU_RUNTIME)
    keys = []
    for p in programs:
        program = known.program(p)
        wanted = (CONFIG,) if known.is_catalog(p) else program.configs
        for t in chosen:
            keys += [(p, c, t.name) for c in configs_for(t, program) if c in wanted]
    return keys


def timed_configs(programs: Sequence[str], known: Programs) -> dict[str, str]:
    """The configuration each program is timed in: the seed, or the first a project's program runs in."""
    from ..catalog.programs import get_config

    runs = {p: [c for c in known.program(p).configs if not get_config(c).compile_only] for p in programs}
    return {p: CONFIG if known.is_catalog(p) or not r else r[0] for p, r in runs.items()}


def hello_and_structure(
    sides: Sequence[Side], keys: Sequence[tuple[str, str, str]], exclusive: bool
) -> tuple[list[Json], list[Json]]:
    """Each side's hello and, with ``keys``, its ``structure`` reply; one side at a time if ``exclusive``."""
    hellos: list[Json] = []
    replies: list[Json] = []
    for group in [[s] for s in sides] if exclusive else [list(sides)]:
        workers = start_pair(group)
        try:
            hellos += [w.hello for w in workers]
            if keys:
                replies += _both(workers, "structure", keys=[list(k) for k in keys])
        finally:
            for w in workers:
                w.close()
    return hellos, replies


def compare_structure(
    answers: Sequence[Json], keys: Sequence[tuple[str, str, str]]
) -> tuple[list[Json], dict[str, dict[str, str | None]]]:
    """The record's ``structure`` entries from the sides' ``structure`` replies, and its ``targets``."""
    base, cand = (repository_paths(r) for r in answers)
    out = [
        _compared(key, *(r["items"].get("/".join(key), {"error": "not answered"}) for r in (base, cand)))
        for key in keys
    ]
    targets = {
        t: {"baseline": base["targets"].get(t), "candidate": cand["targets"].get(t)}
        for t in dict.fromkeys(k[2] for k in keys)
    }
    return out, targets


def _compared(key: tuple[str, str, str], b: Json, c: Json) -> Json:
    diff = changed = None
    if "snapshot" in b and "snapshot" in c and b["snapshot"] != c["snapshot"]:
        diff = structural_diff(b["snapshot"], c["snapshot"], "baseline", "candidate")
        changed = what_changed(b["snapshot"], c["snapshot"])
    moved = offload_moves(b.get("sparsecore_metrics") or {}, c.get("sparsecore_metrics") or {})
    return {
        "key": "/".join(key),
        "baseline": b,
        "candidate": c,
        "diff": diff,
        "changed": changed,
        "offload": None if moved is None else f"{key[0]}[{key[1]}] on {key[2]}: {moved}",
        "metrics": metric_rows(b, c),
        "invariants": invariant_changes(b.get("invariants", []), c.get("invariants", [])),
    }


# The numeric options: flag, Settings field (its default), type, help, the check of its value and why.
NUMBERS: tuple[tuple[str, str, type, str, Callable[[float], bool], str], ...] = (
    ("--threshold", "threshold", float, "a ratio fails when its whole interval is above this",
     lambda v: v > 1.0, "must be above 1 (a slowdown bound)"),
    ("--confidence", "confidence", float, "interval coverage", lambda v: 0.5 < v < 1.0,
     "must be in (0.5, 1)"),
    ("--min-rounds", "min_rounds", int,
     "fresh worker pairs before the first look, on a host clock (the device clock's fresh pairs each trace "
     f"{Settings.device_blocks} blocks a side: {Settings.device_pairs}, up to {Settings.device_max_pairs} "
     "while they disagree)", lambda v: v >= 3, "need 3 <= min <= max"),
    ("--max-rounds", "max_rounds", int, "at most this many while an interval straddles the threshold",
     lambda v: v >= 3, "need 3 <= min <= max"),
    ("--round-seconds", "round_seconds", float, "seconds of blocks per program per round", lambda v: v > 0,
     "must be positive"),
    ("--parallel-threshold", "parallel_threshold", float,
     "CPU backend: lost parallelism when the all-cores wall ratio's whole interval is above this (or its "
     "estimate, with the threads ratio's whole interval below its inverse) while the CPU ratio did not fail",
     lambda v: v > 1.0, "must be above 1 (a slowdown bound)"),
)  # fmt: skip


OUTPUTS = (
    ("--json", "FILE", "write the record (JSON)"),
    ("--out", "MD", "write the markdown report (fits $GITHUB_STEP_SUMMARY)"),
    ("--plot", "PNG", "plot each ratio with its interval and the threshold"),
)
SWITCHES = (
    (
        "--no-pin",
        "let the scheduler place the workers (default on the CPU backend: both workers of a round on one "
        "core, the next round on the next core, then the all-cores phase for lost parallelism)",
    ),
    ("--no-parallel", "skip the all-cores phase (pinned rounds alone cannot see lost parallelism)"),
    ("--no-timing", "compare structure and invariants only"),
    ("--no-structure", "time only"),
)


def _parser() -> Parser:
    p = Parser(
        prog="python -m invariants versus",
        description="Time the catalog under two JAX installations, paired in one run; compare structure.",
        epilog="SPEC: 'current' (this interpreter), a jax release such as 0.6.0 (built, cached with uv, as "
        "bisect does), or the path of a Python interpreter or virtual environment. Exit status: 0 nothing "
        "regressed, 1 a timing verdict failed or an invariant holds on the baseline and fails on the "
        "candidate, 2 bad input, 4 nothing regressed but a target asked for (--targets, or a project's spec "
        "files) was not compared: a side could not compile for it, or its release lacks an API of JAX this "
        "tool needs for a program there, the tool's limit (the last line says which and why).",
    )
    p.add_argument("--baseline", required=True, metavar="SPEC", help="the reference installation")
    p.add_argument("--candidate", required=True, metavar="SPEC", help="the installation under test")
    p.add_argument(
        "--programs",
        help="programs as the gate's --programs takes them: comma-separated names, patterns such as "
        "'vmap_*', kind:backward, tag:core, tag:user (a project's own); the catalog's in the seed "
        "configuration, a project's in its own (default: every program of --spec-dir, else "
        f"{','.join(DEFAULT_PROGRAMS)})",
    )
    add_project_options(p)
    p.add_argument(
        "--targets",
        help="targets for the structure comparison (default: the targets a project's spec files name, "
        f"else {DEFAULT_TARGETS}; 'all', 'tpu', 'gpu')",
    )
    for role in ("baseline", "candidate"):
        p.add_argument(
            f"--{role}-env",
            action="append",
            default=[],
            metavar="K=V",
            help=f"set K=V in {role} workers only",
        )
    for flag, metavar, what in OUTPUTS:
        p.add_argument(flag, type=Path, metavar=metavar, help=what)
    # --threshold's default depends on the clock, which is known once the workers have said their platform.
    threshold = f"{Settings.threshold} on the host's clocks, {DEVICE_THRESHOLD} on the device's"
    for flag, field, kind, what, _check_value, _why in NUMBERS:
        default = None if field == "threshold" else getattr(Settings, field)
        shown = threshold if field == "threshold" else "%(default)s"
        p.add_argument(flag, type=kind, default=default, help=f"{what} (default: {shown})")
    p.add_argument(
        "--clock",
        choices=("cpu", "wall", "device"),
        help="verdict clock (default: cpu on the CPU backend, else device: the chip's own time of each call, "
        "from JAX's profiler)",
    )
    for flag, what in SWITCHES:
        p.add_argument(flag, action="store_true", help=what)
    p.add_argument("--index-url", default=DEFAULT_INDEX, help="package index for version SPECs")
    p.add_argument(
        "--cache-dir",
        type=absolute_path,
        default=DEFAULT_CACHE,
        help="where version SPECs' environments live",
    )
    return p


def _check(args: argparse.Namespace) -> None:
    for flag, field, _kind, _what, holds, why in NUMBERS:
        value = getattr(args, field)
        if value is None:
            continue
        if not math.isfinite(value):
            raise InvariantsError(f"{flag} {value}: takes a finite number; {why}")
        if not holds(value):
            raise InvariantsError(f"{flag} {value}: {why}")
    if not args.min_rounds <= args.max_rounds:
        raise InvariantsError(
            f"--min-rounds {args.min_rounds} / --max-rounds {args.max_rounds}: need 3 <= min <= max"
        )
    if args.no_timing and args.no_structure:
        raise InvariantsError(
            "versus: --no-timing and --no-structure leave nothing to compare; drop one of them"
        )


def _check_outputs(args: argparse.Namespace) -> None:
    outputs = [(flag, getattr(args, flag[2:])) for flag, _metavar, _what in OUTPUTS]
    for flag, path in outputs:
        if path is not None:
            check_output_file(path, flag)
    check_distinct(outputs, command="versus")
    if args.plot is not None:
        check_plot_path(args.plot, "--plot")


def load_programs(project: Project) -> Programs:
    from ..compile.process import held_stderr  # it imports pytest: not when the command loads

    with held_stderr():  # JAX's and the CUDA plugin's start-up notices: the command's first line is its own
        from ..catalog.downstream import load_project  # these import JAX
        from ..catalog.registry import Programs

        return load_project(project)[1] if project.own else Programs()


def select_programs(value: str | None, known: Programs | None = None, own: bool = False) -> list[str]:
    """The programs ``--programs`` selects, as the gate's option does; a project's run defaults to its own.
    Sharded programs are among them: versus compares their structure and times the others."""
    known = known if known is not None else load_programs(Project())
    default = "tag:user" if own else ",".join(DEFAULT_PROGRAMS)
    return known.select(default if value is None else value)


def timed_programs(programs: Sequence[str], known: Programs, args: argparse.Namespace) -> list[str]:
    """The single-device programs, unless ``--no-timing``."""
    timed = [] if args.no_timing else [p for p in programs if known[p].layout is None]
    if args.no_structure and not timed:
        chosen = f"--programs {args.programs}" if args.programs is not None else "the project's programs"
        raise InvariantsError(
            f"versus --no-structure: {chosen} are sharded ({', '.join(programs)}), and versus times "
            "single-device programs: nothing to compare; drop --no-structure to compare their structure"
        )
    return timed


def _settings(args: argparse.Namespace, platform: str) -> Settings:
    clock, _ = runtime_clock(platform, args.clock, "--clock")
    numbers = {field: getattr(args, field) for _flag, field, *_ in NUMBERS}
    numbers["threshold"] = args.threshold or (DEVICE_THRESHOLD if clock == DEVICE else Settings.threshold)
    pin = clock == "cpu" and not args.no_pin
    return Settings(**numbers, clock=clock, pin=pin, parallel=not args.no_parallel)


@dataclasses.dataclass
class _Builder:
    """Builds a side's environment of a jax release with the compilers of the selected targets (libtpu for a
    TPU target, the CUDA plugin for a GPU one) on any host; ``left_out``: per side's flag, the families its
    release cannot compile for, and why (those targets are not compared there)."""

    args: argparse.Namespace
    progress: Progress
    lists: dict[str, list[Version]] = dataclasses.field(default_factory=dict)
    left_out: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)

    def __call__(self, version: object, flag: str) -> Path:
        args = self.args
        platform = (_config.requested_platforms() or ["cpu"])[0]
        if platform in ("cuda", "gpu", "rocm"):
            raise InvariantsError(
                f"{flag} {version}: a version SPEC builds CPU (or TPU) jax; on a {platform} host pass a "
                "virtual environment with that release's GPU jax instead"
            )
        if not self.lists:
            envs.check_index(args.index_url)
            self.lists["jax"] = envs.list_releases("jax", args.index_url)
            self.lists["jaxlib"] = envs.list_releases("jaxlib", args.index_url)
        v = envs.resolve_version(str(version), self.lists["jax"], flag)
        pins, self.left_out[flag] = envs.pins_for(v, self.lists["jaxlib"], args.targets, host=platform)
        self.progress(
            f"versus: {flag} {v}: environment {pins.env_name} (built with uv when missing; minutes)"
        )
        for family, why in self.left_out[flag].items():
            self.progress(f"versus: {flag} {v}: its {family} targets are not compared: {why}")
        return envs.env_python(envs.ensure_env(pins, args.cache_dir, args.index_url, log=self.progress))

    def explain(self, structure: Sequence[Json], targets: dict[str, dict[str, str | None]]) -> None:
        """Each left-out family's reason in place of what a side's worker said of its targets and keys."""
        for flag, families in self.left_out.items():
            role = flag.removeprefix("--")
            for name, sides in targets.items():
                family = select_targets(name, runtime=CPU_RUNTIME)[0].family
                if family in families:
                    sides[role] = f"{name}: {families[family]}"
                    for entry in structure:
                        if entry["key"].rsplit("/", 1)[-1] == name and "error" in entry[role]:
                            entry[role]["error"] = sides[role]


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    _check(args)
    _check_outputs(args)  # before anything runs: an output that cannot be written is one line now
    started = time.perf_counter()
    progress: Progress = functools.partial(print, file=sys.stderr, flush=True)
    project = project_from(args)
    known = load_programs(project)
    programs = select_programs(args.programs, known, project.own)
    timed = timed_programs(programs, known, args)
    targets_given = args.targets is not None
    aimed = aimed_targets(known[p] for p in programs) if project.own and not targets_given else []
    if not targets_given:  # a project's: the targets its spec files name
        args.targets = ",".join(aimed) or DEFAULT_TARGETS
    keys = _compared_keys(args, programs, known, project, bool(timed), targets_given)
    build = _Builder(args, progress)
    sides = [
        resolve(role, spec, parse_env(env, f"--{role}-env"), Path(sys.executable), build, project)
        for role, spec, env in (
            ("baseline", args.baseline, args.baseline_env),
            ("candidate", args.candidate, args.candidate_env),
        )
    ]
    first = _first_pair(sides, keys, args, progress, bool(timed))
    if first is None:
        hellos, replies = _start(sides, keys, args, progress)
    settings = _settings(args, "tpu" if first else _platform(hellos))
    timing = []
    if timed:
        rounds = f"{settings.min_rounds}-{settings.max_rounds} rounds of fresh worker pairs"
        if settings.clock == DEVICE:
            rounds = settings.sampling(settings.device_pairs) + f" (up to {settings.device_max_pairs} pairs)"
        progress(f"versus: timing {len(timed)} programs, {settings.clock} clock: {rounds}")
        start = first or start_pair
        timing = measure_confirmed(sides, timed, settings, progress, start, timed_configs(timed, known))
    if first is not None:
        hellos, replies = first.answers(sides)
    structure, targets = compare_structure(replies, keys) if keys else ([], {})
    build.explain(structure, targets)
    baseline, candidate = (
        SideRecord(s.spec, str(s.python), dict(h["versions"]), dict(s.env), str(h.get("device", "")))
        for s, h in zip(sides, hellos, strict=True)
    )
    timed_entries = [t.to_dict() for t in timing]
    seconds = time.perf_counter() - started
    settings_entry = dataclasses.asdict(settings)
    asked = list(targets) if targets_given or aimed else []  # the defaults were not asked for
    record = make_record(
        baseline, candidate, settings_entry, timed_entries, structure, targets, seconds, asked
    )
    _write_outputs(args, record, bool(timing))
    if record.exit == NOT_COMPARED:
        print(f"versus: {'; '.join(record.not_compared)}", file=sys.stderr)
    return record.exit


def _start(
    sides: Sequence[Side], keys: Sequence[tuple[str, str, str]], args: argparse.Namespace, progress: Progress
) -> tuple[list[Json], list[Json]]:
    exclusive = one_process_per_chip(sides)
    if exclusive and args.clock == "wall":
        raise InvariantsError(
            "versus: --clock wall alternates blocks of two live workers, and a TPU chip belongs to one "
            "process; use --clock device (the default on an accelerator)"
        )
    how = "one after the other (a TPU chip belongs to one process)" if exclusive else "at once"
    progress(
        f"versus: starting a worker of each side, {how} ({', '.join(f'{s.role} {s.python}' for s in sides)})"
    )
    if keys:
        progress(f"versus: structure of {len(keys)} keys on both sides ({args.targets})")
    return hello_and_structure(sides, keys, exclusive)


class FirstPair:
    """A starter of the device clock's fresh pairs whose first worker of each side says its hello and
    answers ``structure`` before it is timed: on a TPU a worker's start is mostly libtpu's, so the structure
    comparison rides on the first timed pair instead of starting workers of its own."""

    def __init__(self, keys: Sequence[tuple[str, str, str]]) -> None:
        self.keys = [list(k) for k in keys]
        self.hellos: dict[str, Json] = {}
        self.replies: dict[str, Json] = {}

    def __call__(self, sides: Sequence[Side], cpus: frozenset[int] | None = None) -> list[WorkerProcess]:
        workers = start_pair(sides, cpus)
        try:
            for side, w in zip(sides, workers, strict=True):
                if side.role not in self.hellos:
                    self.hellos[side.role] = w.hello
                    _platform(list(self.hellos.values()))  # sides on two platforms: stop before timing
                    if self.keys:
                        self.replies[side.role] = w.request("structure", keys=self.keys)
        except BaseException:
            for w in workers:
                w.close()
            raise
        return workers

    def answers(self, sides: Sequence[Side]) -> tuple[list[Json], list[Json]]:
        """Each side's hello and ``structure`` reply, in the order of ``sides``."""
        return [self.hellos[s.role] for s in sides], [self.replies[s.role] for s in sides if self.keys]


def _first_pair(
    sides: Sequence[Side],
    keys: Sequence[tuple[str, str, str]],
    args: argparse.Namespace,
    progress: Progress,
    timed: bool,
) -> FirstPair | None:
    """Where the chip is one process's and the device clock times: the starter whose first pair answers
    structure too (None: hello and structure in workers of their own, :func:`_start`)."""
    if not (timed and args.clock in (None, DEVICE) and one_process_per_chip(sides)):
        return None
    progress(
        "versus: a worker of each side at a time (a TPU chip belongs to one process); the first fresh pair "
        f"of the timing also compares structure{f' of {len(keys)} keys ({args.targets})' if keys else ''} "
        f"({', '.join(f'{s.role} {s.python}' for s in sides)})"
    )
    return FirstPair(keys)


def _platform(hellos: Sequence[Json]) -> str:
    platforms = sorted({h["platform"] for h in hellos})
    if len(platforms) != 1:
        raise InvariantsError(f"versus: the sides run on different platforms ({', '.join(platforms)})")
    return platforms[0]


def _compared_keys(
    args: argparse.Namespace, programs: list[str], known: Programs, project: Project, timed: bool, given: bool
) -> list[tuple[str, str, str]]:
    if args.no_structure:
        return []
    keys = structure_keys(programs, args.targets, known)
    if not keys:
        which = f"--programs {args.programs}" if args.programs is not None else "the selected programs"
        on = f"--targets {args.targets}" if given else f"the targets {args.targets}"
        where = "their configurations" if project.own else CONFIG
        raise InvariantsError(
            f"versus: no program of {which} compiles on {on} in {where}: no structure to compare (choose "
            "other targets" + (", or --no-structure to time only)" if timed else ")")
        )
    return keys


def _write_outputs(args: argparse.Namespace, record: Record, timed: bool) -> None:
    """The markdown on stdout first: a file that cannot be written after all loses nothing of the run."""
    text = render_markdown(record)
    print(text, flush=True)
    if args.json:
        write_json(record, args.json, "--json")
    if args.out:
        write_atomic(args.out, text, "--out")
    if args.plot and timed:
        plot(record, args.plot)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
