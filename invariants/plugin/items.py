"""The gate's item functions, by name (no JAX).

What is decided from a node id alone reads these: which xdist worker runs an item
(:mod:`invariants.plugin.xdist`) and which tier a self-check child deselects
(:mod:`invariants.selfcheck.children`). The functions themselves are the gate's modules
(:mod:`invariants.gate`), which must keep these names.
"""

STRUCTURE = "test_structure"
INVARIANT = "test_invariant"
CORRECTNESS = "test_correctness"
RATIO = "test_ratio"
EFFICIENCY = "test_efficiency"
