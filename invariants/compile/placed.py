"""Where a compile's arguments live, for the gate's compile, ``compile_for`` and a declaration's checks alike.

On a mesh (abstract, or of a target's chips) an argument is placed by its part, a PartitionSpec or its
entries; one given no part keeps its own ``NamedSharding``, else is replicated. Without a mesh, ahead of
time, it is placed on the target's first device, as at runtime: a one-device mesh would put a 'reshard' in
a gradient's jaxpr that a real chip's trace has not. Else (the runtime, or no target yet) the runtime
places it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import jax
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec, Sharding, SingleDeviceSharding

from ..scope.targets import Target
from . import compat

if TYPE_CHECKING:
    from jax.sharding import AbstractMesh  # old jax releases (bisect, matrix) lack it: annotations only

Part = PartitionSpec | Sequence[str | None]


@dataclasses.dataclass(frozen=True)
class Placed:
    """The abstract arguments, each with its sharding; jit's keywords (donation, the output's sharding);
    and the mesh the program is traced under (None: none)."""

    args: tuple[jax.ShapeDtypeStruct, ...]
    jit_kwargs: Mapping[str, object]
    mesh: Mesh | AbstractMesh | None

    def tracing(self) -> contextlib.AbstractContextManager[object]:
        """The mesh set while the program is traced, so that its PartitionSpecs mean what they say."""
        if self.mesh is None:
            return contextlib.nullcontext()
        return compat.tracing_on(self.mesh)


def place(
    specs: Sequence[jax.ShapeDtypeStruct],
    target: Target | None = None,
    mesh: Mesh | AbstractMesh | None = None,
    parts: Sequence[Part | None] | None = None,
    *,
    traced_on_mesh: bool = True,
    donate: int | tuple[int, ...] = (),
    output: Part | None = None,
) -> Placed:
    """``specs`` placed for ``target``; ``traced_on_mesh`` False: the mesh places them only, and the program
    is traced under none."""
    given = list(parts) if parts is not None else [None] * len(specs)
    placed = tuple(
        jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=_sharding(s, target, mesh, p))
        for s, p in zip(specs, given, strict=True)
    )
    jit_kwargs: dict[str, object] = {}
    if mesh is not None and output is not None:
        jit_kwargs["out_shardings"] = NamedSharding(mesh, _spec(output))
    if donate != ():
        jit_kwargs["donate_argnums"] = donate
    return Placed(placed, jit_kwargs, mesh if traced_on_mesh else None)


def _sharding(
    spec: jax.ShapeDtypeStruct, target: Target | None, mesh: Mesh | AbstractMesh | None, part: Part | None
) -> Sharding | None:
    if mesh is not None:
        own = getattr(spec, "sharding", None)
        if part is None and isinstance(own, NamedSharding):
            return own
        return NamedSharding(mesh, _spec(part or ()))
    if target is not None and target.mode != "runtime":
        return SingleDeviceSharding(next(iter(target.devices())))
    return None


def _spec(part: Part) -> PartitionSpec:
    return part if isinstance(part, PartitionSpec) else PartitionSpec(*part)


def pod_mesh(
    devices: Sequence[jax.Device], shape: tuple[int, ...], axes: tuple[str, ...], axis_types: str
) -> Mesh:
    """A mesh of ``shape`` over ``devices`` placed by their physical coordinates, as a pod job builds it."""
    placed = mesh_utils.create_device_mesh(shape, list(devices)[: int(np.prod(shape))])
    return Mesh(placed, axes, axis_types=compat.axis_types(axis_types, len(axes)))
