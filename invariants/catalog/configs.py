"""The configurations programs are compiled in: table dtype and size, index dtype and rank (no JAX).

A configuration's ``table``, ``indices``, ``output`` and ``logits`` are ``jax.ShapeDtypeStruct``s, made
when asked for; everything else (its id, sizes, which configurations exist) is plain data, so that the
stages that only name configurations (targets, selection, specs) start without JAX.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

from .._errors import InvariantsError, did_you_mean

if TYPE_CHECKING:
    import jax


def _struct(shape: tuple[int, ...], dtype: str) -> jax.ShapeDtypeStruct:
    import jax  # a NO_JAX module: JAX only when a program's arguments are built
    import jax.numpy as jnp

    return jax.ShapeDtypeStruct(shape, jnp.dtype(dtype))


# Index distributions: they change what a run measures (timing, correctness), never what compiles, so they
# are not part of a configuration.
Distribution = Literal["uniform", "zipf", "equal"]
DISTRIBUTIONS: tuple[Distribution, ...] = ("uniform", "zipf", "equal")
# numpy-style names (jnp.dtype takes them): JAX is imported only when a ShapeDtypeStruct is made.
_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "i32": "int32", "i8": "int8"}
# (vocabulary, embedding width) per size. "llm" is Llama-3's vocabulary and model width: compiled ahead of
# time only (a 1 GiB bf16 table), to read what the TPU and GPU compilers make of a real model's lookup.
# "offload" is a table and batch at which libtpu moves gathers and scatters to the SparseCores of v5p and
# v6e (tests/data/hlo/sparsecore/): compiled ahead of time only, on those chips.
_SIZES = {"small": (8192, 32), "large": (50000, 512), "llm": (128256, 4096), "offload": (1_000_000, 128)}
# int8 indices address at most 128 rows, and `W[x]` adds V to wrap negative indices in the index dtype:
# V=128 overflows int8 (pinned by a correctness test), so the int8 configuration uses the largest V that fits.
_I8_VOCAB = 127
_INDEX_SHAPES = {"1d": (16384,), "2d": (64, 256)}
# An LLM batch: 8192 tokens, flat or as [batch 4, sequence 2048].
_LLM_INDEX_SHAPES = {"1d": (8192,), "2d": (4, 2048)}
_OFFLOAD_INDEX_SHAPE = (131072,)


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything about the inputs that can change the compiled structure.

    ``id`` is the stable short name used in test ids and snapshot file names: the table dtype, then every
    field that differs from the seed's setting (small table, int32 indices, 1-D indices).
    """

    table_dtype: Literal["f32", "bf16", "f16"] = "f32"
    size: Literal["small", "large", "llm", "offload"] = "small"
    index_dtype: Literal["i32", "i8"] = "i32"
    index_rank: Literal["1d", "2d"] = "1d"

    @property
    def id(self) -> str:
        parts: list[str] = [self.table_dtype]
        if self.size != "small":
            parts.append(self.size)
        if self.index_dtype != "i32":
            parts.append(self.index_dtype)
        if self.index_rank != "1d":
            parts.append(self.index_rank)
        return "-".join(parts)

    @property
    def vocab(self) -> int:
        return _I8_VOCAB if self.index_dtype == "i8" else _SIZES[self.size][0]

    @property
    def width(self) -> int:
        return _SIZES[self.size][1]

    @property
    def index_shape(self) -> tuple[int, ...]:
        if self.size == "offload":
            return _OFFLOAD_INDEX_SHAPE
        return (_LLM_INDEX_SHAPES if self.size == "llm" else _INDEX_SHAPES)[self.index_rank]

    @property
    def compile_only(self) -> bool:
        """Never run on a host: only targets listing it in ``extra_configs`` compile it; nothing times it."""
        return self.size in ("llm", "offload")

    @property
    def table(self) -> jax.ShapeDtypeStruct:
        return _struct((self.vocab, self.width), _DTYPES[self.table_dtype])

    @property
    def indices(self) -> jax.ShapeDtypeStruct:
        return _struct(self.index_shape, _DTYPES[self.index_dtype])

    @property
    def output(self) -> jax.ShapeDtypeStruct:
        return _struct((*self.index_shape, self.width), _DTYPES[self.table_dtype])

    @property
    def logits(self) -> jax.ShapeDtypeStruct:
        """The output of a tied program: one score per row of the table for every index."""
        return _struct((*self.index_shape, self.vocab), _DTYPES[self.table_dtype])


SEED = Config()  # the seed's setting: f32[8192,32] table, s32[16384] indices
CONFIGS: dict[str, Config] = {
    c.id: c
    for c in (
        SEED,
        Config(table_dtype="bf16"),
        Config(size="large"),
        Config(index_dtype="i8"),
        Config(index_rank="2d"),
        Config(table_dtype="bf16", size="llm"),
        Config(table_dtype="bf16", size="llm", index_rank="2d"),
        Config(table_dtype="f16"),
        Config(size="offload"),
    )
}
# Configurations the catalog does not compile: there for a project's programs (an f16 model names its
# parameters' dtype so in its snapshots and items).
PROJECT_ONLY = ("f16",)
# Programs that every configuration is compiled for; the rest use the seed's setting only.
ALL_CONFIGS = tuple(c for c, config in CONFIGS.items() if not config.compile_only and c not in PROJECT_ONLY)
# Llama-3 scale, ahead of time only: the core lookups, their gradients and the one-hot matmul (1-D).
LLM_CONFIGS = tuple(c for c, config in CONFIGS.items() if config.size == "llm")
# The SparseCore offload sizes, compiled by the targets of chips that have SparseCores.
OFFLOAD_CONFIGS = tuple(c for c, config in CONFIGS.items() if config.size == "offload")
# Every configuration compiled only where a target lists it in its extra_configs.
COMPILE_ONLY = LLM_CONFIGS + OFFLOAD_CONFIGS


def get_config(config_id: str) -> Config:
    try:
        return CONFIGS[config_id]
    except KeyError:
        raise InvariantsError(
            f"{config_id}: unknown config{did_you_mean(config_id, CONFIGS, n=3)}; known: "
            + ", ".join(sorted(CONFIGS))
        ) from None
