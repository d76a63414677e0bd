"""A versus worker: one JAX installation, driven by the controller over ``versus.protocol``.

Run as ``python -m invariants.versus.worker`` by one side's interpreter, on this checkout's catalog and
specs under that side's jax (as ``bisect`` runs the suite in an older release), so anything that sets
``XLA_FLAGS`` or injects a slowdown reaches only this process. Both sides time the catalog's seeded
arguments, and a block's clocks exclude the protocol round trip and its warm calls. The slowdown switch
(``INVARIANTS_VERSUS_SLOWDOWN``, test-only, for measuring detection power) makes each timed call cost that
fraction more: a busy wait on the CPU time, device work on an accelerator (a busy wait on the host costs
the chip nothing). ``structure`` evaluates the specs' invariants as written, ratchets included: what
differs between the installations is the finding; a metric without a value here (a
:class:`~invariants.hlo.cost.Missing`) leaves an invariant not evaluated, never failed.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import os
import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TextIO, TypeVar

import numpy as np

from .._cores import free, pin, usable
from .._errors import InvariantsError
from .._supported import ReleaseLacks, installed_too_old
from ..catalog.project import Project
from ..hlo.cost import Missing, value_or_none
from ..measure.measurement import Measurement, measure
from ..measure.metrics import METRICS, OFFLOAD_COUNTS
from ..records.compiled import Key
from ..scope.targets import all_targets, versions
from ..snapshot.render import render_summary
from ..specfile.reader import load_specs
from ..timing.device import DeviceRecorder
from ..timing.trace import TraceError
from .protocol import CPUS_ENV, SLOWDOWN_ENV, Json, ProtocolError, decode_request, encode

if TYPE_CHECKING:
    from ..catalog.programs import Program
    from ..catalog.registry import Programs
    from ..scope.configs import Config
    from ..scope.targets import Target
    from ..specfile.reader import Spec
    from ..verdict.checks import Case

# What starts JAX is imported where it is used: after main() has pinned the worker's cores.

T = TypeVar("T")
# Warm-up, then the per-call probe (warm: a fresh process's first calls are several times slower).
_WARM_CALLS, _WARM_SECONDS = 3, 5e-3
_PROBE_CALLS, _PROBE_SECONDS = 2, 5e-3
# Traced calls per size tried for the slowdown's pass on a device: this many, fewer for a slow call (its
# kernels' events cost the trace's stop), so that each size's calls last about the seconds, 2 at least.
_SLOWDOWN_CALLS, _SLOWDOWN_SECONDS, _SLOWDOWN_MIN_CALLS = 20, 0.05, 2
# Float32 elements of the passes tried: the largest is a few hundred microseconds on a chip, so that a 1 %
# slowdown of a program of tens of milliseconds is read off a size near it, not far past it.
_PAD_SIZES = (1 << 12, 1 << 15, 1 << 18, 1 << 21, 1 << 24)


@dataclasses.dataclass
class Worker:
    """One worker's prepared programs by ``"program/config"``, and the specs whose invariants it evaluates."""

    slowdown: float = 0.0
    specs: Sequence[Spec] | None = None
    programs: Programs | None = None  # None: the catalog
    recorder: DeviceRecorder = dataclasses.field(default_factory=DeviceRecorder)
    calls: dict[str, Callable[[], None]] = dataclasses.field(default_factory=dict)

    def prepare(self, programs: Sequence[tuple[str, str]], pads: Mapping[str, Json] | None = None) -> Json:
        """Each program compiled and its call timed once on the host; the slowdown switch's device passes
        sized (or ``pads``'s, an earlier worker's of this side, reused)."""
        from ..catalog.programs import get_config
        from ..catalog.registry import Programs

        known = Programs() if self.programs is None else self.programs
        per_call, slowed_by, sized = {}, {}, {}
        for name, config_id in programs:
            key = f"{name}/{config_id}"
            program, config = known.program(name), get_config(config_id)
            if program.layout is not None:
                raise InvariantsError(
                    f"{name}: a sharded program needs a mesh; versus times single-device ones"
                )
            given = (pads or {}).get(key)
            self.calls[key], slowed_by[key], pad = _compiled_call(
                program, config, self.slowdown, self.recorder, given
            )
            if pad is not None:
                sized[key] = pad
            _repeat(self.calls[key], _WARM_CALLS, _WARM_SECONDS)
            calls, seconds = _repeat(self.calls[key], _PROBE_CALLS, _PROBE_SECONDS)
            per_call[key] = max(seconds / calls, 1e-9)
        return {"per_call": per_call, "slowed_by": slowed_by, "pads": sized}

    def _prepared(self, key: str) -> Callable[[], None]:
        if key not in self.calls:
            raise ProtocolError(f"worker: {key!r} was not prepared")
        return self.calls[key]

    def time(self, key: str, calls: int, warm: int = 0) -> Json:
        fn = self._prepared(key)
        gc_was = gc.isenabled()
        gc.disable()  # a collection inside one block would land on one side only
        try:
            for _ in range(warm):
                fn()
            return _clocked(fn, calls)
        finally:
            if gc_was:
                gc.enable()

    def trace(
        self, calls: Mapping[str, int], blocks: int = 1, until: Mapping[str, int] | None = None
    ) -> Json:
        """``blocks`` blocks, each every program's calls in turn (a program named in ``until`` in that many
        first blocks only), inside one profiler trace (starting and stopping one costs more than the calls),
        or one trace a block where the long trace lost events (the profiler's buffer is finite): per block,
        each call's device seconds and the wall and CPU seconds of each program's calls there, and how many
        traces were taken. Module executions follow the calls in order."""
        fns = {key: self._prepared(key) for key in calls}
        share = [{k: n for k, n in calls.items() if i < (until or {}).get(k, blocks)} for i in range(blocks)]
        clocks: dict[int, dict[str, dict[str, float]]] = {}  # by block: a block traced again replaces its own

        def run(these: Sequence[int]) -> int:
            for i in these:
                clocks[i] = {key: _clocked(fns[key], c) for key, c in share[i].items()}
            return sum(n for i in these for n in share[i].values())

        seconds, traces = _one_trace_or_each(self.recorder, list(range(blocks)), run)
        out, at = [], 0
        for i, block in enumerate(share):
            device, clocked = {}, clocks[i]
            for key, n in block.items():
                device[key], at = seconds[at : at + n], at + n
            times = {c: {k: got[c] for k, got in clocked.items()} for c in ("wall", "cpu")}
            out.append({"device": device, **times})
        return {"blocks": out, "traces": traces}

    def structure(self, keys: Sequence[tuple[str, str, str]]) -> Json:
        return structure_of_keys(keys, self.specs, self.programs)


def _clocked(fn: Callable[[], None], calls: int) -> dict[str, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    for _ in range(calls):
        fn()
    return {"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0}


def _repeat(
    fn: Callable[[], None], calls: int, seconds: float, clock: Callable[[], float] = time.perf_counter
) -> tuple[int, float]:
    """``fn`` back to back until at least ``calls`` calls and ``seconds``: how many calls, in how long."""
    n, t0 = 0, clock()
    while True:
        fn()
        n += 1
        spent = clock() - t0
        if n >= calls and spent >= seconds:
            return n, spent


def _compiled_call(
    program: Program, config: Config, slowdown: float, recorder: DeviceRecorder, pad: Json | None = None
) -> tuple[Callable[[], None], float | None, Json | None]:
    """A blocking call of ``program`` on the runtime device, the slowdown it reached (None: none), and the
    device pass that slows it (None: none; ``pad``: an earlier worker's, reused). Not more rows looked up: a
    call's dispatch and its table traffic do not grow with the lookups."""
    import jax

    from ..catalog.arguments import make_arguments

    device_args = jax.device_put(make_arguments(program, config))
    compiled = jax.jit(program.fn).lower(*device_args).compile()

    # The same as invariants.timing.calls.jax_callable, without importing scipy, which a side's venv may lack.
    def call() -> None:
        jax.block_until_ready(compiled(*device_args))

    if slowdown <= 0:
        return call, None, None
    if jax.devices()[0].platform == "cpu":
        return slowed(call, slowdown), slowdown, None
    slower, pad = device_slowed(program.fn, device_args, call, slowdown, recorder, pad)
    return slower, pad["reached"], pad


def device_slowed(
    fn: Callable[..., object],
    args: Sequence[object],
    call: Callable[[], None],
    slowdown: float,
    recorder: DeviceRecorder,
    pad: Json | None = None,
) -> tuple[Callable[[], None], Json]:
    """``fn`` with an independent elementwise pass compiled beside it, sized on the device clock so that a
    call costs about ``slowdown`` more than ``call``; that call and its pass (``size`` and the fraction
    ``reached``). Two traces (each one's stop costs more than its calls): ``call`` beside passes of a few
    sizes, then the one chosen. Given ``pad`` (an earlier worker's), that pass, unmeasured: every worker of
    the slowed side then slows its calls alike."""
    import jax

    def padded(size: int) -> Callable[[], None]:
        pad = jax.device_put(np.ones(size, np.float32))
        both = jax.jit(lambda *a: (fn(*a[:-1]), a[-1] * 1.5 + 0.25)).lower(*args, pad).compile()
        return lambda: jax.block_until_ready(both(*args, pad))

    if pad is not None:
        return padded(pad["size"]), pad
    calls, seconds = _repeat(call, _PROBE_CALLS, _PROBE_SECONDS)
    n = sizing_calls(seconds / calls)
    base, *costs = device_medians(recorder, [call, *map(padded, _PAD_SIZES)], n)
    size = pad_size(_PAD_SIZES, [c - base for c in costs], slowdown * base)
    slower = padded(size)
    base, cost = device_medians(recorder, [call, slower], n)
    return slower, {"size": size, "reached": cost / base - 1.0}


def sizing_calls(per_call: float) -> int:
    """Traced calls per size tried for the slowdown's pass, for a call of ``per_call`` seconds."""
    return max(_SLOWDOWN_MIN_CALLS, min(_SLOWDOWN_CALLS, round(_SLOWDOWN_SECONDS / max(per_call, 1e-9))))


def device_medians(
    recorder: DeviceRecorder, fns: Sequence[Callable[[], None]], calls: int = _SLOWDOWN_CALLS
) -> list[float]:
    """The median device seconds of ``calls`` calls of each of ``fns``, all in one trace, or one trace each
    where the long trace lost events (a program of many tiny kernels fills the profiler's buffer)."""

    def run(these: Sequence[Callable[[], None]]) -> int:
        for f in these:
            for _ in range(calls):
                f()
        return calls * len(these)

    seconds, _ = _one_trace_or_each(recorder, list(fns), run)
    return [float(np.median(seconds[i : i + calls])) for i in range(0, len(seconds), calls)]


def _one_trace_or_each(
    recorder: DeviceRecorder, parts: Sequence[T], run: Callable[[Sequence[T]], int]
) -> tuple[list[float], int]:
    """The device seconds of ``run(parts)``'s module executions, in order, inside one profiler trace
    (starting and stopping one costs more than the calls), or one trace a part where the long trace lost
    events (the profiler's buffer is finite); and how many traces were taken."""
    try:
        return recorder.record(functools.partial(run, parts)), 1
    except TraceError:
        if len(parts) == 1:
            raise
        return [s for part in parts for s in recorder.record(functools.partial(run, [part]))], len(parts)


def pad_size(sizes: Sequence[int], extras: Sequence[float], target: float) -> int:
    """The pass's size (a multiple of 1024) whose extra device time is ``target``, read off the extras
    measured at ``sizes`` (ascending; made non-decreasing, noise aside): interpolated between them, in
    proportion past the largest, the smallest below the first."""
    rising = np.maximum.accumulate(np.asarray(extras, float))
    if target >= rising[-1]:
        size = sizes[-1] * target / rising[-1] if rising[-1] > 0 else sizes[-1] * 8
    elif target <= rising[0]:
        size = sizes[0]
    else:
        size = float(np.interp(target, rising, sizes))
    return max(1024, round(size / 1024) * 1024)


def slowed(
    call: Callable[[], None], slowdown: float, clock: Callable[[], float] = time.process_time
) -> Callable[[], None]:
    """``call``, then a busy wait until ``clock`` has advanced ``slowdown`` times as much again."""

    def slower() -> None:
        c0 = clock()
        call()
        c1 = clock()
        until = c1 + slowdown * (c1 - c0)
        while clock() < until:
            pass

    return slower


def missing_metric(case: Case, measured: Callable[[Key], Measurement]) -> str | None:
    """Why ``case`` cannot be evaluated here: the first compiler or kernel metric it reads without a value."""
    for read in case.invariant.assertion.reads():
        name, program = read.name, read.program or case.program
        metric = METRICS.get(name)
        if metric is None or metric.source not in ("compiler", "kernel") or program is None:
            continue
        value = measured(Key(program, read.config or case.config, case.target)).metrics.get(name)
        if isinstance(value, Missing):
            return f"{name} of {program} on {case.target}: {value.reason}"
    return None


def key_answer(measured: Measurement, doc: str = "") -> Json:
    """A side's answer for one key, its invariants still to come."""
    by_source = {
        src: {m: value_or_none(v) for m, v in measured.metrics.items() if METRICS[m].source == src}
        for src in ("kernel", "compiler")
    }
    return {
        "snapshot": render_summary(measured, doc),
        "kernel_metrics": by_source["kernel"],
        "compiler_metrics": by_source["compiler"],
        "sparsecore_metrics": {m: value_or_none(measured.metrics[m]) for m in OFFLOAD_COUNTS},
        "invariants": [],
    }


def structure_of_keys(
    keys: Sequence[tuple[str, str, str]],
    specs: Sequence[Spec] | None = None,
    programs: Programs | None = None,
) -> Json:
    """Each ``(program, config, target)`` key's answer with its invariants' verdicts (default: the package's
    specs on the catalog), and why each target named is unavailable here. A key this release cannot compile
    for the tool's want of an API answers its ``error`` line and the API it ``lacks``."""
    from ..catalog.registry import Programs
    from ..compile.artifacts import CompileCache
    from ..verdict.checks import expand

    reasons, usable = _targets({t for _, _, t in keys})
    programs = programs if programs is not None else Programs()
    cache = CompileCache(usable, programs)
    cache.plan([Key(*k) for k in keys if Key(*k).target in usable])
    items: dict[str, Json] = {}
    measured_keys: dict[Key, Measurement] = {}
    for key in map(Key._make, keys):
        name = "/".join(key)
        if key.target not in usable:
            items[name] = {"error": reasons[key.target]}
            continue
        try:
            measured_keys[key] = measure(cache.get(*key), usable[key.target])
            items[name] = key_answer(measured_keys[key], programs.program(key.program).doc)
        except ReleaseLacks as err:  # the tool's limit on this release: that key is not compared
            items[name] = {"error": str(err), "lacks": err.api}
        except InvariantsError as err:
            items[name] = {"error": str(err)}
    cases = expand(load_specs() if specs is None else specs, usable.values(), programs=programs)
    _add_verdicts(items, _evaluable(cases, measured_keys), measured_keys, programs)
    return {"items": items, "targets": reasons}


def _add_verdicts(
    items: dict[str, Json], cases: Sequence[Case], measured: Mapping[Key, Measurement], programs: Programs
) -> None:
    for case in cases:
        entry = _verdict(case, measured.__getitem__, programs)
        for key in case.keys:
            items["/".join(key)]["invariants"].append(entry)


def _targets(names: set[str]) -> tuple[dict[str, str | None], dict[str, Target]]:
    """Why each target named is unavailable here (None: it is), and the available ones by name."""
    targets = all_targets()
    reasons = {
        n: f"{n}: unknown target here" if n not in targets else targets[n].unavailable_reason()
        for n in sorted(names)
    }
    return reasons, {n: targets[n] for n, r in reasons.items() if r is None}


def _evaluable(cases: Sequence[Case], measured: Mapping[Key, Measurement]) -> list[Case]:
    names = {k.program for k in measured}
    return [
        case
        for case in cases
        if all(k in measured for k in case.keys)
        and (case.program is not None or set(case.invariant.programs) <= names)
    ]


def _verdict(case: Case, measured: Callable[[Key], Measurement], programs: Programs) -> Json:
    from ..verdict.checks import evaluate

    ratchet = case.invariant.ratchet
    entry: Json = {
        "id": case.invariant.id,
        "where": case.invariant.where,
        "ratchet": None if ratchet is None else dataclasses.asdict(ratchet),
    }
    unknown = missing_metric(case, measured)
    if unknown is not None:
        entry.update(holds=None, not_evaluated=unknown, describe=f"not evaluated: {unknown}")
    else:
        verdict = evaluate(case, measured, programs)
        entry.update(holds=verdict.holds, describe=verdict.describe(case.invariant))
        # What versus needs to tell a relation that holds because a side got worse from one that improved.
        numbers = {k: v for k, v in verdict.measured.items() if isinstance(v, (int, float))}
        entry.update(terms={k: v for k, v in numbers.items() if not isinstance(v, bool)})
        entry.update(worse=case.invariant.assertion.worse_direction())
    return entry


def serve(stdin: TextIO, stdout: TextIO, worker: Worker) -> int:
    """Answer requests until ``quit`` or end of input; exit status 2 after a line not understood."""
    import jax

    device = jax.devices()[0]
    hello = {
        "event": "hello",
        "versions": versions(),
        "platform": str(device.platform),
        "device": str(device.device_kind),
        "python": platform.python_version(),
        "slowdown": worker.slowdown,
        "cpus": usable(),
    }
    stdout.write(encode(hello))
    stdout.flush()
    for line in stdin:
        try:
            request = decode_request(line)
        except ProtocolError as err:
            stdout.write(encode({"ok": False, "error": str(err)}))
            stdout.flush()
            return 2
        op = request.pop("op")
        if op == "quit":
            return 0
        try:
            reply = {"ok": True, **getattr(worker, op)(**request)}
        except InvariantsError as err:
            reply = {"ok": False, "error": str(err)}
        except Exception as err:  # a JAX error in one side is a finding about that side, said in one line
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            reply = {"ok": False, "error": f"{type(err).__name__}: {first[:300]}"}
        stdout.write(encode(reply))
        stdout.flush()
    return 0


def main() -> int:
    # The protocol owns fd 1: anything else that writes there (a C++ library's warning, a print in a
    # program) goes to stderr instead of corrupting a reply.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        worker = _from_env()
    except InvariantsError as err:  # bad input, said in the hello's place
        proto.write(encode({"ok": False, "error": f"worker: {err}"}))
        return 2
    return serve(sys.stdin, proto, worker)


def _from_env() -> Worker:
    """The worker its variables ask for, on its cores; its project's programs built under this jax."""
    cpus = os.environ.get(CPUS_ENV, "")
    try:
        if cpus:
            pin({int(c) for c in cpus.split(",")})
        else:
            free()
    except (ValueError, OSError) as err:
        raise InvariantsError(f"{CPUS_ENV}={cpus!r}: {err}") from None
    raw = os.environ.get(SLOWDOWN_ENV, "0") or "0"
    try:
        slowdown = float(raw)
    except ValueError:
        slowdown = -1.0
    if not 0.0 <= slowdown < 1.0:
        raise InvariantsError(f"{SLOWDOWN_ENV}={raw!r} is not in [0, 1)")
    if (why := installed_too_old()) is not None:
        raise InvariantsError(why)
    try:
        import jax  # noqa: F401
    except Exception as err:
        raise InvariantsError(f"cannot import jax: {err}") from None
    project = Project.from_env()
    from ..catalog.downstream import load_project  # it imports JAX: after the check above

    specs, programs = load_project(project) if project.own else (None, None)
    return Worker(slowdown, specs, programs)


if __name__ == "__main__":
    sys.exit(main())
