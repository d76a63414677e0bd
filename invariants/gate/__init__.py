"""The gate's pytest modules, shipped inside the package so that an installed copy can run them.

``pytest invariants/gate`` in a checkout, ``python -m invariants gate`` anywhere (see
:mod:`invariants._gate`); ``selfcheck``, ``bisect`` and ``matrix`` run these same modules in children.
The pytest plugin is :mod:`invariants._plugin`.
"""

# The gate's item functions, by name, for what is decided from a node id alone: which xdist worker runs an
# item (invariants._xdist) and which tier a self-check child deselects (invariants._selfcheck).
STRUCTURE = "test_structure"
INVARIANT = "test_invariant"
CORRECTNESS = "test_correctness"
RATIO = "test_ratio"
EFFICIENCY = "test_efficiency"
