"""The pytest gate: ``hooks`` (the plugin pytest loads, no JAX) hands the work to the run's ``session``
over its ``suite``; the session's recorder writes the results file (:mod:`invariants.records.results`);
``anchors`` and ``tree`` collect the items of ``items`` and ``timed``, which ``generate`` plans;
``command`` is ``python -m invariants gate``.
"""
