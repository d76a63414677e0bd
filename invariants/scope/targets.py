"""Compile targets: the runtime backend, TPU chips and a GPU ahead of time, and a multi-device CPU.

Ahead-of-time (AOT) targets need no accelerator: libtpu carries the TPU compiler and the CUDA plugin the GPU
compiler, so a CPU host reads the real optimized HLO of those chips. Which programs and configurations a
target compiles follows from its scope (invariants.scope.placement). Adding a target touches this file only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import importlib.util
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

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

    ``scope``: ``all`` (every one-device program in every configuration it lists), ``core`` (the seed's
    forms in the seed configuration, plus ``scope_configs``), ``sharded`` (the fixed mesh layouts that fit,
    plus the pod layouts when ``pods``), ``pod`` (the pod layouts only) or ``extra`` (its ``extra_configs``
    alone). ``extra_configs`` are compiled on top of the scope for every program that lists them.
    ``libtpu_init_args`` are read once by libtpu when it starts, so such a target compiles in a child.
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
        return self.mode == "subprocess" or bool(self.libtpu_init_args)

    @property
    def keeps_kernel_code(self) -> bool:
        """GPU targets (PTX) and the CPU runtime (LLVM IR); libtpu dumps no LLO, and the 8-device CPU runs
        the CPU runtime's kernels."""
        return self.family == "gpu" or (self.family == "cpu" and self.mode == "runtime")

    def unavailable_reason(self) -> str | None:
        """None when this target can compile here, else one line saying why not and how to enable it."""
        if self.mode != "aot":
            return None
        if self.family == "tpu" and importlib.util.find_spec("libtpu") is None:
            return f"{self.name}: libtpu is not installed; {self.enable_hint}"
        if self.family == "gpu" and not _has_cuda_plugin():
            return f"{self.name}: the JAX CUDA plugin is not installed; {self.enable_hint}"
        if self.family == "gpu":
            # An installed plugin may still not know this device: its items skip with the plugin's own line.
            try:
                self.devices()
            except Exception as err:
                first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                return f"{self.name}: the CUDA plugin cannot describe this device ({self.topology}): {first}"
        return None

    def devices(self) -> Sequence[jax.Device]:
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
    with _TOPOLOGY_LOCK:
        key = (family, topology, chip_config)
        if key not in _TOPOLOGIES:
            _TOPOLOGIES[key] = _make_topology_devices(family, topology, chip_config)
        return _TOPOLOGIES[key]


def _make_topology_devices(family: Family, topology: str, chip_config: str) -> Sequence[jax.Device]:
    from jax.experimental import topologies  # a NO_JAX module: JAX only when a topology is made

    if family == "tpu":
        chips = tuple(int(n) for n in topology.split(":")[1].split("x"))
        # libtpu refuses a single-chip topology against its default host bounds (2x2x1).
        bounds = {"chips_per_host_bounds": (1, 1, 1)} if all(n == 1 for n in chips) else {}
        topo = topologies.get_topology_desc(
            topology_name=topology, platform="tpu", chip_config_name=chip_config, **bounds
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

# libtpu's flags that move every gather it can to the SparseCore.
GATHER_OFFLOAD_FLAGS = (
    "--xla_tpu_offload_gather_to_sparsecore=true --xla_tpu_offload_all_supported_gathers_to_sparsecore=true"
)


_tpu = functools.partial(Target, family="tpu", mode="aot", enable_hint=_TPU_HINT)
_gpu = functools.partial(Target, family="gpu", mode="aot", enable_hint=_GPU_HINT)
_gather_offload = functools.partial(
    _tpu, scope="extra", extra_configs=OFFLOAD_CONFIGS, libtpu_init_args=GATHER_OFFLOAD_FLAGS
)
_OFFLOAD_CHIP = LLM_CONFIGS + OFFLOAD_CONFIGS
_AOT_TARGETS: tuple[Target, ...] = (
    # The large table is slow to compile on TPU; the CPU and GPU targets cover that size.
    _tpu("tpu-v5e", scope="all", topology="v5e:1x1", skip_configs=("f32-large",), extra_configs=LLM_CONFIGS),
    _tpu("tpu-v4", scope="core", topology="v4:1x1x1", chip_config="megacore"),
    # v5p and v6e have SparseCores: they also compile the offload sizes, with libtpu's default flags and, as
    # the -gather-offload targets, with the flags that move every supported gather there.
    _tpu("tpu-v5p", scope="core", topology="v5p:1x1x1", chip_config="megacore", extra_configs=_OFFLOAD_CHIP),
    _tpu("tpu-v6e", scope="core", topology="v6e:1x1", extra_configs=_OFFLOAD_CHIP),
    _gather_offload("tpu-v5p-gather-offload", topology="v5p:1x1x1", chip_config="megacore"),
    _gather_offload("tpu-v6e-gather-offload", topology="v6e:1x1"),
    _tpu("tpu-v5e-2x4", scope="sharded", topology="v5e:2x4", device_count=8),
    # Pods, for the pod layouts only: the single-chip targets cover every other program.
    _tpu("tpu-v5e-4x4", scope="pod", topology="v5e:4x4", device_count=16),
    _tpu("tpu-v5p-2x2x2", scope="pod", topology="v5p:2x2x2", device_count=8, chip_config="megacore"),
    _gpu("gpu-h100", scope="all", topology="h100_sxm", extra_configs=LLM_CONFIGS),
    # Earlier and later GPU generations: the atomics XLA emits follow the compute capability.
    _gpu("gpu-a100", scope="core", topology="a100_sxm", scope_configs=("bf16",)),
    _gpu("gpu-l4", scope="core", topology="l4", scope_configs=("bf16",)),
    _gpu("gpu-b200", scope="core", topology="b200", scope_configs=("bf16",)),
    Target("cpu-8dev", "cpu", "subprocess", "sharded", device_count=8, pods=True),
)


# Element types a family's compiler computes in a wider one: XLA:CPU has no bf16 arithmetic and converts
# around it, so the bf16 gradient's scatter-add compiles as an f32 one there (f16 it keeps).
_WIDENS: dict[str, dict[str, str]] = {"cpu": {"bf16": "f32"}}


def widened(target_name: str, dtype: str) -> str | None:
    """The element type ``target_name``'s compiler computes ``dtype`` in, where it is wider; else None."""
    return _WIDENS.get(target_name.split("-")[0], {}).get(dtype)


def libtpu_init_args(target_name: str) -> str:
    """The LIBTPU_INIT_ARGS a target compiles under, without starting JAX ("" for none)."""
    return next((t.libtpu_init_args for t in _AOT_TARGETS if t.name == target_name), "")


def device_count(target_name: str) -> int:
    """Devices of a target, without starting JAX (a runtime target has one)."""
    return next((t.device_count for t in _AOT_TARGETS if t.name == target_name), 1)


_TPU_KINDS = {"TPU v4": "v4", "TPU v5": "v5p", "TPU v5p": "v5p", "TPU v5 lite": "v5e", "TPU v6 lite": "v6e"}


def runtime_target() -> Target:
    """The backend this process runs on, named like the AOT target of the same chip: both write the same
    snapshots, so a disagreement between the two is itself a finding."""
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
    """The runtime target of a TPU or GPU host: what its ahead-of-time twin compiles, so that the chip
    checks the twin's snapshots and finds none missing; a chip with no twin compiles everything."""
    twin = next((t for t in _AOT_TARGETS if t.name == name and t.device_count == 1), None)
    if twin is None:
        return Target(name, family, "runtime", "all", extra_configs=LLM_CONFIGS)
    return dataclasses.replace(twin, mode="runtime", topology=None, chip_config="default", enable_hint="")


# What a process that does not start JAX (versus's controller) takes the runtime target to be.
CPU_RUNTIME = Target("cpu", "cpu", "runtime", "all")


# The groups a report draws targets in, a panel each, in this order: few enough targets in each to read.
GROUPS = ("CPU", "TPU chips", "TPU slices and pods", "TPU, gathers on the SparseCore", "GPUs")


def group_of(name: str) -> str:
    """The group of :data:`GROUPS` target ``name`` is drawn in; a name no target has (a chip this version
    does not know, in another host's results) goes by its family, the word before its first ``-``."""
    target = next((t for t in (CPU_RUNTIME, *_AOT_TARGETS) if t.name == name), None)
    family = target.family if target is not None else name.split("-")[0]
    if target is not None and family == "tpu" and target.libtpu_init_args == GATHER_OFFLOAD_FLAGS:
        return GROUPS[3]
    if target is not None and family == "tpu" and target.device_count > 1:
        return GROUPS[2]
    return {"cpu": GROUPS[0], "tpu": GROUPS[1], "gpu": GROUPS[4]}.get(family, family)


def all_targets(runtime: Target | None = None) -> dict[str, Target]:
    """Every known target, the runtime one first (None: ask JAX); it replaces an AOT one of its name."""
    runtime = runtime or runtime_target()
    targets = {runtime.name: runtime}
    for t in _AOT_TARGETS:
        targets.setdefault(t.name, t)
    return targets


# What an empty --targets is told, by the gate and by every command that splits the words itself.
TARGETS_HINT = "name targets, or 'all'"


def select_targets(spec: str | None, runtime: Target | None = None) -> list[Target]:
    """The targets ``--targets`` names (``all``, ``runtime``, families or names; None: all), in every
    command; an empty selection or an unknown name is one line."""
    targets = all_targets(runtime)
    if spec is None or spec.strip() == "all":
        return list(targets.values())
    chosen: dict[str, Target] = {}
    for word in selectors(spec, "--targets", TARGETS_HINT):
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
        chosen.update((t.name, t) for t in matched)
    return list(chosen.values())


def versions() -> dict[str, str]:
    """Versions of everything that decides what the programs compile to."""
    out = {}
    for dist in ("jax", "jaxlib", "libtpu", "libtpu-nightly", "jax-cuda12-plugin", "equinox"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[dist] = importlib.metadata.version(dist)
    return out
