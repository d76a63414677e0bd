"""The accelerator envs of tox.ini check the host before they install: off a TPU host ``tox -e tpu`` (and
off an NVIDIA host ``tox -e gpu``) is one line that says what to run instead, with nothing installed and
nothing run after it."""

from __future__ import annotations

import configparser
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def _tox() -> configparser.ConfigParser:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    return tox


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]


@pytest.mark.parametrize(("env", "check"), [("tpu", "scripts/tpu_host.py"), ("gpu", "nvidia-smi")])
def test_an_accelerator_env_checks_its_host_before_it_installs_and_stops_there(env, check):
    section = _tox()[f"testenv:{env}"]
    # tox installs a package before commands_pre: the env installs it itself, after the check.
    assert section.get("skip_install", "").strip() == "true", section.get("skip_install")
    assert not _lines(section.get("deps", "")), section.get("deps")
    pre = _lines(section["commands_pre"])
    assert check in pre[0], pre
    assert any("pip install" in ln for ln in pre[1:]), pre
    # tox's ignore_errors applies to commands_pre too: with it, the check's failure would go on to install.
    assert section.get("ignore_errors", "false").strip() != "true", f"{env}: ignore_errors"


@pytest.mark.parametrize("env", ["tpu", "gpu"])
def test_versus_still_runs_after_a_failed_gate_and_the_env_fails_with_it(env):
    commands = _lines(_tox()[f"testenv:{env}"]["commands"])
    assert commands == ["- {[base]gate}", "{[base]versus}", "{[base]gate_exit}"], commands
    base = _tox()["base"]
    assert "gate.exit" in base["gate"] and "gate.exit" in base["gate_exit"]


def _tpu_host():
    spec = importlib.util.spec_from_file_location("tpu_host", ROOT / "scripts" / "tpu_host.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pci(root: Path, slot: str, vendor: str, device: str) -> None:
    folder = root / "sys" / "bus" / "pci" / "devices" / slot
    folder.mkdir(parents=True)
    (folder / "vendor").write_text(vendor + "\n")
    (folder / "device").write_text(device + "\n")


def test_a_host_with_google_devices_but_no_tpu_chip_is_one_line(tmp_path, capsys):
    _pci(tmp_path, "0000:00:04.0", "0x1ae0", "0x0042")  # gVNIC, the network card of a GCE VM
    _pci(tmp_path, "0000:00:05.0", "0x8086", "0x0063")
    assert _tpu_host().main(["--root", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tpu: no TPU chip on this host"), err
    assert "tox -e cpu" in err and "nothing was installed" in err, err


@pytest.mark.parametrize("how", ["pci", "accel"])
def test_a_tpu_host_passes_in_silence(tmp_path, capsys, how):
    if how == "pci":
        for n in range(4):
            _pci(tmp_path, f"0000:00:0{8 + n}.0", "0x1ae0", "0x0063")  # a v5e VM's chips
    else:
        (tmp_path / "dev").mkdir()
        (tmp_path / "dev" / "accel0").write_text("")
    assert _tpu_host().main(["--root", str(tmp_path)]) == 0
    assert capsys.readouterr().err == ""
