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
* ``s.metric("structure")`` is what a spec's ``structure(a) == structure(b)`` compares (the kernel list and
  the gathers, scatters, collectives and converts, not the jaxpr):
  ``a.metric("structure") == b.metric("structure")``.
* ``s.compile_cache`` says where the compile came from: ``hit`` (the gate's compile cache served it),
  ``miss`` (compiled, and kept there) or ``off`` (no cache: ``INVARIANTS_NO_CACHE=1``).

The compile cache is the gate's (:mod:`invariants.compile.store`: ``INVARIANTS_CACHE_DIR``, else
``~/.cache/jax-embedding-invariants/compiled``), under the gate's key: the lowered module and every compiler
input (:mod:`invariants.compile.keys`). A function traced the same way in a later process is not compiled
again; one whose trace changed (a constant, a shape, a flag read while tracing) lowers to another module,
and compiles.

The gate's input facts (``table_bytes``, ``lookups``, ...) describe its catalog configurations, not an
arbitrary function's arguments, so they are not metrics here.

Errors: an unknown target is :class:`InvariantsError` with the closest names; a target this host cannot
compile for (libtpu or the CUDA plugin missing) is :class:`TargetUnavailable` with the install command;
a compiler error is one line naming the function and the target. Nothing here imports JAX until
:func:`compile_for` is called.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._errors import InvariantsError, did_you_mean
from .catalog.targets import Target, all_targets
from .compile.record import Key
from .compile.store import Outcome, Store, from_settings
from .hlo.cost import Missing
from .hlo.structure import Structure
from .kernels import KernelFacts
from .kernels.program import walk_kernels
from .measure.measurement import Measurement, measure
from .measure.metrics import METRICS
from .snapshot.render import kernel_line, render_summary, summary_line

if TYPE_CHECKING:
    import jax
    from jax.sharding import Mesh, Sharding

    from .compile.keys import Persistent
    from .compile.record import Compiled
    from .kernels.program import ProgramCode

__all__ = [
    "CompiledStructure",
    "MetricUnavailable",
    "TargetUnavailable",
    "compile_for",
    "mesh_for",
    "target_named",
]


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
    from .compile.process import held_stderr  # it sets the gate's environment defaults before JAX loads

    # JAX starts here and the targets probe their compilers: on a host without CUDA, the CUDA plugin's
    # notices (absl's, "Could not find cuda drivers") are dropped as the gate drops them; the rest is kept.
    with held_stderr():
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
    if target.in_child:
        raise _in_child(target, targets)
    reason = target.unavailable_reason()
    if reason is not None:
        late = not in_time and target.family == "gpu" and "cannot describe" in reason
        raise TargetUnavailable(reason + (_STARTED_EARLY if late else ""))
    return target


def _in_child(target: Target, targets: Mapping[str, Target]) -> InvariantsError:
    """The line for a target that compiles in a child process, naming one this process compiles for: a
    pod target of as many chips for a sharded program (it compiles ahead of time here), else the runtime."""
    flags = target.libtpu_init_args
    why = f"LIBTPU_INIT_ARGS={flags}" if flags else f"{target.device_count} host devices"
    alike = [t.name for t in targets.values() if t.device_count == target.device_count and not t.in_child]
    many = target.device_count > 1 and alike
    use = f"a target of {target.device_count} chips, {', '.join(alike)}" if many else next(iter(targets))
    return InvariantsError(
        f"compile_for: {target.name} compiles in a child process with {why}; "
        f"compile_for compiles in this process: use {use}"
    )


class _CallableInt(int):
    _read: Callable[[str | None], object]

    def __call__(self, dtype: str | None = None) -> object:
        return self._read(dtype)


class _CallableFloat(float):
    _read: Callable[[str | None], object]

    def __call__(self, dtype: str | None = None) -> object:
        return self._read(dtype)


def _as_call(value: object, read: Callable[[str | None], object]) -> object:
    """A metric read as an attribute is its value, and also takes a spec's call form: ``s.scatters == 1``
    and ``s.scatters(dtype="f32")`` (the count of f32 scatters) both read as they do in a spec."""
    kind = {int: _CallableInt, float: _CallableFloat}.get(type(value))
    if kind is None:
        return value
    wrapped = kind(value)
    wrapped._read = read
    return wrapped


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
    compile_cache: Outcome = "off"

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

    def metric(self, name: str, dtype: str | None = None) -> Any:
        """The metric ``name``: a number (or a sorted tuple for ``opcodes``, ``custom_call_targets``);
        ``dtype`` scopes a count to one element type, as a spec's ``scatters(dtype="f32")`` does.

        Raises :class:`MetricUnavailable` when this compile has no value for it, and ``AttributeError``
        (closest names listed) for a name that is not a metric of a compile.
        """
        if name == "structure":  # a spec's structure(a) == structure(b): call-only there, never a number
            return self._structure(dtype)
        if name not in self.metrics:
            raise AttributeError(self._unknown(name, "metric"))
        scoped = METRICS[name].by_dtype
        if dtype is not None and scoped is None:
            takes = ", ".join(m.name for m in METRICS.values() if m.by_dtype is not None)
            raise InvariantsError(f"{self.name}: {name} takes no dtype; the counts that do: {takes}")
        value = self._value(name)  # before any dtype scope, as a spec reads it: no SparseCore, no count
        if dtype is None or scoped is None:
            return value
        from .verdict.checks import WidenedDtype, widened_warning

        if (warning := widened_warning(name, dtype, self.target)) is not None:
            # As a spec's item warns: the count may pass for the very program it guards.
            warnings.warn(f"{self.name} on {self.target}: {warning}", WidenedDtype, stacklevel=2)
        return scoped(self.structure, dtype)

    def _structure(self, dtype: str | None) -> tuple[tuple[object, ...], ...]:
        from .verdict.checks import structural_signature  # the spec's own comparison (it imports JAX)

        if dtype is not None:
            raise InvariantsError(f"{self.name}: structure takes no dtype")
        return structural_signature(self.structure)

    def _value(self, name: str) -> Any:
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
            return _as_call(self.metric(name), functools.partial(self.metric, name))
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
    def kernel_facts(self) -> list[tuple[str, KernelFacts]]:
        """Each kernel with code and what its code does: ``(its snapshot line, its KernelFacts)``, loop
        bodies included, in order; ``[f for _, f in s.kernel_facts if f.cas_loops]`` are the kernels with a
        compare-and-swap retry loop. Empty where the target gives no kernel code (a TPU compile)."""
        return [
            (kernel_line(k), facts)
            for k in walk_kernels(self.structure.kernel_list)
            if (facts := self.code.of(k)) is not None
        ]

    @property
    def snapshot(self) -> str:
        """The snapshot text of this compile, as the gate's structure tier writes it."""
        return render_summary(self.measured)

    def __repr__(self) -> str:
        where = f"{self.name} [{self.config}] on {self.target}"
        return f"<CompiledStructure {where}: {summary_line(self.structure)}>"


def _shape_text(leaf: jax.ShapeDtypeStruct) -> str:
    short = {
        "float32": "f32",
        "bfloat16": "bf16",
        "float16": "f16",
        "int32": "s32",
        "int8": "s8",
        "int64": "s64",
        "uint32": "u32",
        "bool": "pred",
    }
    dtype = np.dtype(leaf.dtype).name
    return f"{short.get(dtype, dtype)}[{','.join(map(str, leaf.shape))}]"


def mesh_for(target: str, *, axis_types: str = "auto", **axes: int) -> Mesh:
    """A ``jax.sharding.Mesh`` over ``target``'s chips, axis name -> size in order (``data=4, tensor=4``),
    the chips placed by their coordinates as a pod job places them; ``axis_types`` ``explicit`` makes every
    axis Explicit. The sizes' product must be the target's chip count: one line otherwise. Arguments
    sharded on it (``jax.ShapeDtypeStruct(..., sharding=NamedSharding(mesh, P(...)))``) are what
    :func:`compile_for` compiles a multi-chip program from."""
    chosen = target_named(target)
    from .compile.artifacts import pod_mesh  # JAX: started by target_named

    if axis_types not in ("auto", "explicit"):
        raise InvariantsError(f"mesh_for: axis_types {axis_types!r}: 'auto' or 'explicit'")
    bad = [f"{a}={n!r}" for a, n in axes.items() if not _is_size(n)]
    if not axes or bad:
        raise InvariantsError(
            f"mesh_for: {', '.join(bad) or 'no axes'}: give each axis a positive size, e.g. data=4, tensor=4"
        )
    chips = int(np.prod(list(axes.values())))
    if chips != chosen.device_count:
        shown = ", ".join(f"{a}={n}" for a, n in axes.items())
        raise InvariantsError(
            f"mesh_for: {target} has {chosen.device_count} chips; the mesh {shown} has {chips}"
        )
    return pod_mesh(list(chosen.devices()), tuple(axes.values()), tuple(axes), axis_types)


def _is_size(n: object) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 1


def _meshes_of(leaves: list[Any]) -> list[Any]:
    """The distinct meshes the leaves' NamedShardings are on."""
    from jax.sharding import NamedSharding

    out: list[Any] = []
    for leaf in leaves:
        sharding = getattr(leaf, "sharding", None)
        if isinstance(sharding, NamedSharding) and all(sharding.mesh is not m for m in out):
            out.append(sharding.mesh)
    return out


def _abstract(
    args: tuple[object, ...],
    target: Target,
    mesh: Mesh | dict[str, int] | None = None,
    in_shardings: object = None,
    axis_types: str = "auto",
) -> tuple[tuple[object, ...], str, Mesh | None]:
    """The abstract arguments, their shapes as text, and the mesh the program runs on (None for one
    device). One device of ``target`` holds an unsharded program, as the gate places it; a multi-chip
    target needs a mesh (given, or the one the arguments are sharded on). A leaf without a shape and dtype,
    or a multi-chip target with nothing sharded, is one line."""
    import jax  # JAX: started by _start_jax (target_named) before this runs

    leaves, treedef = jax.tree_util.tree_flatten_with_path(args)
    for path, leaf in leaves:
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            where = "argument " + jax.tree_util.keystr(path)
            raise InvariantsError(
                f"compile_for: {where} is a {type(leaf).__name__}, not an array: pass arrays or "
                "jax.ShapeDtypeStruct (pytrees of them)"
            )
    arrays = [leaf for _, leaf in leaves]
    mesh = _mesh(arrays, target, mesh, axis_types)
    if in_shardings is not None and mesh is None:
        raise InvariantsError("compile_for: in_shardings needs a mesh (mesh={...} or mesh_for(...))")
    per_leaf = _shardings(args, arrays, target, mesh, in_shardings)
    specs = [
        jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)
        for leaf, sharding in zip(arrays, per_leaf, strict=True)
    ]
    config = ",".join(_shape_text(s) for s in specs)
    return jax.tree_util.tree_unflatten(treedef, specs), config, mesh


def _mesh(
    leaves: list[Any], target: Target, mesh: Mesh | dict[str, int] | None, axis_types: str = "auto"
) -> Mesh | None:
    """The mesh the program runs on: ``mesh`` (a mesh, or axis sizes for :func:`mesh_for`), else the one
    the arguments are sharded on, else None. One line for arguments on several meshes, a mesh that is not
    ``target``'s chips, or a multi-chip target with nothing sharded."""
    chosen: Mesh | None = _given(mesh, target, axis_types)
    found = _meshes_of(leaves)
    if chosen is None and len(found) == 1 and found[0].size > 1:
        chosen = found[0]
    if len(found) > 1 or (chosen is not None and _elsewhere(found, chosen)):
        raise InvariantsError("compile_for: the arguments are sharded on different meshes; use one mesh")
    if chosen is not None:
        _check_chips(chosen, target)
    elif target.device_count > 1:
        raise InvariantsError(
            f"compile_for: {target.name} has {target.device_count} chips and nothing is sharded: pass "
            f"mesh={{...}} and in_shardings=..., or arguments sharded on invariants.testing.mesh_for("
            f"{target.name!r}, ...); a one-chip program compiles for a one-chip target"
        )
    return chosen


def _given(mesh: Mesh | dict[str, int] | None, target: Target, axis_types: str) -> Mesh | None:
    if isinstance(mesh, dict):
        return mesh_for(target.name, axis_types=axis_types, **mesh)
    if axis_types != "auto":
        raise InvariantsError(
            "compile_for: axis_types goes with mesh={...}; a mesh of mesh_for(...) takes its own axis_types"
        )
    return mesh


def _elsewhere(found: list[Mesh], mesh: Mesh) -> bool:
    """Whether an argument is sharded over other devices than ``mesh``'s (a one-device mesh is anywhere)."""
    return any(m.devices.tolist() != mesh.devices.tolist() for m in found if m.size > 1)


def _check_chips(mesh: Mesh, target: Target) -> None:
    chips = {d.id for d in target.devices()}
    if mesh.size != target.device_count or not {d.id for d in mesh.devices.flat} <= chips:
        raise InvariantsError(
            f"compile_for: the mesh has {mesh.size} devices, not {target.name}'s {target.device_count} "
            f"chips: make it with invariants.testing.mesh_for({target.name!r}, ...)"
        )


def _shardings(
    args: tuple[object, ...], leaves: list[Any], target: Target, mesh: Mesh | None, in_shardings: object
) -> list[Sharding | None]:
    """Each leaf's sharding: from ``in_shardings`` (a PartitionSpec per argument, a prefix of ``args``), else
    its own on the mesh (replicated when it has none), else one device of an ahead-of-time ``target``, else
    None (the runtime's default device)."""
    from jax.sharding import NamedSharding, PartitionSpec

    from .compile.artifacts import one_device

    if in_shardings is not None:
        assert mesh is not None  # _abstract refuses in_shardings without a mesh
        return _given_shardings(args, mesh, in_shardings)
    if mesh is not None:  # arguments sharded on the mesh keep their sharding; the rest are replicated
        return [
            leaf.sharding
            if isinstance(getattr(leaf, "sharding", None), NamedSharding)
            else NamedSharding(mesh, PartitionSpec())
            for leaf in leaves
        ]
    if target.mode != "runtime":
        return [one_device(target)] * len(leaves)
    return [None] * len(leaves)


def _given_shardings(args: tuple[object, ...], mesh: Mesh, in_shardings: object) -> list[Sharding | None]:
    """Each leaf's sharding on ``mesh`` from ``in_shardings``, a PartitionSpec (None: replicated) per
    argument, a pytree prefix of ``args``; one line where it does not match them."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    is_spec = lambda x: x is None or isinstance(x, PartitionSpec)  # noqa: E731
    try:
        spread = jax.tree_util.tree_map(  # each spec over every leaf of the arguments below it
            lambda spec, sub: jax.tree_util.tree_map(lambda _: spec, sub),
            in_shardings,
            args,
            is_leaf=is_spec,
        )
    except (ValueError, TypeError) as err:
        raise InvariantsError(f"compile_for: in_shardings does not match the arguments: {err}") from None
    return [
        NamedSharding(mesh, spec or PartitionSpec())
        for spec in jax.tree_util.tree_leaves(spread, is_leaf=is_spec)
    ]


def compile_for(
    fn: Callable[..., object],
    *args: object,
    target: str = "runtime",
    name: str | None = None,
    mesh: Mesh | dict[str, int] | None = None,
    in_shardings: object = None,
    axis_types: str = "auto",
    donate_argnums: int | tuple[int, ...] = (),
) -> CompiledStructure:
    """Compile ``fn(*args)`` for ``target`` (``cpu``, ``tpu-v5e``, ``gpu-h100``, ``tpu-v5e-4x4``, ... or
    ``runtime``) and measure it. Only the shapes and dtypes of ``args`` matter; nothing runs.

    A multi-chip target compiles a sharded program: ``mesh`` (axis name -> size, ``{"data": 4, "tensor":
    4}``, or a mesh of :func:`mesh_for`) with ``in_shardings`` (a PartitionSpec per argument, a pytree
    prefix of ``args``; None or left out: replicated), or arguments already sharded on such a mesh. The
    function is traced under the mesh (``jax.set_mesh``), so PartitionSpecs inside it work as in the user's
    code. ``axis_types``: ``auto`` or ``explicit``, the mesh's axis types, as a spec's ``axis_types`` (an
    ``.at[].get(out_sharding=...)`` inside the function needs ``explicit``). ``donate_argnums``: the
    arguments whose buffers the program may reuse, as ``jax.jit`` takes it (a training step donates its
    parameters). See the module docstring."""
    chosen = target_named(target)
    # These import the catalog, and JAX with it: after target_named has started JAX as the gate does
    import jax

    from .compile.artifacts import CompileFailed, compile_function

    store = from_settings()
    persistent = _persistent(store.folder, store.max_bytes) if store is not None else _persistent(None, 0)
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    specs, config, on = _abstract(args, chosen, mesh, in_shardings, axis_types)
    jit_kwargs = {"donate_argnums": donate_argnums} if donate_argnums != () else {}
    try:
        with jax.set_mesh(on) if on is not None else contextlib.nullcontext():
            compiled, _ = compile_function(fn, specs, chosen, label, config, jit_kwargs, persistent)
    except CompileFailed as err:  # a tracing or compiler error, about this function on this target: one line
        raise InvariantsError(f"compile_for: {label} [{config}] on {chosen.name}: {err.kind}: {err}") from err
    measured = measure(compiled, chosen, source=f"{chosen.name}/{label}")
    outcome = persistent.outcomes.get(Key(label, config, chosen.name), "off")
    return CompiledStructure(label, config, chosen.name, measured, outcome)


@functools.cache
def _persistent(folder: Path | None, size: int) -> Persistent:
    """The compile cache of ``folder`` (None: none), one per folder and process: its fingerprint of the
    installed compiler is read once, as a gate session reads it. Checked when first used: a folder that
    cannot serve is one line."""
    from .compile.keys import Persistent

    store = Store(folder, max_bytes=size) if folder is not None else None
    if store is not None:
        store.check()
        atexit.register(_prune, store)  # the size bound, kept when the process ends, as a gate run's end does
    return Persistent(store)


def _prune(store: Store) -> None:
    with contextlib.suppress(OSError):  # the folder gone by then (a test's temporary folder): nothing to keep
        store.prune()
