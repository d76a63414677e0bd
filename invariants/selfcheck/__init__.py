"""``python -m invariants selfcheck``: proof that the gate can fail, by injecting regressions it must catch.

- ``command``: the command line (arguments, the run, the exit status);
- ``registry``: the injections (``data/injections.toml``) and which ones a run selects, baseline first;
- ``children``: each injection's gate (or versus) run in a child process of its own, with progress;
- ``judge``: whether a child's exit status and results file caught its injection (``structure:code-only``
  told apart from a dump);
- ``score``: the mutation-score table and its score line;
- ``inject``: the pytest plugin that swaps catalog programs for bad ones, in a self-check child only.
"""
