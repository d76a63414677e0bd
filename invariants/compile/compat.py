"""The JAX APIs the suite uses that differ across the releases it supports (0.4.30 through the pin), each
behind one function here, so that the rest of the suite calls one spelling and a release's difference is
met in one place. Each has a test that runs on the oldest release and on the pin
(``tests/unit/compile/test_compat.py``; ``tox -e jax0430`` runs it there)."""

from __future__ import annotations

import contextlib
import inspect

import jax


def module_text(lowered: jax.stages.Lowered) -> str:
    """The lowered module's text without source locations. ``as_text`` takes ``debug_info`` from jax 0.5.0
    on; before, it printed none."""
    if "debug_info" in inspect.signature(lowered.as_text).parameters:
        return lowered.as_text(debug_info=False)
    return lowered.as_text()


def full_precision_matmuls() -> contextlib.AbstractContextManager[None]:
    """Float32 matmuls at full precision while tracing (a TPU's default rounds their operands to bfloat16
    passes). 'float32' is the name every release accepts; 'highest' came later."""
    return jax.default_matmul_precision("float32")
