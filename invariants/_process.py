"""The process a gate runs in: JAX's platform chosen before JAX starts, the backend guard, and the core
an xdist worker runs on.

Importing this module sets the environment, so the plugin imports it before anything imports JAX.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest

# JAX reads JAX_PLATFORMS when it starts. Without a request, the runtime is the CPU: this also lets the
# CUDA plugin load for ahead-of-time GPU compiles on hosts without a GPU. A TPU or GPU host asks for its
# backend explicitly (tox -e tpu / -e gpu set JAX_PLATFORMS), and the guard below holds it to that.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
REQUESTED_PLATFORMS = os.environ["JAX_PLATFORMS"]
if "tpu" not in REQUESTED_PLATFORMS:
    # No TPU runtime here, only the compiler. Ahead-of-time compiles claim libtpu's single-process lock, and
    # xdist workers each need libtpu. Naming a host type and worker spares libtpu's metadata-server lookup
    # and its page of warnings; the compiled HLO is byte-identical with and without (checked).
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-1")
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")


@contextlib.contextmanager
def _held_stderr() -> Iterator[Callable[[], None]]:
    """Hold what native code writes to file descriptor 2 (libtpu, XLA) while the backend starts.

    Yields ``release``, which writes the held text out; text not released is dropped when the block ends.
    The guard drops it when the backend is missing, so that its one line is the whole message.
    """
    with tempfile.TemporaryFile() as held:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(held.fileno(), 2)
        restored = False

        def restore() -> None:
            nonlocal restored
            if not restored:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
                restored = True

        def release() -> None:
            restore()
            held.seek(0)
            os.write(2, held.read())

        try:
            yield release
        finally:
            restore()


def worker_core(workerinput: dict[str, Any] | None, cores: list[int]) -> int | None:
    """The core an xdist worker runs on under ``--pin-workers``: worker i on the i-th usable core; None for
    the controller, or when there are fewer cores than workers (then the scheduler shares them)."""
    if not workerinput:
        return None
    index, count = int(str(workerinput["workerid"]).lstrip("gw")), int(workerinput["workercount"])
    return cores[index] if count <= len(cores) else None


def pin_worker(workerinput: dict[str, Any] | None, pin: bool) -> None:
    """Under ``--pin-workers`` (``pin``), put an xdist worker on its core; give any other gate process every
    core back. Call it before JAX starts its backend: its thread pools are sized to the cores it may use."""
    from . import _cores

    core = worker_core(workerinput, _cores.usable())
    if core is not None and pin:
        _cores.pin({core})
    elif not workerinput:
        _cores.free()  # a gate run started by a pinned process (a test's child run) gets every core back


def guard_backend() -> None:
    """Exit with one line when the requested backend is not there; never fall back to CPU in silence."""
    wanted = [p.strip() for p in REQUESTED_PLATFORMS.split(",") if p.strip()]
    with _held_stderr() as release:
        import jax

        try:
            platform = jax.devices()[0].platform
        except RuntimeError as err:
            first = str(err).strip().splitlines()[0]
            raise pytest.UsageError(
                f"JAX_PLATFORMS={REQUESTED_PLATFORMS}: backend not available on this host ({first})"
            ) from None
        release()
    aliases = {"cuda": "gpu", "rocm": "gpu"}
    if wanted and aliases.get(wanted[0], wanted[0]) != aliases.get(platform, platform):
        raise pytest.UsageError(
            f"JAX_PLATFORMS={REQUESTED_PLATFORMS}: asked for {wanted[0]} but JAX runs on {platform}"
        )
