"""``python -m invariants selfcheck``: proof that the gate can fail, by injecting regressions it must
catch."""
