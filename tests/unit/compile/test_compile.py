"""Compiling: one key at a time on the runtime, cached for the session (nothing compiles twice)."""

from __future__ import annotations

from invariants.compile.artifacts import CompileCache
from invariants.hlo.parse import parse_module
from invariants.records.compiled import Key
from invariants.scope.targets import all_targets


def test_a_key_compiles_once_to_optimized_hlo():
    cache = CompileCache(all_targets())
    first = cache.get("take", "f32", "cpu")
    assert cache.get(*Key("take", "f32", "cpu")) is first  # from the cache: nothing compiles twice
    assert len(cache.compiled) == 1
    module = parse_module(first.hlo_text, "take")
    assert module.scheduled  # the optimized, scheduled module, what XLA runs
    assert "gather" in first.jaxpr
    assert first.key == Key("take", "f32", "cpu") and first.key.target == "cpu"
    assert callable(cache.executable("take", "f32", "cpu"))


# ---------------------------------------------------------------------------------------------------------
# Prefetch: compiles ahead of the items on threads, with the key's result and errors exactly as without.

import threading  # noqa: E402

import pytest  # noqa: E402

from invariants._errors import InvariantsError  # noqa: E402
from invariants.compile import artifacts as _compile  # noqa: E402


class _FakeCompiler:
    """Stands in for ``compile.artifacts``: records which thread compiled what, holds ``hold`` until
    released."""

    def __init__(self, hold: str | None = None, fail: str | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.release = threading.Event()
        self.started = threading.Event()
        self.hold, self.fail = hold, fail
        self.active = 0
        self.lock = threading.Lock()

    def __call__(self, program, config, target, persistent=None):
        program = program.name  # the run's Program: this stand-in goes by its name
        with self.lock:
            self.calls.append((program, threading.current_thread().name))
            self.active += 1
        try:
            if program == self.hold:
                self.started.set()
                assert self.release.wait(10)
            if program == self.fail:
                raise InvariantsError(f"{target.name}/{program}[{config}]: compile failed: boom")
            art = _compile.Compiled(program, config, target.name, "", (), "", {}, {}, 0.0)
            return art, object()
        finally:
            with self.lock:
                self.active -= 1


def test_prefetched_keys_compile_once_on_the_pool(monkeypatch):
    fake = _FakeCompiler()
    monkeypatch.setattr(_compile, "_compile", fake)
    cache = CompileCache(all_targets())
    keys = [Key(p, "f32", "cpu") for p in ("naive", "take", "vmap_naive")]
    cache.prefetch(keys, workers=2)
    cache.settle()
    got = [cache.get(*k) for k in keys]
    assert [c.program for c in got] == ["naive", "take", "vmap_naive"]
    assert sorted(p for p, _ in fake.calls) == ["naive", "take", "vmap_naive"]  # each once
    assert all(name.startswith("invariants-compile") for _, name in fake.calls)
    cache.close()


def test_get_takes_back_a_key_that_has_not_started(monkeypatch):
    fake = _FakeCompiler(hold="naive")
    monkeypatch.setattr(_compile, "_compile", fake)
    cache = CompileCache(all_targets())
    cache.prefetch([Key("naive", "f32", "cpu"), Key("take", "f32", "cpu")], workers=1)
    assert fake.started.wait(10)  # the only thread is busy with naive; take waits in the queue
    assert cache.get("take", "f32", "cpu").program == "take"
    # Compiled for the asking item, on a thread of its own (a watch follows it), not behind naive.
    assert ("take", "invariants-compile-now_0") in fake.calls
    fake.release.set()
    assert cache.get("naive", "f32", "cpu").program == "naive"
    cache.close()
    assert [p for p, _ in fake.calls].count("take") == 1


def test_a_prefetch_error_belongs_to_the_item_that_asks(monkeypatch):
    fake = _FakeCompiler(fail="take")
    monkeypatch.setattr(_compile, "_compile", fake)
    cache = CompileCache(all_targets())
    cache.prefetch([Key("take", "f32", "cpu"), Key("naive", "f32", "cpu")], workers=2)
    assert cache.get("naive", "f32", "cpu").program == "naive"
    with pytest.raises(InvariantsError, match=r"^cpu/take\[f32\]: compile failed: boom$"):
        cache.get("take", "f32", "cpu")
    cache.close()


def test_a_programs_compile_error_is_its_one_line_and_a_compile_failure(monkeypatch):
    """What the compiler said, after the key, and the same as a value for the results file: a finding about
    the program (in that release, on that target), not an error of the suite."""
    from invariants.catalog.programs import CATALOG
    from invariants.records.compiled import FailedCompile

    def fails(*args: object, **kwargs: object) -> None:
        raise _compile.CompileFailed("INTERNAL: RET_CHECK failure (x.cc:1)", "XlaRuntimeError")

    monkeypatch.setattr(_compile, "compile_function", fails)
    with pytest.raises(FailedCompile) as err:
        _compile._compile(CATALOG["take"], "f32", all_targets()["cpu"])
    assert str(err.value) == "cpu/take[f32]: compile failed: INTERNAL: RET_CHECK failure (x.cc:1)"
    assert (err.value.key, err.value.first) == (
        Key("take", "f32", "cpu"),
        "INTERNAL: RET_CHECK failure (x.cc:1)",
    )


def test_timing_never_shares_the_process_with_a_compile(monkeypatch):
    fake = _FakeCompiler(hold="naive")
    monkeypatch.setattr(_compile, "_compile", fake)
    cache = CompileCache(all_targets())
    cache.prefetch([Key("naive", "f32", "cpu")], workers=1)
    assert fake.started.wait(10)
    threading.Timer(0.2, fake.release.set).start()
    cache.executable("take", "f32", "cpu")  # waits for naive's compile before it compiles take itself
    assert fake.active == 0 and fake.release.is_set()
    cache.close()


def test_prefetch_gives_the_same_artifacts_as_compiling_here():
    cache = CompileCache(all_targets())
    cache.prefetch([Key("grad_take", "f32", "tpu-v5e"), Key("take", "f32", "cpu")], workers=2)
    cache.settle()
    for key in (Key("grad_take", "f32", "tpu-v5e"), Key("take", "f32", "cpu")):
        here = _compile.compile_here(key.program, key.config, all_targets()[key.target])
        assert cache.get(*key).hlo_text == here.hlo_text
    cache.close()


# ---------------------------------------------------------------------------------------------------------
# Kernel code: kept from the compile itself, by a per-compile dump option.

import os  # noqa: E402

from invariants.compile.artifacts import compile_here  # noqa: E402


def test_a_cpu_and_a_gpu_compile_keep_their_kernel_code_without_xla_flags(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    targets = all_targets()
    cpu = compile_here("grad_take", "f32", targets["cpu"])
    assert cpu.kernel_code and all(n.endswith(".ir-with-opt.ll") for n in cpu.kernel_code)
    assert any("define " in text for text in cpu.kernel_code.values())
    gpu = compile_here("grad_take", "f32", targets["gpu-a100"])
    assert gpu.kernel_code and all(n.endswith(".ptx") for n in gpu.kernel_code)
    assert any(".target sm_80" in text for text in gpu.kernel_code.values())
    assert "XLA_FLAGS" not in os.environ  # the dump was this compile's option, not a process-wide flag
    assert not any(n.startswith("module_") for n in gpu.kernel_code)  # names are stable: no module number


def test_which_targets_keep_kernel_code():
    targets = all_targets()
    assert targets["cpu"].keeps_kernel_code and targets["gpu-h100"].keeps_kernel_code
    assert not targets["tpu-v5e"].keeps_kernel_code  # libtpu dumps no LLO
    assert not targets["cpu-8dev"].keeps_kernel_code  # the CPU runtime's kernels are read there


class _Lowered:
    """A stand-in for ``jax.stages.Lowered`` whose compiles fail ``failures`` times with ``message``."""

    def __init__(self, message: str, failures: int) -> None:
        self.message, self.failures, self.calls = message, failures, 0

    def compile(self, compiler_options=None):
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(self.message)
        return "compiled"


def test_a_ptxas_that_fails_to_start_is_tried_once_more_and_nothing_else_is():
    tpu = all_targets()["tpu-v5e"]  # no kernel code: the plain compile path
    flaky = _Lowered("INTERNAL: Failed to launch ptxas", failures=1)
    assert _compile._compile_lowered(flaky, tpu) == ("compiled", {}) and flaky.calls == 2
    broken = _Lowered("INTERNAL: Failed to launch ptxas", failures=2)
    with pytest.raises(RuntimeError, match="ptxas"):
        _compile._compile_lowered(broken, tpu)
    finding = _Lowered("RESOURCE_EXHAUSTED: Shared memory size limit exceeded", failures=1)
    with pytest.raises(RuntimeError, match="Shared memory"):
        _compile._compile_lowered(finding, tpu)
    assert finding.calls == 1  # a compiler's verdict on the program is never retried


def test_the_pool_starts_each_plugin_once_in_the_calling_thread_before_any_compile(monkeypatch):
    """Two compile threads that start PJRT plugins at once can race (ALREADY_EXISTS: PJRT_Api already
    exists): prefetch starts every target's devices first, one after another, in the caller's thread."""
    import dataclasses as dc

    from invariants.scope.targets import Target

    events: list[tuple[str, str, int]] = []
    caller = threading.get_ident()

    class Recording(Target):
        def devices(self):
            events.append(("devices", self.name, threading.get_ident()))
            return []

    targets = {n: Recording(**{f.name: getattr(t, f.name) for f in dc.fields(t)})
               for n, t in all_targets().items() if n in ("cpu", "gpu-a100", "tpu-v5e")}  # fmt: skip
    cache = CompileCache(targets)
    monkeypatch.setattr(
        cache, "_fill", lambda key: events.append(("compile", key.target, threading.get_ident()))
    )
    keys = [Key("take", "f32", t) for t in ("tpu-v5e", "gpu-a100", "tpu-v5e", "cpu")]
    cache.prefetch(keys, workers=2)
    cache.close()
    started = [(name, ident) for what, name, ident in events if what == "devices"]
    # (A GPU target's availability check makes its topology too: the same start, asked twice.)
    assert list(dict.fromkeys(started)) == [("tpu-v5e", caller), ("gpu-a100", caller), ("cpu", caller)]
    first_compile = next(i for i, e in enumerate(events) if e[0] == "compile")
    assert first_compile == len(started)  # every plugin started before the first compile


@pytest.mark.parametrize("program", ["train_take", "train_eqx_embedding", "grad_take", "take"])
def test_ahead_of_time_traces_as_the_chip_does(monkeypatch, program):
    """A CPU host records a chip's snapshots ahead of time; on that chip (tox -e tpu) the runtime target
    of the same name compiles the same program from plain arguments. Both must trace alike: a one-device
    mesh's NamedSharding once added a 'reshard' to every training step's jaxpr ahead of time, and a real
    TPU v5e then failed eight structure items ('changed: jaxpr', '-  reshard'). Here the AOT target's
    devices are this host's CPU, so that no compiler plugin is needed: what differs is the arguments."""
    import dataclasses

    import jax

    from invariants.catalog.programs import CATALOG
    from invariants.scope.targets import CPU_RUNTIME, Target

    monkeypatch.setattr(Target, "devices", lambda self: jax.devices("cpu")[: self.device_count])
    ahead = dataclasses.replace(CPU_RUNTIME, name="cpu-aot", mode="aot")
    traced = {}
    for target in (CPU_RUNTIME, ahead):
        placed = _compile.placement(CATALOG[program], "f32", target)
        assert placed.mesh is None
        args = placed.args
        traced[target.mode] = _compile.jaxpr_primitives(jax.make_jaxpr(CATALOG[program].fn)(*args))
    assert traced["aot"] == traced["runtime"]
    assert all(a.sharding.device_set == {jax.devices("cpu")[0]} for a in args)  # placed on the device


@pytest.mark.parametrize("program", ["train_take", "train_eqx_embedding", "grad_take"])
def test_the_pytest_api_places_a_one_chip_program_as_the_gate_does(monkeypatch, program):
    """invariants.testing.compile_for and the gate build a one-chip program's arguments in one place: on an
    ahead-of-time target both trace the training step without the 'reshard' a one-device mesh adds (the
    pytest API once built that mesh, and its snapshots of a training step disagreed with the gate's)."""
    import dataclasses

    import jax

    from invariants import testing
    from invariants.catalog.programs import CATALOG
    from invariants.scope.configs import get_config
    from invariants.scope.targets import CPU_RUNTIME, Target

    monkeypatch.setattr(Target, "devices", lambda self: jax.devices("cpu")[: self.device_count])
    ahead = dataclasses.replace(CPU_RUNTIME, name="cpu-aot", mode="aot")
    fn = CATALOG[program].fn
    gate_args = _compile.placement(CATALOG[program], "f32", ahead).args
    api_args, _, placed = testing._abstract(CATALOG[program].argument_specs(get_config("f32")), ahead)
    assert placed.mesh is None
    gate = _compile.jaxpr_primitives(jax.make_jaxpr(fn)(*gate_args))
    api = _compile.jaxpr_primitives(jax.make_jaxpr(fn)(*api_args))
    assert api == gate and "reshard" not in api
    assert [a.sharding for a in api_args] == [a.sharding for a in gate_args]
