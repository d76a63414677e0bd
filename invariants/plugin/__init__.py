"""The pytest gate: ``hooks`` (the plugin pytest loads, no JAX) hands the work to the run's ``session``
over its ``suite``; ``anchors`` and ``tree`` collect the items of ``items`` and ``timed``, which
``generate`` plans; ``results`` owns the results file's records (no JAX; the report reads them);
``command`` is ``python -m invariants gate``.
"""
