"""Snapshots: the normalized text of what a program compiles to, and where it is stored.

- ``render``: a compiled program's snapshot text;
- ``store``: syrupy's extension for the gate's snapshot files (strict reads, atomic writes);
- ``user``: the same for a project's own tests (the ``compiled_snapshot`` fixture).
"""
