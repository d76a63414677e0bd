"""Compile a (program, configuration, target) to every artifact later stages read, once per session.

The artifacts are plain text and numbers (:class:`~invariants.records.compiled.Compiled`), so that later
stages never touch JAX objects and a child process can hand them back as JSON.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as Pending
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax
import numpy as np
from jax.sharding import Mesh

from .. import _config
from .._errors import InvariantsError
from .._paths import shown
from .._supported import ReleaseLacks
from .._usercode import leave_behind
from ..catalog.downstream import load_project
from ..catalog.programs import Program, get_config
from ..catalog.project import Project
from ..catalog.registry import Programs, get_program
from ..kernels.dump import read_kernel_code
from ..records.cache import Outcome, Store, Tally, from_settings
from ..records.compiled import Compiled, FailedCompile, Key
from ..records.results import Record, compile_failed, compile_name
from ..scope.targets import _AOT_TARGETS, HOST_DEVICE_FLAG, Target
from .child import STARTED, KeyTimedOut, keys_child
from .keys import Persistent
from .placed import Placed, place, pod_mesh

if TYPE_CHECKING:
    from jax.extend.core import ClosedJaxpr, Jaxpr

# A key that compiled to no record: a finding about its program, or the tool's limit on this release.
Unmade = FailedCompile | ReleaseLacks


def placement(program: Program, config_id: str, target: Target) -> Placed:
    """A program's arguments as the gate compiles them: a sharded one on a mesh of the target's devices,
    traced under it when it is a pod program (those name mesh axes in their code, as model code does)."""
    config = get_config(config_id)
    specs = program.argument_specs(config)
    inputs = program.inputs
    donate = tuple(range(inputs.param_leaves(config))) if program.donates and inputs is not None else ()
    layout = program.layout
    if layout is None:
        return place(specs, target, donate=donate)
    devices = list(target.devices())
    if layout.pod:
        mesh = pod_mesh(devices, layout.mesh_for(target.device_count), layout.axes, layout.axis_types)
    else:
        mesh = Mesh(np.array(devices[: layout.devices]).reshape(layout.mesh_shape), layout.axes)
    parts = program.argument_specs_sharded(config)
    return place(specs, target, mesh, parts, traced_on_mesh=layout.pod, donate=donate, output=layout.output)


_INLINED = {"pjit", "jit", "closed_call", "core_call", "remat", "checkpoint"} | {
    "custom_jvp_call",
    "custom_vjp_call",
    "custom_vjp_call_jaxpr",
}


def jaxpr_primitives(closed_jaxpr: ClosedJaxpr) -> tuple[str, ...]:
    """The primitive sequence of a jaxpr, nested calls inlined, gather/scatter with their mode."""
    out: list[str] = []

    def walk(jaxpr: Jaxpr) -> None:
        for eqn in jaxpr.eqns:
            subs = [v for v in eqn.params.values() if hasattr(v, "eqns") or hasattr(v, "jaxpr")]
            subs += [b for v in eqn.params.values() if isinstance(v, tuple) for b in v if hasattr(b, "jaxpr")]
            if subs and eqn.primitive.name in _INLINED:
                for sub in subs:
                    walk(getattr(sub, "jaxpr", sub))
                continue
            name = eqn.primitive.name
            mode = eqn.params.get("mode")
            if mode is not None and ("gather" in name or "scatter" in name):
                name = f"{name}[{getattr(mode, 'name', mode)}]"
            out.append(name)
            for sub in subs:  # loops and conditionals: keep their bodies visible
                out.append("{")
                walk(getattr(sub, "jaxpr", sub))
                out.append("}")

    walk(closed_jaxpr.jaxpr)
    return tuple(out)


def compile_here(
    program: Program | str, config_id: str, target: Target, persistent: Persistent | None = None
) -> Compiled:
    """Lower and compile in this process (a name: the catalog's program)."""
    return _compile(
        get_program(program) if isinstance(program, str) else program, config_id, target, persistent
    )[0]


def _compile(
    program: Program, config_id: str, target: Target, persistent: Persistent | None = None
) -> tuple[Compiled, jax.stages.Compiled | None]:
    """The artifacts and the executable (None when the persistent cache served them). ``persistent`` None:
    a real compile, counted nowhere (what a timed item runs)."""
    try:
        placed = placement(program, config_id, target)
        with placed.tracing():
            return compile_function(
                program.fn, placed.args, target, program.name, config_id, placed.jit_kwargs, persistent
            )
    except ReleaseLacks as err:  # said of this compile: a skip's line names what it skipped
        raise err.about(compile_name(target.name, program.name, config_id)) from None
    except CompileFailed as err:
        key = Key(program.name, config_id, target.name)
        line = compile_failed(target.name, program.name, config_id, str(err))
        raise FailedCompile(line, key, str(err), err.kind, err.unoptimized) from err


class CompileFailed(InvariantsError):
    """A tracing or compiler error, said in its first line."""

    def __init__(self, first: str, kind: str, unoptimized: str | None = None) -> None:
        super().__init__(first)
        self.kind = kind
        self.unoptimized = unoptimized


def compile_function(
    fn: Callable[..., Any],
    args: Sequence[Any],
    target: Target,
    program: str,
    config: str,
    jit_kwargs: Mapping[str, Any] | None = None,
    persistent: Persistent | None = None,
) -> tuple[Compiled, jax.stages.Compiled | None]:
    """Trace, lower and compile ``fn(*args)`` for ``target``, as every compile here is made: the artifacts
    and the executable (None when ``persistent`` held the lowered module)."""
    key = Key(program, config, target.name)
    start = time.perf_counter()
    lowered = None
    try:
        closed = jax.make_jaxpr(fn)(*args)
        lowered = jax.jit(fn, **(jit_kwargs or {})).lower(*args)
        jaxpr, primitives = str(closed), jaxpr_primitives(closed)
        traced = {"jaxpr": jaxpr, "jaxpr_primitives": list(primitives)}
        result, hit = (None, None)
        if persistent is not None:
            result, hit = persistent.served(key, lowered, target, args, traced, closed)
        if hit is not None:
            return hit, None
        compiled, kernel_code = _compile_lowered(lowered, target)
        seconds = time.perf_counter() - start
        # libtpu may fail only when it serializes the compiled module: that is part of the compile too.
        hlo_text = compiled.as_text() or ""
    except InvariantsError:
        raise
    except Exception as err:  # a compiler error is a finding about this key, said in one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        _refuse_undecodable(first)
        raise CompileFailed(first, type(err).__name__, _unoptimized(lowered)) from err
    cost, memory = _cost(compiled), _memory(compiled)
    artifacts = Compiled(*key, jaxpr, primitives, hlo_text, cost, memory, seconds, kernel_code)
    if persistent is not None:
        persistent.kept(key, result, artifacts)
    return artifacts, compiled


def _refuse_undecodable(first: str) -> None:
    """A loaded module whose path is not UTF-8 is one line: JAX's lowering writes it into the locations."""
    for module in list(sys.modules.values()) if first == "std::bad_cast" else []:
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and file.encode("utf-8", "replace").decode() != file:
            raise InvariantsError(
                f"{os.fsencode(file).decode('utf-8', 'backslashreplace')}: the path of this module is not "
                "UTF-8, and JAX cannot write it into the source locations of the lowered program "
                "(std::bad_cast): move the project to a folder whose name is UTF-8"
            ) from None


def _unoptimized(lowered: jax.stages.Lowered | None) -> str | None:
    if lowered is None:
        return None
    try:
        return str(lowered.as_text(dialect="hlo"))
    except Exception:  # the module is an aid to a bug report, never a second failure
        return None


# XLA:GPU failing to start ptxas says nothing about the program: the compile is tried once more.
_SPAWN_FAILURES = ("Failed to launch ptxas",)


def _compile_lowered(
    lowered: jax.stages.Lowered, target: Target
) -> tuple[jax.stages.Compiled, dict[str, str]]:
    for attempt in (1, 2):
        try:
            if target.keeps_kernel_code:
                return _compile_with_code(lowered)
            return lowered.compile(), {}
        except Exception as err:
            if attempt == 2 or not any(s in str(err) for s in _SPAWN_FAILURES):
                raise
    raise AssertionError("unreachable")


def _compile_with_code(lowered: jax.stages.Lowered) -> tuple[jax.stages.Compiled, dict[str, str]]:
    """Compile ``lowered`` dumping this compile only (a per-compile option) and read back its kernel code."""
    with tempfile.TemporaryDirectory(prefix="invariants-code-") as folder:
        compiled = lowered.compile(compiler_options={"xla_dump_to": folder})
        modules = read_kernel_code(Path(folder))
    if len(modules) > 1:  # one jit is one module; more would mean a dump shared with another compile
        raise InvariantsError(f"{folder}: one compile dumped {len(modules)} modules: {', '.join(modules)}")
    return compiled, next(iter(modules.values()), {})


def _cost(compiled: jax.stages.Compiled) -> dict[str, float]:
    try:
        cost = compiled.cost_analysis()
    except Exception:  # not every backend offers it; it is an aid, never a verdict
        return {}
    if isinstance(cost, list):  # older JAX returned one dict per computation
        cost = cost[0] if cost else {}
    return {
        k: float(v) for k, v in (cost or {}).items() if k in ("flops", "bytes accessed", "transcendentals")
    }


def _memory(compiled: jax.stages.Compiled) -> dict[str, int]:
    try:
        mem = compiled.memory_analysis()
    except Exception:
        return {}
    fields = [f"{f}_size_in_bytes" for f in ("argument", "output", "temp", "generated_code")]
    fields.append("peak_memory_in_bytes")
    return {f: int(getattr(mem, f)) for f in fields if mem is not None and hasattr(mem, f)}


def compile_in_child(
    keys: Iterable[Key],
    target: Target,
    project: Project | None = None,
    persistent: Persistent | None = None,
    watch: Watch | None = None,
) -> list[Compiled | Unmade]:
    """Compile ``keys`` for a target that compiles in a child, in one child with its flags set. The child
    keys and fills the same persistent cache; a key whose compile failed is its :class:`FailedCompile`, one
    this release cannot compile for the tool's want of an API its :class:`ReleaseLacks`. A
    key past ``watch``'s timeout ends the child and fails; a new child compiles the others (those compiled
    before it are in the persistent cache by then)."""
    keys = list(keys)
    made: dict[Key, Compiled | Unmade] = {}
    todo = keys
    while todo:
        try:
            made.update(_child_batch(todo, target, project, persistent, watch))
            todo = []
        except KeyTimedOut as err:
            assert watch is not None  # only a watch bounds a key
            made[todo[err.index]] = watch.timed_out(todo[err.index])
            todo = todo[: err.index] + todo[err.index + 1 :]
    return [made[k] for k in keys]


def _child_batch(
    keys: list[Key],
    target: Target,
    project: Project | None,
    persistent: Persistent | None,
    watch: Watch | None,
) -> dict[Key, Compiled | Unmade]:
    store = persistent.store if persistent is not None else None
    bound = watch.timeout if watch is not None and watch.timeout > 0 else None
    try:
        out = keys_child(
            "invariants.compile.artifacts",
            keys,
            env=_child_env(target, project, store),
            what=f"{target.name}: compile",
            args=[target.name],
            started=(lambda i: watch.begin(keys[i], i + 1, len(keys))) if watch is not None else None,
            key_timeout=bound,
            timeout=math.inf if watch is not None else 600,
        )
    finally:
        if watch is not None:
            watch.end(keys)
    records = [Compiled.from_json(d) for d in out["records"]]
    if persistent is not None:
        for record, outcome in zip(records, out["outcomes"], strict=True):
            persistent.count(record.key, outcome)
        if store is not None:
            store.notes.extend(out["notes"])
    made: dict[Key, Compiled | Unmade] = {r.key: r for r in records}
    for key, message, first, kind, unoptimized in out["failed"]:
        made[Key(*key)] = FailedCompile(message, Key(*key), first, kind, unoptimized)
    for key, *fields in out["lacking"]:
        made[Key(*key)] = ReleaseLacks(*fields)
    return made


class Watch:
    """What a session hears of its compiles while an item waits for them: every ``every`` seconds, a line
    (``say``) for each compile in flight, with its place among its target's and how long it has run; a
    compile past ``timeout`` seconds (0: unbounded) fails."""

    def __init__(self, say: Callable[[str], None], every: float, timeout: float) -> None:
        self.say, self.every, self.timeout = say, every, timeout
        self._lock = threading.Lock()
        self._running: dict[Key, tuple[float, int, int, threading.Thread | None]] = {}

    def begin(self, key: Key, n: int, of: int, here: bool = False) -> None:
        """``key`` started, ``n`` of ``of`` of its target's; ``here``: on this thread of this process."""
        with self._lock:
            self._running[key] = (time.monotonic(), n, of, threading.current_thread() if here else None)

    def end(self, keys: Iterable[Key]) -> None:
        with self._lock:
            for key in keys:
                self._running.pop(key, None)

    def tell(self) -> list[tuple[Key, threading.Thread]]:
        """Say each compile in flight; the compiles of this process past the timeout, no longer followed."""
        now = time.monotonic()
        with self._lock:
            running = sorted(self._running.items(), key=lambda kv: kv[1][0])
        overdue = []
        for key, (start, n, of, thread) in running:
            self.say(
                f"invariants: compiling {key.program} [{key.config}] for {key.target} ({n} of {of}), "
                f"{now - start:.0f} s"
            )
            if thread is not None and self.timeout > 0 and now - start > self.timeout:
                overdue.append((key, thread))
        self.end(key for key, _ in overdue)
        return overdue

    def timed_out(self, key: Key) -> FailedCompile:
        first = f"still compiling after {self.timeout:g} s (--compile-timeout)"
        line = compile_failed(key.target, key.program, key.config, first)
        return FailedCompile(line, key, first, "timeout")


def _child_env(target: Target, project: Project | None, store: Store | None) -> dict[str, str]:
    env = {**os.environ, **(project.environment() if project is not None else {})}
    if target.mode == "subprocess":
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {HOST_DEVICE_FLAG}".strip()
    if target.libtpu_init_args:
        env["LIBTPU_INIT_ARGS"] = target.libtpu_init_args
    env["JAX_PLATFORMS"] = "cpu"
    env[_config.name("INVARIANTS_NO_CACHE")] = "0" if store is not None else "1"
    if store is not None:
        env[_config.name("INVARIANTS_CACHE_DIR")] = str(store.folder)
    return env


class CompileCache:
    """Session-wide cache: nothing compiles twice.

    ``plan`` names every key a session will ask for, so a child-process target compiles all of its keys in
    one child. ``prefetch`` compiles ahead of the items on a thread pool (XLA releases the GIL). ``get``
    never waits on a compile that has not started. ``executable`` first waits for every compile in flight,
    so a timed program never shares the process with a compile.
    """

    def __init__(
        self,
        targets: dict[str, Target],
        programs: Programs | None = None,
        project: Project | None = None,
        store: Store | None = None,
        watch: Watch | None = None,
    ) -> None:
        self._targets = targets
        self.watch = watch
        self._programs = programs if programs is not None else Programs()
        self._project = project
        self.persistent = Persistent(store)
        self._done: dict[Key, Compiled] = {}
        self._failed: dict[Key, Unmade] = {}  # a child's, raised for the items asking
        self._executables: dict[Key, jax.stages.Compiled | None] = {}
        self._planned: dict[str, set[Key]] = {}
        self._lock = threading.Lock()
        self._futures: dict[Key, Future[None]] = {}
        self._pool: ThreadPoolExecutor | None = None
        # The compile an item asks for that none started: on a thread of its own, so that a watch follows it.
        self._now: ThreadPoolExecutor | None = None
        self._begun: dict[str, int] = {}  # compiles started per target, for "n of N"
        self._left_behind = False

    def plan(self, keys: Iterable[Key]) -> None:
        for key in keys:
            self._planned.setdefault(key.target, set()).add(key)

    def narrow_plan(self, keys: Iterable[Key]) -> None:
        """Plan only ``keys`` of what was planned: what the items left after every selection read."""
        kept = set(keys)
        self._planned = {t: planned & kept for t, planned in self._planned.items()}

    def prefetch(self, keys: Iterable[Key], workers: int) -> None:
        """Start compiling ``keys``, in the items' order; ``get`` raises a compile error for its item."""
        if workers < 1:
            return
        keys = list(keys)
        self._start_plugins(keys)
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(workers, thread_name_prefix="invariants-compile")
            batches: dict[Key | str, Future[None]] = {}
            for key in keys:
                if key in self._done or key in self._futures or key.target not in self._targets:
                    continue
                batch = key.target if self._targets[key.target].in_child else key  # one child per target
                if batch not in batches:
                    batches[batch] = self._pool.submit(self._fill, key)
                self._futures[key] = batches[batch]

    def _start_plugins(self, keys: list[Key]) -> None:
        """Start each backend the keys compile for here, one at a time: two threads starting PJRT plugins at
        once can race. A target that cannot start is left to its items, which say why."""
        for name in dict.fromkeys(k.target for k in keys):
            target = self._targets.get(name)
            if target is None or target.in_child or target.unavailable_reason() is not None:
                continue
            with contextlib.suppress(Exception):
                target.devices()

    def _fill(self, key: Key) -> None:
        t = self._targets[key.target]
        if t.in_child:
            batch = sorted(self._planned.get(key.target, set()) | {key})
            with self._lock:
                todo = [k for k in batch if k not in self._done]
            made = compile_in_child(todo, t, self._project, self.persistent, self.watch)
            for k, c in zip(todo, made, strict=True):
                with self._lock:
                    if isinstance(c, Compiled):
                        self._done[k] = c
                    else:
                        self._failed[k] = c
            return
        if self.watch is not None:
            with self._lock:
                n = self._begun[key.target] = self._begun.get(key.target, 0) + 1
            self.watch.begin(key, n, max(n, len(self._planned.get(key.target, ()))), here=True)
        try:
            program = self._programs.program(key.program)
            compiled, executable = _compile(program, key.config, t, self.persistent)
        finally:
            if self.watch is not None:
                self.watch.end([key])
        with self._lock:
            if key in self._failed:  # past the timeout: reported as such, whatever came of it after
                return
            self._done[key] = compiled
            if t.mode == "runtime" and executable is not None:
                self._executables[key] = executable

    def _await(self, future: Future[None], keys: Iterable[Key]) -> None:
        """Wait for ``future``, a compile of ``keys``, while the watch says what is compiling; return when
        it is done or every one of ``keys`` is past the timeout (raising what the compile raised)."""
        keys = list(keys)
        watch = self.watch
        while True:
            try:
                return future.result(timeout=watch.every if watch is not None else None)
            except Pending:
                assert watch is not None
            for key, thread in watch.tell():  # a thread cannot be stopped: the process leaves it at exit
                leave_behind(thread)
                with self._lock:
                    self._failed[key] = watch.timed_out(key)
                    self._left_behind = True
            with self._lock:
                if all(k in self._failed for k in keys):
                    return

    def get(self, program: str, config: str, target: str) -> Compiled:
        key = Key(program, config, target)
        with self._lock:
            if key in self._done:
                return self._done[key]
            future = self._futures.get(key)
        if future is not None and not future.cancel():
            self._await(future, [key])  # started (or done): a compile error is raised here
        if key not in self._done and key not in self._failed:
            with self._lock:
                if self._now is None:
                    self._now = ThreadPoolExecutor(1, thread_name_prefix="invariants-compile-now")
                now = self._now.submit(self._fill, key)
            self._await(now, [key])
        if key in self._failed:
            raise self._failed[key]
        return self._done[key]

    def settle(self) -> None:
        with self._lock:
            futures: dict[Future[None], list[Key]] = {}
            for key, future in self._futures.items():
                futures.setdefault(future, []).append(key)
            self._futures.clear()
        for future, keys in futures.items():
            if not future.cancel():
                with contextlib.suppress(Exception):  # an error belongs to the item that asks for the key
                    self._await(future, keys)

    def close(self) -> None:
        self.settle()
        for pool in (self._pool, self._now):
            if pool is not None:  # a compile left behind past its timeout is not waited for
                pool.shutdown(wait=not self._left_behind, cancel_futures=True)
        self._pool = self._now = None
        if self.persistent.store is not None:  # the size bound, kept at each run's end
            self.persistent.store.prune()

    def executable(self, program: str, config: str, target: str) -> jax.stages.Compiled | None:
        if self._targets[target].mode != "runtime":
            raise InvariantsError(f"{target}: only the runtime target runs programs; this one compiles only")
        self.settle()
        self.get(program, config, target)
        key = Key(program, config, target)
        if key not in self._executables:  # served by the persistent cache: timing needs the real one
            _, self._executables[key] = _compile(
                self._programs.program(program), config, self._targets[target]
            )
        return self._executables[key]

    def outcome(self, key: Key) -> Outcome | None:
        return self.persistent.outcomes.get(Key(*key))

    @property
    def compiled(self) -> list[Compiled]:
        with self._lock:
            return list(self._done.values())

    @property
    def total_seconds(self) -> float:
        outcomes = self.persistent.outcomes
        return sum(c.compile_seconds or 0.0 for c in self.compiled if outcomes.get(c.key) in ("miss", "off"))

    def header_line(self) -> str:
        store = self.persistent.store
        if store is None:
            return "compile cache: off (--no-cache): every program compiles"
        stats = store.stats()
        return (
            f"compile cache: {shown(store.folder)} ({stats['results']} compiles, "
            f"{stats['bytes'] / 1024**2:.0f} MB of {store.max_bytes / 1024**2:.0f} MB)"
        )

    def summary_lines(self, items: Sequence[Record], parse_seconds: float) -> list[str]:
        """The run's end: what the cache served and what compiled (an xdist controller counts the records)."""
        persistent = self.persistent
        tally = persistent.tally if persistent.tally.counts else _tally_of(items)
        lines = []
        line = tally.line(persistent.store.folder if persistent.store is not None else None)
        if line is not None:
            lines.append(f"invariants: {line}")
        compiled = [c for c in self.compiled if persistent.outcomes.get(c.key) in ("miss", "off")]
        if self.compiled:
            lines.append(
                f"invariants: {len(self.compiled)} programs: {len(compiled)} compiled "
                f"({self.total_seconds:.1f} s of compile threads' time), "
                f"{len(self.compiled) - len(compiled)} from the compile cache; parsed in "
                f"{parse_seconds:.2f} s"
            )
        if persistent.store is not None:
            lines += [f"invariants: {n}" for n in dict.fromkeys(persistent.store.notes)]
        return lines


def _tally_of(items: Sequence[Record]) -> Tally:
    said = [i.get("compile_cache") for i in items if i.kind == "structure" and i.get("compile_cache")]
    return Tally(dict(collections.Counter(said)))


def _child_main(target_name: str) -> int:
    target = next(t for t in _AOT_TARGETS if t.name == target_name)
    try:
        _, programs = load_project(Project.from_env())
        persistent = Persistent(from_settings())
    except InvariantsError as err:
        print(err, file=sys.stderr)
        return 1
    keys = json.loads(sys.stdin.read())
    out, failed, lacking = [], [], []
    for index, (program, config, _) in enumerate(keys):
        print(f"{STARTED}{index}", file=sys.stderr, flush=True)
        try:
            out.append(compile_here(programs.program(program), config, target, persistent).to_json())
        except FailedCompile as err:  # that program's finding: the others compile all the same
            failed.append([list(err.key), str(err), err.first, err.kind, err.unoptimized])
        except ReleaseLacks as err:  # the tool's limit on this release, for that key: the others compile
            lacking.append([[program, config, target.name], *err.fields()])
        except InvariantsError as err:
            print(err, file=sys.stderr)
            return 1
    outcomes = [
        persistent.outcomes[k] for p, c, _ in keys if (k := Key(p, c, target.name)) in persistent.outcomes
    ]
    notes = persistent.store.notes if persistent.store is not None else []
    said = {"records": out, "outcomes": outcomes, "notes": notes, "failed": failed, "lacking": lacking}
    json.dump(said, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1]))
