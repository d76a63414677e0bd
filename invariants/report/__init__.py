"""Reports of a run: markdown for ``$GITHUB_STEP_SUMMARY``, a plot, and ``hlo-stats``.

- ``run``: results files (and pytest-benchmark JSON) read and merged into one model of a run;
- ``markdown``: ``python -m invariants report``;
- ``plot``: its figure;
- ``hlo_stats``: ``python -m invariants hlo-stats``, the metrics of HLO text files.
"""
