"""The snapshot tier: each program's compiled structure on each target, against its snapshot file.

pytest collects this module through the gate's plugin (:mod:`invariants.plugin.tree`) without importing it:
its items are :class:`invariants.plugin.items.StructureItem`, one per target, program and configuration.
"""

GATE_TIER = "structure"
