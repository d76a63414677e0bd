"""The configurations programs are compiled in: table dtype and size, index dtype and rank. Only the
``jax.ShapeDtypeStruct`` properties import JAX, so the stages that only name configurations start without it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from .._errors import InvariantsError, did_you_mean

if TYPE_CHECKING:
    import jax


def _struct(shape: tuple[int, ...], dtype: str) -> jax.ShapeDtypeStruct:
    import jax  # a NO_JAX module: JAX only when a program's arguments are built
    import jax.numpy as jnp

    return jax.ShapeDtypeStruct(shape, jnp.dtype(dtype))


# Index distributions change what a run measures, never what compiles: not part of a configuration.
Distribution = Literal["uniform", "zipf", "equal"]
DISTRIBUTIONS: tuple[Distribution, ...] = ("uniform", "zipf", "equal")
_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "i32": "int32", "i8": "int8"}
# (vocabulary, width). "llm" is Llama-3's; "offload" a size at which libtpu moves gathers and scatters to the
# SparseCores of v5p and v6e. Both are compiled ahead of time only.
_SIZES = {"small": (8192, 32), "large": (50000, 512), "llm": (128256, 4096), "offload": (1_000_000, 128)}
# `W[x]` adds V to wrap negative indices in the index dtype: V=128 overflows int8.
_I8_VOCAB = 127
_INDEX_SHAPES = {"1d": (16384,), "2d": (64, 256)}
_LLM_INDEX_SHAPES = {"1d": (8192,), "2d": (4, 2048)}
_OFFLOAD_INDEX_SHAPE = (131072,)


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything about the inputs that can change the compiled structure."""

    table_dtype: Literal["f32", "bf16", "f16"] = "f32"
    size: Literal["small", "large", "llm", "offload"] = "small"
    index_dtype: Literal["i32", "i8"] = "i32"
    index_rank: Literal["1d", "2d"] = "1d"

    @property
    def id(self) -> str:
        """The name in item ids and snapshot files: the table dtype, then the fields that differ from the
        seed's (the defaults)."""
        values = {f.name: (getattr(self, f.name), f.default) for f in dataclasses.fields(self)}
        return "-".join(v for name, (v, seed) in values.items() if v != seed or name == "table_dtype")

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
        """Only targets listing it in ``extra_configs`` compile it; nothing runs it."""
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
# There for a project's programs only (an f16 model names its parameters' dtype so in its snapshots).
PROJECT_ONLY = ("f16",)
ALL_CONFIGS = tuple(c for c, config in CONFIGS.items() if not config.compile_only and c not in PROJECT_ONLY)
LLM_CONFIGS = tuple(c for c, config in CONFIGS.items() if config.size == "llm")
OFFLOAD_CONFIGS = tuple(c for c, config in CONFIGS.items() if config.size == "offload")
COMPILE_ONLY = LLM_CONFIGS + OFFLOAD_CONFIGS


def get_config(config_id: str) -> Config:
    if config_id not in CONFIGS:
        raise InvariantsError(_unknown("config", config_id, CONFIGS))
    return CONFIGS[config_id]


def _unknown(what: str, name: str, known: Iterable[str]) -> str:
    return f"{name}: unknown {what}{did_you_mean(name, known, n=3)}; known: {', '.join(sorted(known))}"
