"""Record the optimized-HLO fixtures in tests/data/hlo/ from real compiles.

Usage::

    python scripts/record_hlo_fixtures.py [--out tests/data/hlo] [--no-tpu]

Every program uses W f32[8192,32], x s32[16384] and, for the backward pass, a cotangent f32[16384,32];
backward = ``jax.vjp(lambda W: f(W, x), W)[1](ct)[0]`` jitted over (W, x, ct).

What is written depends on the installed jax:

* jax >= 0.5 (the pinned 0.10.2): CPU forward/backward as ``cpu_*.txt`` and, when libtpu is installed,
  TPU ahead-of-time compiles for v5e as ``tpu_*.txt`` (no TPU needed: libtpu compiles on a CPU host).
* older jax (0.4.30 in a throwaway env): the CPU programs as ``jax0430_cpu_*.txt``.

Each file is ``compiled.as_text()`` verbatim. The two ``tpu_seed_*.txt`` files are not recorded here: they
are quoted verbatim from the seed report (see tests/data/hlo/README.md).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import jaxlib

V, D, N = 8192, 32, 16384


def fwd_index(w: Any, x: Any) -> Any:
    return w[x]


def fwd_take(w: Any, x: Any) -> Any:
    return jnp.take(w, x, axis=0)


def fwd_vmap_index(w: Any, x: Any) -> Any:
    # The equinox Embedding pattern: a scalar index, vmapped over the batch.
    return jax.vmap(lambda i: w[i])(x)


def backward(f: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    def bwd(w: Any, x: Any, ct: Any) -> Any:
        return jax.vjp(lambda w_: f(w_, x), w)[1](ct)[0]

    return bwd


def _old_jax() -> bool:
    major, minor = (int(p) for p in jax.__version__.split(".")[:2])
    return (major, minor) < (0, 5)


def _cpu_programs() -> dict[str, tuple[Callable[..., Any], bool]]:
    """name -> (function, takes a cotangent)."""
    return {
        "fwd_index": (fwd_index, False),
        "fwd_take": (fwd_take, False),
        "bwd_index": (backward(fwd_index), True),
    }


def _args(sharding: Any = None, table_sharding: Any = None) -> tuple[Any, Any, Any]:
    def sds(shape: tuple[int, ...], dtype: Any, s: Any) -> Any:
        if s is None:
            return jax.ShapeDtypeStruct(shape, dtype)
        return jax.ShapeDtypeStruct(shape, dtype, sharding=s)

    w = sds((V, D), jnp.float32, table_sharding if table_sharding is not None else sharding)
    x = sds((N,), jnp.int32, sharding)
    ct = sds((N, D), jnp.float32, sharding)
    return w, x, ct


def record_cpu(out: pathlib.Path, prefix: str) -> None:
    w, x, ct = _args()
    for name, (fn, with_ct) in _cpu_programs().items():
        args = (w, x, ct) if with_ct else (w, x)
        text = jax.jit(fn).lower(*args).compile().as_text()
        _write(out / f"{prefix}cpu_{name}.txt", text)


def record_tpu(out: pathlib.Path) -> None:
    from jax.experimental import topologies
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    topo = topologies.get_topology_desc(
        topology_name="v5e:1x1", platform="tpu", chip_config_name="default", chips_per_host_bounds=(1, 1, 1)
    )
    mesh = topologies.make_mesh(topo, (1,), ("x",))
    rep = NamedSharding(mesh, P())
    w, x, ct = _args(rep)
    programs: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
        "tpu_v5e_fwd_take": (fwd_take, (w, x)),
        "tpu_v5e_bwd_vmap_index": (backward(fwd_vmap_index), (w, x, ct)),
    }
    for name, (fn, args) in programs.items():
        _write(out / f"{name}.txt", jax.jit(fn).lower(*args).compile().as_text())

    # Four chips, table rows sharded over them, indices replicated: the partitioner must move data.
    topo4 = topologies.get_topology_desc(topology_name="v5e:2x2", platform="tpu", chip_config_name="default")
    mesh4 = topologies.make_mesh(topo4, (4,), ("x",))
    rows = NamedSharding(mesh4, P("x", None))
    w4, x4, _ = _args(NamedSharding(mesh4, P()), table_sharding=rows)
    text = jax.jit(fwd_index).lower(w4, x4).compile().as_text()
    _write(out / "tpu_v5e_2x2_sharded_fwd_index.txt", text)


def _write(path: pathlib.Path, text: str | None) -> None:
    if text is None:  # as_text() is typed Optional; a compile that succeeded always has text
        raise RuntimeError(f"{path.name}: the compiler returned no HLO text")
    path.write_text(text if text.endswith("\n") else text + "\n")
    print(f"wrote {path} ({len(text.splitlines())} lines)")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("tests/data/hlo"))
    parser.add_argument("--no-tpu", action="store_true", help="skip the TPU ahead-of-time compiles")
    opts = parser.parse_args(argv)
    opts.out.mkdir(parents=True, exist_ok=True)
    print(f"jax {jax.__version__}, jaxlib {jaxlib.__version__}")
    if _old_jax():
        record_cpu(opts.out, prefix="jax0430_")
        return 0
    record_cpu(opts.out, prefix="")
    if not opts.no_tpu:
        record_tpu(opts.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
