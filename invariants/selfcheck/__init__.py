"""``python -m invariants selfcheck``: proof that the gate can fail, by injecting regressions it must catch.

- ``command``: the injections and the run that judges them;
- ``inject``: the pytest plugin that swaps catalog programs for bad ones, in a self-check child only.
"""
