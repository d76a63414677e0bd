"""Two lookups a library might ship. Both take ``(table, indices)`` and return ``[*indices.shape, D]`` rows,
the contract ``python -m invariants gate`` holds a declared program to."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax


def row_loop_lookup(table: jax.Array, indices: jax.Array) -> jax.Array:
    """One row at a time under ``lax.map``: correct values, and a loop of one tiny kernel per token (the
    pathology of openxla/xla#20899). The gate is meant to catch it."""
    flat = indices.reshape(-1)
    rows = lax.map(lambda i: lax.dynamic_index_in_dim(table, i, 0, keepdims=False), flat)
    return rows.reshape((*indices.shape, table.shape[1]))


def take_lookup(table: jax.Array, indices: jax.Array) -> jax.Array:
    """One gather, as ``flax.nnx.Embed`` does it."""
    return jnp.take(table, indices, axis=0)
