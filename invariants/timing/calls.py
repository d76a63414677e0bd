"""JAX callables for the timer, each blocking until the device is done: a program, a memory stream."""

from __future__ import annotations

import math
from collections.abc import Callable

from invariants._errors import InvariantsError
from invariants.hlo.parse import parse_module
from invariants.hlo.structure import structure_of


def jax_callable(fn: Callable[..., object], *args: object) -> Callable[[], None]:
    """``fn(*args)``, blocking on every output; ``fn`` already compiled, so no compile lands in a sample."""
    import jax  # JAX starts after compile.process sets the environment, not when timing is imported

    def call() -> None:
        jax.block_until_ready(fn(*args))

    return call


# One row of the copy's float32 [n, 32] buffer: the fewest bytes it streams.
MIN_COPY_BYTES = 128


def copy_callable(nbytes: int) -> Callable[[], None]:
    """A device memory stream of about ``nbytes`` read and written: the efficiency's roofline reference.

    ``b + 1`` rather than a copy: an elementwise fusion that XLA partitions across threads as it does a
    gather, where ``jnp.copy`` is one memcpy on one thread and reacts to load differently from a lookup.
    """
    import jax
    import jax.numpy as jnp

    if nbytes < MIN_COPY_BYTES:
        raise InvariantsError(f"copy_callable: nbytes must be >= {MIN_COPY_BYTES}, got {nbytes}")
    buf = jnp.ones((math.ceil(nbytes / MIN_COPY_BYTES), 32), dtype=jnp.float32)
    compiled = jax.jit(lambda b: b + 1.0).lower(buf).compile()
    if not _hlo_copies(compiled.as_text() or ""):
        raise InvariantsError(f"copy_callable: XLA elided the {nbytes}-byte stream; no reference bandwidth")
    return jax_callable(compiled, buf)


def _hlo_copies(hlo_text: str) -> bool:
    """A kernel streams the buffer (jax 0.4.30's XLA:CPU wraps it in a call to a parallel computation)."""
    kernels = structure_of(parse_module(hlo_text, "copy reference")).kernel_list
    return any(k.opcode in ("copy", "fusion") for k in kernels)
