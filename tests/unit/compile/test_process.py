"""The process a gate runs in (invariants.compile.process): which core an xdist worker is pinned to; what it
prints while JAX starts (nothing, on a CPU-only host), and the environment checked before any compile
(JAX_PLATFORMS, XLA_FLAGS), run as users meet them, in child runs.

The backend guard's one line for JAX_PLATFORMS=tpu is also in tests/integration/test_gate_session.py."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from invariants.compile import process as _process
from invariants.compile.process import check_flags, flags_message, quiet, worker_core


def test_pinned_xdist_workers_get_a_core_each():
    assert worker_core(None, [0, 1]) is None  # the controller (or no xdist) is never pinned
    assert worker_core({"workerid": "gw0", "workercount": 2}, [4, 7]) == 4
    assert worker_core({"workerid": "gw1", "workercount": 2}, [4, 7]) == 7
    assert worker_core({"workerid": "gw2", "workercount": 3}, [4, 7]) is None  # more workers than cores


# ------------------------------------------------------------------- quiet output, the environment first

ROOT = Path(__file__).parents[3]
CACHE = "INVARIANTS_CACHE_DIR"
ABSL = "All log messages before absl::InitializeLog()"
CUDART = "cudart_stub.cc"
# What the CUDA plugin writes on a host without CUDA, as jaxlib 0.10.2 writes it (each of its libraries
# once), among lines that are no noise.
NOISE = (
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    b"I0000 00:00:1796157499.377078   23947 cudart_stub.cc:31] Could not find cuda drivers on your machine, "
    b"GPU will not be used.\n"
)
KEPT = (
    b"W1201 20:41:57.770350   27777 some.cc:12] a warning\n"
    b"E1201 20:41:57.770350   27777 some.cc:12] an error\n"
    b"F1201 20:41:57.770350   27777 parse_flags_from_env.cc:234] Unknown flag in XLA_FLAGS: --xla_x\n"
    b"UserWarning: something Python says\n"
)


def _child(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m invariants ARGS`` as a user runs it, in ``cwd``, with this checkout's package, and none of
    this run's own gate settings (an xdist worker's, INVARIANTS_*, XLA_FLAGS) unless ``env`` sets them; the
    session's compile cache folder stays (tests/conftest.py)."""
    keep = {k: v for k, v in os.environ.items()
            if (not k.startswith(("PYTEST_XDIST_", "INVARIANTS_", "PYTEST_ADDOPTS")) or k == CACHE)
            and k not in ("XLA_FLAGS", "JAX_PLATFORMS", "TF_CPP_MIN_LOG_LEVEL")}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "invariants", *args], cwd=cwd, capture_output=True, text=True, check=False,
        timeout=600, env={**keep, "PYTHONPATH": str(ROOT), **(env or {})},
    )  # fmt: skip


def test_quiet_drops_the_cpu_host_notices_and_keeps_the_rest(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    assert quiet(NOISE * 4 + KEPT) == KEPT
    # The user's own level wins: 0 shows everything, 3 everything but fatal lines.
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    assert quiet(NOISE + KEPT) == NOISE + KEPT
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    assert quiet(NOISE + KEPT) == KEPT.splitlines(keepends=True)[2] + KEPT.splitlines(keepends=True)[3]


def test_xla_s_own_words_on_a_rejected_flag():
    unknown = (
        NOISE + b"F1201 20:41:57.770350   27777 parse_flags_from_env.cc:234] Unknown flag in XLA_FLAGS: --x\n"
    )
    assert flags_message(unknown) == ("XLA_FLAGS", "Unknown flag in XLA_FLAGS: --x")
    bad_value = (
        b"E1201 20:42:09.079944   28016 command_line_flags.cc:63] Couldn't interpret value abc for flag x.\n"
        b"F1201 20:42:09.079971   28016 parse_flags_from_env.cc:220] Check failed: ... Flag parsing failed.\n"
        b"usage: --x=abc\nFlags:\n"
    )
    assert flags_message(bad_value) == ("XLA_FLAGS", "Couldn't interpret value abc for flag x")
    assert flags_message(NOISE + b"Traceback ...\nAssertionError\n") is None  # not a flag: the guard's
    # libtpu's flag parser (absl's), on LIBTPU_INIT_ARGS.
    libtpu = NOISE + b"ERROR: Unknown command line flag 'xla_no_such'\n"
    assert flags_message(libtpu) == ("LIBTPU_INIT_ARGS", "Unknown command line flag 'xla_no_such'")


@pytest.mark.e2e
def test_bad_input_is_exactly_one_line_on_stderr(tmp_path: Path):
    """`python -m invariants gate --targets cpu --programs nosuch`: the line, nothing before it (not the CUDA
    plugin's absl notices of a CPU-only host, 8 lines), nothing on stdout."""
    proc = _child("gate", "--targets", "cpu", "--programs", "nosuch", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()  # pytest's prefix: Exit (the plugin's pytest.exit) or ERROR
    assert re.fullmatch(r"(error|ERROR): --programs: unknown program 'nosuch'", line), proc.stderr


@pytest.mark.e2e
@pytest.mark.skipif(
    importlib.util.find_spec("jax_cuda12_plugin") is None or shutil.which("nvidia-smi") is not None,
    reason="the notices are the CUDA plugin's on a host without CUDA",
)
def test_a_users_log_level_shows_the_notices(tmp_path: Path):
    proc = _child("gate", "--targets", "cpu", "--programs", "nosuch", cwd=tmp_path,
                  env={"TF_CPP_MIN_LOG_LEVEL": "0"})  # fmt: skip
    assert proc.returncode == 2
    assert ABSL in proc.stderr and CUDART in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith(": --programs: unknown program 'nosuch'")


@pytest.mark.e2e
def test_a_green_gate_run_prints_no_absl_lines(tmp_path: Path):
    proc = _child("gate", "--targets", "cpu", "--programs", "take", "--configs", "f32", "-m",
                  "not throughput", "-p", "no:cacheprovider", "-q", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    out = proc.stdout + proc.stderr
    assert " passed" in proc.stdout
    assert ABSL not in out and CUDART not in out, out[:2000]
    assert proc.stderr == "", proc.stderr


@pytest.mark.e2e
@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU host: cuda may be there")
def test_jax_platforms_cuda_on_a_cpu_host_is_one_line(tmp_path: Path):
    """One line, not an INTERNALERROR traceback (jax.devices() raises an AssertionError there)."""
    proc = _child("gate", "--targets", "cpu", "--programs", "take", "--collect-only", cwd=tmp_path,
                  env={"JAX_PLATFORMS": "cuda"})  # fmt: skip
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("JAX_PLATFORMS=cuda: backend not available on this host (Unable to load CUDA"), (
        line
    )
    assert "unset JAX_PLATFORMS to run on the CPU" in line and "INTERNALERROR" not in proc.stdout


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("flags", "said"),
    [
        ("--xla_no_such_flag", "Unknown flag in XLA_FLAGS: --xla_no_such_flag"),
        (
            "--xla_cpu_prefer_vector_width=abc",
            "Couldn't interpret value abc for flag xla_cpu_prefer_vector_width",
        ),
    ],
)
def test_an_xla_flag_xla_rejects_is_one_line(tmp_path: Path, flags: str, said: str):
    """One line, not exit 1 and no output at all (XLA aborts while file descriptor 2 is held)."""
    proc = _child("gate", "--targets", "cpu", "--programs", "take", "--collect-only", cwd=tmp_path,
                  env={"XLA_FLAGS": flags})  # fmt: skip
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    line = f"XLA_FLAGS={flags}: XLA rejects it: {said}; correct or unset XLA_FLAGS"
    assert proc.stderr.strip().splitlines() == [line], proc.stderr


@pytest.mark.e2e
@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="libtpu reads LIBTPU_INIT_ARGS")
@pytest.mark.parametrize(
    ("flags", "said"),
    [
        ("--xla_no_such_flag=1", "Unknown command line flag 'xla_no_such_flag'"),
        (
            "--xla_tpu_offload_gather_to_sparsecore=maybe",
            "Illegal value 'maybe' specified for flag 'xla_tpu_offload_gather_to_sparsecore'",
        ),
    ],
)
def test_a_libtpu_flag_libtpu_rejects_is_one_line_and_the_earlier_results_stay(tmp_path: Path, flags, said):
    """libtpu reads LIBTPU_INIT_ARGS when a TPU target first compiles, mid-run, and ends the process with its
    own line (exit 1, read as a failure found): one line and exit 2 before anything compiles, with the
    earlier run's results file as it was."""
    earlier = tmp_path / "r.json"
    earlier.write_text('{"items": []}\n')
    proc = _child("gate", "--targets", "tpu-v5e", "--programs", "take", "--configs", "f32", "-p", "no:xdist",
                  "--results-json", str(earlier), cwd=tmp_path, env={"LIBTPU_INIT_ARGS": flags})  # fmt: skip
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    line = f"LIBTPU_INIT_ARGS={flags}: libtpu rejects it: {said}; correct or unset LIBTPU_INIT_ARGS"
    assert proc.stderr.strip().splitlines() == [line], proc.stderr
    assert earlier.read_text() == '{"items": []}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no lock left either


@pytest.mark.e2e
def test_flags_xla_takes_are_probed_once(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_prefer_vector_width=32")
    monkeypatch.delenv("LIBTPU_INIT_ARGS", raising=False)
    monkeypatch.delenv(_process._FLAGS_CHECKED, raising=False)
    check_flags()
    # Children skip it.
    assert os.environ[_process._FLAGS_CHECKED] == "XLA_FLAGS=--xla_cpu_prefer_vector_width=32"
    monkeypatch.setattr(_process.subprocess, "run", None)  # a second probe would fail
    check_flags()


def _claims_jax(folder: Path, version: str) -> str:
    """A folder that, first on the path, makes the installed jax read as ``version`` (its metadata only)."""
    info = folder / f"jax-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: jax\nVersion: {version}\n")
    return f"{folder}{os.pathsep}{ROOT}"


@pytest.mark.e2e
def test_a_jax_older_than_the_suite_supports_is_refused_in_one_line_before_any_compile(tmp_path: Path):
    path = _claims_jax(tmp_path / "old", "0.4.29")
    proc = _child("gate", "--targets", "cpu", "--programs", "take", "-p", "no:cacheprovider", cwd=tmp_path,
                  env={"PYTHONPATH": path})  # fmt: skip
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "jax 0.4.29 is older than this suite supports: it needs jax >= 0.4.30; install a supported one "
        "(pip install 'jax>=0.4.30')"
    ], proc.stderr
    assert "passed" not in proc.stdout and "failed" not in proc.stdout


_HYPOTHESIS_CHILD = """
import sys, pytest
if sys.argv[1] == "imported":
    import hypothesis
class Look:
    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config):
        print("registered", config.pluginmanager.has_plugin("hypothesispytest"))
rc = pytest.main(["invariants/gate", "--targets", "cpu", "--programs", "take", "--configs", "f32", "-m",
                  "not throughput", "-p", "no:cacheprovider", "-q"], plugins=[Look()])
print("exit", int(rc), "imported", "hypothesis.core" in sys.modules)
"""


@pytest.mark.e2e
@pytest.mark.skipif(importlib.util.find_spec("hypothesis") is None, reason="hypothesis is not installed")
@pytest.mark.parametrize(("before", "after"), [("idle", "registered False"), ("imported", "registered True")])
def test_a_gate_run_that_never_imported_hypothesis_does_not_import_it_to_end(before, after, tmp_path: Path):
    """hypothesis's pytest plugin, installed beside the gate, imports the whole of hypothesis to write its
    summary: a gate session that never imported it leaves its plugin out of that summary; one that did keeps
    it."""
    env = {**os.environ, CACHE: str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", _HYPOTHESIS_CHILD, before], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    lines = proc.stdout.strip().splitlines()
    assert lines[-2:] == [after, f"exit 0 imported {before == 'imported'}"], proc.stdout[-2000:] + proc.stderr


_REWRITE_CHILD = """
import sys
from _pytest.assertion.rewrite import AssertionRewritingHook
from invariants.__main__ import main
rc = main(["gate", "--targets", "cpu", "--programs", "take", "--configs", "f32", "-m", "not throughput", "-q",
           "-p", "no:cacheprovider"])
print("exit", rc, "rewritten", sorted(n for n, m in list(sys.modules.items())
                                      if isinstance(getattr(m, "__loader__", None), AssertionRewritingHook)))
"""


@pytest.mark.e2e
def test_the_gate_command_parses_no_module_again_to_rewrite_its_asserts(tmp_path: Path):
    """pytest rewrites the asserts of every module of each distribution with a pytest plugin (jaxtyping's,
    which equinox imports, xdist's, pytest-benchmark's), parsing each again where no bytecode is written; the
    gate asserts nothing with ``assert``, and its command leaves every module as Python loads it."""
    env = {**os.environ, CACHE: str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", _REWRITE_CHILD], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    assert proc.stdout.strip().splitlines()[-1] == "exit 0 rewritten []", proc.stdout[-2000:] + proc.stderr
