"""A vocabulary-parallel embedding, as a serving stack writes it for a pod: the table's rows split over the
"tensor" axis, the batch over "data".

``embed_gathered`` returns the looked-up rows replicated: XLA all-gathers them over "data" on every call,
one more collective per layer that moves the whole batch's activations. ``embed`` keeps them where their
ids are, sharded over "data", as the next layer reads them.
"""

from __future__ import annotations

from jax.sharding import PartitionSpec as P


def embed_gathered(table, ids):
    return table.at[ids].get(out_sharding=P(None, None))


def embed(table, ids):
    return table.at[ids].get(out_sharding=P("data", None))
