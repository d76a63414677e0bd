"""A graph network's message passing, as a GNN library writes it: gather each edge's sender features, sum
them into the receivers with ``jax.ops.segment_sum``, then a dense update; and its own train step.

The arguments come from ``graph``, a factory of the gate: no table, no token ids. The edges are concrete
arrays (a ring, each node sending to the next), since an index drawn at random could point past the nodes.
"""

import jax
import jax.numpy as jnp
import numpy as np

NODES, EDGES, FEATURES = 4096, 32768, 64


def graph(config):
    """(params, nodes, senders, receivers, targets): the arguments of ``layer`` and ``train_step``."""
    senders = np.arange(EDGES, dtype=np.int32) % NODES
    receivers = (senders + 1) % NODES
    params = {
        "w": jax.ShapeDtypeStruct((FEATURES, FEATURES), jnp.float32),
        "b": jax.ShapeDtypeStruct((FEATURES,), jnp.float32),
    }
    nodes = jax.ShapeDtypeStruct((NODES, FEATURES), jnp.float32)
    targets = jax.ShapeDtypeStruct((NODES, FEATURES), jnp.float32)
    return params, nodes, senders, receivers, targets


def layer(params, nodes, senders, receivers, targets=None):
    """One message-passing layer: every edge's message summed into its receiver, then a dense update."""
    messages = jnp.take(nodes, senders, axis=0)
    summed = jax.ops.segment_sum(messages, receivers, num_segments=nodes.shape[0])
    return jax.nn.relu(summed @ params["w"] + params["b"])


def layer_row_loop(params, nodes, senders, receivers, targets=None):
    """The same layer with each receiver's sum written one edge at a time: the loop the gate catches."""

    def add(total, edge):
        return total.at[receivers[edge]].add(nodes[senders[edge]]), None

    summed, _ = jax.lax.scan(add, jnp.zeros_like(nodes), jnp.arange(senders.shape[0]))
    return jax.nn.relu(summed @ params["w"] + params["b"])


def train_step(params, nodes, senders, receivers, targets):
    """The library's own step: a squared error through the layer, and an SGD update of the parameters."""

    def loss(p):
        return jnp.mean((layer(p, nodes, senders, receivers) - targets) ** 2)

    value, grads = jax.value_and_grad(loss)(params)
    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads), value
