"""The gate's pytest modules, shipped inside the package so that an installed copy can run them.

``pytest invariants/gate`` in a checkout, ``python -m invariants gate`` anywhere (see
:mod:`invariants._gate`); ``selfcheck``, ``bisect`` and ``matrix`` run these same modules in children.
The pytest plugin is :mod:`invariants._plugin`.
"""
