"""The catalog of canonical embedding programs: every lookup form users write.

Adding a program touches this file only: write its function and register it in ``CATALOG`` below.

A program is a pure function of the table ``W`` and the indices ``x`` (a forward), of ``W``, ``x`` and a
cotangent (a backward, the gradient with respect to the table), or a small training step. A ``tied``
program uses the table as lookup and output projection too. flax and haiku are imported when a program is
traced, never here, so the catalog loads without the ``libs`` extra.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib.util
import itertools
import math
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._errors import InvariantsError, did_you_mean
from ..measure.metrics import input_facts

# The configurations live in configs (no JAX); re-exported here, where the catalog's users look for them.
from ..scope.configs import _INDEX_SHAPES
from ..scope.configs import ALL_CONFIGS as ALL_CONFIGS
from ..scope.configs import CONFIGS as CONFIGS
from ..scope.configs import LLM_CONFIGS as LLM_CONFIGS
from ..scope.configs import OFFLOAD_CONFIGS as OFFLOAD_CONFIGS
from ..scope.configs import SEED as SEED
from ..scope.configs import Config as Config
from ..scope.configs import Distribution as Distribution
from ..scope.configs import get_config as get_config
from ..scope.select import selectors

if TYPE_CHECKING:
    from ..specfile.reader import ProgramDecl

ProgramKind = Literal["forward", "backward", "train", "step", "sharded", "sharded_grad", "tied", "tied_grad"]

_PIP_NAMES = {"flax": "flax", "haiku": "dm-haiku"}
LIBS_HINT = (
    "pip install 'jax-embedding-invariants[libs]' (in a checkout: pip install -e '.[libs]'): "
    "flax and dm-haiku"
)

# The [4, 2048] variant is for the nested vmap; W[x] and take only see a reshape of the indices there.
_LLM_FLAT = ("bf16-llm",)


@dataclasses.dataclass(frozen=True)
class Layout:
    """How a sharded program places its inputs on a device mesh: PartitionSpec entries over ``axes``.

    One entry of ``mesh_shape`` may be ``-1``: the rest of the target's devices. ``output`` None: the
    compiler chooses. A ``pod`` layout's mesh follows the chips' physical topology, as a pod job builds it.
    """

    mesh_shape: tuple[int, ...]
    axes: tuple[str, ...]
    table: tuple[str | None, ...]
    indices: tuple[str | None, ...]
    output: tuple[str | None, ...] | None = None
    cotangent: tuple[str | None, ...] | None = None
    pod: bool = False
    # "explicit": each array's sharding is part of its type (``.at[].get(out_sharding=...)`` needs it).
    axis_types: Literal["auto", "explicit"] = "auto"

    @property
    def devices(self) -> int:
        return int(np.prod([max(n, 1) for n in self.mesh_shape]))

    def mesh_for(self, devices: int) -> tuple[int, ...]:
        if -1 not in self.mesh_shape:
            return self.mesh_shape
        if devices % self.devices:
            raise InvariantsError(f"mesh {self.mesh_shape} does not divide {devices} devices")
        return tuple(devices // self.devices if n == -1 else n for n in self.mesh_shape)

    def shards(self, spec: tuple[str | None, ...], devices: int) -> int:
        sizes = dict(zip(self.axes, self.mesh_for(devices), strict=True))
        return sizes.get(spec[0], 1) if spec and spec[0] is not None else 1


class Inputs(Protocol):
    """The arguments of a program that brings its own, as a flat tuple."""

    def specs(self, config: Config) -> tuple[jax.ShapeDtypeStruct, ...]: ...

    def partition_specs(self, config: Config) -> tuple[tuple[str | None, ...], ...]: ...

    def param_leaves(self, config: Config) -> int: ...

    def facts(self, config: Config) -> dict[str, int]: ...

    def draw(self, config: Config, distribution: Distribution, seed: int) -> tuple[np.ndarray, ...]: ...


@dataclasses.dataclass(frozen=True)
class Program:
    """One program: ``fn`` of :meth:`argument_specs`, compiled in ``configs``; ``tags`` let targets choose.
    ``declaration``: a project's ``[[program]]``; None for the catalog's, whose code says everything."""

    name: str
    kind: ProgramKind
    fn: Callable[..., Any]
    doc: str
    configs: tuple[str, ...] = (SEED.id,)
    tags: frozenset[str] = frozenset()
    layout: Layout | None = None
    requires: tuple[str, ...] = ()  # modules the program imports when traced (from the ``libs`` extra)
    logits: bool = False  # returns (or, for a gradient, takes the cotangent of) logits over the vocabulary
    inputs: Inputs | None = None  # None: the arguments follow from ``kind`` and the configuration
    declaration: ProgramDecl | None = None

    @property
    def aimed(self) -> tuple[str, ...]:
        """The target-name patterns a declared program's spec files name; empty for the catalog's."""
        return self.declaration.aimed if self.declaration is not None else ()

    @property
    def donates(self) -> bool:
        return self.declaration is not None and self.declaration.donate

    def unavailable_reason(self) -> str | None:
        """None when every library the program needs is importable, else one line with the install command."""
        missing = [m for m in self.requires if importlib.util.find_spec(m) is None]
        if not missing:
            return None
        names = " and ".join(_PIP_NAMES.get(m, m) for m in missing)
        return f"{self.name}: {names} not installed; {LIBS_HINT}"

    def input_facts(self, config: Config, devices: int = 1) -> dict[str, int]:
        """The input facts an assert reads: the configuration's table, or the model's own tables."""
        facts = input_facts(config, self.layout, devices)
        return {**facts, **(self.inputs.facts(config) if self.inputs is not None else {})}

    def argument_specs(self, config: Config) -> tuple[jax.ShapeDtypeStruct, ...]:
        if self.inputs is not None:
            return self.inputs.specs(config)
        # A declared lookup may take its indices in another integer dtype than its configuration's.
        index_dtype = (self.declaration and self.declaration.index_dtype) or config.indices.dtype
        indices = jax.ShapeDtypeStruct(config.indices.shape, index_dtype)
        if self.kind in ("backward", "tied_grad", "sharded_grad"):
            return (config.table, indices, config.logits if self.logits else config.output)
        if self.kind == "train":
            batch, seq = _INDEX_SHAPES["2d"]
            return (
                config.table,
                jax.ShapeDtypeStruct((config.width, _TRAIN_CLASSES), config.table.dtype),
                jax.ShapeDtypeStruct((batch, seq), index_dtype),
                jax.ShapeDtypeStruct((batch,), jnp.int32),
            )
        return (config.table, indices)

    def argument_specs_sharded(self, config: Config) -> tuple[tuple[str | None, ...], ...]:
        """PartitionSpec entries per argument, of a program with a ``layout``."""
        if self.layout is None:
            raise InvariantsError(f"{self.name}: not a sharded program")
        if self.inputs is not None:
            return self.inputs.partition_specs(config)
        if self.kind in ("sharded_grad", "backward"):
            return (self.layout.table, self.layout.indices, self.layout.cotangent or ())
        return (self.layout.table, self.layout.indices)


# The lookups, each written the way users write it.


def naive(W: jax.Array, x: jax.Array) -> jax.Array:
    """``W[x]``: numpy-style advanced indexing (a gather with negative-index wrap)."""
    return W[x]


def take(W: jax.Array, x: jax.Array) -> jax.Array:
    """``jnp.take(W, x, axis=0)``, mode ``fill``: what flax's ``Embed`` does."""
    return jnp.take(W, x, axis=0)


def take_clip(W: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.take(W, x, axis=0, mode="clip")


def take_wrap(W: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.take(W, x, axis=0, mode="wrap")


def at_get_promise(W: jax.Array, x: jax.Array) -> jax.Array:
    # jnp.take rejects promise_in_bounds; .at[].get accepts it.
    return W.at[x].get(mode="promise_in_bounds")


def at_get_clip(W: jax.Array, x: jax.Array) -> jax.Array:
    return W.at[x].get(mode="clip")


def at_get_fill(W: jax.Array, x: jax.Array) -> jax.Array:
    return W.at[x].get(mode="fill", fill_value=0)


def _vmap_leading(row: Callable[[jax.Array], jax.Array], x: jax.Array) -> jax.Array:
    f = row
    for _ in range(x.ndim):
        f = jax.vmap(f)
    return f(x)


def vmap_naive(W: jax.Array, x: jax.Array) -> jax.Array:
    """``vmap(lambda i: W[i])``: a scalar index per row; the seed's pattern."""
    return _vmap_leading(lambda i: W[i], x)


def vmap_take(W: jax.Array, x: jax.Array) -> jax.Array:
    return _vmap_leading(lambda i: jnp.take(W, i, axis=0), x)


def eqx_embedding(W: jax.Array, x: jax.Array) -> jax.Array:
    """The installed equinox ``nn.Embedding`` under vmap (nested vmap for 2-D indices)."""
    import equinox as eqx  # here: a process that never traces it does not pay for importing equinox

    return _vmap_leading(eqx.nn.Embedding(weight=W), x)


def onehot_matmul(W: jax.Array, x: jax.Array) -> jax.Array:
    """``one_hot(x, V) @ W``: the lookup as a matmul."""
    return jax.nn.one_hot(x, W.shape[0], dtype=W.dtype) @ W


def lax_gather(W: jax.Array, x: jax.Array) -> jax.Array:
    """An explicit ``lax.gather`` with the dimension numbers of a row lookup."""
    dnums = lax.GatherDimensionNumbers(offset_dims=(x.ndim,), collapsed_slice_dims=(0,), start_index_map=(0,))
    return lax.gather(
        W,
        x[..., None],
        dnums,
        slice_sizes=(1, W.shape[1]),
        mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS,
    )


def lax_map_loop(W: jax.Array, x: jax.Array) -> jax.Array:
    """A row-at-a-time loop: the seed's pathology written on purpose, as a known-bad reference."""
    flat = x.reshape(-1)
    rows = lax.map(lambda i: lax.dynamic_index_in_dim(W, i, 0, keepdims=False), flat)
    return rows.reshape((*x.shape, W.shape[1]))


# Library modules, each applied the way its users apply it to trained parameters.

# Two compile threads importing flax.nnx and flax.linen at once meet flax's circular imports half done.
IMPORTING = threading.Lock()


def _nnx_module(build: Callable[[Any], Any], **params: jax.Array) -> Any:
    """An nnx module built by ``build(rngs)`` abstractly (no initializer in the jaxpr), holding ``params``."""
    with IMPORTING:
        from flax import nnx

    graphdef, state = nnx.split(nnx.eval_shape(lambda: build(nnx.Rngs(0))))
    flat = dict(nnx.to_flat_state(state))
    for path, value in params.items():
        flat[tuple(path.split("."))].set_value(value)
    return nnx.merge(graphdef, nnx.from_flat_state(flat))


def _nnx_embed(W: jax.Array) -> Any:
    with IMPORTING:
        from flax import nnx

    vocab, width = W.shape
    return _nnx_module(lambda rngs: nnx.Embed(vocab, width, param_dtype=W.dtype, rngs=rngs), embedding=W)


def flax_nnx_embed(W: jax.Array, x: jax.Array) -> jax.Array:
    """``flax.nnx.Embed`` (it calls ``jnp.take(embedding, x, axis=0)``)."""
    return _nnx_embed(W)(x)


def flax_linen_embed(W: jax.Array, x: jax.Array) -> jax.Array:
    """``flax.linen.Embed(V, D).apply({'params': {'embedding': W}}, x)``."""
    with IMPORTING:
        import flax.linen as nn

    embed = nn.Embed(W.shape[0], W.shape[1], param_dtype=W.dtype)
    return cast(jax.Array, embed.apply({"params": {"embedding": W}}, x))


def _haiku_apply(W: jax.Array, x: jax.Array, lookup_style: str) -> jax.Array:
    with IMPORTING:
        import haiku as hk

    vocab, width = W.shape
    model: Any = hk.without_apply_rng(
        hk.transform(lambda ids: hk.Embed(vocab, width, lookup_style=lookup_style)(ids))
    )
    return model.apply({"embed": {"embeddings": W}}, x)


def haiku_embed(W: jax.Array, x: jax.Array) -> jax.Array:
    """``haiku.Embed`` with its default lookup style, ``ARRAY_INDEX``: ``embeddings[ids]``."""
    return _haiku_apply(W, x, "ARRAY_INDEX")


def haiku_embed_onehot(W: jax.Array, x: jax.Array) -> jax.Array:
    """``haiku.Embed(lookup_style='ONE_HOT')``: ``one_hot(ids, V) @ embeddings``."""
    return _haiku_apply(W, x, "ONE_HOT")


def tied_take(W: jax.Array, x: jax.Array) -> jax.Array:
    """Tied input and output embeddings by hand: ``jnp.take(W, x, axis=0) @ W.T``, the reference."""
    return jnp.take(W, x, axis=0) @ W.T


def flax_nnx_embed_attend(W: jax.Array, x: jax.Array) -> jax.Array:
    """One ``flax.nnx.Embed`` as input and output layer: ``embed.attend(embed(x))``, i.e. ``h @ W.T``."""
    embed = _nnx_embed(W)
    return embed.attend(embed(x))


def _library_train_step(library: str) -> Callable[..., Any]:
    """The step ``train_take`` computes, as a model of ``library``, its gradient taken the library's way."""

    def xent(logits: jax.Array, labels: jax.Array) -> jax.Array:
        logp = jax.nn.log_softmax(logits)
        return -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()

    def nnx_step(W: jax.Array, P: jax.Array, tokens: jax.Array, labels: jax.Array) -> Any:
        with IMPORTING:
            from flax import nnx

        class Classifier(nnx.Module):
            def __init__(self, rngs: nnx.Rngs) -> None:
                self.embed = nnx.Embed(W.shape[0], W.shape[1], param_dtype=W.dtype, rngs=rngs)
                self.head = nnx.Linear(P.shape[0], P.shape[1], use_bias=False, param_dtype=P.dtype, rngs=rngs)

            def __call__(self, tokens: jax.Array) -> jax.Array:
                return self.head(self.embed(tokens).astype(jnp.float32).mean(axis=1))

        model = _nnx_module(Classifier, **{"embed.embedding": W, "head.kernel": P})
        grads = nnx.grad(lambda m: xent(m(tokens), labels))(model)
        return grads["embed"]["embedding"].get_value(), grads["head"]["kernel"].get_value()

    def linen_step(W: jax.Array, P: jax.Array, tokens: jax.Array, labels: jax.Array) -> Any:
        with IMPORTING:
            import flax.linen as nn

        class Classifier(nn.Module):
            @nn.compact
            def __call__(self, tokens: jax.Array) -> jax.Array:
                h = nn.Embed(W.shape[0], W.shape[1], param_dtype=W.dtype, name="embed")(tokens)
                return nn.Dense(P.shape[1], use_bias=False, param_dtype=P.dtype, name="head")(
                    h.astype(jnp.float32).mean(axis=1)
                )

        params = {"params": {"embed": {"embedding": W}, "head": {"kernel": P}}}
        logits = lambda p: cast(jax.Array, Classifier().apply(p, tokens))  # noqa: E731
        grads = jax.grad(lambda p: xent(logits(p), labels))(params)["params"]
        return grads["embed"]["embedding"], grads["head"]["kernel"]

    def haiku_step(lookup_style: str) -> Callable[..., Any]:
        def step(W: jax.Array, P: jax.Array, tokens: jax.Array, labels: jax.Array) -> Any:
            with IMPORTING:
                import haiku as hk

            def classify(tokens: jax.Array) -> jax.Array:
                h = hk.Embed(W.shape[0], W.shape[1], lookup_style=lookup_style)(tokens)
                return hk.Linear(P.shape[1], with_bias=False)(h.astype(jnp.float32).mean(axis=1))

            model: Any = hk.without_apply_rng(hk.transform(classify))
            params = {"embed": {"embeddings": W}, "linear": {"w": P}}
            grads = jax.grad(lambda p: xent(model.apply(p, tokens), labels))(params)
            return grads["embed"]["embeddings"], grads["linear"]["w"]

        return step

    steps = {
        "flax_nnx": nnx_step,
        "flax_linen": linen_step,
        "haiku": haiku_step("ARRAY_INDEX"),
        "haiku_onehot": haiku_step("ONE_HOT"),
    }
    return steps[library]


# Sharded as pods run it: the mesh is set while these are traced, so a bare PartitionSpec names its axes.


def vocab_parallel_megatron(W: jax.Array, x: jax.Array) -> jax.Array:
    """Megatron's vocabulary-parallel embedding by hand: each 'model' shard looks up the indices in its
    row range, zeroes the others, and one all-reduce (``psum``) over 'model' sums the partial rows."""

    def local(rows: jax.Array, ids: jax.Array) -> jax.Array:
        start = lax.axis_index("model") * rows.shape[0]
        mine = (ids >= start) & (ids < start + rows.shape[0])
        found = jnp.take(rows, jnp.where(mine, ids - start, 0), axis=0)
        return lax.psum(jnp.where(mine[..., None], found, 0), "model")

    spec = jax.sharding.PartitionSpec
    return jax.shard_map(local, in_specs=(spec("model", None), spec("data")), out_specs=spec("data", None))(
        W, x
    )


def _gather_table(W: jax.Array) -> jax.Array:
    return lax.with_sharding_constraint(W, jax.sharding.PartitionSpec())


def fsdp_take(W: jax.Array, x: jax.Array) -> jax.Array:
    """FSDP: rows stored on 'fsdp', all-gathered, then ``jnp.take`` on the batch shard of each chip."""
    return jnp.take(_gather_table(W), x, axis=0)


def fsdp_tied(W: jax.Array, x: jax.Array) -> jax.Array:
    """FSDP with tied input/output embeddings: one all-gathered table serves the lookup and the logits."""
    table = _gather_table(W)
    return jnp.take(table, x, axis=0) @ table.T


def _backward(forward: Callable[[jax.Array, jax.Array], jax.Array]) -> Callable[..., jax.Array]:
    def grad_wrt_table(W: jax.Array, x: jax.Array, ct: jax.Array) -> jax.Array:
        _, pullback = jax.vjp(lambda table: forward(table, x), W)
        return pullback(ct)[0]

    grad_wrt_table.__name__ = f"grad_{forward.__name__}"
    return grad_wrt_table


_TRAIN_CLASSES = 16


# At the sizes where libtpu moves gathers and scatters to the SparseCores of v5p and v6e.


@dataclasses.dataclass(frozen=True)
class _Fixed:
    """Arguments of fixed shapes and dtypes, and the table they look up; compiled only, never drawn."""

    shapes: tuple[tuple[tuple[int, ...], str], ...]
    table: tuple[tuple[int, ...], str]
    lookups: int

    def specs(self, config: Config) -> tuple[jax.ShapeDtypeStruct, ...]:
        return tuple(jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in self.shapes)

    def partition_specs(self, config: Config) -> tuple[tuple[str | None, ...], ...]:
        return tuple(() for _ in self.shapes)

    def param_leaves(self, config: Config) -> int:
        return 0

    def facts(self, config: Config) -> dict[str, int]:
        (rows, *row), dtype = self.table
        row_bytes = math.prod(row) * jnp.dtype(dtype).itemsize
        return {
            "table_bytes": rows * row_bytes,
            "row_bytes": row_bytes,
            "vocab": rows,
            "lookups": self.lookups,
        }

    def draw(self, config: Config, distribution: Distribution, seed: int) -> tuple[np.ndarray, ...]:
        raise InvariantsError(f"{config.id}: compiled ahead of time only, never run")


def scatter_min(t: jax.Array, i: jax.Array, s: jax.Array) -> jax.Array:
    return t.at[i].min(s)


_BAG = 8  # indices per bag


def embedding_bag(W: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.take(W, x.reshape(-1, _BAG), axis=0).sum(axis=1)


_EXPERTS, _TOP_K, _MODEL, _HIDDEN = 64, 8, 2048, 1024


def moe_decode_step(h: jax.Array, router: jax.Array, w_in: jax.Array, w_out: jax.Array) -> jax.Array:
    weights, chosen = lax.top_k((h @ router)[0], _TOP_K)
    up = jnp.einsum("bd,kdf->kf", h, w_in[chosen])
    down = jnp.einsum("kf,kfd->kd", jax.nn.silu(up), w_out[chosen])
    return (jax.nn.softmax(weights)[:, None] * down).sum(0, keepdims=True)


def _add_offload_programs(programs: dict[str, Program]) -> None:
    table, ids, bags = ((1_000_000, 128), "float32"), ((131_072,), "int32"), (131_072 // _BAG, 128)
    updated, updates = ((5_600_000,), "float32"), (((1_300_000,), "int32"), ((1_300_000,), "float32"))
    w_in, w_out = ((_EXPERTS, _MODEL, _HIDDEN), "bfloat16"), ((_EXPERTS, _HIDDEN, _MODEL), "bfloat16")
    moe = (((1, _MODEL), "bfloat16"), ((_MODEL, _EXPERTS), "bfloat16"), w_in, w_out)
    scatter_doc = "t.at[i].min(s): 1.3M updates into a 5.6M-element table"
    bag_doc = f"d/dW of jnp.take(W, x.reshape(-1, {_BAG}), axis=0).sum(1): an embedding bag's gradient"
    moe_doc = f"batch-1 MoE decode: top-{_TOP_K} of {_EXPERTS} experts, their bf16 weights gathered"
    offload: list[tuple[Callable[..., jax.Array], ProgramKind, str, _Fixed]] = [
        (scatter_min, "forward", scatter_doc, _Fixed((updated, *updates), updated, 1_300_000)),
        (
            _backward(embedding_bag),
            "backward",
            bag_doc,
            _Fixed((table, ids, (bags, "float32")), table, 131_072),
        ),
        (moe_decode_step, "forward", moe_doc, _Fixed(moe, w_in, _TOP_K)),
    ]
    for fn, kind, doc, inputs in offload:
        name = fn.__name__
        programs[name] = Program(name, kind, fn, doc, OFFLOAD_CONFIGS, _SPARSECORE, inputs=inputs)


def _train_step(lookup: Callable[[jax.Array, jax.Array], jax.Array]) -> Callable[..., Any]:
    def loss(W: jax.Array, P: jax.Array, tokens: jax.Array, labels: jax.Array) -> jax.Array:
        pooled = lookup(W, tokens).astype(jnp.float32).mean(axis=1)
        logits = pooled @ P.astype(jnp.float32)
        logp = jax.nn.log_softmax(logits)
        return -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()

    def step(W: jax.Array, P: jax.Array, tokens: jax.Array, labels: jax.Array) -> Any:
        return jax.grad(loss, argnums=(0, 1))(W, P, tokens, labels)

    return step


_CORE = frozenset({"core"})
_SPARSECORE = frozenset({"sparsecore"})
_FIXED_LAYOUTS = {
    "rows_batch": Layout((8,), ("x",), ("x", None), ("x",)),
    "mesh2d": Layout((2, 4), ("data", "model"), ("model", None), ("data",)),
    "columns": Layout((8,), ("x",), (None, "x"), (None,)),
}
# Pod layouts: 'model' is 4 wide (tensor parallelism within a host's chips), 'data' takes the rest.
_VOCAB_PARALLEL = Layout((-1, 4), ("data", "model"), ("model", None), ("data",), ("data", None), pod=True)
_VOCAB_PARALLEL_TIED = dataclasses.replace(_VOCAB_PARALLEL, output=("data", "model"))
_FSDP = Layout((-1,), ("fsdp",), ("fsdp", None), ("fsdp",), ("fsdp", None), pod=True)


def _catalog() -> dict[str, Program]:
    forwards: list[tuple[Callable[..., jax.Array], str, tuple[str, ...], frozenset[str]]] = [
        (naive, "W[x]", ALL_CONFIGS + _LLM_FLAT, _CORE),
        # At the offload size: the large gather, and its gradient the large scatter-add (v5p and v6e only).
        (take, "jnp.take(W, x, axis=0) (mode fill)", ALL_CONFIGS + _LLM_FLAT + OFFLOAD_CONFIGS, _CORE),
        (take_clip, "jnp.take(..., mode='clip')", (SEED.id,), frozenset()),
        (take_wrap, "jnp.take(..., mode='wrap')", (SEED.id,), frozenset()),
        (at_get_promise, "W.at[x].get(mode='promise_in_bounds')", (SEED.id,), frozenset()),
        (at_get_clip, "W.at[x].get(mode='clip')", (SEED.id,), frozenset()),
        (at_get_fill, "W.at[x].get(mode='fill', fill_value=0)", (SEED.id,), frozenset()),
        (vmap_naive, "vmap(lambda i: W[i])(x)", ALL_CONFIGS + LLM_CONFIGS, _CORE),
        (vmap_take, "vmap(lambda i: jnp.take(W, i, axis=0))(x)", ALL_CONFIGS + LLM_CONFIGS, _CORE),
        (eqx_embedding, "vmap(eqx.nn.Embedding(weight=W))(x)", ALL_CONFIGS + LLM_CONFIGS, _CORE),
        # At LLM scale 1-D only: the [4, 2048] one-hot matmul alone takes 5 s to compile for TPU.
        (onehot_matmul, "one_hot(x, V) @ W", (SEED.id, "bf16", *_LLM_FLAT), frozenset({"no-runtime-large"})),
        (lax_gather, "lax.gather(W, x[..., None], row dnums, PROMISE_IN_BOUNDS)", (SEED.id,), frozenset()),
    ]
    programs: dict[str, Program] = {}
    for fn, doc, configs, tags in forwards:
        programs[fn.__name__] = Program(fn.__name__, "forward", fn, doc, configs, tags)
    for name in ("naive", "take", "take_clip", "vmap_naive", "vmap_take", "eqx_embedding", "onehot_matmul"):
        # At LLM scale the gradients of the core lookups only: one_hot(x, V)^T @ ct is a 2 GiB one-hot.
        llm = () if name == "onehot_matmul" else LLM_CONFIGS
        configs = tuple(c for c in programs[name].configs if c not in LLM_CONFIGS or c in llm)
        _add_with_gradient(programs, programs[name], "backward", configs=configs)
    for name, lookup in (("train_eqx_embedding", eqx_embedding), ("train_take", take)):
        doc = f"embed [B,S] with {lookup.__name__}, mean-pool, project, cross-entropy, grad"
        programs[name] = Program(name, "train", _train_step(lookup), doc, (SEED.id, "bf16"), _CORE)
    for (layout_name, layout), fn in itertools.product(_FIXED_LAYOUTS.items(), (naive, take, vmap_naive)):
        name = f"sharded_{layout_name}_{fn.__name__}"
        doc = f"{fn.__name__} with table {layout.table} and indices {layout.indices} on mesh {layout.axes}"
        programs[name] = Program(name, "sharded", fn, doc, layout=layout)
    _add_libraries(programs)
    _add_pod_programs(programs)
    _add_offload_programs(programs)
    return programs


def _add_pod_programs(programs: dict[str, Program]) -> None:
    """Vocabulary-parallel, FSDP and tied; each gradient sharded like the table, as an optimizer keeps it."""
    pods: list[tuple[str, Callable[..., jax.Array], Layout, bool, str]] = [
        ("vocab_parallel_take", take, _VOCAB_PARALLEL, False, "rows on 'model', batch on 'data': take"),
        ("vocab_parallel_megatron", vocab_parallel_megatron, _VOCAB_PARALLEL, False, "shard_map + psum"),
        ("vocab_parallel_tied", tied_take, _VOCAB_PARALLEL_TIED, True, "take(W, x) @ W.T, rows on 'model'"),
        ("fsdp_take", fsdp_take, _FSDP, False, "rows and batch on 'fsdp', table all-gathered, take"),
        ("fsdp_tied", fsdp_tied, _FSDP, True, "FSDP, tied: take(W, x) @ W.T on the all-gathered table"),
    ]
    for name, fn, layout, logits, doc in pods:
        program = Program(name, "sharded", fn, doc, layout=layout, logits=logits)
        if name == "vocab_parallel_megatron":
            programs[name] = program  # its gradient is GSPMD's: the forward is what Megatron writes by hand
            continue
        grad = dataclasses.replace(layout, output=layout.table, cotangent=layout.output)
        grad_doc = f"d/dW of {doc}; the gradient sharded like the table"
        _add_with_gradient(programs, program, "sharded_grad", grad_doc, layout=grad)


def _add_libraries(programs: dict[str, Program]) -> None:
    """flax and haiku modules, each with its gradient and a training step; tied embeddings and gradients."""
    libraries: list[tuple[Callable[..., jax.Array], str, str, tuple[str, ...]]] = [
        (flax_nnx_embed, "flax_nnx", "flax.nnx.Embed(V, D)(x)", ("flax",)),
        (flax_linen_embed, "flax_linen", "flax.linen.Embed(V, D).apply(params, x)", ("flax",)),
        (haiku_embed, "haiku", "haiku.Embed(V, D)(x) (lookup_style ARRAY_INDEX)", ("haiku",)),
        (haiku_embed_onehot, "haiku_onehot", "haiku.Embed(V, D, lookup_style='ONE_HOT')(x)", ("haiku",)),
    ]
    for fn, library, doc, requires in libraries:
        name, step = fn.__name__, _library_train_step(library)
        _add_with_gradient(programs, Program(name, "forward", fn, doc, requires=requires), "backward")
        step_doc = (
            f"the train_take step as a {library} model: {doc}, mean-pool, dense head, cross-entropy, grad"
        )
        programs[f"train_{name}"] = Program(f"train_{name}", "train", step, step_doc, requires=requires)
    tied: list[tuple[Callable[..., jax.Array], str, tuple[str, ...]]] = [
        (tied_take, "jnp.take(W, x, axis=0) @ W.T", ()),
        (flax_nnx_embed_attend, "embed = flax.nnx.Embed(V, D); embed.attend(embed(x))", ("flax",)),
    ]
    for fn, doc, requires in tied:
        program = Program(fn.__name__, "tied", fn, doc, requires=requires, logits=True)
        grad_doc = f"d/dW of {doc}: the lookup's scatter-add plus the projection's matmul"
        _add_with_gradient(programs, program, "tied_grad", grad_doc)


def _add_with_gradient(
    programs: dict[str, Program], program: Program, kind: ProgramKind, doc: str | None = None, **grad: Any
) -> None:
    """``program`` and its gradient ``grad_NAME``, with ``grad``'s fields."""
    programs[program.name] = program
    name = f"grad_{program.name}"
    programs[name] = dataclasses.replace(
        program, name=name, kind=kind, fn=_backward(program.fn), doc=doc or f"d/dW of {program.doc}", **grad
    )


CATALOG: Mapping[str, Program] = _catalog()


def select_configs(value: str | None) -> frozenset[str]:
    """The configurations ``--configs`` names (ids or fnmatch patterns). Not given: all but the SparseCore
    offload sizes, which compile for minutes."""
    if value is None:
        return frozenset(CONFIGS) - frozenset(OFFLOAD_CONFIGS)
    chosen: set[str] = set()
    for sel in selectors(value, "--configs", "name configurations, or leave the option out for all"):
        matched = [c for c in CONFIGS if fnmatch.fnmatchcase(c, sel)]
        if not matched:
            raise InvariantsError(
                f"--configs: unknown configuration {sel!r}{did_you_mean(sel, CONFIGS, n=2)}; "
                f"known: {', '.join(CONFIGS)}"
            )
        chosen.update(matched)
    return frozenset(chosen)
