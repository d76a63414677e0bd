"""A project's own embedding, held by its own tests to what it must compile to: the pytest API.

With the package installed, its pytest plugin gives every test two fixtures: ``compile_for`` (compile a
function for a named target ahead of time and measure it) and ``compiled_snapshot`` (syrupy's snapshot of
what it compiled to, kept under ``snapshots/<target>/`` beside this file). See README.md.
"""

import jax
import jax.numpy as jnp
import pytest

VOCAB, WIDTH, TOKENS = 1024, 64, 256
TABLE_BYTES = VOCAB * WIDTH * 4
# Shapes only: compile_for lowers and compiles, nothing runs (concrete arrays work as well).
PARAMS = {"table": jax.ShapeDtypeStruct((VOCAB, WIDTH), jnp.float32)}
INDICES = jax.ShapeDtypeStruct((TOKENS,), jnp.int32)


def embed(params, indices):
    """The lookup under test: rows of the table, one per index."""
    return jnp.take(params["table"], indices, axis=0)


def embed_grad(params, indices):
    """The gradient of a loss through the lookup, with respect to the parameters."""
    return jax.grad(lambda p: jnp.sum(embed(p, indices) ** 2))(params)


def test_embed_is_one_gather(compile_for, compiled_snapshot):
    s = compile_for(embed, PARAMS, INDICES, target="cpu")
    # One fused gather: a per-row loop (the pathology of openxla/xla#20899) would show as a while loop.
    assert s.while_loops == 0
    assert s.gathers == 1
    assert s.kernels == 1
    assert compiled_snapshot == s


@pytest.mark.parametrize("target", ["tpu-v5e", "gpu-h100"])
def test_embed_ahead_of_time(compile_for, compiled_snapshot, target):
    # Compiled for the chip on this host; skips with the install command without the tpu/gpu extra.
    s = compile_for(embed, PARAMS, INDICES, target=target)
    assert s.while_loops == 0
    assert s.gathers == 1
    assert s.metric("temp_bytes") == 0
    assert compiled_snapshot == s


@pytest.mark.parametrize("target", ["cpu", "tpu-v5e", "gpu-h100"])
def test_gradient_is_one_scatter(compile_for, compiled_snapshot, target):
    s = compile_for(embed_grad, PARAMS, INDICES, target=target)
    # The table's gradient is one scatter-add, never a loop over the tokens.
    assert s.while_loops == 0
    assert s.scatters == 1
    assert s.metric("temp_bytes") <= TABLE_BYTES
    assert compiled_snapshot == s


@pytest.mark.xfail(
    strict=True,
    reason="jaxlib 0.10.2 compiles the f32 scatter-add to a compare-and-swap retry loop on GPU "
    "(openxla/xla#46225); strict, so that a fix fails here and the test is tightened",
)
def test_gradient_uses_native_atomics_on_gpu(compile_for):
    s = compile_for(embed_grad, PARAMS, INDICES, target="gpu-h100")
    assert s.cas_loops == 0
