"""Unit tests of what a release's environment installs for a target selection: no network, no environments.

A selection that compiles for a GPU ahead of time gets that release's CUDA plugin (``jax[cuda12-local]``)
in an environment of its own, one with a TPU target its libtpu (``jax[tpu]``), on any host; a CPU-only one
neither; a release too old for one leaves that family out with its reason, before anything installs.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version

from invariants._errors import InvariantsError
from invariants.releases import environments as r
from invariants.versus import command as vs

V = Version
JAXLIBS = [V(s) for s in ("0.4.30", "0.9.0", "0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.2")]


@pytest.mark.parametrize(
    ("targets", "gpu"),
    [
        ("cpu", False),
        ("cpu,tpu-v5e", False),
        ("tpu", False),
        ("runtime", False),
        ("gpu-a100", True),
        ("cpu, gpu-l4", True),
        ("gpu", True),
        ("all", True),  # every target, the GPU ones among them
    ],
)
def test_gpu_selected(targets: str, gpu: bool) -> None:
    assert r.selected(targets, "gpu") is gpu


def test_gpu_pins_install_that_releases_cuda_plugin() -> None:
    pins = r.choose_pins(V("0.10.1"), JAXLIBS, gpu=True)
    assert pins.gpu is True
    reqs = pins.requirements()
    assert reqs[:2] == ["jax[cuda12-local]==0.10.1", "jaxlib==0.10.1"]
    assert pins.env_name == "jax-0.10.1-gpu", "cached apart from the CPU-only environment"
    both = r.choose_pins(V("0.10.1"), JAXLIBS, tpu=True, gpu=True)
    assert both.requirements()[0] == "jax[tpu,cuda12-local]==0.10.1" and both.env_name == "jax-0.10.1-tpu-gpu"


def test_cpu_only_pins_have_no_plugin() -> None:
    pins = r.choose_pins(V("0.10.1"), JAXLIBS, gpu=r.selected("cpu", "gpu"))
    assert pins.gpu is False
    assert not any("cuda" in req for req in pins.requirements())
    assert pins.requirements()[0] == "jax==0.10.1" and pins.env_name == "jax-0.10.1"
    # The marker differs, so neither environment is ever taken for the other.
    assert pins.to_json() != r.choose_pins(V("0.10.1"), JAXLIBS, gpu=True).to_json()
    tpu = r.choose_pins(V("0.10.1"), JAXLIBS, tpu=True)
    assert tpu.requirements()[0] == "jax[tpu]==0.10.1" and tpu.env_name == "jax-0.10.1-tpu"


def test_a_release_too_old_for_gpu_is_one_line() -> None:
    with pytest.raises(InvariantsError) as err:
        r.choose_pins(V("0.9.1"), JAXLIBS, gpu=True)
    msg = str(err.value)
    assert msg.startswith("jax 0.9.1: too old to compile for a GPU on this host")
    assert "cudaRuntimeGetVersion" in msg and "0.9.2" in msg and "\n" not in msg
    assert r.gpu_too_old(V("0.9.1")) == msg
    assert r.gpu_too_old(V("0.9.2")) is None
    assert r.choose_pins(V("0.9.2"), JAXLIBS, gpu=True).gpu
    assert not r.choose_pins(V("0.9.1"), JAXLIBS).gpu, "a CPU-only selection still builds it"


def test_a_gpu_environment_is_checked_by_compiling_for_a_gpu(tmp_path: Path, monkeypatch) -> None:
    ran: list[tuple[list[str], dict[str, str]]] = []

    def fake_run(cmd, **kwargs):
        ran.append((list(cmd), dict(kwargs.get("env") or {})))
        if cmd[0] == "uv-stub" and "venv" in cmd:
            (Path(cmd[-1]) / "bin").mkdir(parents=True)
        if "-c" in cmd and "jax_cuda12_plugin" in cmd[-1]:
            return subprocess.CompletedProcess(cmd, 1, "", "RuntimeError: cudaRuntimeGetVersion failed\n")
        return subprocess.CompletedProcess(cmd, 0, "{}", "")

    monkeypatch.setattr(r, "_uv", lambda: ["uv-stub"])
    monkeypatch.setattr(r.subprocess, "run", fake_run)
    pins = r.choose_pins(V("0.10.1"), JAXLIBS, gpu=True)
    failed = r"^jax\[cuda12-local\]==0\.10\.1 .*: installs but cannot compile for a GPU: RuntimeError: cuda"
    with pytest.raises(InvariantsError, match=failed):
        r.ensure_env(pins, tmp_path, "https://example.invalid/simple", log=lambda s: None)
    install = next(cmd for cmd, _ in ran if "install" in cmd)
    assert "jax[cuda12-local]==0.10.1" in install
    check_env = ran[-1][1]
    assert "gpu_device_info" in check_env[r._GPU_CONFIG_ENV] and check_env["JAX_PLATFORMS"] == "cpu"
    assert not list(tmp_path.iterdir()), "a failed build leaves nothing in the cache"
    # A CPU-only environment is never asked to compile for a GPU.
    ran.clear()
    env = r.ensure_env(r.choose_pins(V("0.10.1"), JAXLIBS), tmp_path, "https://example.invalid/simple",
                       log=lambda s: None)  # fmt: skip
    assert env == tmp_path / "jax-0.10.1"
    assert not any("jax_cuda12_plugin" in cmd[-1] for cmd, _ in ran)


_NO_TPU = "jax 0.5.0: its jax[tpu] pins libtpu-nightly, which no package index serves"
_NO_GPU = "jax 0.6.0: too old to compile for a GPU on this host"


@pytest.mark.parametrize(
    ("targets", "version", "want", "left_out"),
    [
        ("cpu,gpu-a100", "0.10.1", "jax[cuda12-local]==0.10.1", {}),
        ("cpu", "0.10.1", "jax==0.10.1", {}),
        ("tpu-v5e", "0.10.1", "jax[tpu]==0.10.1", {}),  # on a CPU host too
        (vs.DEFAULT_TARGETS, "0.10.1", "jax[tpu,cuda12-local]==0.10.1", {}),
        (vs.DEFAULT_TARGETS, "0.6.0", "jax[tpu]==0.6.0", {"gpu": _NO_GPU}),
        ("gpu-h100", "0.6.0", "jax==0.6.0", {"gpu": _NO_GPU}),
        ("cpu,tpu-v5e", "0.5.0", "jax==0.5.0", {"tpu": _NO_TPU}),
        ("tpu", "0.5.1", "jax[tpu]==0.5.1", {}),
    ],
)
def test_versus_version_spec_gets_the_compilers_of_its_targets(
    monkeypatch, targets, version, want, left_out
) -> None:
    """A release's side gets libtpu for a TPU target and the CUDA plugin for a GPU one, on a CPU host; a
    family its release cannot compile for is left out with the reason, which replaces what its worker says
    of those targets (never a silent skip: an asked-for target not compared exits 4)."""
    built: list[r.Pins] = []
    monkeypatch.setattr(r, "check_index", lambda url: None)
    monkeypatch.setattr(r, "list_releases", lambda name, url: [V("0.5.0"), V("0.5.1"), V("0.6.0"), *JAXLIBS])

    def ensure_env(pins, cache_dir, index_url, log=print):
        built.append(pins)
        return Path("/envs") / pins.env_name

    monkeypatch.setattr(r, "ensure_env", ensure_env)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    args = argparse.Namespace(
        targets=targets, index_url="https://example.invalid/simple", cache_dir=Path("c")
    )
    build = vs._Builder(args, lambda line: None)
    assert build(V(version), "--baseline") == Path("/envs") / built[0].env_name / "bin" / "python"
    assert built[0].requirements()[0] == want and built[0].gpu is ("cuda" in want)
    assert {f: why[: len(left_out[f])] for f, why in build.left_out["--baseline"].items()} == left_out
    said = {"tpu-v5e": {"baseline": "tpu-v5e: libtpu is not installed", "candidate": None},
            "gpu-h100": {"baseline": None, "candidate": None}}  # fmt: skip
    keys = [{"key": f"take/f32/{name}", "baseline": {"error": "the worker's own line"}, "candidate": {}}
            for name in said]  # fmt: skip
    build.explain(keys, said)
    for name, family in (("tpu-v5e", "tpu"), ("gpu-h100", "gpu")):
        key = next(k for k in keys if k["key"].endswith(name))
        if family in left_out:
            assert said[name]["baseline"].startswith(f"{name}: {left_out[family]}")
            assert key["baseline"]["error"] == said[name]["baseline"], "the key says it too"
        else:
            assert key["baseline"]["error"] == "the worker's own line"
    if "tpu" not in left_out:
        assert said["tpu-v5e"]["baseline"] == "tpu-v5e: libtpu is not installed", (
            "a worker's own reason stays"
        )


def test_a_tpu_host_refuses_a_release_without_libtpu(monkeypatch) -> None:
    monkeypatch.setattr(r, "check_index", lambda url: None)
    monkeypatch.setattr(r, "list_releases", lambda name, url: [V("0.5.0"), *JAXLIBS])
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    args = argparse.Namespace(targets="cpu", index_url="https://example.invalid/simple", cache_dir=Path("c"))
    with pytest.raises(InvariantsError, match=f"^{re.escape(_NO_TPU)}"):
        vs._Builder(args, lambda line: None)(V("0.5.0"), "--baseline")
