"""The invariant tier: every ``[[invariant]]`` of the spec files, one item per target, program and config.

pytest collects this module through the gate's plugin (:mod:`invariants.plugin.tree`) without importing it:
its items are :class:`invariants.plugin.items.InvariantItem`.
"""

GATE_TIER = "invariants"
