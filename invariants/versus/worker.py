"""A versus worker: one JAX installation, driven by the controller over the protocol of ``versus.protocol``.

Run as ``python -m invariants.versus.worker`` by the interpreter of one side, with this checkout on
``PYTHONPATH``: the worker runs the catalog and the specs of the checkout that started it, under that
side's jax, jaxlib and equinox (the way ``bisect`` runs the suite in an older release). Anything that sets
``XLA_FLAGS`` or injects a slowdown reaches only this process.

* ``prepare`` compiles each ``(program, config)`` for the runtime device, puts the catalog's seeded
  arguments on it (the same values on both sides: :func:`invariants.catalog.arguments.make_arguments`), warms
  it up and answers its per-call time, from back-to-back calls as a block makes them (the first calls of a
  fresh process are several times slower than warm ones).
* ``time`` runs one prepared program ``warm`` times untimed, then ``calls`` times back to back, and
  answers the wall-clock and process CPU seconds of those calls alone (the protocol round trip and the
  warm calls are outside the clocks: the all-cores phase's blocks start with the worker's threads awake). With
  ``INVARIANTS_VERSUS_SLOWDOWN=f`` each call is followed by a busy wait of ``f`` times the CPU time
  that call took: a test-only switch that makes every timed call cost exactly a fraction more (on the CPU
  clock, which decides on the CPU backend), for measuring detection power.
* ``trace`` runs one prepared program ``calls`` times back to back under JAX's profiler and answers each
  call's device seconds (:class:`~invariants.timing.device.DeviceRecorder`), with the wall-clock and CPU
  seconds of those calls: the device clock, for a controller that runs one side at a time (a TPU chip
  belongs to one process). On an accelerator the slowdown switch adds device work instead: an independent
  elementwise pass compiled into the program, sized with the device clock until the call costs that
  fraction more on the chip (a busy wait on the host costs the chip nothing); ``prepare`` answers the
  fraction it reached.
* ``structure`` compiles keys for any target this installation has (TPU and GPU ahead of time where
  libtpu or the CUDA plugin is installed), and answers each key's snapshot rendering (with its kernels'
  ``code:`` lines), its compiler and kernel-code metrics and its counts of offloaded gathers and scatters
  (numbers, null where the target gives none), and
  the verdict of every invariant of the specs on it, evaluated as written (no ``when`` scopes, no
  ratchets: what differs between the two installations is the finding; a ratchet is a verdict like any
  other). An invariant on a metric this key has no value for (a :class:`~invariants.hlo.cost.Missing`: the
  kernel code of a TPU compile, libtpu's cycles on a GPU) is answered ``holds: null`` with the reason,
  never as a failure.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TextIO

import numpy as np

from .._cores import free, pin, usable
from .._errors import InvariantsError
from ..catalog.project import Project
from ..catalog.targets import all_targets, versions
from ..compile.record import Key
from ..hlo.cost import Missing, value_or_none
from ..measure.measurement import Measurement, measure
from ..measure.metrics import METRICS, OFFLOAD_COUNTS
from ..snapshot.render import render_summary
from ..specfile.reader import load_specs
from ..timing.device import DeviceRecorder
from .protocol import CPUS_ENV, SLOWDOWN_ENV, Json, ProtocolError, decode_request, encode

if TYPE_CHECKING:
    from ..catalog.configs import Config
    from ..catalog.programs import Program
    from ..catalog.registry import Programs
    from ..catalog.targets import Target
    from ..specfile.reader import Spec
    from ..verdict.checks import Case

# What starts JAX (jax itself, catalog.programs, compile, snapshot.render, verdict.checks) is imported where
# it is used: after main() has pinned the worker's cores and the side's environment is in place.

# Warm-up, then the per-call probe: each at least this many calls and seconds (a slow program: 5 calls).
_WARM_CALLS, _WARM_SECONDS = 3, 5e-3
_PROBE_CALLS, _PROBE_SECONDS = 2, 5e-3


class Worker:
    """The state of one worker process: prepared programs by ``"program/config"``, and the specs whose
    invariants it evaluates (the package's, or the project's its controller named: :attr:`specs`)."""

    def __init__(
        self,
        slowdown: float = 0.0,
        specs: Sequence[Spec] | None = None,
        programs: Programs | None = None,
        recorder: DeviceRecorder | None = None,
    ) -> None:
        self.slowdown = slowdown
        self.recorder = recorder or DeviceRecorder()  # the device clock (a test's stands in for a chip)
        self.calls: dict[str, Callable[[], None]] = {}
        self.specs = specs
        self._programs = programs

    @property
    def programs(self) -> Programs:
        """The programs this worker runs: its project's, or the catalog's (imported here: it starts JAX)."""
        if self._programs is None:
            from ..catalog.registry import Programs

            self._programs = Programs()
        return self._programs

    def prepare(self, programs: Sequence[tuple[str, str]]) -> Json:
        from ..catalog.programs import get_config

        per_call, slowed_by = {}, {}
        for name, config_id in programs:
            key = f"{name}/{config_id}"
            program, config = self.programs.program(name), get_config(config_id)
            if program.layout is not None:
                raise InvariantsError(
                    f"{name}: a sharded program needs a mesh; versus times single-device ones"
                )
            self.calls[key], slowed_by[key] = _compiled_call(program, config, self.slowdown, self.recorder)
            _repeat(self.calls[key], _WARM_CALLS, _WARM_SECONDS)
            calls, seconds = _repeat(self.calls[key], _PROBE_CALLS, _PROBE_SECONDS)
            per_call[key] = max(seconds / calls, 1e-9)
        return {"per_call": per_call, "slowed_by": slowed_by}

    def time(self, key: str, calls: int, warm: int = 0) -> Json:
        if key not in self.calls:
            raise ProtocolError(f"worker: {key!r} was not prepared")
        fn = self.calls[key]
        gc_was = gc.isenabled()
        gc.disable()  # a collection inside one block would land on one side only
        try:
            for _ in range(warm):
                fn()
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(calls):
                fn()
            w1, c1 = time.perf_counter(), time.process_time()
        finally:
            if gc_was:
                gc.enable()
        return {"wall": w1 - w0, "cpu": c1 - c0}

    def trace(self, key: str, calls: int) -> Json:
        if key not in self.calls:
            raise ProtocolError(f"worker: {key!r} was not prepared")
        fn = self.calls[key]
        clocks: dict[str, float] = {}

        def batch() -> int:
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(calls):
                fn()
            clocks.update(wall=time.perf_counter() - w0, cpu=time.process_time() - c0)
            return calls

        return {"device": self.recorder.record(batch), **clocks}

    def structure(self, keys: Sequence[tuple[str, str, str]]) -> Json:
        return structure_of_keys(keys, self.specs, self.programs)


def _repeat(
    fn: Callable[[], None], calls: int, seconds: float, clock: Callable[[], float] = time.perf_counter
) -> tuple[int, float]:
    """Call ``fn`` back to back until at least ``calls`` calls and ``seconds`` have passed; answer how many
    calls, in how many seconds."""
    n, t0 = 0, clock()
    while True:
        fn()
        n += 1
        spent = clock() - t0
        if n >= calls and spent >= seconds:
            return n, spent


def _compiled_call(
    program: Program, config: Config, slowdown: float, recorder: DeviceRecorder
) -> tuple[Callable[[], None], float | None]:
    """A blocking call of ``program`` compiled for the runtime device on the catalog's seeded arguments, and
    the slowdown it was given. With ``slowdown > 0`` each call costs that fraction more: on the CPU a busy
    wait of that fraction of the call's process CPU time; on an accelerator device work
    (:func:`device_slowed`), whose reached fraction is answered (None: no slowdown). Not more rows looked
    up: a call's dispatch and its table traffic do not grow with the lookups.
    """
    import jax

    from ..catalog.arguments import make_arguments

    device_args = jax.device_put(make_arguments(program, config))
    compiled = jax.jit(program.fn).lower(*device_args).compile()

    # The same as invariants.timing.calls.jax_callable, without importing scipy, which a side's venv may lack.
    def call() -> None:
        jax.block_until_ready(compiled(*device_args))

    if slowdown <= 0:
        return call, None
    if jax.devices()[0].platform == "cpu":
        return slowed(call, slowdown), slowdown
    return device_slowed(program.fn, device_args, call, slowdown, recorder)


def device_slowed(
    fn: Callable[..., object],
    args: Sequence[object],
    call: Callable[[], None],
    slowdown: float,
    recorder: DeviceRecorder,
    calls: int = 20,
) -> tuple[Callable[[], None], float]:
    """``fn`` with an independent elementwise pass over a padding array compiled beside it, the array sized
    from the device clock (three rounds of scaling) until a call costs about ``slowdown`` more device time
    than ``call``; the call and the fraction reached (medians of ``calls`` traced calls)."""
    import jax

    def device_time(c: Callable[[], None]) -> float:
        def batch() -> int:
            for _ in range(calls):
                c()
            return calls

        return float(np.median(recorder.record(batch)))

    def padded(size: int) -> Callable[[], None]:
        pad = jax.device_put(np.ones(size, np.float32))
        both = jax.jit(lambda *a: (fn(*a[:-1]), a[-1] * 1.5 + 0.25)).lower(*args, pad).compile()
        return lambda: jax.block_until_ready(both(*args, pad))

    base = device_time(call)
    size = 1 << 14
    for _ in range(3):
        extra = device_time(padded(size)) - base
        size = size * 8 if extra <= 0 else max(1024, round(size * slowdown * base / extra / 1024) * 1024)
    slower = padded(size)
    return slower, device_time(slower) / base - 1.0


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
    """Why ``case`` cannot be evaluated here: the first compiler or kernel metric its assert reads that
    has no value on its key (the words ``invariants.verdict.checks.evaluate`` fails with); None when it
    can."""
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
    """A side's answer for one key, its invariants still to come: the snapshot rendering, the kernel and
    compiler metrics, and the counts of what runs on the SparseCore (each null where the
    target gives none)."""
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
    """Snapshot rendering, compiler and kernel metrics, and invariant verdicts of each ``(program, config,
    target)`` key, per target; ``specs``: whose invariants (default: the package's), on ``programs``
    (default: the catalog's)."""
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
        except InvariantsError as err:
            items[name] = {"error": str(err)}
    cases = expand(load_specs() if specs is None else specs, usable.values(), programs=programs)
    _add_verdicts(items, _evaluable(cases, measured_keys), measured_keys, programs)
    return {"items": items, "targets": reasons}


def _add_verdicts(
    items: dict[str, Json], cases: Sequence[Case], measured: Mapping[Key, Measurement], programs: Programs
) -> None:
    """Each case's verdict in the ``invariants`` of each of its keys' answers."""
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
    """The cases whose keys were all measured here, and whose programs (a relation's) all were."""
    names = {k.program for k in measured}
    return [
        case
        for case in cases
        if all(k in measured for k in case.keys)
        and (case.program is not None or set(case.invariant.programs) <= names)
    ]


def _verdict(case: Case, measured: Callable[[Key], Measurement], programs: Programs) -> Json:
    """One invariant's verdict on the keys of ``case``, or why it was not evaluated here."""
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
    return entry


def serve(stdin: TextIO, stdout: TextIO, worker: Worker) -> int:
    """Answer requests until ``quit`` or end of input; exit status 2 after a line not understood."""
    import jax

    # The cores it may run on (what the controller's pinning gave it), for the record.
    cpus = usable()
    hello = {
        "event": "hello",
        "versions": versions(),
        "platform": str(jax.devices()[0].platform),
        "device": str(jax.devices()[0].device_kind),
        "python": platform.python_version(),
        "slowdown": worker.slowdown,
        "cpus": cpus,
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
        op = request["op"]
        if op == "quit":
            return 0
        try:
            if op == "prepare":
                reply = worker.prepare(request["programs"])
            elif op == "time":
                reply = worker.time(request["key"], request["calls"], request["warm"])
            elif op == "trace":
                reply = worker.trace(request["key"], request["calls"])
            else:
                reply = worker.structure(request["keys"])
            stdout.write(encode({"ok": True, **reply}))
        except InvariantsError as err:
            stdout.write(encode({"ok": False, "error": str(err)}))
        except Exception as err:  # a JAX error in one side is a finding about that side, said in one line
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            stdout.write(encode({"ok": False, "error": f"{type(err).__name__}: {first[:300]}"}))
        stdout.flush()
    return 0


def main() -> int:
    # The protocol owns fd 1: anything else that writes there (a C++ library's warning, a print in a
    # program) goes to stderr instead of corrupting a reply.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    cpus = os.environ.get(CPUS_ENV, "")
    try:
        if cpus:
            pin({int(c) for c in cpus.split(",")})
        else:
            free()
    except (ValueError, OSError) as err:
        proto.write(encode({"ok": False, "error": f"worker: {CPUS_ENV}={cpus!r}: {err}"}))
        return 2
    raw = os.environ.get(SLOWDOWN_ENV, "0") or "0"
    try:
        slowdown = float(raw)
    except ValueError:
        slowdown = -1.0
    if not 0.0 <= slowdown < 1.0:
        proto.write(encode({"ok": False, "error": f"worker: {SLOWDOWN_ENV}={raw!r} is not in [0, 1)"}))
        return 2
    try:
        import jax  # noqa: F401  (a side that cannot import jax is bad input: say so in the hello's place)
    except Exception as err:
        proto.write(encode({"ok": False, "error": f"worker: cannot import jax: {err}"}))
        return 2
    project = Project.from_env()
    try:
        from ..catalog.downstream import load_project  # it imports JAX: after the check above

        specs, programs = load_project(project) if project.own else (None, None)
    except InvariantsError as err:  # the project's programs do not build under this side's jax: one line
        proto.write(encode({"ok": False, "error": f"worker: {err}"}))
        return 2
    return serve(sys.stdin, proto, Worker(slowdown, specs, programs))


if __name__ == "__main__":
    sys.exit(main())
