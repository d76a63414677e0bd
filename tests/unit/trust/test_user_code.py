"""A project's code (its modules imported, its factories called, its functions traced) runs under a guard:
whatever it does to end the process, or however long it hangs, the gate says so in one line and exits 2,
never green and never with the project's own exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from invariants.__main__ import main as cli

ROOT = Path(__file__).parents[3]

GOOD = """
import jax, jax.numpy as jnp

def init(config):
    return {"w": jax.ShapeDtypeStruct((config.vocab, 8), config.dtype)}

def embed(params, ids):
    return params["w"][ids]
"""


def _project(tmp_path: Path, module: str, code: str) -> None:
    (tmp_path / f"{module}.py").write_text(GOOD + code)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "lib.toml").write_text(
        '[spec]\ntargets = ["cpu"]\n\n[[program]]\nname = "p"\n'
        f'function = "{module}:{"bad" if "def bad(" in code else "embed"}"\n'
        f'params = "{module}:{"bad_init" if "def bad_init" in code else "init"}"\n'
        'kind = "forward"\nindex_shape = [4, 8]\n'
    )


# What the project's code does, and what the one line says it did.
CASES = {
    "import_exit_0": ("raise SystemExit(0)\n", "import", "SystemExit(0)"),
    "import_exit_3": ("import sys\nsys.exit(3)\n", "import", "SystemExit(3)"),
    "import_interrupt": ("raise KeyboardInterrupt\n", "import", "KeyboardInterrupt"),
    "factory_exit_0": ("import sys\ndef bad_init(config):\n    sys.exit(0)\n", "init", "SystemExit(0)"),
    "factory_interrupt": (
        "def bad_init(config):\n    raise KeyboardInterrupt\n",
        "init",
        "KeyboardInterrupt",
    ),
    "trace_exit_0": ("import sys\ndef bad(params, ids):\n    sys.exit(0)\n", "trac", "SystemExit(0)"),
}


@pytest.mark.parametrize("case", CASES)
def test_user_code_that_exits_fails_the_run_in_one_line(tmp_path, monkeypatch, capsys, case):
    code, doing, said = CASES[case]
    module = f"uc_{case}"
    _project(tmp_path, module, code)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    status = cli(["gate", "--spec-dir", "specs", "--no-catalog"])
    err = capsys.readouterr().err
    assert status == 2, err
    assert err.count("\n") == 1, err
    assert "specs/lib.toml" in err and doing in err and said in err, err


def _gate(tmp_path: Path, *extra: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, "-m", "invariants", "gate", "--spec-dir", "specs", "--no-catalog", *extra],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


@pytest.mark.e2e
@pytest.mark.parametrize("module", ["os", "posix"])
def test_os_exit_at_import_fails_the_run_in_one_line(tmp_path, module):
    """``os._exit``, and the same function under its own module's name, ``posix._exit``."""
    _project(tmp_path, f"uc_{module}_exit", f"import {module}\n{module}._exit(0)\n")
    proc = _gate(tmp_path)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "os._exit(0)" in last and "import" in last, proc.stderr


@pytest.mark.e2e
def test_a_hang_past_the_timeout_fails_in_one_line(tmp_path):
    _project(tmp_path, "uc_hang", "import time\ndef bad_init(config):\n    time.sleep(600)\n")
    proc = _gate(tmp_path, "--user-code-timeout", "2", timeout=120)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "2 s" in last and "--user-code-timeout" in last and "bad_init" in last, proc.stderr


THREAD = "threading.Thread(target=time.sleep, args=(600,)).start()"
THREADS = {
    "import": f"import threading, time\n{THREAD}\n",
    "factory": f"import threading, time\ndef bad_init(config):\n    {THREAD}\n    return init(config)\n",
    "trace": f"import threading, time\ndef bad(params, ids):\n    {THREAD}\n    return embed(params, ids)\n",
}


@pytest.mark.e2e
@pytest.mark.parametrize("where", THREADS)
def test_a_thread_the_projects_code_starts_does_not_hold_the_process(tmp_path, where):
    """A non-daemon thread started at import, in a factory or while tracing: the run ends with its own
    status (a failure here, a program the spec holds to no kernels at all) instead of waiting for it."""
    _project(tmp_path, f"uc_thread_{where}", THREADS[where])
    with (tmp_path / "specs" / "lib.toml").open("a") as f:
        f.write('\n[[invariant]]\nid = "none"\nprograms = ["p"]\nassert = "kernels == 0"\nwhy = "to fail"\n')
    proc = _gate(tmp_path, "-q", timeout=120)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "none failed on cpu p [f32]" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "abc", ""])
def test_a_bad_user_code_timeout_is_one_line(tmp_path, monkeypatch, capsys, value):
    _project(tmp_path, "uc_timeout_" + str(abs(hash(value))), "")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    status = cli(["gate", "--spec-dir", "specs", "--no-catalog", "--user-code-timeout", value])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "--user-code-timeout" in err, err
