"""Concrete arguments of a program, for timing and correctness: seeded, the same in every process. What a
program compiles to never depends on these values, only on their shapes and dtypes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from .._errors import InvariantsError
from ..scope.configs import DISTRIBUTIONS, Config, Distribution, _unknown
from .programs import _TRAIN_CLASSES, Program

if TYPE_CHECKING:
    import jax


def make_indices(
    config: Config,
    distribution: Distribution,
    seed: int = 0,
    shape: tuple[int, ...] | None = None,
    dtype: Any = None,
    vocab: int | None = None,
) -> np.ndarray:
    """Indices in ``[0, vocab)`` from ``distribution``: ``zipf`` is token-like, ``equal`` sends every lookup
    to one row (the worst case of a scatter-add). Defaults: the configuration's."""
    rng = np.random.default_rng(seed)
    shape = config.index_shape if shape is None else shape
    vocab = config.vocab if vocab is None else vocab
    if distribution == "uniform":
        idx = rng.integers(0, vocab, size=shape)
    elif distribution == "zipf":
        idx = (rng.zipf(1.2, size=shape) - 1) % vocab
    elif distribution == "equal":
        idx = np.full(shape, vocab // 2)
    else:
        raise InvariantsError(_unknown("distribution", distribution, DISTRIBUTIONS))
    return idx.astype(np.dtype(config.indices.dtype if dtype is None else dtype))


def make_arguments(
    program: Program, config: Config, distribution: Distribution = "uniform", seed: int = 0
) -> tuple[np.ndarray, ...]:
    """Concrete host arguments matching :meth:`Program.argument_specs`, made once and shared, so read-only."""
    arg_specs = program.argument_specs(config)
    need = sum(math.prod(a.shape) * np.dtype(a.dtype).itemsize for a in arg_specs)
    have = available_memory()
    if have is not None and need > have:
        raise InvariantsError(_not_drawn(program, config, arg_specs, f"this machine has {_bytes(have)} free"))
    try:
        if program.inputs is not None:
            return program.inputs.draw(config, distribution, seed)
        specs = tuple((tuple(s.shape), np.dtype(s.dtype)) for s in arg_specs)
        return _arguments(program.kind, specs, config, distribution, seed)
    except MemoryError:  # they fit, but not with the draw's own temporaries
        why = "drawing them ran out of memory"
        raise InvariantsError(_not_drawn(program, config, arg_specs, why)) from None


def available_memory() -> int | None:
    """Bytes this machine can still give (else its physical memory); None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (OSError, ValueError, AttributeError):
        return None


def _not_drawn(program: Program, config: Config, specs: tuple[jax.ShapeDtypeStruct, ...], why: str) -> str:
    sizes = [(math.prod(a.shape) * np.dtype(a.dtype).itemsize, a) for a in specs]
    n, big = max(sizes, key=lambda x: x[0])
    shape = f"{np.dtype(big.dtype).name}[{','.join(map(str, big.shape))}]"
    return (
        f"{program.name} [{config.id}]: its arguments need {_bytes(sum(b for b, _ in sizes))} (the largest "
        f"{shape}, {_bytes(n)}) and {why}: not drawn, so it is neither timed nor run here (its structure "
        "and invariants need no arguments)"
    )


def _bytes(n: int) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:,} B"


_ArgSpecs = tuple[tuple[tuple[int, ...], "np.dtype[Any]"], ...]


@functools.lru_cache(maxsize=64)
def _arguments(
    kind: str, specs: _ArgSpecs, config: Config, distribution: Distribution, seed: int
) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed + 1)
    out = [_uniform(rng, *specs[0]), make_indices(config, distribution, seed, dtype=specs[1][1])]
    if kind in ("backward", "tied_grad"):
        out.append(_uniform(rng, *specs[2]))
    elif kind == "train":
        out[1:] = [
            _uniform(rng, *specs[1]),
            make_indices(dataclasses.replace(config, index_rank="2d"), distribution, seed, dtype=specs[2][1]),
            rng.integers(0, _TRAIN_CLASSES, size=specs[3][0]).astype(np.int32),
        ]
    for a in out:
        a.flags.writeable = False
    return tuple(out)


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    # Uniform on [-1, 1) in float32, in place: a tied program's logit cotangent is half a GiB.
    x = rng.random(shape, dtype=np.float32)
    x *= 2
    x -= 1
    return x.astype(dtype, copy=False)
