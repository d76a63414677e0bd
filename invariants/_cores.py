"""Which cores a process runs on: one per versus round or xdist worker, and children set free.

Linux only (``os.sched_setaffinity``); elsewhere nothing here does anything. A pin is inherited by every
child, so a pinned process records the cores it had in :data:`FREED_ENV`, and a child that was not told
where to run calls :func:`free` to get them back.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable

from . import _config

FREED_ENV = _config.name("INVARIANTS_FREE_CORES")


def usable() -> list[int]:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def freed() -> list[int]:
    """The cores a child of this process gets back when it calls :func:`free`."""
    cores = os.environ.get(FREED_ENV, "")
    try:
        return sorted({int(c) for c in cores.split(",")}) if cores else usable()
    except ValueError:
        return usable()


def pin(cores: Iterable[int]) -> None:
    """Run this process, and the threads it starts from now on, on ``cores`` only."""
    if not hasattr(os, "sched_setaffinity"):
        return
    os.environ.setdefault(FREED_ENV, ",".join(map(str, usable())))
    os.sched_setaffinity(0, set(cores))


def free() -> None:
    """Undo a pin inherited from a parent."""
    cores = os.environ.get(FREED_ENV, "")
    if cores and hasattr(os, "sched_setaffinity"):
        # Cores this process may not have (another cpuset): it stays where it is.
        with contextlib.suppress(ValueError, OSError):
            os.sched_setaffinity(0, {int(c) for c in cores.split(",")})
