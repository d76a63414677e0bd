"""Programs measured on a TPU chip to fit and hold the ahead-of-time cost model (``predicted_seconds``).

Each probe is a (family, name, function, argument maker) that no catalog holds; together with the catalog's
programs they are what was timed on a chip with the device clock (corpus.json beside this file). The families
vary what a TPU's time depends on: rows, widths, index count and distribution, dtypes, and the kind of op
(gather, scatter, loop, matmul, elementwise). A model is held to a family it never saw by leaving the whole
family out of its fit, so a family groups programs that share a mechanism, never a size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Probe:
    family: str
    name: str
    fn: Callable[..., Any]
    args: Callable[[np.random.Generator], tuple[np.ndarray, ...]]


def _table(v: int, d: int, dtype: str) -> Callable[[np.random.Generator], np.ndarray]:
    import ml_dtypes

    np_dtype = ml_dtypes.bfloat16 if dtype == "bf16" else np.dtype(dtype if dtype != "f32" else "float32")
    return lambda rng: rng.standard_normal((v, d), dtype=np.float32).astype(np_dtype)


def _ids(n: int, v: int, dist: str) -> Callable[[np.random.Generator], np.ndarray]:
    def draw(rng: np.random.Generator) -> np.ndarray:
        if dist == "sorted":
            return np.sort(rng.integers(0, v, n)).astype(np.int32)
        if dist == "equal":
            return np.full(n, v // 2, np.int32)
        if dist == "zipf":
            return ((rng.zipf(1.2, n) - 1) % v).astype(np.int32)
        return rng.integers(0, v, n).astype(np.int32)

    return draw


def probes() -> list[Probe]:  # noqa: C901 - one table of families, read top to bottom
    import jax
    import jax.numpy as jnp
    from jax import lax

    out: list[Probe] = []

    def add(
        family: str, name: str, fn: Callable[..., Any], *makers: Callable[[np.random.Generator], Any]
    ) -> None:
        out.append(Probe(family, name, fn, lambda rng, makers=makers: tuple(m(rng) for m in makers)))

    # Row gathers, W[x]: rows, width, count, dtype, distribution.
    for v, d, n, dt, dist in [
        (1024, 32, 16384, "f32", "uniform"),
        (65536, 32, 16384, "f32", "uniform"),
        (262144, 32, 16384, "f32", "uniform"),
        (8192, 8, 16384, "f32", "uniform"),
        (8192, 128, 16384, "f32", "uniform"),
        (8192, 512, 16384, "f32", "uniform"),
        (8192, 1024, 4096, "bf16", "uniform"),
        (8192, 32, 1024, "f32", "uniform"),
        (8192, 32, 131072, "f32", "uniform"),
        (8192, 32, 16384, "f32", "sorted"),
        (8192, 32, 16384, "f32", "equal"),
        (8192, 128, 65536, "bf16", "zipf"),
        (32768, 256, 8192, "bf16", "uniform"),
        (8192, 32, 16384, "bf16", "uniform"),
    ]:
        add(
            "gather",
            f"gather_v{v}_d{d}_n{n}_{dt}_{dist}",
            lambda W, x: W[x],
            _table(v, d, dt),
            _ids(n, v, dist),
        )
    # take (fill mode): the bounds-checked gather with its select.
    for v, d, n, dt in [
        (65536, 32, 16384, "f32"),
        (8192, 128, 16384, "f32"),
        (8192, 512, 4096, "bf16"),
        (8192, 32, 131072, "f32"),
    ]:
        add(
            "take",
            f"take_v{v}_d{d}_n{n}_{dt}",
            lambda W, x: jnp.take(W, x, axis=0),
            _table(v, d, dt),
            _ids(n, v, "uniform"),
        )
    # The vmapped row lookup (a bit-packed kCustom gather).
    for v, d, n, dt in [
        (8192, 8, 16384, "f32"),
        (8192, 128, 16384, "f32"),
        (65536, 32, 16384, "f32"),
        (8192, 32, 4096, "f32"),
        (8192, 32, 65536, "f32"),
        (8192, 256, 8192, "bf16"),
    ]:
        add(
            "vmap_gather",
            f"vmap_gather_v{v}_d{d}_n{n}_{dt}",
            lambda W, x: jax.vmap(lambda i: W[i])(x),
            _table(v, d, dt),
            _ids(n, v, "uniform"),
        )
    # Scatter-add: the gradient of a lookup, by index distribution and size.
    for v, d, n, dt, dist in [
        (8192, 32, 16384, "f32", "equal"),
        (8192, 32, 16384, "f32", "zipf"),
        (65536, 32, 16384, "f32", "uniform"),
        (8192, 128, 16384, "f32", "uniform"),
        (8192, 32, 131072, "f32", "uniform"),
        (8192, 32, 16384, "bf16", "uniform"),
    ]:
        add(
            "scatter_add",
            f"scatter_add_v{v}_d{d}_n{n}_{dt}_{dist}",
            lambda W, x, u: W.at[x].add(u),
            _table(v, d, dt),
            _ids(n, v, dist),
            _table(n, d, dt),
        )
    # segment_sum: a scatter-add into segments.
    for n, d, s in [(16384, 32, 1024), (131072, 64, 4096), (16384, 256, 256)]:
        add(
            "segment_sum",
            f"segment_sum_n{n}_d{d}_s{s}",
            lambda u, seg, s=s: jax.ops.segment_sum(u, seg, num_segments=s),
            _table(n, d, "f32"),
            _ids(n, s, "sorted"),
        )
    # A per-row update loop (the seed's pathology written by hand).
    for v, d, n in [(8192, 32, 256), (8192, 32, 2048), (1024, 128, 1024)]:

        def loop(W: Any, x: Any, u: Any) -> Any:
            def body(i: Any, acc: Any) -> Any:
                row = lax.dynamic_slice_in_dim(acc, x[i], 1, 0)
                return lax.dynamic_update_slice_in_dim(acc, row + u[i][None], x[i], 0)

            return lax.fori_loop(0, x.shape[0], body, W)

        add(
            "row_loop",
            f"row_loop_v{v}_d{d}_n{n}",
            loop,
            _table(v, d, "f32"),
            _ids(n, v, "uniform"),
            _table(n, d, "f32"),
        )
    # take_along_axis: a per-row gather along the minor axis.
    for b, v, k in [(1024, 4096, 64), (4096, 1024, 16), (256, 32768, 256)]:
        add(
            "take_along_axis",
            f"take_along_b{b}_v{v}_k{k}",
            lambda a, i: jnp.take_along_axis(a, i, axis=1),
            _table(b, v, "f32"),
            lambda rng, b=b, v=v, k=k: rng.integers(0, v, (b, k)).astype(np.int32),
        )
    # one-hot matmul: a lookup as an MXU product.
    for v, d, n, dt in [(1024, 128, 4096, "bf16"), (8192, 32, 4096, "f32"), (4096, 512, 8192, "bf16")]:
        add(
            "onehot",
            f"onehot_v{v}_d{d}_n{n}_{dt}",
            lambda W, x: jax.nn.one_hot(x, W.shape[0], dtype=W.dtype) @ W,
            _table(v, d, dt),
            _ids(n, v, "uniform"),
        )
    # A gathered mixture of experts: per-token expert weights gathered, then applied.
    for e, d, f, t in [(8, 128, 256, 256), (64, 64, 128, 64), (16, 256, 512, 1)]:
        add(
            "moe_gather",
            f"moe_e{e}_d{d}_f{f}_t{t}",
            lambda h, w, r: jnp.einsum("td,tdf->tf", h, w[r]),
            _table(t, d, "bf16"),
            lambda rng, e=e, d=d, f=f: rng.standard_normal((e, d, f), dtype=np.float32).astype("float32"),
            _ids(t, e, "uniform"),
        )
    # bucketize (searchsorted) and a histogram of the buckets.
    for n, b in [(65536, 1024), (1 << 20, 64)]:
        add(
            "bucketize",
            f"bucketize_n{n}_b{b}",
            lambda x, edges: jnp.searchsorted(edges, x),
            lambda rng, n=n: rng.random(n, dtype=np.float32),
            lambda rng, b=b: np.sort(rng.random(b, dtype=np.float32)),
        )
    # image patches: a gather expressed as a convolution.
    for hw, c in [(64, 16), (128, 8)]:
        add(
            "patches",
            f"patches_hw{hw}_c{c}",
            lambda img: lax.conv_general_dilated_patches(img, (3, 3), (1, 1), "SAME"),
            lambda rng, hw=hw, c=c: rng.standard_normal((8, c, hw, hw), dtype=np.float32),
        )
    # Elementwise streams: the bandwidth reference.
    for n, d in [(8192, 32), (65536, 128), (1 << 20, 32), (4096, 4096)]:
        add("stream", f"stream_n{n}_d{d}", lambda b: b + 1.0, _table(n, d, "f32"))
    # cumsum along rows: a reduction window.
    for n, d in [(16384, 32), (4096, 512)]:
        add("cumsum", f"cumsum_n{n}_d{d}", lambda b: jnp.cumsum(b, axis=0), _table(n, d, "f32"))
    return out
