"""A chain of scatter-adds into one small array, as an integrator's update step writes them, with and without
a reduction after it.

On a GPU the reduction takes the compile from under a second to minutes (XLA explores every way of fusing
the chain into it), where the CPU compiles both alike. Neither program is slow to run: only the compile is.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

STEPS = 8


def state(config):
    """The array the chain updates (index_shape = [1]: the one row index the chain starts from)."""
    return {"x": jax.ShapeDtypeStruct((64, 64), jnp.float32)}


def _chain(params, start):
    x = params["x"]
    row = start[0]
    for step in range(STEPS):
        x = x.at[row + step].add(x[0] * (1.0 + step * 1e-4))
    return x


def updates(params, start):
    return _chain(params, start)


def updates_then_summed(params, start):
    return jnp.sum(_chain(params, start))
