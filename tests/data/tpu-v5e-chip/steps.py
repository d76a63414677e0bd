"""Programs of model teams measured on a TPU chip: the pieces of whole model steps by family and size, and
whole steps that no fit may see.

``families()`` are what the cost model is fitted on beside ``probes.py``: attention blocks (causal and not),
MLPs, norms, losses, MoE routers and dispatch, top-k and sort, message passing with segment sums, optimizer
updates and small train steps. Each family spans at least 100x in size, and its largest program is at least
8x its next, so that a fit without it shows how the model extrapolates in size.

``held_out()`` are whole steps (small language models forward and train, an MoE block, a GNN layer and its
train step, a two-tower retrieval step): they are never fitted on, only predicted (``heldout/``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from probes import Probe, _ids


def _normal(*shape: int, dtype: str = "f32") -> Callable[[np.random.Generator], np.ndarray]:
    import ml_dtypes

    np_dtype = ml_dtypes.bfloat16 if dtype == "bf16" else np.float32

    def draw(rng: np.random.Generator) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * 0.05).astype(np_dtype)

    return draw


def _attention(causal: bool) -> Callable[..., Any]:
    import jax
    import jax.numpy as jnp

    def attend(q: Any, k: Any, v: Any) -> Any:
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1]).astype(q.dtype)
        if causal:
            n = q.shape[2]
            s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, jnp.asarray(-1e9, s.dtype))
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    return attend


def _mlp(x: Any, w1: Any, w2: Any) -> Any:
    import jax

    return jax.nn.gelu(x @ w1) @ w2


def _layernorm(x: Any, g: Any, b: Any) -> Any:
    import jax.numpy as jnp

    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jnp.reciprocal(jnp.sqrt(var + 1e-6)) * g + b


def _xent(logits: Any, labels: Any) -> Any:
    import jax
    import jax.numpy as jnp

    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()


def _router(x: Any, w: Any) -> Any:
    import jax

    gates, experts = jax.lax.top_k(x @ w, 2)
    return jax.nn.softmax(gates, axis=-1), experts


def _dispatch(x: Any, experts: Any, w1: Any, w2: Any, capacity: int) -> Any:
    """Top-1 dispatch with a capacity, the expert MLPs, and the combine (einsum form)."""
    import jax
    import jax.numpy as jnp

    e = w1.shape[0]
    onehot = jax.nn.one_hot(experts, e, dtype=x.dtype)
    position = (jnp.cumsum(onehot, axis=0) - 1) * onehot
    mask = onehot[:, :, None] * jax.nn.one_hot(position.sum(-1).astype(jnp.int32), capacity, dtype=x.dtype)[
        :, None, :
    ]
    h = jnp.einsum("tec,td->ecd", mask, x)
    h = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", h, w1))
    h = jnp.einsum("ecf,efd->ecd", h, w2)
    return jnp.einsum("tec,ecd->td", mask, h)


def _message_passing(h: Any, senders: Any, receivers: Any, w: Any) -> Any:
    import jax

    messages = h[senders] @ w
    return jax.nn.relu(jax.ops.segment_sum(messages, receivers, num_segments=h.shape[0]))


def _adam(p: Any, g: Any, m: Any, v: Any) -> Any:
    import jax.numpy as jnp

    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    return p - 1e-3 * m / (jnp.sqrt(v) + 1e-8), m, v


def _mlp_train(x: Any, y: Any, w1: Any, w2: Any) -> Any:
    import jax

    def loss(w1: Any, w2: Any) -> Any:
        return ((_mlp(x, w1, w2) - y) ** 2).mean()

    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 1e-2 * g1, w2 - 1e-2 * g2


def families() -> list[Probe]:  # noqa: C901 - one table of families, read top to bottom
    import jax
    import jax.numpy as jnp

    out: list[Probe] = []

    def add(family: str, name: str, fn: Callable[..., Any], *makers: Callable[[np.random.Generator], Any]) -> None:
        out.append(Probe(family, name, fn, lambda rng, makers=makers: tuple(m(rng) for m in makers)))

    for causal in (False, True):
        family = "attention_causal" if causal else "attention"
        for b, h, s, d, dt in [
            (1, 4, 128, 64, "f32"),
            (2, 4, 256, 64, "bf16"),
            (4, 8, 256, 64, "f32"),
            (4, 8, 512, 64, "bf16"),
            (4, 8, 512, 128, "f32"),
            (8, 16, 1024, 64, "bf16"),
        ]:
            q = _normal(b, h, s, d, dtype=dt)
            add(family, f"{family}_b{b}_h{h}_s{s}_d{d}_{dt}", _attention(causal), q, q, q)
    for n, d, f, dt in [(256, 256, 1024, "f32"), (1024, 512, 1024, "bf16"), (2048, 512, 2048, "f32"),
                        (2048, 1024, 4096, "bf16"), (8192, 1024, 4096, "bf16")]:  # fmt: skip
        add("mlp", f"mlp_n{n}_d{d}_f{f}_{dt}", _mlp, _normal(n, d, dtype=dt), _normal(d, f, dtype=dt),
            _normal(f, d, dtype=dt))  # fmt: skip
    for n, d, dt in [(1024, 256, "f32"), (4096, 512, "bf16"), (16384, 1024, "f32"), (262144, 1024, "bf16")]:
        add("layernorm", f"layernorm_n{n}_d{d}_{dt}", _layernorm, _normal(n, d, dtype=dt), _normal(d, dtype=dt),
            _normal(d, dtype=dt))  # fmt: skip
    for n, v, dt in [(64, 1024, "f32"), (512, 8192, "f32"), (1024, 32000, "bf16"), (16384, 32000, "bf16")]:
        add("xent", f"xent_n{n}_v{v}_{dt}", _xent, _normal(n, v, dtype=dt), _ids(n, v, "uniform"))
    for t, d, e in [(256, 256, 8), (2048, 512, 16), (8192, 1024, 64), (131072, 1024, 64)]:
        add("moe_router", f"moe_router_t{t}_d{d}_e{e}", _router, _normal(t, d), _normal(d, e))
    for t, e, c, d, f in [(256, 8, 64, 128, 256), (1024, 8, 256, 256, 512), (2048, 16, 256, 512, 1024),
                          (16384, 16, 2048, 512, 1024)]:  # fmt: skip
        add("moe_dispatch", f"moe_dispatch_t{t}_e{e}_c{c}_d{d}_f{f}",
            lambda x, r, w1, w2, c=c: _dispatch(x, r, w1, w2, c), _normal(t, d, dtype="bf16"),
            _ids(t, e, "uniform"), _normal(e, d, f, dtype="bf16"), _normal(e, f, d, dtype="bf16"))  # fmt: skip
    for r, n, k in [(64, 1024, 8), (256, 4096, 8), (1024, 4096, 64), (512, 8192, 2), (4096, 32768, 8)]:
        add("topk", f"topk_r{r}_n{n}_k{k}", lambda x, k=k: jax.lax.top_k(x, k), _normal(r, n))
    for r, n in [(64, 1024), (256, 4096), (1024, 4096), (2048, 32768)]:
        add("sort", f"sort_r{r}_n{n}", lambda x: jnp.sort(x, axis=-1), _normal(r, n))
    for r, n in [(64, 1024), (1024, 4096)]:
        add("sort", f"argsort_r{r}_n{n}", lambda x: jnp.argsort(x, axis=-1), _normal(r, n))
    for n, e, d in [(1000, 10000, 32), (10000, 100000, 64), (50000, 200000, 64), (100000, 2000000, 64)]:
        add("message_passing", f"message_passing_n{n}_e{e}_d{d}", _message_passing, _normal(n, d),
            _ids(e, n, "uniform"), _ids(e, n, "sorted"), _normal(d, d))  # fmt: skip
    for n in (65536, 1 << 20, 1 << 22, 1 << 26):
        vec = _normal(n)
        add("adam", f"adam_n{n}", _adam, vec, vec, vec, lambda rng, n=n: np.abs(_normal(n)(rng)))
    for n, d, f, dt in [(256, 256, 1024, "f32"), (1024, 512, 1024, "bf16"), (2048, 512, 2048, "f32"),
                        (8192, 1024, 4096, "bf16")]:  # fmt: skip
        add("mlp_train", f"mlp_train_n{n}_d{d}_f{f}_{dt}", _mlp_train, _normal(n, d, dtype=dt),
            _normal(n, d, dtype=dt), _normal(d, f, dtype=dt), _normal(f, d, dtype=dt))  # fmt: skip
    for n, e, dist in [(30000, 300000, "sorted"), (40000, 100000, "uniform"), (80000, 400000, "sorted"),
                       (200000, 1000000, "uniform"), (250000, 4000000, "sorted")]:  # fmt: skip
        add("segment_far", f"segment_far_n{n}_e{e}_{dist}",
            lambda u, seg, n=n: jax.ops.segment_sum(u, seg, num_segments=n), _normal(e, 64), _ids(e, n, dist))
    for e, d, f, t, dt in [(8, 128, 256, 256, "f32"), (16, 256, 512, 512, "bf16"), (8, 256, 512, 1024, "f32"),
                           (64, 512, 512, 256, "bf16"), (32, 256, 1024, 4096, "bf16")]:  # fmt: skip
        add("expert_gather", f"expert_gather_e{e}_d{d}_f{f}_t{t}_{dt}", lambda w, r: w[r],
            _normal(e, d, f, dtype=dt), _ids(t, e, "uniform"))  # fmt: skip
    for b, s, d, dt, causal, train in [
        (8, 128, 256, "f32", True, False),
        (4, 256, 512, "bf16", False, False),
        (2, 512, 1024, "bf16", True, False),
        (1, 2048, 512, "bf16", True, False),
        (8, 128, 256, "f32", False, True),
        (4, 256, 512, "bf16", True, True),
        (2, 512, 1024, "bf16", True, True),
    ]:
        family = "block_train" if train else "block"
        fn = _block_train(causal) if train else _block(causal)
        add(family, f"{family}_b{b}_s{s}_d{d}_{dt}_{'causal' if causal else 'full'}", fn,
            _normal(b, s, d, dtype=dt), _block_params(d, dt))  # fmt: skip
    # A cumulative sum's window (libtpu's depthwise emitter) across lengths, widths and dtypes, none past
    # the fitted family's largest (larger() holds one far beyond).
    for n, d, dt in [(256, 512, "f32"), (1024, 32, "f32"), (1024, 128, "f32"), (1024, 512, "f32"),
                     (4096, 32, "f32"), (4096, 128, "f32"), (16384, 128, "f32"), (65536, 32, "f32"),
                     (2048, 1024, "f32"), (1024, 512, "bf16"), (4096, 512, "bf16"), (16384, 32, "bf16"),
                     # blocks of 64, 43, 32 and 1 rows of the window's dimension (the ahead-of-time compile
                     # shows which), and windows along the lanes
                     (8192, 256, "f32"), (4096, 256, "f32"), (8192, 128, "f32"), (6144, 256, "f32"),
                     (32768, 64, "f32"), (8192, 256, "bf16"), (16384, 128, "bf16"), (8192, 128, "bf16"),
                     (8192, 64, "f32"), (32768, 16, "f32")]:  # fmt: skip
        add("cumsum", f"cumsum_n{n}_d{d}_{dt}", lambda b: jnp.cumsum(b, axis=0), _normal(n, d, dtype=dt))
    # Experts' weights gathered per token, then applied, across tokens and expert sizes, none past the
    # fitted family's largest.
    for e, d, f, t in [(8, 128, 256, 16), (8, 128, 256, 64), (8, 128, 256, 128), (4, 128, 256, 32),
                       (16, 128, 128, 64), (8, 64, 256, 128), (32, 64, 128, 256)]:  # fmt: skip
        add("moe_gather", f"moe_e{e}_d{d}_f{f}_t{t}", lambda h, w, r: jnp.einsum("td,tdf->tf", h, w[r]),
            _normal(t, d, dtype="bf16"), _normal(e, d, f), _ids(t, e, "uniform"))  # fmt: skip
    return out


def _layer(x: Any, block: Any, attend: Callable[..., Any]) -> Any:
    """One pre-norm transformer layer: attention over heads of 64, then an MLP of 4x width."""
    import jax.numpy as jnp

    wq, wk, wv, wo, w1, w2, g = block
    b, s, d = x.shape
    y = _layernorm(x, g, jnp.zeros_like(g))
    q, k, v = ((y @ w).reshape(b, s, d // 64, 64).transpose(0, 2, 1, 3) for w in (wq, wk, wv))
    x = x + attend(q, k, v).transpose(0, 2, 1, 3).reshape(b, s, d) @ wo
    return x + _mlp(_layernorm(x, g, jnp.zeros_like(g)), w1, w2)


def _block_params(d: int, dt: str) -> Callable[[np.random.Generator], Any]:
    makers = [_normal(d, d, dtype=dt) for _ in range(4)] + [_normal(d, 4 * d, dtype=dt),
              _normal(4 * d, d, dtype=dt), _normal(d, dtype=dt)]  # fmt: skip
    return lambda rng: tuple(m(rng) for m in makers)


def _block(causal: bool) -> Callable[..., Any]:
    attend = _attention(causal)
    return lambda x, block: _layer(x, block, attend)


def _block_train(causal: bool) -> Callable[..., Any]:
    import jax

    attend = _attention(causal)

    def step(x: Any, block: Any) -> Any:
        grads = jax.grad(lambda p: (_layer(x, p, attend).astype("float32") ** 2).mean())(block)
        return jax.tree.map(lambda p, g: p - 1e-2 * g, block, grads)

    return step


def _lm(layers: int, causal: bool) -> Callable[..., Any]:
    """A small decoder: embed, ``layers`` transformer layers, logits, mean cross-entropy."""
    attend = _attention(causal)

    def loss(params: Any, tokens: Any, labels: Any) -> Any:
        emb, blocks, out = params
        x = emb[tokens]
        for block in blocks:
            x = _layer(x, block, attend)
        b, s, _ = x.shape
        return _xent((x @ out).reshape(b * s, -1), labels.reshape(-1))

    return loss


def _lm_params(v: int, d: int, layers: int, dt: str) -> Callable[[np.random.Generator], Any]:
    block = _block_params(d, dt)
    return lambda rng: (_normal(v, d, dtype=dt)(rng), [block(rng) for _ in range(layers)], _normal(d, v, dtype=dt)(rng))


def _sgd(loss: Callable[..., Any]) -> Callable[..., Any]:
    import jax

    def step(params: Any, *batch: Any) -> Any:
        value, grads = jax.value_and_grad(loss)(params, *batch)
        return value, jax.tree.map(lambda p, g: p - 1e-2 * g.astype(p.dtype), params, grads)

    return step


def _moe_block(x: Any, wr: Any, w1: Any, w2: Any) -> Any:
    """Top-2 routing, each token sent to both its experts (capacity: every token), and the combine."""
    import jax
    import jax.numpy as jnp

    gates, experts = _router(x, wr)
    out = jnp.zeros_like(x)
    for j in range(2):
        h = jnp.einsum("td,tdf->tf", x, w1[experts[:, j]])
        out = out + gates[:, j : j + 1].astype(x.dtype) * jnp.einsum("tf,tfd->td", jax.nn.gelu(h), w2[experts[:, j]])
    return out


def _gnn_loss(params: Any, h: Any, senders: Any, receivers: Any, y: Any) -> Any:
    w1, w2 = params
    x = _message_passing(h, senders, receivers, w1)
    x = _message_passing(x, senders, receivers, w2)
    return ((x - y) ** 2).mean()


def _two_tower_loss(params: Any, users: Any, items: Any) -> Any:
    import jax
    import jax.numpy as jnp

    user_table, item_table, wu, wi = params
    u = jax.nn.relu(jnp.take(user_table, users, axis=0) @ wu)
    i = jax.nn.relu(jnp.take(item_table, items, axis=0) @ wi)
    logits = u @ i.T
    return _xent(logits, jnp.arange(users.shape[0]))


def _whole_steps(
    v: int,
    lms: list[tuple[int, bool, int, int, int, str, bool]],
    moes: list[tuple[int, int, int, int, str]],
    gnns: list[tuple[int, int, int]],
    towers: list[tuple[int, int, int, int]],
) -> list[Probe]:
    """Whole steps at the sizes given: small language models of vocabulary ``v`` (layers, causal, width,
    sequence, batch, dtype, train), MoE blocks, GNN layers with their train steps, two-tower train steps."""
    out: list[Probe] = []

    def add(family: str, name: str, fn: Callable[..., Any], *makers: Callable[[np.random.Generator], Any]) -> None:
        out.append(Probe(family, name, fn, lambda rng, makers=makers: tuple(m(rng) for m in makers)))

    for layers, causal, d, s, b, dt, train in lms:
        loss = _lm(layers, causal)
        name = f"lm_{'train' if train else 'fwd'}_l{layers}_{'causal' if causal else 'full'}_d{d}_s{s}_{dt}"
        tokens = _ids(b * s, v, "uniform")
        add("lm", name, _sgd(loss) if train else loss, _lm_params(v, d, layers, dt),
            lambda rng, b=b, s=s, tokens=tokens: tokens(rng).reshape(b, s), tokens)  # fmt: skip
    for t, d, e, f, dt in moes:
        add("moe_block", f"moe_block_t{t}_d{d}_e{e}_f{f}_{dt}", _moe_block, _normal(t, d, dtype=dt),
            _normal(d, e, dtype=dt), _normal(e, d, f, dtype=dt), _normal(e, f, d, dtype=dt))  # fmt: skip
    for n, e, d in gnns:
        edges = (_ids(e, n, "uniform"), _ids(e, n, "sorted"))
        add("gnn", f"gnn_layer_n{n}_e{e}_d{d}", _message_passing, _normal(n, d), *edges, _normal(d, d))
        add("gnn", f"gnn_train_n{n}_e{e}_d{d}", _sgd(_gnn_loss),
            lambda rng, d=d: (_normal(d, d)(rng), _normal(d, d)(rng)), _normal(n, d), *edges, _normal(n, d))
    for u, i, d, b in towers:
        add("two_tower", f"two_tower_train_u{u}_i{i}_d{d}_b{b}", _sgd(_two_tower_loss),
            lambda rng, u=u, i=i, d=d: (_normal(u, d)(rng), _normal(i, d)(rng), _normal(d, d)(rng),
                                        _normal(d, d)(rng)),
            _ids(b, u, "uniform"), _ids(b, i, "uniform"))  # fmt: skip
    return out


def held_out() -> list[Probe]:
    return _whole_steps(
        8192,
        [
            (2, True, 256, 256, 8, "f32", False),
            (4, False, 512, 512, 4, "bf16", False),
            (8, True, 256, 1024, 2, "bf16", False),
            (2, True, 256, 256, 8, "f32", True),
            (4, True, 512, 512, 4, "bf16", True),
            (2, False, 512, 256, 8, "bf16", True),
        ],
        [(2048, 512, 8, 1024, "bf16"), (512, 256, 16, 512, "f32")],
        [(20000, 200000, 64), (50000, 500000, 64)],
        [(100000, 50000, 64, 1024), (1000000, 200000, 128, 4096)],
    )


# Twin pairs: two ways of writing one computation, as a relation compares them (``time(a) / time(b)``).
TWINS = (
    ("twin_scatter_max", "twin_segment_max"),
    ("twin_attention_causal", "twin_attention_full"),
    ("twin_xent_onehot", "twin_xent_take"),
    ("twin_topk", "twin_sort_slice"),
    ("twin_lookup_onehot", "twin_lookup_take"),
    ("twin_layernorm_bf16", "twin_layernorm_f32"),
    ("twin_aggregate_dense", "twin_aggregate_segment"),
    ("twin_moe_gather", "twin_moe_einsum"),
)


def twins() -> list[Probe]:
    """The programs of :data:`TWINS`, on shared sizes: never fitted on, their ratios held to the chip's."""
    import jax
    import jax.numpy as jnp

    out: list[Probe] = []

    def add(name: str, fn: Callable[..., Any], *makers: Callable[[np.random.Generator], Any]) -> None:
        out.append(Probe("twins", name, fn, lambda rng, makers=makers: tuple(m(rng) for m in makers)))

    n, e, d = 20000, 400000, 64
    add("twin_scatter_max", lambda u, seg: jnp.full((n, d), -jnp.inf).at[seg].max(u), _normal(e, d),
        _ids(e, n, "uniform"))  # fmt: skip
    add("twin_segment_max", lambda u, seg: jax.ops.segment_max(u, seg, num_segments=n), _normal(e, d),
        _ids(e, n, "uniform"))  # fmt: skip
    q = _normal(4, 8, 1024, 64, dtype="bf16")
    add("twin_attention_causal", _attention(True), q, q, q)
    add("twin_attention_full", _attention(False), q, q, q)
    logits = _normal(2048, 8192)
    add("twin_xent_onehot", lambda z, y: -(jax.nn.log_softmax(z) * jax.nn.one_hot(y, z.shape[1])).sum(1).mean(),
        logits, _ids(2048, 8192, "uniform"))  # fmt: skip
    add("twin_xent_take", _xent, logits, _ids(2048, 8192, "uniform"))
    scores = _normal(2048, 4096)
    add("twin_topk", lambda x: jax.lax.top_k(x, 16)[0], scores)
    add("twin_sort_slice", lambda x: -jnp.sort(-x, axis=-1)[:, :16], scores)
    table = _normal(4096, 256, dtype="bf16")
    add("twin_lookup_onehot", lambda w, x: jax.nn.one_hot(x, w.shape[0], dtype=w.dtype) @ w, table,
        _ids(8192, 4096, "uniform"))  # fmt: skip
    add("twin_lookup_take", lambda w, x: jnp.take(w, x, axis=0), table, _ids(8192, 4096, "uniform"))
    add("twin_layernorm_bf16", _layernorm, _normal(65536, 512, dtype="bf16"), _normal(512, dtype="bf16"),
        _normal(512, dtype="bf16"))  # fmt: skip
    add("twin_layernorm_f32", _layernorm, _normal(65536, 512), _normal(512), _normal(512))
    nodes, edges = 2048, 32768
    add("twin_aggregate_dense",
        lambda h, s, r: jnp.zeros((nodes, nodes)).at[r, s].add(1.0) @ h, _normal(nodes, 128),
        _ids(edges, nodes, "uniform"), _ids(edges, nodes, "sorted"))  # fmt: skip
    add("twin_aggregate_segment",
        lambda h, s, r: jax.ops.segment_sum(h[s], r, num_segments=nodes), _normal(nodes, 128),
        _ids(edges, nodes, "uniform"), _ids(edges, nodes, "sorted"))  # fmt: skip
    add("twin_moe_gather", lambda x, w, r: jnp.einsum("td,tdf->tf", x, w[r]), _normal(1024, 256, dtype="bf16"),
        _normal(8, 256, 512, dtype="bf16"), _ids(1024, 8, "uniform"))  # fmt: skip
    add("twin_moe_einsum",
        lambda x, w, r: jnp.einsum("te,ted->td", jax.nn.one_hot(r, 8, dtype=x.dtype), jnp.einsum("td,edf->tef", x, w)),
        _normal(1024, 256, dtype="bf16"), _normal(8, 256, 512, dtype="bf16"), _ids(1024, 8, "uniform"))  # fmt: skip
    return out


def larger() -> list[Probe]:  # noqa: C901 - one table of families, read top to bottom
    """Each family again at about 4x to 16x its largest program in the fit (as the chip's memory allows),
    measured after the fit was settled: never fitted on, only predicted (``heldout/``), so that how the model
    extrapolates in size is measured on programs no change to it was made from."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    from probes import _table

    out: list[Probe] = []

    def add(family: str, name: str, fn: Callable[..., Any], *makers: Callable[[np.random.Generator], Any]) -> None:
        out.append(Probe(family, name, fn, lambda rng, makers=makers: tuple(m(rng) for m in makers)))

    add("gather", "gather_v2097152_d32_n131072_f32_uniform", lambda w, x: w[x], _table(1 << 21, 32, "f32"),
        _ids(131072, 1 << 21, "uniform"))  # fmt: skip
    add("gather", "gather_v65536_d128_n524288_bf16_uniform", lambda w, x: w[x], _table(65536, 128, "bf16"),
        _ids(524288, 65536, "uniform"))  # fmt: skip
    add("take", "take_v65536_d32_n1048576_f32", lambda w, x: jnp.take(w, x, axis=0), _table(65536, 32, "f32"),
        _ids(1 << 20, 65536, "uniform"))  # fmt: skip
    add("vmap_gather", "vmap_gather_v65536_d32_n524288_f32", lambda w, x: jax.vmap(lambda i: w[i])(x),
        _table(65536, 32, "f32"), _ids(524288, 65536, "uniform"))  # fmt: skip
    add("scatter_add", "scatter_add_v65536_d32_n1048576_f32_uniform", lambda w, x, u: w.at[x].add(u),
        _table(65536, 32, "f32"), _ids(1 << 20, 65536, "uniform"), _table(1 << 20, 32, "f32"))  # fmt: skip
    add("segment_sum", "segment_sum_n1048576_d64_s32768",
        lambda u, seg: jax.ops.segment_sum(u, seg, num_segments=32768), _table(1 << 20, 64, "f32"),
        _ids(1 << 20, 32768, "sorted"))  # fmt: skip

    def loop(w: Any, x: Any, u: Any) -> Any:
        def body(i: Any, acc: Any) -> Any:
            row = lax.dynamic_slice_in_dim(acc, x[i], 1, 0)
            return lax.dynamic_update_slice_in_dim(acc, row + u[i][None], x[i], 0)

        return lax.fori_loop(0, x.shape[0], body, w)

    add("row_loop", "row_loop_v65536_d32_n16384", loop, _table(65536, 32, "f32"), _ids(16384, 65536, "uniform"),
        _table(16384, 32, "f32"))  # fmt: skip
    add("take_along_axis", "take_along_b16384_v4096_k64", lambda a, i: jnp.take_along_axis(a, i, axis=1),
        _table(16384, 4096, "f32"), lambda rng: rng.integers(0, 4096, (16384, 64)).astype(np.int32))  # fmt: skip
    add("onehot", "onehot_v16384_d512_n32768_bf16",
        lambda w, x: jax.nn.one_hot(x, w.shape[0], dtype=w.dtype) @ w, _table(16384, 512, "bf16"),
        _ids(32768, 16384, "uniform"))  # fmt: skip
    add("moe_gather", "moe_e16_d256_f512_t1024", lambda h, w, r: jnp.einsum("td,tdf->tf", h, w[r]),
        _table(1024, 256, "bf16"), _normal(16, 256, 512), _ids(1024, 16, "uniform"))  # fmt: skip
    add("bucketize", "bucketize_n1048576_b1024", lambda x, edges: jnp.searchsorted(edges, x),
        lambda rng: rng.random(1 << 20, dtype=np.float32),
        lambda rng: np.sort(rng.random(1024, dtype=np.float32)))  # fmt: skip
    add("patches", "patches_hw512_c8", lambda img: lax.conv_general_dilated_patches(img, (3, 3), (1, 1), "SAME"),
        lambda rng: rng.standard_normal((8, 8, 512, 512), dtype=np.float32))  # fmt: skip
    add("stream", "stream_n16777216_d32", lambda b: b + 1.0, _table(1 << 24, 32, "f32"))
    add("cumsum", "cumsum_n65536_d512", lambda b: jnp.cumsum(b, axis=0), _table(65536, 512, "f32"))
    for n, d, dt in [(262144, 128, "f32"), (1 << 20, 32, "f32"), (32768, 512, "bf16"), (131072, 256, "f32"),
                     (524288, 64, "f32"), (65536, 256, "bf16")]:  # fmt: skip
        add("cumsum", f"cumsum_n{n}_d{d}_{dt}", lambda b: jnp.cumsum(b, axis=0), _normal(n, d, dtype=dt))
    add("moe_gather", "moe_e8_d128_f256_t2048", lambda h, w, r: jnp.einsum("td,tdf->tf", h, w[r]),
        _table(2048, 128, "bf16"), _normal(8, 128, 256), _ids(2048, 8, "uniform"))  # fmt: skip
    for causal in (False, True):
        family = "attention_causal" if causal else "attention"
        q = _normal(16, 16, 2048, 64, dtype="bf16")
        add(family, f"{family}_b16_h16_s2048_d64_bf16", _attention(causal), q, q, q)
    add("mlp", "mlp_n65536_d1024_f4096_bf16", _mlp, _normal(65536, 1024, dtype="bf16"),
        _normal(1024, 4096, dtype="bf16"), _normal(4096, 1024, dtype="bf16"))  # fmt: skip
    add("mlp_train", "mlp_train_n65536_d1024_f4096_bf16", _mlp_train, _normal(65536, 1024, dtype="bf16"),
        _normal(65536, 1024, dtype="bf16"), _normal(1024, 4096, dtype="bf16"), _normal(4096, 1024, dtype="bf16"))  # fmt: skip
    add("layernorm", "layernorm_n1048576_d1024_bf16", _layernorm, _normal(1 << 20, 1024, dtype="bf16"),
        _normal(1024, dtype="bf16"), _normal(1024, dtype="bf16"))  # fmt: skip
    add("xent", "xent_n32768_v32000_bf16", _xent, _normal(32768, 32000, dtype="bf16"), _ids(32768, 32000, "uniform"))
    add("moe_router", "moe_router_t524288_d1024_e64", _router, _normal(1 << 19, 1024), _normal(1024, 64))
    add("moe_dispatch", "moe_dispatch_t65536_e16_c2048_d512_f1024",
        lambda x, r, w1, w2: _dispatch(x, r, w1, w2, 2048), _normal(65536, 512, dtype="bf16"),
        _ids(65536, 16, "uniform"), _normal(16, 512, 1024, dtype="bf16"), _normal(16, 1024, 512, dtype="bf16"))  # fmt: skip
    add("topk", "topk_r16384_n32768_k8", lambda x: jax.lax.top_k(x, 8), _normal(16384, 32768))
    add("sort", "sort_r16384_n32768", lambda x: jnp.sort(x, axis=-1), _normal(16384, 32768))
    add("message_passing", "message_passing_n500000_e10000000_d64", _message_passing, _normal(500000, 64),
        _ids(10_000_000, 500000, "uniform"), _ids(10_000_000, 500000, "sorted"), _normal(64, 64))  # fmt: skip
    vec = _normal(1 << 28)
    add("adam", "adam_n268435456", _adam, vec, vec, vec, lambda rng: np.abs(vec(rng)))
    add("segment_far", "segment_far_n1000000_e16000000_sorted",
        lambda u, seg: jax.ops.segment_sum(u, seg, num_segments=1_000_000), _normal(16_000_000, 64),
        _ids(16_000_000, 1_000_000, "sorted"))  # fmt: skip
    add("expert_gather", "expert_gather_e32_d256_f512_t16384_bf16", lambda w, r: w[r],
        _normal(32, 256, 512, dtype="bf16"), _ids(16384, 32, "uniform"))  # fmt: skip
    add("block", "block_b8_s2048_d1024_bf16_causal", _block(True), _normal(8, 2048, 1024, dtype="bf16"),
        _block_params(1024, "bf16"))  # fmt: skip
    add("block_train", "block_train_b8_s1024_d1024_bf16_causal", _block_train(True),
        _normal(8, 1024, 1024, dtype="bf16"), _block_params(1024, "bf16"))  # fmt: skip
    return out


def held_out_fresh() -> list[Probe]:
    """Whole steps again at sizes and shapes ``held_out()`` does not have, measured after the fit was
    settled: held-out programs no change to the model was made from."""
    return _whole_steps(
        16384,
        [
            (6, True, 384, 512, 4, "bf16", False),
            (3, False, 768, 256, 8, "f32", False),
            (6, True, 384, 512, 4, "bf16", True),
            (3, True, 768, 1024, 2, "bf16", True),
        ],
        [(4096, 768, 16, 1536, "bf16")],
        [(100000, 1000000, 128)],
        [(500000, 100000, 64, 2048)],
    )
