"""The process a gate runs in: JAX's platform chosen before JAX starts, the backend guard, the environment
checked before anything compiles, and the core an xdist worker runs on.

Importing this module sets the environment, so the plugin imports it before anything imports JAX.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from .. import _config, _cores

# JAX reads JAX_PLATFORMS when it starts. Without a request, the runtime is the CPU: this also lets the
# CUDA plugin load for ahead-of-time GPU compiles on hosts without a GPU. A TPU or GPU host asks for its
# backend explicitly (tox -e tpu / -e gpu set JAX_PLATFORMS), and the guard below holds it to that.
_config.default_platforms()  # unset, empty or blank: cpu
REQUESTED_PLATFORMS = os.environ["JAX_PLATFORMS"]
if "tpu" not in REQUESTED_PLATFORMS:
    # No TPU runtime here, only the compiler. Ahead-of-time compiles claim libtpu's single-process lock, and
    # xdist workers each need libtpu. Naming a host type and worker spares libtpu's metadata-server lookup
    # and its page of warnings; the compiled HLO is byte-identical with and without (checked).
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-1")
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
# Native log lines below this severity (0 INFO, 1 WARNING, 2 ERROR) are not shown while JAX starts; XLA's own
# variable, so a user's setting wins. The CUDA plugin's notices on a host without CUDA are written before any
# flag is read, so the guard holds file descriptor 2 while JAX starts and drops them itself (see quiet).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

# A native log line: absl's and glog's prefix, severity first (I0000 00:00:1796.5  123 file.cc:31] text).
_LOG_LINE = re.compile(rb"^([IWEF])\d{4} \d\d:\d\d:[\d.]+\s+\d+ [^\]\s]+:\d+\] ?(.*)$")
# What absl and glog print before their first message when nothing initialized them: no news.
_PREINIT_NOTICES = (
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    b"WARNING: Logging before InitGoogle() is written to STDERR",
)
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}


def min_log_level() -> int:
    """The severity below which native log lines are dropped (``TF_CPP_MIN_LOG_LEVEL``; never fatal ones)."""
    try:
        return min(int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "1")), 3)
    except ValueError:
        return 1


def quiet(text: bytes, level: int | None = None) -> bytes:
    """``text`` without the native log lines below ``level`` (default :func:`min_log_level`) and absl's
    and glog's pre-initialization notices. The rest (a Python warning, an error, a fatal line) stays."""
    level = min_log_level() if level is None else level
    if level <= 0:
        return text
    kept = []
    for line in text.splitlines(keepends=True):
        bare = line.rstrip(b"\r\n")
        if bare in _PREINIT_NOTICES:
            continue
        match = _LOG_LINE.match(bare)
        if match and _SEVERITY[match.group(1)] < min(level, 3):
            continue
        kept.append(line)
    return b"".join(kept)


class _Held:
    """What native code and Python wrote to file descriptor 2 inside :func:`held_stderr`."""

    def __init__(self, file: Any) -> None:
        self._file = file
        self.dropped = False

    def text(self) -> str:
        self._file.seek(0)
        return self._file.read().decode(errors="replace")

    def drop(self) -> None:
        """Write nothing of it out: the caller says what went wrong in one line of its own."""
        self.dropped = True


@contextlib.contextmanager
def held_stderr() -> Iterator[_Held]:
    """Hold what is written to file descriptor 2 (libtpu, XLA, the CUDA plugin, Python) in the block; at
    its end write it out without the noise of a CPU-only host (:func:`quiet`), unless the block called
    ``drop()``. An exception leaving the block keeps what was held: it may explain it."""
    with tempfile.TemporaryFile() as file:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(file.fileno(), 2)
        held = _Held(file)
        try:
            yield held
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            if not held.dropped:
                file.seek(0)
                kept = quiet(file.read())
                if kept:
                    os.write(2, kept)


def worker_core(workerinput: dict[str, Any] | None, cores: list[int]) -> int | None:
    """The core an xdist worker runs on under ``--pin-workers``: worker i on the i-th usable core; None for
    the controller, or when there are fewer cores than workers (then the scheduler shares them)."""
    if not workerinput:
        return None
    index, count = int(str(workerinput["workerid"]).lstrip("gw")), int(workerinput["workercount"])
    return cores[index] if count <= len(cores) else None


def pin_worker(workerinput: dict[str, Any] | None, pin: bool) -> None:
    """Under ``--pin-workers`` (``pin``), put an xdist worker on its core; give any other gate process every
    core back. Call it before JAX starts its backend: its thread pools are sized to the cores it may use."""
    core = worker_core(workerinput, _cores.usable())
    if core is not None and pin:
        _cores.pin({core})
    elif not workerinput:
        _cores.free()  # a gate run started by a pinned process (a test's child run) gets every core back


# Set once XLA_FLAGS has been probed, to the flags that passed: the processes this one starts (xdist
# workers, the self-check's children) inherit it and do not probe the same flags again.
_FLAGS_CHECKED = _config.name("INVARIANTS_XLA_FLAGS_CHECKED")
_PROBE = "import jax; jax.devices()"


def check_xla_flags(timeout: float = 300) -> None:
    """Start JAX with this process's ``XLA_FLAGS`` in a child first: XLA aborts the process on a flag it
    rejects, which in the gate (file descriptor 2 held while the backend starts) ends the run with no word.
    A rejection is one line with XLA's own message (:class:`pytest.UsageError`); a child that fails for
    another reason (the platform) is left to :func:`guard_backend`."""
    flags = os.environ.get("XLA_FLAGS", "").strip()
    if not flags or os.environ.get(_FLAGS_CHECKED) == flags:
        return
    for flag in flags.split():
        # XLA takes 0 or garbage here and JAX then fails to start the CPU backend with a message about
        # process indices: said by name instead.
        if flag.startswith("--xla_force_host_platform_device_count"):
            value = flag.partition("=")[2]
            if not (value.isdigit() and int(value) >= 1):
                raise pytest.UsageError(
                    f"XLA_FLAGS={flags}: --xla_force_host_platform_device_count takes a number of devices, 1 "
                    f"or more (got {value!r}); correct or unset XLA_FLAGS"
                )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE],
            env=dict(os.environ),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return  # a slow host is not a bad flag; the run goes on and says what it meets
    if proc.returncode != 0:
        said = xla_flags_message(proc.stderr)
        if said is not None:
            raise pytest.UsageError(f"XLA_FLAGS={flags}: XLA rejects it: {said}; correct or unset XLA_FLAGS")
        return
    os.environ[_FLAGS_CHECKED] = flags


def xla_flags_message(stderr: bytes) -> str | None:
    """XLA's own words on a flag it rejects, from what a process that started JAX wrote (its first error or
    fatal log line about a flag, without the log prefix); None when no such line is there."""
    for line in stderr.splitlines():
        match = _LOG_LINE.match(line.strip())
        if match and match.group(1) in (b"E", b"F") and b"flag" in match.group(2).lower():
            return match.group(2).decode(errors="replace").strip().rstrip(".")
    return None


_PLATFORM_HINTS = {
    "tpu": "run on a TPU VM with jax[tpu] (tox -e tpu)",
    "cuda": "run on an NVIDIA host with jax[cuda12] (tox -e gpu)",
    "gpu": "run on an NVIDIA host with jax[cuda12] (tox -e gpu)",
}


def _cause(err: BaseException, held: str) -> str:
    """Why the backend did not start, in a few words: the error's first line, else the last Python error
    line JAX logged while it started (a plugin that failed to initialize), else the error's type."""
    first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), "")
    if not first:
        logged = re.findall(r"^\w*(?:Error|Exception): (.+)$", held, flags=re.M)
        first = logged[-1].strip() if logged else f"no backend came up ({type(err).__name__})"
    # JAX's own advice names a setting that makes JAX choose in silence: the gate never does.
    return re.sub(r"\s*\(set JAX_PLATFORMS='' to automatically choose an available backend\)", "", first)


def guard_backend() -> None:
    """Exit with one line when the requested backend is not there; never fall back to CPU in silence.

    Before it, :func:`check_xla_flags`. While JAX starts, file descriptor 2 is held: what the CUDA plugin
    and libtpu say on a CPU-only host is dropped (:func:`quiet`), and when the backend is missing all of it
    is, so that the one line is the whole message."""
    check_xla_flags()
    wanted = _config.requested_platforms()
    with held_stderr() as held:
        import jax  # here JAX starts: after the environment is set, with stderr held

        try:
            platform = jax.devices()[0].platform
        except Exception as err:  # RuntimeError, or an AssertionError when a plugin failed to initialize
            held.drop()
            asked = wanted[0] if wanted else REQUESTED_PLATFORMS
            todo = _PLATFORM_HINTS.get(asked, "name a platform JAX has here")
            raise pytest.UsageError(
                f"JAX_PLATFORMS={REQUESTED_PLATFORMS}: backend not available on this host "
                f"({_cause(err, held.text())}); unset JAX_PLATFORMS to run on the CPU (TPU and GPU targets "
                f"still compile ahead of time), or {todo}"
            ) from None
    aliases = {"cuda": "gpu", "rocm": "gpu"}
    if wanted and aliases.get(wanted[0], wanted[0]) != aliases.get(platform, platform):
        raise pytest.UsageError(
            f"JAX_PLATFORMS={REQUESTED_PLATFORMS}: asked for {wanted[0]} but JAX runs on {platform}"
        )
