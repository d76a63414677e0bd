"""The process a gate runs in: JAX's platform chosen before JAX starts, the backend guard, the environment
checked before anything compiles, and the core an xdist worker runs on.

Importing this module sets the environment, so the plugin imports it before anything imports JAX.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import IO, Any

import pytest

from .. import _config, _cores

# Without a request, the runtime is the CPU (the CUDA plugin still loads for ahead-of-time GPU compiles); a
# TPU or GPU host asks for its backend explicitly, and the guard below holds it to that.
_config.default_platforms()
REQUESTED_PLATFORMS = os.environ["JAX_PLATFORMS"]
if "tpu" not in REQUESTED_PLATFORMS:
    # Only the compiler here, loaded by every xdist worker; naming a host spares libtpu's metadata lookup.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-1")
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
# No INFO lines while JAX starts, unless the user asks (XLA's own variable).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

# absl's and glog's prefix, severity first (I0000 00:00:1796.5  123 file.cc:31] text).
_LOG_LINE = re.compile(rb"^([IWEF])\d{4} \d\d:\d\d:[\d.]+\s+\d+ [^\]\s]+:\d+\] ?(.*)$")
_PREINIT_NOTICES = (
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    b"WARNING: Logging before InitGoogle() is written to STDERR",
)
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}


def quiet(text: bytes, level: int | None = None) -> bytes:
    """``text`` without the native log lines below ``level`` (default ``TF_CPP_MIN_LOG_LEVEL``) and absl's
    and glog's pre-initialization notices."""
    if level is None:
        try:
            level = min(int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "1")), 3)
        except ValueError:
            level = 1
    if level <= 0:
        return text
    floor = min(level, 3)

    def noise(bare: bytes) -> bool:
        match = _LOG_LINE.match(bare)
        return bare in _PREINIT_NOTICES or bool(match and _SEVERITY[match.group(1)] < floor)

    return b"".join(line for line in text.splitlines(keepends=True) if not noise(line.rstrip(b"\r\n")))


class _Held:
    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self.dropped = False

    def text(self) -> str:
        self._file.seek(0)
        return self._file.read().decode(errors="replace")

    def drop(self) -> None:
        self.dropped = True


@contextlib.contextmanager
def held_stderr() -> Iterator[_Held]:
    """Hold what is written to file descriptor 2 in the block; at its end write it out without the noise of
    a CPU-only host (:func:`quiet`), unless the block called ``drop()``."""
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
    """Worker i's core under ``--pin-workers``; None for the controller, or with fewer cores than workers."""
    if not workerinput:
        return None
    index, count = int(str(workerinput["workerid"]).lstrip("gw")), int(workerinput["workercount"])
    return cores[index] if count <= len(cores) else None


def pin_worker(workerinput: dict[str, Any] | None, pin: bool) -> None:
    """Put an xdist worker on its core; give any other gate process every core back. Call it before JAX
    starts its backend: its thread pools are sized to the cores it may use."""
    core = worker_core(workerinput, _cores.usable())
    if core is not None and pin:
        _cores.pin({core})
    elif not workerinput:
        _cores.free()


# The flags that passed the probe, so that the processes this one starts do not probe them again.
_FLAGS_CHECKED = _config.name("INVARIANTS_XLA_FLAGS_CHECKED")
_PROBE = "import jax; jax.devices()"
# libtpu reads LIBTPU_INIT_ARGS when it loads: on a host without a chip, for a TPU target's first compile.
_TPU_PROBE = "\nfrom invariants.scope.targets import all_targets\nall_targets()['tpu-v5e'].devices()"
# Who reads each variable, and the form of its words on a flag it rejects: XLA logs through absl's log
# (E/F lines, matched by _LOG_LINE), libtpu through absl's flag parser ("ERROR: Unknown command line flag").
_READERS = {"XLA_FLAGS": "XLA", "LIBTPU_INIT_ARGS": "libtpu"}
_PARSER_ERROR = re.compile(rb"^ERROR: (.*flag.*)$", re.I)


def check_flags(timeout: float = 300) -> None:
    """Start JAX (and libtpu, where it is installed and ``LIBTPU_INIT_ARGS`` is set) with this process's
    ``XLA_FLAGS`` and ``LIBTPU_INIT_ARGS`` in a child first: XLA and libtpu end the process on a flag they
    reject, which in the gate ends the run with no word of its own, libtpu's mid-compile. A rejection is one
    line with the library's message, exit 2."""
    given = {v: flags for v in _READERS if (flags := os.environ.get(v, "").strip())}
    for flag in given.get("XLA_FLAGS", "").split():
        # XLA takes 0 or garbage here and JAX then fails with a message about process indices.
        if flag.startswith("--xla_force_host_platform_device_count"):
            value = flag.partition("=")[2]
            if not (value.isdigit() and int(value) >= 1):
                raise pytest.UsageError(
                    f"XLA_FLAGS={given['XLA_FLAGS']}: --xla_force_host_platform_device_count takes a number "
                    f"of devices, 1 or more (got {value!r}); correct or unset XLA_FLAGS"
                )
    checked = "\n".join(f"{v}={flags}" for v, flags in given.items())
    if not given or os.environ.get(_FLAGS_CHECKED) == checked:
        return
    tpu = "LIBTPU_INIT_ARGS" in given and importlib.util.find_spec("libtpu") is not None
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE + (_TPU_PROBE if tpu else "")],
            env=dict(os.environ),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return  # a slow host is not a bad flag; the run goes on and says what it meets
    if proc.returncode != 0:
        found = flags_message(proc.stderr)
        if found is not None:
            variable, said = found
            if variable not in given:  # the words' form names the other reader: the one variable set
                variable = next(iter(given))
            raise pytest.UsageError(
                f"{variable}={given[variable]}: {_READERS[variable]} rejects it: {said}; correct or unset "
                f"{variable}"
            )
        return
    os.environ[_FLAGS_CHECKED] = checked


def flags_message(stderr: bytes) -> tuple[str, str] | None:
    """``(variable, words)``: a library's own words on a flag it rejects (XLA's first error log line about
    a flag, or libtpu's flag parser's line), with the variable its form says was read; None when none."""
    for line in stderr.splitlines():
        match = _LOG_LINE.match(line.strip())
        if match and match.group(1) in (b"E", b"F") and b"flag" in match.group(2).lower():
            return "XLA_FLAGS", match.group(2).decode(errors="replace").strip().rstrip(".")
        match = _PARSER_ERROR.match(line.strip())
        if match:
            return "LIBTPU_INIT_ARGS", match.group(1).decode(errors="replace").strip().rstrip(".")
    return None


_PLATFORM_HINTS = {
    "tpu": "run on a TPU VM with jax[tpu] (tox -e tpu)",
    "cuda": "run on an NVIDIA host with jax[cuda12] (tox -e gpu)",
    "gpu": "run on an NVIDIA host with jax[cuda12] (tox -e gpu)",
}


def _cause(err: BaseException, held: str) -> str:
    """Why the backend did not start: the error's first line, else the last error JAX logged."""
    first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), "")
    if not first:
        logged = re.findall(r"^\w*(?:Error|Exception): (.+)$", held, flags=re.M)
        first = logged[-1].strip() if logged else f"no backend came up ({type(err).__name__})"
    # JAX's own advice names a setting that makes JAX choose in silence: the gate never does.
    return re.sub(r"\s*\(set JAX_PLATFORMS='' to automatically choose an available backend\)", "", first)


def guard_backend() -> None:
    """Exit with one line when the requested backend is not there; never fall back to CPU in silence."""
    check_flags()
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
