"""The JAX APIs the suite uses that differ across the releases it supports (0.4.30 through the pin), each
behind one function here, so that the rest of the suite calls one spelling and a release's difference is
met in one place. Each has a test that runs on the oldest release and on the pin
(``tests/unit/compile/test_compat.py``; ``tox -e jax0430`` runs it there)."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Iterator
from typing import TYPE_CHECKING

import jax
from jax.sharding import Mesh, PartitionSpec

from .._errors import InvariantsError
from .._supported import ReleaseLacks

if TYPE_CHECKING:
    from jax.sharding import AbstractMesh, AxisType  # old jax releases lack them: annotations only


def module_text(lowered: jax.stages.Lowered) -> str:
    """The lowered module's text without source locations. ``as_text`` takes ``debug_info`` from jax 0.5.0
    on; before, it printed none."""
    if "debug_info" in inspect.signature(lowered.as_text).parameters:
        return lowered.as_text(debug_info=False)
    return lowered.as_text()


def device_trace(folder: str) -> contextlib.AbstractContextManager[object]:
    """JAX's profiler around a batch, collecting the device's events alone where the release lets it say so
    (``profiler_options`` came later; before, the defaults). By default it also traces every Python call
    and host event and attaches each compiled program's HLO: nothing here reads them, and on a TPU
    exporting them makes the trace's stop cost far more than the calls."""
    options = getattr(jax.profiler, "ProfileOptions", None)
    if options is None:
        return jax.profiler.trace(folder)
    lean = options()
    lean.host_tracer_level, lean.python_tracer_level, lean.enable_hlo_proto = 0, 0, False
    return jax.profiler.trace(folder, profiler_options=lean)


def full_precision_matmuls() -> contextlib.AbstractContextManager[None]:
    """Float32 matmuls at full precision while tracing (a TPU's default rounds their operands to bfloat16
    passes). 'float32' is the name every release accepts; 'highest' came later."""
    return jax.default_matmul_precision("float32")


def tracing_on(mesh: Mesh | AbstractMesh) -> contextlib.AbstractContextManager[object]:
    """The mesh set while a program is traced, so that its PartitionSpecs name the mesh's axes: a concrete
    mesh through ``jax.set_mesh`` (``jax.sharding.use_mesh``, or the mesh itself, in the releases before
    it), an abstract one through ``jax.sharding.use_abstract_mesh``, which a release without it cannot
    (:class:`ReleaseLacks`). Where the release has it but ``with_sharding_constraint`` still finds no mesh
    there (jax 0.7), what the traced program raises is that limit, never the program's fault."""
    if isinstance(mesh, Mesh):
        setter = getattr(jax, "set_mesh", None) or getattr(jax.sharding, "use_mesh", None)
        # Before both (jax 0.4.30), a Mesh is itself the context its PartitionSpecs resolve in.
        return setter(mesh) if setter is not None else mesh
    use = getattr(jax.sharding, "use_abstract_mesh", None)
    if use is None:
        raise ReleaseLacks("jax.sharding.use_abstract_mesh", "to trace a program on a mesh without devices")
    if _abstract_mesh_constrains():
        return use(mesh)
    lacks = ReleaseLacks(
        "mesh for jax.lax.with_sharding_constraint in jax.sharding.use_abstract_mesh",
        "to trace a program on a mesh without devices",
    )
    return _limited(use(mesh), lacks)


@functools.cache
def _abstract_mesh_constrains() -> bool:
    """Whether ``with_sharding_constraint`` resolves a PartitionSpec on an abstract mesh set by
    ``use_abstract_mesh``: tried once, on a one-axis mesh of one device."""

    def constrained(x: jax.Array) -> jax.Array:
        return jax.lax.with_sharding_constraint(x, PartitionSpec("x"))

    try:
        with jax.sharding.use_abstract_mesh(abstract_mesh((1,), ("x",), "auto")):
            jax.eval_shape(constrained, jax.ShapeDtypeStruct((1,), "float32"))
    except Exception:  # the release's own words differ; that it failed is what is asked
        return False
    return True


@contextlib.contextmanager
def _limited(inner: contextlib.AbstractContextManager[object], lacks: ReleaseLacks) -> Iterator[object]:
    """``inner``, an error raised in it (not the tool's own) said as ``lacks``."""
    with inner as entered:
        try:
            yield entered
        except InvariantsError:
            raise
        except Exception as err:
            raise lacks from err


def axis_types(kind: str, n: int) -> tuple[AxisType, ...]:
    """``n`` mesh axes of ``kind`` ('explicit', else auto); a release without ``jax.sharding.AxisType``
    raises :class:`ReleaseLacks`."""
    types = getattr(jax.sharding, "AxisType", None)
    if types is None:
        raise ReleaseLacks("jax.sharding.AxisType", "to build a mesh with axis types")
    return (types.Explicit if kind == "explicit" else types.Auto,) * n


def abstract_mesh(shape: tuple[int, ...], axes: tuple[str, ...], kind: str) -> AbstractMesh:
    """A mesh without devices; a release without ``jax.sharding.AbstractMesh`` raises
    :class:`ReleaseLacks`."""
    make = getattr(jax.sharding, "AbstractMesh", None)
    if make is None:
        raise ReleaseLacks(
            "jax.sharding.AbstractMesh", "to check a sharded program before a target is chosen"
        )
    return make(shape, axes, axis_types=axis_types(kind, len(axes)))
