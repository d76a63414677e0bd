"""The gate's measurements for a project's own tests: compile a function for a named target and read it.

The plain-function half of the pytest API (the fixtures in :mod:`invariants.pytest_plugin` call it)::

    from invariants.testing import compile_for

    s = compile_for(embed, params, indices, target="tpu-v5e")
    assert s.while_loops == 0
    assert s.metric("temp_bytes") <= 4 * 2**20

:func:`compile_for` lowers ``fn`` on the abstract shapes of its arguments (nothing runs), compiles it for
the target as the gate does, through the gate's compile cache, and returns a :class:`CompiledStructure`:

* ``s.NAME`` and ``s.metric("NAME")`` are the metric ``NAME`` (``python -m invariants hlo-stats --help``
  lists them). One the target does not give, or an unknown trip count, raises :class:`MetricUnavailable`
  saying why, never a stand-in number; ``s.metrics`` holds them all, raw.
* Where a metric and a ``Structure`` field share a name, ``s.NAME`` is the metric and the field is
  ``s.structure.NAME``; other ``Structure`` fields read through. Any other name raises ``AttributeError``
  naming the closest.
* ``s.snapshot`` is the snapshot text the gate writes; ``s.metric("structure")`` is what a spec's
  ``structure(a) == structure(b)`` compares; ``s.compile_cache`` is ``hit``, ``miss`` or ``off``.

The gate's input facts (``table_bytes``, ...) describe its catalog configurations, so they are not metrics
here. An unknown target is one line with the closest names, one this host cannot compile for is
:class:`TargetUnavailable` with the install command. Nothing here imports JAX until a function is called.
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
from .hlo.cost import Missing
from .hlo.structure import Structure
from .kernels import KernelFacts
from .kernels.program import walk_kernels
from .measure.measurement import Measurement, measure
from .measure.metrics import METRICS
from .records.cache import Outcome, Store, from_settings
from .records.compiled import Key
from .scope.targets import Target, all_targets
from .snapshot.render import kernel_line, render_summary, summary_line

if TYPE_CHECKING:
    import jax
    from jax.sharding import Mesh, PartitionSpec

    from .compile.keys import Persistent
    from .compile.placed import Placed
    from .kernels.program import ProgramCode
    from .records.compiled import Compiled

__all__ = [
    "CompiledStructure",
    "MetricUnavailable",
    "TargetUnavailable",
    "compile_for",
    "mesh_for",
    "target_named",
]


class TargetUnavailable(InvariantsError):
    """The target exists but this host cannot compile for it; ``str()`` says what to install."""


class MetricUnavailable(InvariantsError):
    """A metric with no value for this compile: the target does not give it, or it is unknown."""


def _start_jax() -> bool:
    """JAX as the gate starts it, where that can still apply: the CPU as the runtime when no platform was
    chosen, which lets the CUDA plugin compile ahead of time on a host without a GPU. False when too late."""
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
    """The one target called ``name`` (a name of ``--targets``, or ``runtime``) this process compiles for."""
    from .compile.process import held_stderr  # it sets the gate's environment defaults before JAX loads

    # The CUDA plugin's notices on a host without CUDA are dropped as the gate drops them.
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
    """The line for a target that compiles in a child process, naming one of as many chips that does not."""
    flags = target.libtpu_init_args
    why = f"LIBTPU_INIT_ARGS={flags}" if flags else f"{target.device_count} host devices"
    alike = [t.name for t in targets.values() if t.device_count == target.device_count and not t.in_child]
    many = target.device_count > 1 and alike
    use = f"a target of {target.device_count} chips, {', '.join(alike)}" if many else next(iter(targets))
    return InvariantsError(
        f"compile_for: {target.name} compiles in a child process with {why}; "
        f"compile_for compiles in this process: use {use}"
    )


class _Called:
    _read: Callable[[str | None], object]

    def __call__(self, dtype: str | None = None) -> object:
        return self._read(dtype)


class _CallableInt(_Called, int): ...


class _CallableFloat(_Called, float): ...


def _as_call(value: object, read: Callable[[str | None], object]) -> object:
    """A metric's value that also takes a spec's call form: ``s.scatters(dtype="f32")``."""
    kind = {int: _CallableInt, float: _CallableFloat}.get(type(value))
    if kind is None:
        return value
    wrapped = kind(value)
    wrapped._read = read
    return wrapped


@dataclasses.dataclass(frozen=True)
class CompiledStructure:
    """One function compiled for one target (see the module docstring for how names read); ``config`` is
    the shapes of its arguments, ``f32[1000,64],s32[128]``."""

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
        return self.measured.metrics

    def metric(self, name: str, dtype: str | None = None) -> Any:
        """The metric ``name``; ``dtype`` scopes a count to one element type (``scatters(dtype="f32")``)."""
        if name == "structure":
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
            warnings.warn(f"{self.name} on {self.target}: {warning}", WidenedDtype, stacklevel=2)
        return scoped(self.structure, dtype)

    def _structure(self, dtype: str | None) -> tuple[tuple[object, ...], ...]:
        from .verdict.checks import structural_signature

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
        """``(snapshot line, KernelFacts)`` of each kernel with code, loop bodies included, in order."""
        return [
            (kernel_line(k), facts)
            for k in walk_kernels(self.structure.kernel_list)
            if (facts := self.code.of(k)) is not None
        ]

    @property
    def snapshot(self) -> str:
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
    """A mesh over ``target``'s chips placed as a pod job places them, axis name -> size in order
    (``data=4, tensor=4``); ``axis_types="explicit"`` makes every axis Explicit."""
    chosen = target_named(target)
    from .compile.placed import pod_mesh

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
    donate_argnums: int | tuple[int, ...] = (),
) -> tuple[tuple[object, ...], str, Placed]:
    """The abstract arguments in the pytree of ``args``, their shapes as text, and their placement."""
    import jax

    from .compile.placed import place

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
    parts = _given_parts(args, in_shardings) if in_shardings is not None else None
    placed = place(arrays, target, mesh, parts, donate=donate_argnums)
    config = ",".join(_shape_text(s) for s in placed.args)
    return jax.tree_util.tree_unflatten(treedef, placed.args), config, placed


def _mesh(
    leaves: list[Any], target: Target, mesh: Mesh | dict[str, int] | None, axis_types: str = "auto"
) -> Mesh | None:
    """``mesh`` (a mesh, or axis sizes for :func:`mesh_for`), else the one the arguments are sharded on."""
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
    return any(m.devices.tolist() != mesh.devices.tolist() for m in found if m.size > 1)


def _check_chips(mesh: Mesh, target: Target) -> None:
    chips = {d.id for d in target.devices()}
    if mesh.size != target.device_count or not {d.id for d in mesh.devices.flat} <= chips:
        raise InvariantsError(
            f"compile_for: the mesh has {mesh.size} devices, not {target.name}'s {target.device_count} "
            f"chips: make it with invariants.testing.mesh_for({target.name!r}, ...)"
        )


def _given_parts(args: tuple[object, ...], in_shardings: object) -> list[PartitionSpec]:
    """A PartitionSpec per leaf of ``args``, from ``in_shardings`` (a pytree prefix; None: replicated)."""
    import jax
    from jax.sharding import PartitionSpec

    is_spec = lambda x: x is None or isinstance(x, PartitionSpec)  # noqa: E731
    try:
        spread = jax.tree_util.tree_map(
            lambda spec, sub: jax.tree_util.tree_map(lambda _: spec, sub), in_shardings, args, is_leaf=is_spec
        )
    except (ValueError, TypeError) as err:
        raise InvariantsError(f"compile_for: in_shardings does not match the arguments: {err}") from None
    return [spec or PartitionSpec() for spec in jax.tree_util.tree_leaves(spread, is_leaf=is_spec)]


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
    """Compile ``fn(*args)`` for ``target`` and measure it; only the shapes and dtypes of ``args`` matter.

    A multi-chip target compiles a sharded program: ``mesh`` (axis name -> size, or a mesh of
    :func:`mesh_for`) with ``in_shardings`` (a PartitionSpec per argument, a pytree prefix of ``args``), or
    arguments already sharded on such a mesh."""
    chosen = target_named(target)
    # After target_named has started JAX as the gate does.
    from .compile.artifacts import CompileFailed, compile_function

    store = from_settings()
    persistent = _persistent(store.folder, store.max_bytes) if store is not None else _persistent(None, 0)
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    specs, config, placed = _abstract(args, chosen, mesh, in_shardings, axis_types, donate_argnums)
    try:
        with placed.tracing():
            compiled, _ = compile_function(fn, specs, chosen, label, config, placed.jit_kwargs, persistent)
    except CompileFailed as err:
        raise InvariantsError(f"compile_for: {label} [{config}] on {chosen.name}: {err.kind}: {err}") from err
    measured = measure(compiled, chosen, source=f"{chosen.name}/{label}")
    outcome = persistent.outcomes.get(Key(label, config, chosen.name), "off")
    return CompiledStructure(label, config, chosen.name, measured, outcome)


@functools.cache
def _persistent(folder: Path | None, size: int) -> Persistent:
    """The compile cache of ``folder`` (None: none), one per process, as a gate session holds it."""
    from .compile.keys import Persistent

    store = Store(folder, max_bytes=size) if folder is not None else None
    if store is not None:
        store.check()
        atexit.register(_prune, store)
    return Persistent(store)


def _prune(store: Store) -> None:
    with contextlib.suppress(OSError):  # the folder gone by then (a test's temporary folder)
        store.prune()
