"""The compatibility points of :mod:`invariants.compile.compat`, each on whichever JAX runs this file: the
pin in the project's own tests, the oldest supported release under ``tox -e jax0430``."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from invariants.compile.compat import full_precision_matmuls, module_text

TABLE = jax.ShapeDtypeStruct((8, 4), jnp.float32)
INDICES = jax.ShapeDtypeStruct((3,), jnp.int32)


def _lowered_at(line: int) -> jax.stages.Lowered:
    """The same function, named alike, defined at ``line`` of its file."""
    namespace = {"jnp": jnp}
    source = "\n" * line + "def lookup(w, x):\n    return jnp.take(w, x, axis=0)\n"
    exec(compile(source, "<program>", "exec"), namespace)
    return jax.jit(namespace["lookup"]).lower(TABLE, INDICES)


def test_module_text_is_blind_to_where_the_program_was_written() -> None:
    here, there = _lowered_at(1), _lowered_at(40)
    located = [lo.compiler_ir("stablehlo").operation.get_asm(enable_debug_info=True) for lo in (here, there)]
    assert located[0] != located[1], "the two lowerings carry no locations: this test checks nothing"
    assert module_text(here) == module_text(there)
    assert "gather" in module_text(here)


def test_full_precision_matmuls_lower_float32_dots_at_the_highest_precision() -> None:
    def matmul(a, b):
        return a @ b

    square = jax.ShapeDtypeStruct((4, 4), jnp.float32)
    default = module_text(jax.jit(matmul).lower(square, square))
    with full_precision_matmuls():
        full = module_text(jax.jit(matmul).lower(square, square))
    assert "precision = [HIGHEST, HIGHEST]" not in default, "the default is the highest: this checks nothing"
    assert "precision = [HIGHEST, HIGHEST]" in full
