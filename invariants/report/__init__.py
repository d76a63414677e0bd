"""Reports of a run: ``report`` (markdown for ``$GITHUB_STEP_SUMMARY``, a plot), ``hlo-stats`` and
``trace-stats``."""
