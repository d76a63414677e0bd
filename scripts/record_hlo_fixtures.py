"""Record the optimized-HLO fixtures in tests/data/hlo/ from real compiles.

Usage::

    python scripts/record_hlo_fixtures.py [--out tests/data/hlo] [--no-tpu] [--no-gpu]

The embedding programs use W f32[8192,32], x s32[16384] and, for the backward pass, a cotangent
f32[16384,32]; backward = ``jax.vjp(lambda W: f(W, x), W)[1](ct)[0]`` jitted over (W, x, ct). The vmapped
segment sum sums each row of d f32[1024,4096] into 2048 segments by seg s32[4096].

What is written depends on the installed jax:

* jax >= 0.5 (the pinned 0.10.2) but not 0.9.1 / 0.9.2: the CPU programs as ``cpu_*.txt``; when libtpu is
  installed, TPU ahead-of-time compiles for v5e as ``tpu_*.txt`` (no TPU needed: libtpu compiles on a CPU
  host); when the CUDA plugin is installed, the segment sum compiled ahead of time for an H100 (from
  invariants/data/h100_sxm.txtpb, no GPU needed) as ``gpu_h100_*.txt``.
* jax 0.9.1 and 0.9.2: only the CPU segment sum, as ``jax091_cpu_*.txt`` / ``jax092_cpu_*.txt``: its scatter
  writes each window contiguously on one side and strided on the other.
* older jax (0.4.30): the CPU embedding programs as ``jax0430_cpu_*.txt``.
* jax 0.9.0 with libtpu: only ``jnp.take`` and the cumulative sums for TPU, as ``jax090_tpu_v5e_*.txt``.

With libtpu, two cumulative sums for v5e as ``tpu_v5e_cumsum_*.txt``: f32[4096,512] down its rows (a
window the depthwise emitter writes in blocks of fewer than 128 rows) and f32[1024,32] (a window along
the lanes).

Another release runs from an environment of its own, e.g. the gate's cached ones (built by
``invariants.releases.environments.ensure_env``)::

    ~/.cache/jax-embedding-invariants/envs/jax-0.9.1/bin/python scripts/record_hlo_fixtures.py

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
ROWS, ROW_LENGTH, SEGMENTS = 1024, 4096, 2048
# The releases on either side of the segment sum's change of scatter window; they record only that program.
SEGMENT_SUM_RELEASES = ("0.9.1", "0.9.2")
# A release before the pin whose TPU compiler writes take's select and the cumulative sums: it records
# only those.
TPU_RELEASES = ("0.9.0",)
CUMSUMS = {"tpu_v5e_cumsum_blocks": (4096, 512), "tpu_v5e_cumsum_lanes": (1024, 32)}


def fwd_index(w: Any, x: Any) -> Any:
    return w[x]


def fwd_take(w: Any, x: Any) -> Any:
    return jnp.take(w, x, axis=0)


def fwd_vmap_index(w: Any, x: Any) -> Any:
    # The equinox Embedding pattern: a scalar index, vmapped over the batch.
    return jax.vmap(lambda i: w[i])(x)


def vmap_segment_sum(d: Any, seg: Any) -> Any:
    return jax.vmap(lambda row: jax.ops.segment_sum(row, seg, num_segments=SEGMENTS))(d)


def backward(f: Callable[[Any, Any], Any]) -> Callable[[Any, Any, Any], Any]:
    def bwd(w: Any, x: Any, ct: Any) -> Any:
        return jax.vjp(lambda w_: f(w_, x), w)[1](ct)[0]

    return bwd


def _old_jax() -> bool:
    major, minor = (int(p) for p in jax.__version__.split(".")[:2])
    return (major, minor) < (0, 5)


def _release_prefix() -> str:
    return "jax" + jax.__version__.replace(".", "") + "_"


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


def _segment_sum_args(sharding: Any = None) -> tuple[Any, Any]:
    kwargs = {} if sharding is None else {"sharding": sharding}
    d = jax.ShapeDtypeStruct((ROWS, ROW_LENGTH), jnp.float32, **kwargs)
    seg = jax.ShapeDtypeStruct((ROW_LENGTH,), jnp.int32, **kwargs)
    return d, seg


def record_cpu(out: pathlib.Path, prefix: str) -> None:
    w, x, ct = _args()
    for name, (fn, with_ct) in _cpu_programs().items():
        args = (w, x, ct) if with_ct else (w, x)
        text = jax.jit(fn).lower(*args).compile().as_text()
        _write(out / f"{prefix}cpu_{name}.txt", text)


def record_cpu_segment_sum(out: pathlib.Path, prefix: str) -> None:
    text = jax.jit(vmap_segment_sum).lower(*_segment_sum_args()).compile().as_text()
    _write(out / f"{prefix}cpu_vmap_segment_sum.txt", text)


def _v5e() -> Any:
    """A replicated sharding on one v5e chip, ahead of time."""
    from jax.experimental import topologies
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    topo = topologies.get_topology_desc(
        topology_name="v5e:1x1", platform="tpu", chip_config_name="default", chips_per_host_bounds=(1, 1, 1)
    )
    return NamedSharding(topologies.make_mesh(topo, (1,), ("x",)), P())


def record_tpu_across_releases(out: pathlib.Path, prefix: str) -> None:
    """The TPU programs recorded for the pin and for TPU_RELEASES alike: take and the cumulative sums."""
    rep = _v5e()
    w, x, _ = _args(rep)
    _write(out / f"{prefix}tpu_v5e_fwd_take.txt", jax.jit(fwd_take).lower(w, x).compile().as_text())
    for name, shape in CUMSUMS.items():
        args = jax.ShapeDtypeStruct(shape, jnp.float32, sharding=rep)
        text = jax.jit(lambda b: jnp.cumsum(b, axis=0)).lower(args).compile().as_text()
        _write(out / f"{prefix}{name}.txt", text)


def record_tpu(out: pathlib.Path) -> None:
    from jax.experimental import topologies
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    rep = _v5e()
    w, x, ct = _args(rep)
    programs: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
        "tpu_v5e_bwd_vmap_index": (backward(fwd_vmap_index), (w, x, ct)),
        "tpu_v5e_vmap_segment_sum": (vmap_segment_sum, _segment_sum_args(rep)),
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


def record_gpu(out: pathlib.Path) -> None:
    from jax.experimental import topologies
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    # The gate's own H100 description (what its gpu-h100 target compiles for).
    config = pathlib.Path(__file__).resolve().parents[1] / "invariants" / "data" / "h100_sxm.txtpb"
    topo = topologies.get_topology_desc(
        topology_name="h100", platform="cuda", target_config=config.read_text(), topology="1x1x1"
    )
    rep = NamedSharding(topologies.make_mesh(topo, (1,), ("x",)), P())
    text = jax.jit(vmap_segment_sum).lower(*_segment_sum_args(rep)).compile().as_text()
    _write(out / "gpu_h100_vmap_segment_sum.txt", text)


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
    parser.add_argument("--no-gpu", action="store_true", help="skip the GPU ahead-of-time compile")
    opts = parser.parse_args(argv)
    opts.out.mkdir(parents=True, exist_ok=True)
    print(f"jax {jax.__version__}, jaxlib {jaxlib.__version__}")
    if _old_jax():
        record_cpu(opts.out, prefix=_release_prefix())
        return 0
    if jax.__version__ in SEGMENT_SUM_RELEASES:
        record_cpu_segment_sum(opts.out, prefix=_release_prefix())
        return 0
    if jax.__version__ in TPU_RELEASES:
        record_tpu_across_releases(opts.out, prefix=_release_prefix())
        return 0
    record_cpu(opts.out, prefix="")
    record_cpu_segment_sum(opts.out, prefix="")
    if not opts.no_tpu:
        record_tpu(opts.out)
        record_tpu_across_releases(opts.out, prefix="")
    if not opts.no_gpu:
        record_gpu(opts.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
