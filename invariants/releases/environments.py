"""JAX releases, and one cached environment per release for ``bisect`` and ``matrix``.

An environment (``uv venv`` under ``--cache-dir``) holds JAX, jaxlib, numpy and equinox as
:func:`choose_pins` pins them, and the suite's test dependencies, never the project: the suite runs from
this checkout, so one environment serves every checkout and never runs stale code. ``jax[tpu]`` and, for a
GPU compiled ahead of time, ``jax[cuda12-local]`` (the CUDA plugin without NVIDIA's wheels: enough to
compile, not to run) get environments of their own."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from packaging.version import InvalidVersion, Version

from .. import _config
from .._errors import InvariantsError
from .._paths import PACKAGE_DIR
from .._supported import too_old
from .._trust import trusted_folder

DEFAULT_INDEX = "https://pypi.org/simple"
DEFAULT_CACHE = Path.home() / ".cache" / "jax-embedding-invariants" / "envs"
MARKER = "invariants-env.json"
_INSTEAD = "give a folder of your own with --cache-dir"
# Their versions float: they run on every JAX this tool supports.
SUITE_DEPS = ("pytest", "syrupy", "pytest-benchmark", "packaging", "scipy")
# Oldest release whose CUDA plugin compiles for a GPU ahead of time on a host without CUDA: the plugins of
# earlier releases fail cudaRuntimeGetVersion when the client starts, before any compile.
OLDEST_GPU_AOT = Version("0.9.2")
GPU_EXTRA = "cuda12-local"
# Oldest release whose jax[tpu] resolves from a package index alone: earlier extras pin libtpu-nightly, which
# only Google's own storage serves (a find-links page, not an index; PyPI has no such project).
OLDEST_TPU_FROM_INDEX = Version("0.5.1")


def parse_pip_versions(text: str) -> list[str]:
    for line in text.splitlines():
        if line.strip().startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    return []


def releases(versions: Iterable[str]) -> list[Version]:
    """Final releases, ascending, duplicates and unparsable strings dropped."""
    out: set[Version] = set()
    for v in versions:
        try:
            parsed = Version(v)
        except InvalidVersion:
            continue
        if not (parsed.is_prerelease or parsed.is_devrelease):
            out.add(parsed)
    return sorted(out)


def span(all_releases: Sequence[Version], start: Version, end: Version) -> list[Version]:
    """Releases from ``start`` to ``end`` inclusive, in walking order (descending when start > end)."""
    lo, hi = min(start, end), max(start, end)
    chosen = [v for v in all_releases if lo <= v <= hi]
    return chosen if start <= end else chosen[::-1]


@dataclasses.dataclass(frozen=True)
class Pins:
    jax: Version
    jaxlib: Version
    numpy: str
    equinox: str
    tpu: bool = False
    gpu: bool = False

    def requirements(self) -> list[str]:
        extras = [e for e, wanted in (("tpu", self.tpu), (GPU_EXTRA, self.gpu)) if wanted]
        jax = f"jax[{','.join(extras)}]=={self.jax}" if extras else f"jax=={self.jax}"
        return [jax, f"jaxlib=={self.jaxlib}", self.numpy, self.equinox, *SUITE_DEPS]

    @property
    def env_name(self) -> str:
        return f"jax-{self.jax}" + ("-tpu" if self.tpu else "") + ("-gpu" if self.gpu else "")

    def to_json(self) -> dict[str, object]:
        return {"requirements": self.requirements()}


def selected(targets: str, family: str) -> bool:
    """Whether ``targets`` (the --targets words) names a target of ``family`` (tpu, gpu)."""
    words = [w.strip() for w in targets.split(",")]
    return any(w in (family, "all") or w.startswith(f"{family}-") for w in words)


def gpu_selected(targets: str) -> bool:
    return selected(targets, "gpu")


def gpu_too_old(jax: Version) -> str | None:
    if jax >= OLDEST_GPU_AOT:
        return None
    return (
        f"jax {jax}: too old to compile for a GPU on this host (the CUDA plugin of jax < {OLDEST_GPU_AOT} "
        "fails cudaRuntimeGetVersion without CUDA); select no gpu targets, or releases from "
        f"{OLDEST_GPU_AOT} on"
    )


def tpu_too_old(jax: Version) -> str | None:
    if jax >= OLDEST_TPU_FROM_INDEX:
        return None
    return (
        f"jax {jax}: its jax[tpu] pins libtpu-nightly, which no package index serves (only Google's own "
        f"storage), so no TPU compiler installs for it; TPU targets compile from jax {OLDEST_TPU_FROM_INDEX} "
        "on"
    )


_TOO_OLD = {"tpu": tpu_too_old, "gpu": gpu_too_old}


def left_out(jax: Version, targets: str) -> dict[str, str]:
    """The accelerator families ``targets`` names that ``jax``'s release cannot compile for, each with why."""
    return {f: why for f, too_old in _TOO_OLD.items() if selected(targets, f) and (why := too_old(jax))}


def pins_for(
    jax: Version, jaxlib_releases: Sequence[Version], targets: str, host: str = "cpu"
) -> tuple[Pins, dict[str, str]]:
    """The pins that compile ``targets`` under ``jax``: libtpu for a TPU target, the CUDA plugin for a GPU
    one, on any host; and :func:`left_out`'s families, installed without their compiler. On a TPU ``host``
    libtpu is needed to run at all: a release without it is refused."""
    missing = left_out(jax, targets)
    tpu, gpu = (selected(targets, f) and f not in missing for f in ("tpu", "gpu"))
    return choose_pins(jax, jaxlib_releases, tpu=tpu or host == "tpu", gpu=gpu), missing


def choose_pins(
    jax: Version, jaxlib_releases: Sequence[Version], tpu: bool = False, gpu: bool = False
) -> Pins:
    """Pins for ``jax``, with libtpu (``tpu``) or the CUDA plugin (``gpu``). jaxlib: the newest not newer
    than ``jax``, as a patch release without its own jaxlib (0.4.37) requires. Before jax 0.4.31, numpy<2
    (wheels built before numpy 2 fail to import under it) and the equinox it was verified with."""
    for wanted, refused in ((tpu, tpu_too_old), (gpu, gpu_too_old)):
        if wanted and (reason := refused(jax)):
            raise InvariantsError(reason)
    below = [v for v in jaxlib_releases if v <= jax]
    if not below:
        raise InvariantsError(f"jax {jax}: no jaxlib release at or below it on the index")
    old = jax < Version("0.4.31")
    return Pins(
        jax=jax,
        jaxlib=max(below),
        numpy="numpy<2" if old else "numpy",
        equinox="equinox==0.11.4" if old else "equinox",
        tpu=tpu,
        gpu=gpu,
    )


def check_index(index_url: str, timeout: float = 10.0) -> None:
    url = index_url.rstrip("/") + "/jax/"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            resp.read(1)
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise InvariantsError(f"--index-url {index_url}: index unreachable ({reason})") from None


def _pip_env() -> dict[str, str]:
    # Only the index we were given: no pip.conf extra indexes or find-links, so pip and uv see one world.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return env | {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def list_releases(package: str, index_url: str) -> list[Version]:
    cmd = [sys.executable, "-m", "pip", "index", "versions", package, "--index-url", index_url]
    cmd += ["--retries", "0", "--timeout", "15"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_pip_env(), check=False, timeout=120)
    found = releases(parse_pip_versions(proc.stdout))
    if not found:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise InvariantsError(f"{index_url}: cannot list {package} releases ({last})")
    return found


def resolve_version(text: str, available: Sequence[Version], flag: str) -> Version:
    try:
        v = Version(text)
    except InvalidVersion:
        raise InvariantsError(f"{flag} {text}: not a version") from None
    if (why := too_old(v)) is not None:
        raise InvariantsError(f"{flag} {text}: {why}")
    if v not in available:
        near = [a for a in available if a < v][-2:] + [a for a in available if a > v][:2]
        hint = f" (nearest: {', '.join(map(str, near))})" if near else ""
        raise InvariantsError(f"{flag} {text}: not a jax release on the index{hint}")
    return v


def _uv() -> list[str]:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if not found:
        raise InvariantsError("uv: not installed (pip install uv); it builds the per-release environments")
    return [found]


def env_python(env: Path) -> Path:
    return env / "bin" / "python"


def env_healthy(env: Path, pins: Pins) -> bool:
    marker = env / MARKER
    if not (marker.is_file() and env_python(env).exists()):
        return False
    try:
        return bool(json.loads(marker.read_text()) == pins.to_json())
    except ValueError:
        return False


_HEALTH = (
    "import json, jax, jaxlib, numpy, equinox as eqx; import jax.numpy as jnp; "
    "e = eqx.nn.Embedding(weight=jnp.ones((4, 2))); jax.vmap(e)(jnp.arange(3)).block_until_ready(); "
    "print(json.dumps({'jax': jax.__version__, 'numpy': numpy.__version__, 'equinox': eqx.__version__}))"
)
# A GPU environment must also compile for a GPU ahead of time (an H100, its description in the env var).
_GPU_CONFIG_ENV = _config.name("INVARIANTS_HEALTH_GPU_CONFIG")
_HEALTH_GPU = (
    "import os, jax, jax.numpy as jnp, jax_cuda12_plugin; from jax.experimental import topologies; "
    "t = topologies.get_topology_desc(topology_name='h100', platform='cuda', "
    f"target_config=os.environ['{_GPU_CONFIG_ENV}'], topology='1x1x1'); "
    "s = jax.sharding.NamedSharding(jax.sharding.Mesh(t.devices, ('d',)), jax.sharding.PartitionSpec()); "
    "jax.jit(lambda a: a + 1).lower(jax.ShapeDtypeStruct((8,), jnp.float32, sharding=s)).compile()"
)
_GPU_CONFIG = PACKAGE_DIR / "data" / "h100_sxm.txtpb"


def ensure_env(pins: Pins, cache_dir: Path, index_url: str, log: Callable[[str], None] = print) -> Path:
    """The cached environment for ``pins``, built if missing or unhealthy. A folder that is not this user's
    own is refused: a planted interpreter would run as this user."""
    cache_dir = trusted_folder(
        cache_dir, [f"{pins.env_name}/bin"], named="release environments", instead=_INSTEAD, make=False
    )
    env = cache_dir / pins.env_name
    if env_healthy(env, pins):
        return env
    partial = cache_dir / f"{pins.env_name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    start = time.perf_counter()
    what = " ".join(pins.requirements()[:4])
    try:
        uv, python = _uv(), str(env_python(partial))
        failed = f"{what}: does not install"
        _run_checked([*uv, "venv", "-q", "--python", sys.executable, str(partial)], failed)
        install = ["pip", "install", "-q", "--python", python, "--index-url", index_url]
        _run_checked([*uv, *install, *pins.requirements()], failed)
        env_vars = {**os.environ, "JAX_PLATFORMS": "cpu"}
        health = functools.partial(_run_checked, env=env_vars, timeout=300, umask=-1)
        health([python, "-c", _HEALTH], f"{what}: installs but does not import")
        if pins.gpu:
            env_vars[_GPU_CONFIG_ENV] = _GPU_CONFIG.read_text()
            health([python, "-c", _HEALTH_GPU], f"{what}: installs but cannot compile for a GPU")
        (partial / MARKER).write_text(json.dumps(pins.to_json()))
        shutil.rmtree(env, ignore_errors=True)
        partial.rename(env)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    log(f"  built {env} in {time.perf_counter() - start:.0f} s")
    return env


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in (proc.stderr + proc.stdout).strip().splitlines() if ln.strip()]
    # uv ends with hints and causes; the line that names the conflict is the most useful one.
    for ln in lines:
        if "No solution found" in ln or "because" in ln or "Error" in ln:
            return ln.strip()[:300]
    return (lines[-1] if lines else f"exit {proc.returncode}").strip()[:300]


def _run_checked(
    cmd: list[str], failure: str, env: dict[str, str] | None = None, timeout: float = 900, umask: int = 0o077
) -> None:
    """``umask``: owner-only, whatever the user's, for what uv makes: it is run later, as this user's."""
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, check=False, timeout=timeout, umask=umask
    )
    if proc.returncode != 0:
        raise InvariantsError(f"{failure}: {_last_line(proc)}")
