"""The gate's pytest modules, shipped inside the package so that an installed copy can run them.

``pytest invariants/gate`` in a checkout, ``python -m invariants gate`` anywhere (see
:mod:`invariants.plugin.command`); ``selfcheck``, ``bisect`` and ``matrix`` run these same modules in
children. The pytest plugin is :mod:`invariants.plugin.hooks`; the item functions' names are
:mod:`invariants.plugin.items`.
"""
