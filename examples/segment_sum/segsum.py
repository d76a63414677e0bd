"""Segment sums as a recommender library writes them: pooled rows, and per-row sums under ``jax.vmap``.

Each function is a program with parameters (``function(params, indices)``, ``params = factory(config)``);
the indices are segment ids. The factories return shapes only: nothing is drawn to compile.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# Segments of a pooled bag: few, so that many ids land on each one (the contention of a scatter-add).
POOL_SEGMENTS = 24
# Segments of the per-row sum: as many as an embedding bag's output rows.
ROW_SEGMENTS = 2048
ROWS = 1024


def pool_values(config):
    """The values pooled by segment: one f32 row of the configuration's width per id."""
    (n,) = config.index_shape
    return {"values": jax.ShapeDtypeStruct((n, config.width), jnp.float32)}


def pool(params, segment_ids):
    """``segment_sum`` of f32 rows into 24 segments: a scatter-add whose atomics the GPU compiler picks."""
    return jax.ops.segment_sum(params["values"], segment_ids, num_segments=POOL_SEGMENTS)


def row_data(config):
    """A batch of rows, each summed over the same segment ids."""
    (n,) = config.index_shape
    return {"data": jax.ShapeDtypeStruct((ROWS, n), jnp.float32)}


def rows_vmapped(params, segment_ids):
    """One segment sum per row, under ``jax.vmap``: how the per-row form reads in model code."""
    per_row = lambda row: jax.ops.segment_sum(row, segment_ids, num_segments=ROW_SEGMENTS)  # noqa: E731
    return jax.vmap(per_row)(params["data"])


def rows_transposed(params, segment_ids):
    """The same sums as one segment sum over the transposed batch: each segment's row is written whole."""
    return jax.ops.segment_sum(params["data"].T, segment_ids, num_segments=ROW_SEGMENTS).T
