"""The throughput tier: paired time ratios and memcpy efficiency on the runtime target.

pytest collects this module through the gate's plugin (:mod:`invariants.plugin.tree`) without importing it:
its items are :mod:`invariants.plugin.timed`'s (``-m ratio``, ``-m efficiency`` select one kind).
"""

GATE_TIER = "throughput"
