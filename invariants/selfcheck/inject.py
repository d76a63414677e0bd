"""A pytest plugin that swaps catalog programs for bad ones, in a self-check child process only.

With ``INVARIANTS_INJECT=NAME=module:function[;...]``, each named catalog program is replaced before any
item compiles by the same :class:`Program` with ``fn`` swapped: the child collects exactly the clean suite's
items, and only what they compile changes. The bad programs live here so that the catalog never carries
them; each keeps its original's signature and looks the way a real regression would."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from .. import _config
from ..plugin.options import PROGRAM_SWAPS

if TYPE_CHECKING:
    from jax import Array

ENV = _config.name("INVARIANTS_INJECT")


def parse_spec(spec: str) -> list[tuple[str, str, str]]:
    """``NAME=module:function;...`` -> ``[(NAME, module, function), ...]``."""
    out = []
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        name, sep, target = part.partition("=")
        module, colon, function = target.partition(":")
        if not (sep and colon and name.strip() and module.strip() and function.strip()):
            raise ValueError(f"{ENV}: {part!r} is not NAME=module:function")
        out.append((name.strip(), module.strip(), function.strip()))
    return out


def swaps(spec: str) -> dict[str, Callable[..., object]]:
    """The functions ``spec`` names, by the catalog program each replaces; ValueError (one line) for bad
    syntax or a function that does not exist."""
    out: dict[str, Callable[..., object]] = {}
    for name, module, function in parse_spec(spec):
        try:
            out[name] = getattr(importlib.import_module(module), function)
        except (ImportError, AttributeError) as err:
            raise ValueError(f"{ENV}: cannot load {module}:{function} ({err})") from None
    return out


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    spec = os.environ.get(ENV, "")
    if not spec:
        return
    try:
        config.stash[PROGRAM_SWAPS] = swaps(spec)
    except ValueError as err:
        raise pytest.UsageError(str(err)) from None


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [
        f"selfcheck injection: {name} <- {fn.__module__}:{fn.__name__}"
        for name, fn in config.stash.get(PROGRAM_SWAPS, {}).items()
    ]


# Each bad program imports JAX inside itself: this module loads before invariants.compile.process sets
# JAX's environment, and they run only once it has.


def take_as_map_loop(W: Array, x: Array) -> Array:
    """``take`` rewritten as the row-at-a-time loop: the seed's pathology."""
    from ..catalog.programs import lax_map_loop

    return lax_map_loop(W, x)


def naive_twice(W: Array, x: Array) -> Array:
    """``W[x]`` computed twice and averaged: same values, double the gather work. The second lookup reads
    the rows reversed, so that XLA cannot merge the two (the CPU pipeline drops an optimization_barrier)."""
    import jax.numpy as jnp

    first = W[x]
    second = jnp.flip(W[jnp.flip(x)], axis=tuple(range(x.ndim)))
    return (first + second) / 2


def _grad_of(forward: Callable[[Array, Array], Array]) -> Callable[..., Array]:
    def grad_wrt_table(W: Array, x: Array, ct: Array) -> Array:
        import jax

        _, pullback = jax.vjp(lambda table: forward(table, x), W)
        return pullback(ct)[0]

    return grad_wrt_table


def grad_take_through_map_loop(W: Array, x: Array, ct: Array) -> Array:
    """The backward of ``take`` differentiated through the row loop: a loop of dynamic-update-slices."""
    from ..catalog.programs import lax_map_loop

    return _grad_of(lax_map_loop)(W, x, ct)


def grad_take_contended(W: Array, x: Array, ct: Array) -> Array:
    """The gradient of ``take`` (same values) whose cost grows with index contention, as an atomics-bound
    GPU scatter's does: one more scatter-add of zeros per 512 repeats of the most repeated row.
    Uniform indices repeat a row a few times (no extra pass); all-equal ones 16384 times (32 passes)."""
    import jax.numpy as jnp
    from jax import lax

    grad = _grad_of(lambda table, ids: jnp.take(table, ids, axis=0))(W, x, ct)
    repeats = jnp.zeros(W.shape[0], jnp.int32).at[x.reshape(-1)].add(1).max()

    def one_more_pass(state: tuple[int, Array]) -> tuple[int, Array]:
        done, acc = state
        return done + 1, acc.at[x].add(ct * 0)

    return lax.while_loop(lambda s: s[0] < repeats // 512, one_more_pass, (0, grad))[1]


def eqx_embedding_as_take(W: Array, x: Array) -> Array:
    """An ``Embedding`` that looks up with ``jnp.take`` (flax's way) instead of ``W[i]`` under vmap."""
    import jax.numpy as jnp

    return jnp.take(W, x, axis=0)


def take_clip_as_fill(W: Array, x: Array) -> Array:
    """``take(mode='clip')`` silently changed to the default fill mode: out-of-bounds rows become NaN."""
    import jax.numpy as jnp

    return jnp.take(W, x, axis=0, mode="fill")
