"""Two models a library might ship, written as their users write them: a function of a parameter pytree
and the token ids. ``python -m invariants gate`` holds them to the contract of a program with params:
``factory(config)`` gives the parameters (here as ``jax.ShapeDtypeStruct``s: only shapes matter to a
compile, and the gate draws values for the checks that run), ``function(params, indices)`` the outputs."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

_CLASSES = 16


def token_position_params(config: Any) -> dict[str, jax.ShapeDtypeStruct]:
    """Two tables: one row per token of the vocabulary, one per position of the sequence."""
    _, seq = config.index_shape
    return {
        "tokens": jax.ShapeDtypeStruct((config.vocab, config.width), config.dtype),
        "positions": jax.ShapeDtypeStruct((seq, config.width), config.dtype),
    }


def token_position_embed(params: dict[str, jax.Array], indices: jax.Array) -> jax.Array:
    """GPT-2's input layer: the token's row plus its position's row, for [batch, sequence] token ids."""
    rows = jnp.take(params["tokens"], indices, axis=0)
    return rows + jnp.take(params["positions"], jnp.arange(indices.shape[1]), axis=0)[None]


def token_position_indexed(params: dict[str, jax.Array], indices: jax.Array) -> jax.Array:
    """The same embedding as numpy users write it: advanced indexing, and the position table broadcast."""
    return params["tokens"][indices] + params["positions"][None, : indices.shape[1]]


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Classifier:
    """A small module as an equinox or flax user writes one: an embedding, a layer norm's scale and a
    projection, its fields the leaves of a pytree."""

    embedding: jax.Array
    norm_scale: jax.Array
    projection: jax.Array

    def __call__(self, indices: jax.Array) -> jax.Array:
        x = jnp.take(self.embedding, indices, axis=0).astype(jnp.float32)
        x = (x - x.mean(-1, keepdims=True)) * jax.lax.rsqrt(x.var(-1, keepdims=True) + 1e-6)
        return (x * self.norm_scale) @ self.projection


def classifier_params(config: Any) -> Classifier:
    return Classifier(
        embedding=jax.ShapeDtypeStruct((config.vocab, config.width), config.dtype),
        norm_scale=jax.ShapeDtypeStruct((config.width,), jnp.float32),
        projection=jax.ShapeDtypeStruct((config.width, _CLASSES), jnp.float32),
    )


def classify(model: Classifier, indices: jax.Array) -> jax.Array:
    """The module applied to the token ids: one score per class for every token."""
    return model(indices)
