"""The correctness tier: every ``[[correctness]]`` check of the spec files, on the runtime target.

pytest collects this module through the gate's plugin (:mod:`invariants.plugin.tree`) without importing it:
its items are :class:`invariants.plugin.items.CorrectnessItem`.
"""

GATE_TIER = "correctness"
