"""What is measured: the programs, the configurations they compile in, and the targets they compile for.

- ``configs``: table and index shapes, dtypes and distributions (no JAX);
- ``targets``: the runtime backend, TPU chips and pods, GPUs ahead of time, a multi-device CPU (no JAX);
- ``select``: the one reading of a ``--programs`` / ``--targets`` selection, for every command (no JAX);
- ``programs``: the catalog of lookup forms (a new canonical program goes here, and only here);
- ``registry``: the programs of this process, the catalog plus a downstream project's;
- ``downstream``: a spec file's ``[[program]]`` entries, built into programs;
- ``arguments``: the seeded concrete arguments a program is timed and checked on.

This package's ``__init__`` imports nothing, so that its JAX-free modules stay JAX-free.
"""
