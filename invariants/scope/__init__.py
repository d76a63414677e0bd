"""Where programs compile, without JAX: the configurations, the target table, placement, and selection.

- ``configs``: table and index shapes, dtypes and distributions;
- ``targets``: the runtime backend, TPU chips and pods, GPUs ahead of time, a multi-device CPU;
- ``placement``: which programs and configurations a target compiles;
- ``select``: the one reading of a ``--programs`` / ``--targets`` selection, for every command;
- ``installed``: what is installed that decides a compile (the compiler, the distributions a trace ran).
"""
