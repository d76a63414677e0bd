"""Compile targets: the runtime backend, TPU chips and a GPU ahead of time, and a multi-device CPU.

A target says which devices a program is compiled for, and the scope of the catalog it compiles there
(which programs and configurations follow from it: invariants.catalog.placement).
Ahead-of-time (AOT) targets need no accelerator: libtpu carries the TPU compiler and the CUDA plugin the GPU
compiler, so a CPU host reads the real optimized HLO of those chips.

Adding a target touches this file only.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from .._errors import InvariantsError, did_you_mean
from .._paths import PACKAGE_DIR
from .configs import LLM_CONFIGS, OFFLOAD_CONFIGS
from .select import selectors

if TYPE_CHECKING:
    import jax

Family = Literal["cpu", "tpu", "gpu"]
Mode = Literal["runtime", "aot", "subprocess"]

_GPU_CONFIG_DIR = PACKAGE_DIR / "data"
# A multi-device CPU needs a flag that must be set before JAX starts, so that target compiles in a child
# process and the flag never leaks into the tests that share this process.
HOST_DEVICE_FLAG = "--xla_force_host_platform_device_count=8"


@dataclasses.dataclass(frozen=True)
class Target:
    """One place programs are compiled for.

    ``scope`` says what the catalog compiles on it: ``all`` (every program of one device in every
    configuration it lists), ``core`` (the seed's forms, seed configuration only: enough to see each chip),
    ``sharded``
    (the programs with a fixed mesh layout that fits in ``device_count`` devices, plus the pod layouts
    when ``pods`` is set), ``pod`` (the pod layouts only, on all ``device_count`` chips), or ``extra`` (its
    ``extra_configs`` alone: a chip under other compiler flags, at the sizes the flags are about).
    ``extra_configs`` are compiled on top of the scope for every program that lists them: the
    compile-only LLM-scale configurations, which no scope includes by itself. ``scope_configs`` are
    compiled beside the seed's configuration by a ``core`` target, for the programs in its scope that list
    them. A project's declared program compiles where its spec files aim it, whatever the scope
    (invariants.catalog.placement).

    ``libtpu_init_args``: flags for the TPU compiler, as ``LIBTPU_INIT_ARGS`` gives them (the SparseCore
    offloads, say). libtpu reads that variable once, when it starts, so such a target compiles in a child
    process of its own (:attr:`in_child`); the flags are part of the target, so of the compile cache's key,
    and the snapshot header shows them.
    """

    name: str
    family: Family
    mode: Mode
    scope: Literal["all", "core", "sharded", "pod", "extra"]
    device_count: int = 1
    topology: str | None = None
    chip_config: str = "default"
    enable_hint: str = ""
    skip_configs: tuple[str, ...] = ()
    extra_configs: tuple[str, ...] = ()
    scope_configs: tuple[str, ...] = ()
    pods: bool = False
    libtpu_init_args: str = ""

    @property
    def in_child(self) -> bool:
        """Whether its compiles run in a child process: the host-device flag of a multi-device CPU, or
        libtpu's flags, must be set before the compiler starts, and never leak into this process."""
        return self.mode == "subprocess" or bool(self.libtpu_init_args)

    @property
    def keeps_kernel_code(self) -> bool:
        """Whether a compile for this target keeps its kernel code: GPU targets (PTX) and the CPU runtime
        (LLVM IR). TPU compiles write none (libtpu dumps no LLO), and the 8-device CPU target's sharded
        programs run the same kernels as the CPU runtime's."""
        return self.family == "gpu" or (self.family == "cpu" and self.mode == "runtime")

    def unavailable_reason(self) -> str | None:
        """None when this target can compile here, else one line saying why not and how to enable it."""
        if self.mode == "runtime":
            return None
        if self.mode == "subprocess":
            return None
        if self.family == "tpu" and importlib.util.find_spec("libtpu") is None:
            return f"{self.name}: libtpu is not installed; {self.enable_hint}"
        if self.family == "gpu" and not _has_cuda_plugin():
            return f"{self.name}: the JAX CUDA plugin is not installed; {self.enable_hint}"
        if self.family == "gpu":
            # An installed plugin may still not know this device (an older release, a newer chip): its items
            # skip with the plugin's own first line. Making a GPU topology takes a millisecond.
            try:
                self.devices()
            except Exception as err:
                first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                return f"{self.name}: the CUDA plugin cannot describe this device ({self.topology}): {first}"
        return None

    def devices(self) -> Sequence[jax.Device]:
        """The devices to compile for: real ones at runtime, topology devices ahead of time."""
        import jax  # a NO_JAX module: JAX starts when devices are asked for, not at import

        if self.mode == "runtime":
            return jax.devices()[: self.device_count]
        if self.mode == "subprocess":
            return jax.devices("cpu")[: self.device_count]
        return _topology_devices(self.family, self.topology or "", self.chip_config)


def _has_cuda_plugin() -> bool:
    return any(importlib.util.find_spec(m) is not None for m in ("jax_cuda12_plugin", "jax_cuda13_plugin"))


_TOPOLOGIES: dict[tuple[str, str, str], Sequence[jax.Device]] = {}
# Starting a PJRT plugin (libtpu, the CUDA plugin) for a topology is not safe from two threads at once.
_TOPOLOGY_LOCK = threading.Lock()


def _topology_devices(family: Family, topology: str, chip_config: str) -> Sequence[jax.Device]:
    """The devices of a topology ahead of time, made once per process, one topology at a time."""
    with _TOPOLOGY_LOCK:
        key = (family, topology, chip_config)
        if key not in _TOPOLOGIES:
            _TOPOLOGIES[key] = _make_topology_devices(family, topology, chip_config)
        return _TOPOLOGIES[key]


def _make_topology_devices(family: Family, topology: str, chip_config: str) -> Sequence[jax.Device]:
    from jax.experimental import topologies  # a NO_JAX module: JAX only when a topology is made

    if family == "tpu":
        chips = tuple(int(n) for n in topology.split(":")[1].split("x"))
        kwargs: dict[str, Any] = {}
        if all(n == 1 for n in chips):
            # Single-chip topologies need explicit host bounds: libtpu 0.0.42 refuses "v5e:1x1" as "not
            # divisible by the given (or default) chips_per_host_bounds 2x2x1".
            kwargs["chips_per_host_bounds"] = (1, 1, 1)
        topo = topologies.get_topology_desc(
            topology_name=topology, platform="tpu", chip_config_name=chip_config, **kwargs
        )
    else:
        config_text = (_GPU_CONFIG_DIR / f"{topology}.txtpb").read_text()
        topo = topologies.get_topology_desc(
            topology_name=topology.split("_")[0], platform="cuda", target_config=config_text, topology="1x1x1"
        )
    return list(topo.devices)


# Installed users and checkouts install extras differently; the hints name both.
_TPU_HINT = (
    "pip install 'jax-embedding-invariants[tpu]' (in a checkout: pip install -e '.[tpu]'); libtpu from PyPI "
    "compiles for TPU on any host"
)
_GPU_HINT = (
    "pip install 'jax-embedding-invariants[gpu]' (in a checkout: pip install -e '.[gpu]'); the CUDA plugin "
    "compiles for a GPU without one"
)

# libtpu's flags that move every gather it can to the SparseCore (the form users pass them in).
GATHER_OFFLOAD_FLAGS = (
    "--xla_tpu_offload_gather_to_sparsecore=true --xla_tpu_offload_all_supported_gathers_to_sparsecore=true"
)

_AOT_TARGETS: tuple[Target, ...] = (
    # The 50000x512 table costs 2-5 s a compile on TPU; the CPU and GPU targets cover that size.
    Target(
        "tpu-v5e",
        "tpu",
        "aot",
        "all",
        topology="v5e:1x1",
        enable_hint=_TPU_HINT,
        skip_configs=("f32-large",),
        extra_configs=LLM_CONFIGS,
    ),
    Target(
        "tpu-v4", "tpu", "aot", "core", topology="v4:1x1x1", chip_config="megacore", enable_hint=_TPU_HINT
    ),
    # v5p and v6e have SparseCores: they also compile the offload sizes, with libtpu's default flags and, as
    # the -gather-offload targets, with the flags that move every supported gather there.
    Target(
        "tpu-v5p",
        "tpu",
        "aot",
        "core",
        topology="v5p:1x1x1",
        chip_config="megacore",
        enable_hint=_TPU_HINT,
        extra_configs=LLM_CONFIGS + OFFLOAD_CONFIGS,
    ),
    Target(
        "tpu-v6e",
        "tpu",
        "aot",
        "core",
        topology="v6e:1x1",
        enable_hint=_TPU_HINT,
        extra_configs=LLM_CONFIGS + OFFLOAD_CONFIGS,
    ),
    Target(
        "tpu-v5p-gather-offload",
        "tpu",
        "aot",
        "extra",
        topology="v5p:1x1x1",
        chip_config="megacore",
        enable_hint=_TPU_HINT,
        extra_configs=OFFLOAD_CONFIGS,
        libtpu_init_args=GATHER_OFFLOAD_FLAGS,
    ),
    Target(
        "tpu-v6e-gather-offload",
        "tpu",
        "aot",
        "extra",
        topology="v6e:1x1",
        enable_hint=_TPU_HINT,
        extra_configs=OFFLOAD_CONFIGS,
        libtpu_init_args=GATHER_OFFLOAD_FLAGS,
    ),
    Target("tpu-v5e-2x4", "tpu", "aot", "sharded", device_count=8, topology="v5e:2x4", enable_hint=_TPU_HINT),
    # Pods: a v5e 4x4 slice (16 chips, 4 hosts) and a v5p 2x2x2 cube (8 chips, megacore), for the pod
    # layouts only (vocabulary-parallel, FSDP, tied): the single-chip targets cover every other program.
    Target("tpu-v5e-4x4", "tpu", "aot", "pod", device_count=16, topology="v5e:4x4", enable_hint=_TPU_HINT),
    Target(
        "tpu-v5p-2x2x2",
        "tpu",
        "aot",
        "pod",
        device_count=8,
        topology="v5p:2x2x2",
        chip_config="megacore",
        enable_hint=_TPU_HINT,
    ),
    Target(
        "gpu-h100", "gpu", "aot", "all", topology="h100_sxm", enable_hint=_GPU_HINT, extra_configs=LLM_CONFIGS
    ),
    # Earlier and later GPU generations, for the code each kernel compiles to (invariants.kernels): the
    # atomics XLA emits follow the compute capability. The core programs in f32 and bf16 are enough to see
    # each chip.
    Target(
        "gpu-a100", "gpu", "aot", "core", topology="a100_sxm", enable_hint=_GPU_HINT, scope_configs=("bf16",)
    ),
    Target("gpu-l4", "gpu", "aot", "core", topology="l4", enable_hint=_GPU_HINT, scope_configs=("bf16",)),
    Target("gpu-b200", "gpu", "aot", "core", topology="b200", enable_hint=_GPU_HINT, scope_configs=("bf16",)),
    Target("cpu-8dev", "cpu", "subprocess", "sharded", device_count=8, pods=True),
)


# Element types a family's compiler computes in a wider one: XLA:CPU has no bf16 arithmetic and converts
# around it, so the bf16 gradient's scatter-add compiles as an f32 one there (f16 it keeps).
_WIDENS: dict[str, dict[str, str]] = {"cpu": {"bf16": "f32"}}


def widened(target_name: str, dtype: str) -> str | None:
    """The element type ``target_name``'s compiler computes ``dtype`` in, where it is wider; else None.
    Every target's name begins with its family's."""
    return _WIDENS.get(target_name.split("-")[0], {}).get(dtype)


def libtpu_init_args(target_name: str) -> str:
    """The LIBTPU_INIT_ARGS a target compiles under, without starting JAX ("" for none)."""
    return next((t.libtpu_init_args for t in _AOT_TARGETS if t.name == target_name), "")


def device_count(target_name: str) -> int:
    """Devices of a target, without starting JAX (a runtime target has one)."""
    return next((t.device_count for t in _AOT_TARGETS if t.name == target_name), 1)


# TPU device kinds as JAX reports them, to the chip names used in target names.
_TPU_KINDS = {"TPU v4": "v4", "TPU v5": "v5p", "TPU v5p": "v5p", "TPU v5 lite": "v5e", "TPU v6 lite": "v6e"}


def runtime_target() -> Target:
    """The backend this process runs on, named like the AOT target of the same chip.

    On a TPU or GPU host the runtime target replaces the AOT target of that chip, so both write the same
    snapshots: a disagreement between the two is itself a finding.
    """
    import jax  # a NO_JAX module: JAX starts when the backend is asked for, not at import

    device = jax.devices()[0]
    if device.platform == "cpu":
        return CPU_RUNTIME
    if device.platform == "tpu":
        chip = _TPU_KINDS.get(device.device_kind, re.sub(r"\W+", "", device.device_kind.lower()))
        return _on_the_chip(f"tpu-{chip}", "tpu")
    model = re.search(r"\b([A-Z]\d{1,3})\b", device.device_kind)  # A100-SXM4-80GB, H100, L4, B200
    name = model.group(1).lower() if model else re.sub(r"\W+", "", device.device_kind.lower())
    return _on_the_chip(f"gpu-{name}", "gpu")


def _on_the_chip(name: str, family: Family) -> Target:
    """The runtime target of a TPU or GPU host: the programs and configurations its ahead-of-time twin of
    the same name compiles, so that the chip checks the twin's snapshots and finds none missing. It takes
    the twin's scope (a core twin, tpu-v4 or gpu-a100, compiles the core programs), leaves out what the
    twin leaves out (tpu-v5e: f32-large, slow to compile there, which a CPU host never records for it) and
    compiles the twin's extra configurations (the LLM-scale ones: a snapshot update on the host keeps and
    checks those snapshots; compiled only, never run). A chip with no twin compiles every program, the
    LLM-scale configurations too."""
    twin = next((t for t in _AOT_TARGETS if t.name == name and t.device_count == 1), None)
    if twin is None:
        return Target(name, family, "runtime", "all", extra_configs=LLM_CONFIGS)
    return dataclasses.replace(twin, mode="runtime", topology=None, chip_config="default", enable_hint="")


# The CPU runtime target: what a process that does not start JAX (versus's controller) takes the runtime
# target to be, when its workers run on the CPU backend.
CPU_RUNTIME = Target("cpu", "cpu", "runtime", "all")


def all_targets(runtime: Target | None = None) -> dict[str, Target]:
    """Every known target, the runtime one first; the runtime target replaces an AOT one of its name.

    ``runtime`` None asks JAX which backend this process runs on (:func:`runtime_target`)."""
    runtime = runtime or runtime_target()
    targets = {runtime.name: runtime}
    for t in _AOT_TARGETS:
        targets.setdefault(t.name, t)
    return targets


# What an empty --targets is told, by the gate and by every command that splits the words itself.
TARGETS_HINT = "name targets, or 'all'"


def select_targets(spec: str | None, runtime: Target | None = None) -> list[Target]:
    """Targets named by a comma-separated ``spec`` (``all``, ``runtime``, family names or target names):
    the one grammar of ``--targets`` in the gate and every command.

    ``None`` (the option not given) means all; an empty selection is an error, never "all" in silence. An
    unknown name raises one line listing the known ones. ``runtime``: as in :func:`all_targets`.
    """
    targets = all_targets(runtime)
    if spec is None or spec.strip() == "all":
        return list(targets.values())
    words = selectors(spec, "--targets", TARGETS_HINT)
    chosen: dict[str, Target] = {}
    for word in words:
        if word == "runtime":
            matched = [next(iter(targets.values()))]
        elif word in targets:
            matched = [targets[word]]
        elif word in ("cpu", "tpu", "gpu"):
            matched = [t for t in targets.values() if t.family == word]
        else:
            raise InvariantsError(
                f"--targets: unknown target {word!r}{did_you_mean(word, targets, n=2)}; "
                "known: all, runtime, tpu, gpu, " + ", ".join(targets)
            )
        for t in matched:
            chosen[t.name] = t
    return list(chosen.values())


def versions() -> dict[str, str]:
    """Versions of everything that decides what the programs compile to."""
    out = {}
    for dist in ("jax", "jaxlib", "libtpu", "libtpu-nightly", "jax-cuda12-plugin", "equinox"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out
