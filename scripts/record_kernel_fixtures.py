"""Record the kernel-code fixtures of tests/data/kernels: real PTX and LLVM IR from two jaxlib releases.

Each release compiles the same embedding programs ahead of time on this CPU host, for three GPUs (A100 sm_80,
L4 sm_89, H100 sm_90, from the target descriptions in invariants/data) and for XLA:CPU, with
``compile(compiler_options={"xla_dump_to": DIR})``. Of each dump it keeps the kernel files (``*.ptx`` for a
GPU, ``*.ir-with-opt.ll`` for the CPU) and the optimized HLO (``*after_optimizations.txt``), under
``tests/data/kernels/jaxlib-<release>/<target>/<program>/``.

Usage (from the repository root)::

    uv venv /tmp/jax0101
    uv pip install --python /tmp/jax0101/bin/python 'jax[cuda12-local]==0.10.1' 'jaxlib==0.10.1' numpy
    JAX_PLATFORMS=cpu .venv/bin/python scripts/record_kernel_fixtures.py \\
        --python 0.10.1=/tmp/jax0101/bin/python --python 0.10.2=.venv/bin/python

``--table`` prints the facts of the recorded fixtures (what tests/data/kernels/README.md shows), read with
this checkout's parsers (``invariants.kernels``).

Each ``--python RELEASE=PATH`` names an interpreter with that jax/jaxlib and the CUDA plugin
(``jax[cuda12-local]``: it compiles for a GPU without one); the script runs itself under each (``--child``)
and checks that it reports that release. The CPU fixtures depend on this host's processor (XLA:CPU compiles
for the host): re-recorded elsewhere they may differ in vector width.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "kernels"
CONFIGS = ROOT / "invariants" / "data"

# target name -> (topology name, target description file); None: XLA:CPU.
TARGETS: dict[str, tuple[str, str] | None] = {
    "gpu-a100": ("a100", "a100_sxm.txtpb"),
    "gpu-l4": ("l4", "l4.txtpb"),
    "gpu-h100": ("h100", "h100_sxm.txtpb"),
    "cpu": None,
}
PROGRAMS = ("take.f32", "grad_take.f32", "grad_take.bf16", "grad_index.f32")
VOCAB, DIM, TOKENS = 8192, 32, 16384


def _keep(name: str, gpu: bool) -> bool:
    if name.endswith("after_optimizations.txt"):
        return True
    return name.endswith(".ptx") if gpu else name.endswith(".ir-with-opt.ll")


def child(out: Path) -> None:
    """Compile every program for every target with the running jax; write the kept files under ``out``."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import topologies
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    def program(name: str):  # -> (function, dtype)
        kind, dtype = name.split(".")
        dt = {"f32": jnp.float32, "bf16": jnp.bfloat16}[dtype]
        if kind == "take":
            return (lambda W, x: jnp.take(W, x, axis=0)), dt
        if kind == "grad_take":
            return jax.grad(lambda W, x: jnp.take(W, x, axis=0).sum()), dt
        if kind == "grad_index":
            return jax.grad(lambda W, x: W[x].sum()), dt
        raise ValueError(name)

    for target, spec in TARGETS.items():
        sharding = None
        if spec is not None:
            topo_name, config = spec
            topo = topologies.get_topology_desc(
                topology_name=topo_name,
                platform="cuda",
                target_config=(CONFIGS / config).read_text(),
                topology="1x1x1",
            )
            mesh = Mesh(np.array(topo.devices[:1]).reshape(1), ("x",))
            sharding = NamedSharding(mesh, PartitionSpec())
        for name in PROGRAMS:
            fn, dt = program(name)
            args = (
                jax.ShapeDtypeStruct((VOCAB, DIM), dt, sharding=sharding),
                jax.ShapeDtypeStruct((TOKENS,), jnp.int32, sharding=sharding),
            )
            dest = out / target / name
            dest.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory() as dump:
                jax.jit(fn).lower(*args).compile(compiler_options={"xla_dump_to": dump})
                kept = 0
                for f in sorted(Path(dump).iterdir()):
                    if f.is_file() and _keep(f.name, spec is not None):
                        shutil.copyfile(f, dest / f.name)
                        kept += 1
            if not kept:
                raise SystemExit(f"{target}/{name}: the dump held no kernel files")
    (out / "VERSION").write_text(f"{jax.__version__} {jax.lib.__version__}\n")


def table() -> str:
    """A Markdown table of every fixture's kernels: atomics, CAS loops, float atomics, vector width."""
    sys.path.insert(0, str(ROOT))
    from invariants.kernels import kernel_files, parse_kernel_code

    rows = [
        "| release | target | program | kernel | atomics | CAS (in loops) | float atomics | vector bits |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for release in sorted(p.name for p in OUT.glob("jaxlib-*")):
        for target in TARGETS:
            for program in PROGRAMS:
                folder = OUT / release / target / program
                names = kernel_files(p.name for p in folder.iterdir())
                facts = parse_kernel_code({n: (folder / n).read_text() for n in names})
                for f in facts:
                    atomics = ", ".join(f"{a} ×{n}" for a, n in f.atomics) or "-"
                    rows.append(
                        f"| {release.removeprefix('jaxlib-')} | {target} | {program} | {f.name} | {atomics} "
                        f"| {f.cas_atomics} ({f.cas_loops}) | {f.float_atomics} | {f.vector_width} |"
                    )
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", action="append", default=[], metavar="RELEASE=PATH")
    ap.add_argument("--table", action="store_true", help="print the recorded fixtures' facts and exit")
    ap.add_argument("--child", metavar="DIR", help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.table:
        print(table())
        return
    if ns.child:
        child(Path(ns.child))
        return
    if not ns.python:
        ap.error("name at least one --python RELEASE=PATH")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    for item in ns.python:
        release, _, python = item.partition("=")
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([python, __file__, "--child", tmp], check=True, env=env)
            got = (Path(tmp) / "VERSION").read_text().split()
            if got != [release, release]:
                raise SystemExit(f"{python}: jax/jaxlib {got}, not {release}")
            dest = OUT / f"jaxlib-{release}"
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(Path(tmp), dest, ignore=shutil.ignore_patterns("VERSION"))
        print(f"jaxlib {release}: {sum(1 for p in dest.rglob('*') if p.is_file())} files in {dest}")


if __name__ == "__main__":
    main()
