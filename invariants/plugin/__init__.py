"""The pytest gate: ``hooks`` (the plugin pytest loads, no JAX) hands the work to the run's ``session``
over its ``suite``; ``anchors`` and ``tree`` collect the items of ``items`` and ``timed``, which
``generate`` plans, recorded by ``recorder`` into the results file (:mod:`invariants.records.results`);
``command`` is ``python -m invariants gate``.
"""
