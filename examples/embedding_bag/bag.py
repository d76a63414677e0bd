"""An embedding bag as a recommender library writes one: ids looked up in a table, summed per bag, the bags
given by their offsets into the flat ids (as torch's EmbeddingBag takes them).

The table is a parameter; the offsets are an input of the model that is never differentiated. The segment
ids are made from the offsets with an integer scatter (a one at each bag's start, then a running sum): the
scatters of the program are that s32 one and the f32 segment sum, and a gradient adds the table's f32
scatter-add.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

BAGS = 64


def table(config):
    return {"table": jax.ShapeDtypeStruct((config.vocab, config.width), jnp.float32)}


def offsets(config):
    """Where each bag starts in the flat ids: an evenly filled batch (concrete, so timing reads real bags)."""
    (n,) = config.index_shape
    return {"offsets": jnp.arange(BAGS, dtype=jnp.int32) * (n // BAGS)}


def bag(params, ids, inputs):
    starts = jnp.zeros(ids.shape, jnp.int32).at[inputs["offsets"]].add(1)
    segments = jnp.cumsum(starts) - 1
    rows = jnp.take(params["table"], ids, axis=0)
    return jax.ops.segment_sum(rows, segments, num_segments=BAGS)
