"""The gate's anchor modules, shipped inside the package so that an installed copy can run them.

``pytest invariants/gate`` in a checkout, ``python -m invariants gate`` anywhere (see
:mod:`invariants.plugin.command`); ``selfcheck``, ``bisect`` and ``matrix`` run these same modules in
children. Each names its tier (``GATE_TIER``); the pytest plugin (:mod:`invariants.plugin.hooks`) collects
it as that tier's tree of items (:mod:`invariants.plugin.tree`).
"""
