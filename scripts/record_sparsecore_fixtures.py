"""Record the SparseCore HLO fixtures in tests/data/hlo/sparsecore/ from real ahead-of-time compiles.

Usage::

    python scripts/record_sparsecore_fixtures.py [--out tests/data/hlo/sparsecore] [--only NAME ...]

Each program is compiled for TPU v6e (``v6e:1x1``) and v5p (``v5p:1x1x1``, megacore) with libtpu's default
flags and with the gather-offload flags of jax#40553 in ``LIBTPU_INIT_ARGS``. libtpu reads that variable once,
when it starts, so every compile runs in a child process of its own and this process never sets it.

The programs, at the sizes where libtpu moves work to the SparseCores:

* ``scatter_min``: ``t.at[i].min(s)``, t f32[5600000], i s32[1300000], s f32[1300000] (pytorch/xla#8720 in its
  JAX form);
* ``scatter_add``: ``t.at[i].add(s)``, the same sizes;
* ``gather``: ``jnp.take(table, ids, axis=0)``, table f32[1000000,128], ids s32[131072];
* ``bag_grad``: the gradient with respect to the table of ``jnp.take(table, ids.reshape(-1, 8),
  axis=0).sum(1)`` (bags of 8 rows), the same table and ids;
* ``moe_decode``: a batch-1 mixture-of-experts decode step: the router's top-8 of 64 experts, and each chosen
  expert's weights gathered (w_in bf16[64,2048,1024], w_out bf16[64,1024,2048]).

Each file is ``compiled.as_text()`` verbatim; ``compile_seconds.json`` beside them records how long each
compile took (one process, this host, not a benchmark).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Any

OFFLOAD_FLAGS = (
    "--xla_tpu_offload_gather_to_sparsecore=true --xla_tpu_offload_all_supported_gathers_to_sparsecore=true"
)
TARGETS = {"v6e": ("v6e:1x1", "default"), "v5p": ("v5p:1x1x1", "megacore")}
PROGRAMS = ("scatter_min", "scatter_add", "gather", "moe_decode", "bag_grad")


def _program(name: str, sds: Any) -> tuple[Any, tuple[Any, ...]]:
    import jax
    import jax.numpy as jnp

    if name in ("scatter_min", "scatter_add"):
        args = (sds((5_600_000,), jnp.float32), sds((1_300_000,), jnp.int32), sds((1_300_000,), jnp.float32))
        if name == "scatter_min":
            return (lambda t, i, s: t.at[i].min(s)), args
        return (lambda t, i, s: t.at[i].add(s)), args
    if name == "bag_grad":  # bags of 8 rows summed; the gradient with respect to the table
        table, ids = sds((1_000_000, 128), jnp.float32), sds((131_072,), jnp.int32)

        def bag_grad(w: Any, x: Any, ct: Any) -> Any:
            _, pullback = jax.vjp(lambda t: jnp.take(t, x.reshape(-1, 8), axis=0).sum(axis=1), w)
            return pullback(ct)[0]

        return bag_grad, (table, ids, sds((131_072 // 8, 128), jnp.float32))
    if name == "gather":
        return (lambda w, x: jnp.take(w, x, axis=0)), (
            sds((1_000_000, 128), jnp.float32),
            sds((131_072,), jnp.int32),
        )
    experts, k, d, f = 64, 8, 2048, 1024

    def moe_decode(h: Any, router: Any, w_in: Any, w_out: Any) -> Any:
        logits = h @ router  # [1, experts]
        weights, chosen = jax.lax.top_k(logits[0], k)
        up = jnp.einsum("bd,kdf->kf", h, w_in[chosen])  # the chosen experts' weights, gathered
        down = jnp.einsum("kf,kfd->kd", jax.nn.silu(up), w_out[chosen])
        return (jax.nn.softmax(weights)[:, None] * down).sum(0, keepdims=True)

    bf16 = jnp.bfloat16
    return moe_decode, (
        sds((1, d), bf16),
        sds((d, experts), bf16),
        sds((experts, d, f), bf16),
        sds((experts, f, d), bf16),
    )


def child(program: str, chip: str) -> None:
    """Compile one program for one chip and print its HLO; the parent chose LIBTPU_INIT_ARGS."""
    import jax
    from jax.experimental import topologies
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    topology, chip_config = TARGETS[chip]
    topo = topologies.get_topology_desc(
        topology_name=topology, platform="tpu", chip_config_name=chip_config, chips_per_host_bounds=(1, 1, 1)
    )
    rep = NamedSharding(topologies.make_mesh(topo, (1,), ("x",)), P())
    fn, args = _program(program, lambda shape, dtype: jax.ShapeDtypeStruct(shape, dtype, sharding=rep))
    start = time.perf_counter()
    text = jax.jit(fn).lower(*args).compile().as_text()
    seconds = time.perf_counter() - start
    sys.stdout.write(json.dumps({"seconds": round(seconds, 1), "text": text}))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("tests/data/hlo/sparsecore"))
    parser.add_argument("--only", nargs="*", default=None, help="file stems to record, e.g. v6e_scatter_min")
    parser.add_argument("--child", nargs=2, metavar=("PROGRAM", "CHIP"), help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    if opts.child:
        child(*opts.child)
        return 0
    opts.out.mkdir(parents=True, exist_ok=True)
    times_path = opts.out / "compile_seconds.json"
    times = json.loads(times_path.read_text()) if times_path.exists() else {}
    for chip in TARGETS:
        for program in PROGRAMS:
            for flags in ("", OFFLOAD_FLAGS):
                stem = f"{chip}_{program}" + ("_offload_flags" if flags else "")
                if opts.only is not None and stem not in opts.only:
                    continue
                env = {**os.environ, "LIBTPU_INIT_ARGS": flags}
                done = subprocess.run(
                    [sys.executable, __file__, "--child", program, chip],
                    env=env,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if done.returncode != 0:
                    print(f"{stem}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
                    continue
                result = json.loads(done.stdout)
                text = result["text"]
                (opts.out / f"{stem}.txt").write_text(text if text.endswith("\n") else text + "\n")
                times[stem] = result["seconds"]
                times_path.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")
                print(f"{stem}: {len(text.splitlines())} lines, {result['seconds']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
