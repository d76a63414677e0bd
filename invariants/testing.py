"""The gate's measurements for a project's own tests: compile a function for a named target and read it.

This is the plain-function half of the pytest API (the fixtures in :mod:`invariants.pytest_plugin` call
it)::

    from invariants.testing import compile_for

    s = compile_for(embed, params, indices, target="tpu-v5e")
    assert s.while_loops == 0
    assert s.metric("temp_bytes") <= 4 * 2**20

:func:`compile_for` lowers ``fn`` under ``jax.jit`` on the abstract shapes of its arguments (arrays,
``jax.ShapeDtypeStruct``, or pytrees of them: nothing runs), compiles it for the target the way the gate
does (ahead of time for TPU and GPU targets on any host; on the runtime backend for ``cpu``), and returns
a :class:`CompiledStructure`: the :class:`~invariants.hlo.structure.Structure` of the optimized HLO with every
metric of :data:`invariants.METRICS` that a compile gives.

Reading a :class:`CompiledStructure`:

* ``s.NAME`` and ``s.metric("NAME")`` are the metric ``NAME`` (``python -m invariants hlo-stats --help``
  lists them): structural (``kernels``, ``while_loops``, ``gathers``, ``opcodes``, ...), the compiler's
  (``temp_bytes``, ``flops``, ``estimated_cycles`` on TPU, ...) and the kernels' code (``cas_loops``,
  ``vector_width``, ... on GPU and CPU). A metric the target does not give (no cycle estimate off TPU, no
  kernel code on TPU) or cannot compute (an unknown trip count) raises :class:`MetricUnavailable` with
  one line saying why, never a stand-in number. ``s.metrics`` holds them all, raw (a
  :class:`~invariants.hlo.cost.Missing` or None where there is no value).
* Where a metric and a ``Structure`` field share a name (``while_loops``, ``collectives``, ``converts``,
  ``kernels``, ...), ``s.NAME`` is the metric, a number; the field is ``s.structure.NAME``. Structure
  fields that are not metrics (``kernel_list``, ``fusion_kinds``, ``gather_shapes``, ``root_shape``, ...)
  read through too.
* Any other name raises ``AttributeError`` naming the closest metrics and fields.
* ``s.snapshot`` is the snapshot text the gate writes (:func:`invariants.snapshot.render.render_summary`).

The gate's input facts (``table_bytes``, ``lookups``, ...) describe its catalog configurations, not an
arbitrary function's arguments, so they are not metrics here.

Errors: an unknown target is :class:`InvariantsError` with the closest names; a target this host cannot
compile for (libtpu or the CUDA plugin missing) is :class:`TargetUnavailable` with the install command;
a compiler error is one line naming the function and the target. Nothing here imports JAX until
:func:`compile_for` is called.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ._errors import InvariantsError, did_you_mean
from .catalog.targets import Target, all_targets
from .hlo.cost import Missing
from .hlo.structure import Structure
from .measure.measurement import Measurement, measure
from .snapshot.render import render_summary, summary_line

if TYPE_CHECKING:
    from .compile.record import Compiled
    from .kernels.program import ProgramCode

__all__ = ["CompiledStructure", "MetricUnavailable", "TargetUnavailable", "compile_for", "target_named"]


class TargetUnavailable(InvariantsError):
    """The target exists but this host cannot compile for it; ``str()`` is the target's reason and the
    command that installs what it needs."""


class MetricUnavailable(InvariantsError):
    """A metric with no value for this compile: the target does not give it, or it is unknown (a loop's
    trip count that cannot be derived). ``str()`` says which and why."""


def _start_jax() -> bool:
    """JAX as the gate starts it, where that can still apply: libtpu's environment defaults (read when it
    loads), and the CPU as the runtime when nothing chose a platform (``JAX_PLATFORMS`` unset) and JAX has
    not started a backend yet. The CPU runtime is what lets the CUDA plugin compile for a GPU ahead of time
    on a host without one; ``JAX_PLATFORMS=tpu`` or ``cuda`` keeps the real chip.

    Returns False when it came too late: JAX had started every backend it could, with no platform chosen.
    """
    # JAX starts here, once compile.process has set its environment defaults (they apply when it loads)
    import jax
    from jax._src import xla_bridge

    from .compile import process  # noqa: F401  (importing it sets the environment defaults, as in the gate)

    if getattr(jax.config, "jax_platforms", None):
        return True
    if xla_bridge.backends_are_initialized():
        return False
    jax.config.update("jax_platforms", "cpu")
    return True


# What a GPU target's skip adds when JAX started on its own before compile_for (see _start_jax).
_STARTED_EARLY = (
    "; JAX started its backends before compile_for with no JAX_PLATFORMS, and on a host without CUDA the "
    "plugin then cannot compile ahead of time: set JAX_PLATFORMS=cpu, or pass jax.ShapeDtypeStruct "
    "arguments so that nothing starts JAX before compile_for"
)


def target_named(name: str) -> Target:
    """The one target called ``name`` (a name of ``python -m invariants`` ``--targets``, or ``runtime``).

    An unknown name raises one line with the closest names; a target this process cannot compile for in
    itself (``cpu-8dev`` compiles in a child with 8 host devices), or cannot compile for at all here
    (:class:`TargetUnavailable`), says so.
    """
    in_time = _start_jax()
    targets = all_targets()
    if name == "runtime":
        name = next(iter(targets))
    if name not in targets:
        raise InvariantsError(
            f"compile_for: unknown target {name!r}{did_you_mean(name, targets, n=2)}; "
            "known: runtime, " + ", ".join(targets)
        )
    target = targets[name]
    if target.mode == "subprocess":
        raise InvariantsError(
            f"compile_for: {name} compiles in a child process with {target.device_count} host devices; "
            "compile_for compiles single-device programs in this process: use " + next(iter(targets))
        )
    reason = target.unavailable_reason()
    if reason is not None:
        late = not in_time and target.family == "gpu" and "cannot describe" in reason
        raise TargetUnavailable(reason + (_STARTED_EARLY if late else ""))
    return target


@dataclasses.dataclass(frozen=True)
class CompiledStructure:
    """One function compiled for one target: its structure, every metric, and its snapshot text.

    ``name`` is the function's name (or the ``name`` given to :func:`compile_for`), ``config`` the shapes
    of its arguments (``f32[1000,64],s32[128]``), ``target`` the target's name, ``measured`` what the
    compile measured to (:class:`~invariants.measure.measurement.Measurement`). See the module docstring
    for how names read.
    """

    name: str
    config: str
    target: str
    measured: Measurement

    @property
    def compiled(self) -> Compiled:
        return self.measured.compiled

    @property
    def structure(self) -> Structure:
        return self.measured.structure

    @property
    def code(self) -> ProgramCode:
        return self.measured.code

    @property
    def metrics(self) -> Mapping[str, Any]:
        """Every metric of the compile, raw: a :class:`~invariants.hlo.cost.Missing` or None where there
        is no value."""
        return self.measured.metrics

    def metric(self, name: str) -> Any:
        """The metric ``name``: a number (or a sorted tuple for ``opcodes``, ``custom_call_targets``).

        Raises :class:`MetricUnavailable` when this compile has no value for it, and ``AttributeError``
        (closest names listed) for a name that is not a metric of a compile.
        """
        if name not in self.metrics:
            raise AttributeError(self._unknown(name, "metric"))
        value = self.metrics[name]
        if isinstance(value, Missing):
            raise MetricUnavailable(f"{self.name} on {self.target}: {name} {value}")
        if value is None:
            raise MetricUnavailable(
                f"{self.name} on {self.target}: {name} is unknown "
                "(a while loop's trip count cannot be derived)"
            )
        return value

    def __getattr__(self, name: str) -> Any:
        # Only called for names the dataclass does not have: metrics, then the Structure's own fields.
        if name.startswith("__") or name == "measured":
            raise AttributeError(name)
        if name in self.metrics:
            return self.metric(name)
        if name in {f.name for f in dataclasses.fields(self.structure)}:
            return getattr(self.structure, name)
        raise AttributeError(self._unknown(name, "metric or Structure field"))

    def _unknown(self, name: str, what: str) -> str:
        fields = [f.name for f in dataclasses.fields(self.structure)]
        known = sorted({*self.metrics, *fields})
        return (
            f"{self.name} on {self.target}: no {what} {name!r}{did_you_mean(name, known, n=3)}; "
            "metrics: python -m invariants hlo-stats --help"
        )

    @property
    def snapshot(self) -> str:
        """The snapshot text of this compile, as the gate's structure tier writes it."""
        return render_summary(self.measured)

    def __repr__(self) -> str:
        where = f"{self.name} [{self.config}] on {self.target}"
        return f"<CompiledStructure {where}: {summary_line(self.structure)}>"


def _shape_text(leaf: Any) -> str:
    short = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int32": "s32", "int8": "s8",
             "int64": "s64", "uint32": "u32", "bool": "pred"}  # fmt: skip
    dtype = np.dtype(leaf.dtype).name
    return f"{short.get(dtype, dtype)}[{','.join(map(str, leaf.shape))}]"


def _abstract(args: tuple[Any, ...], target: Target) -> tuple[tuple[Any, ...], str]:
    """The abstract arguments (one device of ``target``, as the gate places an unsharded program) and
    their shapes as text. A leaf without a shape and dtype is one line naming its path."""
    import jax  # JAX: started by _start_jax (target_named) before this runs
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    leaves, treedef = jax.tree_util.tree_flatten_with_path(args)
    for path, leaf in leaves:
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            where = "argument " + jax.tree_util.keystr(path)
            raise InvariantsError(
                f"compile_for: {where} is a {type(leaf).__name__}, not an array: pass arrays or "
                "jax.ShapeDtypeStruct (pytrees of them)"
            )
    sharding = None
    if target.mode != "runtime":
        mesh = Mesh(np.array(list(target.devices())[:1]).reshape(1), ("x",))
        sharding = NamedSharding(mesh, PartitionSpec())
    specs = [jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding) for _, leaf in leaves]
    config = ",".join(_shape_text(s) for s in specs)
    return jax.tree_util.tree_unflatten(treedef, specs), config


def compile_for(
    fn: Callable[..., Any], *args: Any, target: str = "runtime", name: str | None = None
) -> CompiledStructure:
    """Compile ``fn(*args)`` for ``target`` (``cpu``, ``tpu-v5e``, ``gpu-h100``, ... or ``runtime``) and
    measure it. Only the shapes and dtypes of ``args`` matter; nothing runs. See the module docstring."""
    # These import the catalog, and JAX with it: after target_named has started JAX as the gate does
    from .compile.artifacts import CompileFailed, compile_function

    chosen = target_named(target)
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    specs, config = _abstract(args, chosen)
    try:
        compiled, _ = compile_function(fn, specs, chosen, label, config)
    except CompileFailed as err:  # a tracing or compiler error, about this function on this target: one line
        raise InvariantsError(f"compile_for: {label} [{config}] on {chosen.name}: {err.kind}: {err}") from err
    measured = measure(compiled, chosen, source=f"{chosen.name}/{label}")
    return CompiledStructure(label, config, chosen.name, measured)
