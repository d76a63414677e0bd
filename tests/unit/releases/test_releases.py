"""Unit tests of what a release's environment installs for a target selection: no network, no environments.

A selection that compiles for a GPU ahead of time gets that release's CUDA plugin (``jax[cuda12-local]``)
in an environment of its own; a CPU-only one does not; a release too old for it is one line, before
anything installs.
"""

from __future__ import annotations

import argparse
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
    assert r.gpu_selected(targets) is gpu


def test_gpu_pins_install_that_releases_cuda_plugin() -> None:
    pins = r.choose_pins(V("0.10.1"), JAXLIBS, gpu=True)
    assert pins.gpu is True
    reqs = pins.requirements()
    assert reqs[:2] == ["jax[cuda12-local]==0.10.1", "jaxlib==0.10.1"]
    assert pins.env_name == "jax-0.10.1-gpu", "cached apart from the CPU-only environment"
    both = r.choose_pins(V("0.10.1"), JAXLIBS, tpu=True, gpu=True)
    assert both.requirements()[0] == "jax[tpu,cuda12-local]==0.10.1" and both.env_name == "jax-0.10.1-tpu-gpu"


def test_cpu_only_pins_have_no_plugin() -> None:
    pins = r.choose_pins(V("0.10.1"), JAXLIBS, gpu=r.gpu_selected("cpu,tpu-v5e"))
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


@pytest.mark.parametrize(
    ("targets", "version", "want"),
    [
        ("cpu,gpu-a100", "0.10.1", "jax[cuda12-local]==0.10.1"),
        ("cpu", "0.10.1", "jax==0.10.1"),
        (vs.DEFAULT_TARGETS, "0.10.1", "jax[cuda12-local]==0.10.1"),  # gpu-h100 is among the defaults
        (vs.DEFAULT_TARGETS, "0.6.0", "jax==0.6.0"),  # too old for it: its gpu-h100 keys read unavailable
        ("gpu-h100", "0.6.0", "jax 0.6.0: too old to compile for a GPU"),  # asked for: refused, one line
    ],
)
def test_versus_version_spec_gets_the_plugin_for_gpu_targets(monkeypatch, targets, version, want) -> None:
    built: list[r.Pins] = []
    monkeypatch.setattr(r, "check_index", lambda url: None)
    monkeypatch.setattr(r, "list_releases", lambda name, url: [V("0.6.0"), *JAXLIBS])

    def ensure_env(pins, cache_dir, index_url, log=print):
        built.append(pins)
        return Path("/envs") / pins.env_name

    monkeypatch.setattr(r, "ensure_env", ensure_env)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    args = argparse.Namespace(
        targets=targets, index_url="https://example.invalid/simple", cache_dir=Path("c")
    )
    build = vs._builder(args, lambda line: None)
    if want.startswith("jax "):
        with pytest.raises(InvariantsError, match=rf"^{want}"):
            build(V(version), "--baseline")
        assert not built, "refused before anything installs"
        return
    assert build(V(version), "--baseline") == Path("/envs") / built[0].env_name / "bin" / "python"
    assert built[0].requirements()[0] == want and built[0].gpu is ("cuda" in want)
