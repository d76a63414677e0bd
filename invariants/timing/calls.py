"""JAX callables for the timer: a compiled program with its arguments, and the memory stream that
efficiency is measured against. Both block until the device is done
(:data:`invariants.timing.paired.Timed`)."""

from __future__ import annotations

import math
from collections.abc import Callable

from invariants._errors import InvariantsError
from invariants.hlo.parse import parse_module

__all__ = ["copy_callable", "jax_callable"]


def jax_callable(fn: Callable[..., object], *args: object) -> Callable[[], None]:
    """Wrap an already-compiled function and concrete arguments into a :data:`Timed` callable.

    Nothing is jitted or compiled here: pass ``jax.jit(f).lower(*args).compile()`` (or a jitted function
    that has already run once) so compile time never lands in a sample. Each call runs ``fn(*args)`` and
    waits with ``jax.block_until_ready`` for every output buffer.
    """
    import jax  # JAX starts after compile.process sets the environment, not when timing is imported

    def call() -> None:
        jax.block_until_ready(fn(*args))

    return call


# One row of the copy's float32 [n, 32] buffer: the fewest bytes it streams.
MIN_COPY_BYTES = 128


def copy_callable(nbytes: int) -> Callable[[], None]:
    """A :data:`Timed` device memory stream of about ``nbytes`` (read ``nbytes``, write ``nbytes``).

    The program is ``b + 1`` on a float32 ``[n, 32]`` buffer of ``nbytes``, compiled once: the same bytes
    as a copy, but an elementwise loop fusion that XLA partitions across threads the way it partitions a
    gather. A plain ``jnp.copy`` runs as one memcpy on one thread, so its time reacts to load on the other
    cores differently from the lookup's, and an efficiency against it spreads widely. The input is not
    donated, and the optimized HLO is checked to do real work rather than return the parameter. This is the
    bandwidth roofline reference for :func:`measure_efficiency`.

    Raises:
        InvariantsError: if ``nbytes < MIN_COPY_BYTES``, or if the compiled program does no work.
    """
    import jax  # JAX starts after compile.process sets the environment, not when timing is imported
    import jax.numpy as jnp

    if nbytes < MIN_COPY_BYTES:
        raise InvariantsError(f"copy_callable: nbytes must be >= {MIN_COPY_BYTES}, got {nbytes}")
    buf = jnp.ones((math.ceil(nbytes / MIN_COPY_BYTES), 32), dtype=jnp.float32)
    compiled = jax.jit(lambda b: b + 1.0).lower(buf).compile()
    if not _hlo_copies(compiled.as_text() or ""):
        raise InvariantsError(f"copy_callable: XLA elided the {nbytes}-byte stream; no reference bandwidth")
    return jax_callable(compiled, buf)


def _hlo_copies(hlo_text: str) -> bool:
    """True when the entry computation's root is a ``copy`` or ``fusion`` (not the bare parameter)."""
    return parse_module(hlo_text, "copy reference").entry.root.opcode in ("copy", "fusion")
