"""``python -m invariants bisect`` and ``matrix``: the suite across JAX releases, in isolated environments.

Each release gets its own virtual environment, built with ``uv venv`` + ``uv pip install`` and cached under
``~/.cache/jax-embedding-invariants/envs/jax-<version>`` (``--cache-dir`` to move it). An environment holds
JAX, jaxlib, numpy and equinox pinned by :func:`choose_pins`, and the suite's test dependencies (pytest,
syrupy, pytest-benchmark, packaging, scipy). The project itself is **not** installed into it: the suite
runs from this checkout (``cwd`` and ``PYTHONPATH`` = the repository root), so one cached environment
serves every checkout and never runs stale code.

**bisect**: the verdict of a release is ``holds`` when every selected non-structure item (invariants,
correctness checks) passes or xfails in that release, ``fails`` when one fails. Structure snapshots are
never part of the verdict: they were recorded with one release and differ on every other by design. The
default selection ``-k test_invariant`` is every invariant item; narrow it with ``-k`` and ``--programs``.
The search walks the releases from ``--good`` towards ``--bad`` (either may be the newer one, so it finds
"the first release where X breaks" and "the first release where X holds" alike) and binary-searches for
the first release whose verdict differs from ``--good``'s. A release whose environment does not install
is skipped, as ``git bisect skip`` does. It prints the boundary, the failing items on each side and the
structural diff of their programs (snapshot summaries rendered in each of the two environments).

**matrix**: the structure tier of a few canonical programs (f32) in each release, on ``cpu`` and, where
``jax[tpu]==VERSION`` installs, on ``tpu-v5e`` ahead of time; a markdown table and a PNG.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from . import _results
from ._errors import InvariantsError

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INDEX = "https://pypi.org/simple"
DEFAULT_CACHE = Path.home() / ".cache" / "jax-embedding-invariants" / "envs"
MARKER = "invariants-env.json"
# The suite's own test dependencies; versions float (they run on every JAX this tool supports).
SUITE_DEPS = ("pytest", "syrupy", "pytest-benchmark", "packaging", "scipy")
# Non-structure kinds decide a verdict; the throughput tier is never selected (timing is not bisectable).
VERDICT_KINDS = frozenset({"invariant", "correctness"})
# Oldest release the suite is known to run on (its APIs: jax.ShapeDtypeStruct(sharding=), topologies, ...).
OLDEST_SUPPORTED = Version("0.4.30")


# ---------------------------------------------------------------------------------------------------------
# Releases and pins.


def parse_pip_versions(text: str) -> list[str]:
    """The version strings of ``pip index versions`` output (its ``Available versions:`` line)."""
    for line in text.splitlines():
        if line.strip().startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    return []


def releases(versions: Iterable[str]) -> list[Version]:
    """Final releases among ``versions``, ascending, duplicates and unparsable strings dropped."""
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
    """What one release's environment installs (requirement strings for ``uv pip install``)."""

    jax: Version
    jaxlib: Version
    numpy: str
    equinox: str
    tpu: bool = False

    def requirements(self) -> list[str]:
        jax = f"jax[tpu]=={self.jax}" if self.tpu else f"jax=={self.jax}"
        return [jax, f"jaxlib=={self.jaxlib}", self.numpy, self.equinox, *SUITE_DEPS]

    @property
    def env_name(self) -> str:
        return f"jax-{self.jax}" + ("-tpu" if self.tpu else "")

    def to_json(self) -> dict[str, Any]:
        return {"requirements": self.requirements()}


def choose_pins(jax: Version, jaxlib_releases: Sequence[Version], tpu: bool = False) -> Pins:
    """Pins for ``jax``.

    * jaxlib: the newest jaxlib release not newer than ``jax``. Modern jax requires ``jaxlib <= jax`` and
      usually has a jaxlib of its own version; a patch release without one (jax 0.4.37, 0.5.2) uses the one
      before it (0.4.36, 0.5.1), which is what its own requirement allows.
    * numpy: ``numpy<2`` before jax 0.4.31 (0.4.30 was verified with numpy 1.26; wheels built before
      numpy 2 fail to import under it), else unpinned.
    * equinox: ``equinox==0.11.4`` before jax 0.4.31 (verified with 0.4.30), else unpinned: the resolver
      picks the newest equinox whose declared ``jax>=`` bound the release meets.
    """
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
    )


def check_index(index_url: str, timeout: float = 10.0) -> None:
    """Fail fast, in one line, when the package index does not answer."""
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
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def list_releases(package: str, index_url: str) -> list[Version]:
    """Final releases of ``package`` on ``index_url``, via ``pip index versions``."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", package, "--index-url", index_url,
           "--retries", "0", "--timeout", "15"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_pip_env(), check=False, timeout=120)
    found = releases(parse_pip_versions(proc.stdout))
    if not found:
        last = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        raise InvariantsError(f"{index_url}: cannot list {package} releases ({last})")
    return found


def resolve_version(text: str, available: Sequence[Version], flag: str) -> Version:
    """``text`` as a jax release that the index has; anything else is one line with the nearest ones."""
    try:
        v = Version(text)
    except InvalidVersion:
        raise InvariantsError(f"{flag} {text}: not a version") from None
    if v not in available:
        after = [a for a in available if a > v][:2]
        before = [a for a in available if a < v][-2:]
        near = [*before, *after]
        hint = f" (nearest: {', '.join(map(str, near))})" if near else ""
        raise InvariantsError(f"{flag} {text}: not a jax release on the index{hint}")
    if v < OLDEST_SUPPORTED:
        raise InvariantsError(f"{flag} {text}: the suite needs jax >= {OLDEST_SUPPORTED}")
    return v


# ---------------------------------------------------------------------------------------------------------
# Environments.


def _uv() -> list[str]:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if not found:
        raise InvariantsError("uv: not installed (pip install uv); it builds the per-release environments")
    return [found]


def env_python(env: Path) -> Path:
    return env / "bin" / "python"


def env_healthy(env: Path, pins: Pins) -> bool:
    """A cached environment is reused when its marker records these pins and its interpreter exists."""
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


def ensure_env(pins: Pins, cache_dir: Path, index_url: str, log: Callable[[str], None] = print) -> Path:
    """The cached environment for ``pins``, built if missing or unhealthy. One line on failure."""
    env = cache_dir / pins.env_name
    if env_healthy(env, pins):
        return env
    cache_dir.mkdir(parents=True, exist_ok=True)
    partial = cache_dir / f"{pins.env_name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    start = time.perf_counter()
    what = " ".join(pins.requirements()[:4])
    try:
        uv = _uv()
        _run_checked([*uv, "venv", "-q", "--python", sys.executable, str(partial)], what)
        _run_checked(
            [*uv, "pip", "install", "-q", "--python", str(env_python(partial)), "--index-url", index_url,
             *pins.requirements()],
            what,
        )  # fmt: skip
        env_vars = {**os.environ, "JAX_PLATFORMS": "cpu"}
        proc = subprocess.run([str(env_python(partial)), "-c", _HEALTH], capture_output=True, text=True,
                              env=env_vars, check=False, timeout=300)  # fmt: skip
        if proc.returncode != 0:
            raise InvariantsError(f"{what}: installs but does not import: {_last_line(proc)}")
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


def _run_checked(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=900)
    if proc.returncode != 0:
        raise InvariantsError(f"{what}: does not install: {_last_line(proc)}")


# ---------------------------------------------------------------------------------------------------------
# Running the suite in an environment.


@dataclasses.dataclass
class ReleaseRun:
    """One release's verdict on the selected items."""

    version: Version
    holds: bool
    items: list[dict[str, Any]]  # every results-file item
    seconds: float

    @property
    def word(self) -> str:
        return "holds" if self.holds else "fails"

    @property
    def failing(self) -> list[dict[str, Any]]:
        return [it for it in self.items if it.get("kind") in VERDICT_KINDS and it.get("outcome") == "failed"]


def suite_command(python: Path, k: str, targets: str, programs: str | None, results: Path, dump: Path,
                  tests: str = "tests/gate") -> list[str]:  # fmt: skip
    cmd = [str(python), "-m", "pytest", tests, "-q", "-p", "no:cacheprovider",
           "-m", "not slow and not throughput", "--targets", targets, "-k", k,
           "--results-json", str(results), "--hlo-dump-dir", str(dump),
           # Every assert as written: the specs scope invariants by version and mark known-bad ones as
           # ratchets, which would keep each release green; a bisect asks where the fact itself changed.
           "--raw-invariants"]  # fmt: skip
    if programs:
        cmd += ["--programs", programs]
    return cmd


def _suite_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["JAX_PLATFORMS"] = "cpu"
    env.setdefault("INVARIANTS_SELFCHECK_CHILD", "1")  # never start the self-check from here
    return env


def run_suite(env: Path, version: Version, args: argparse.Namespace, workdir: Path,
              tests: str = "tests/gate", k: str | None = None,
              timeout: float = 1200) -> tuple[dict[str, Any], float]:  # fmt: skip
    """Run the selection in ``env``; return the results file and the seconds it took. One line on failure."""
    folder = workdir / f"jax-{version}"
    folder.mkdir(parents=True, exist_ok=True)
    results = folder / "results.json"
    results.unlink(missing_ok=True)
    cmd = suite_command(
        env_python(env), k or args.k, args.targets, args.programs, results, folder / "hlo", tests
    )
    start = time.perf_counter()
    env_vars = _suite_env()
    # Older libtpu asks the GCE metadata server for its topology and waits on it off GCE.
    env_vars.setdefault("TPU_SKIP_MDS_QUERY", "1")
    try:
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env_vars, capture_output=True, text=True, check=False,
                              timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        raise InvariantsError(f"jax {version}: the suite did not finish in {timeout:.0f} s") from None
    seconds = time.perf_counter() - start
    (folder / "pytest.txt").write_text(proc.stdout + proc.stderr)
    if proc.returncode == 5 or (proc.returncode == 0 and not results.exists()):
        raise InvariantsError(f"jax {version}: -k {k or args.k!r} selects no items")
    if not results.exists():
        raise InvariantsError(
            f"jax {version}: the suite did not run (exit {proc.returncode}): {_last_line(proc)}; "
            f"see {folder / 'pytest.txt'}"
        )
    return _results.read(results), seconds


def verdict_of(version: Version, results: Mapping[str, Any], seconds: float) -> ReleaseRun:
    items = list(results.get("items", []))
    errors = [it for it in items if it.get("kind") == "error"]
    if errors:
        raise InvariantsError(
            f"jax {version}: {errors[0].get('nodeid')} errored; the suite may not run on it"
        )
    judged = [it for it in items if it.get("kind") in VERDICT_KINDS]
    if not judged:
        raise InvariantsError(f"jax {version}: the selection has no invariant or correctness items")
    holds = all(it.get("outcome") in ("passed", "xfailed", "skipped") for it in judged)
    return ReleaseRun(version, holds, items, seconds)


# ---------------------------------------------------------------------------------------------------------
# The search.


class Unusable(Exception):
    """A release that cannot be judged (its environment does not install); the search skips it."""


@dataclasses.dataclass
class Boundary:
    """Where the verdict changes: ``before`` has the reference verdict, ``after`` the other one."""

    before: Version
    after: Version
    tested: dict[Version, Any]  # version -> verdict value (or the Unusable message)
    skipped: list[Version]


def bisect_releases(order: Sequence[Version], verdict: Callable[[Version], Any]) -> Boundary:
    """Binary search along ``order`` for the first release whose verdict differs from ``order[0]``'s.

    ``verdict`` may raise :class:`Unusable` for a release in between: it is skipped. The endpoints must be
    usable and must differ, else one line says so. Calls ``verdict`` at most once per release.
    """
    if len(order) < 2:
        raise InvariantsError("bisect: --good and --bad must be two different releases")
    tested: dict[Version, Any] = {}
    skipped: list[Version] = []

    def holds_at(v: Version) -> Any:
        if v not in tested:
            tested[v] = verdict(v)
        return tested[v]

    candidates = list(order)
    ref = holds_at(candidates[0])
    other = holds_at(candidates[-1])
    if ref == other:
        raise InvariantsError(
            f"bisect: the verdict is {ref} at both {candidates[0]} and {candidates[-1]}; nothing to bisect"
        )
    lo, hi = 0, len(candidates) - 1  # candidates[lo] has ref, candidates[hi] does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            value = holds_at(candidates[mid])
        except Unusable as err:
            tested[candidates[mid]] = f"skipped: {err}"
            skipped.append(candidates.pop(mid))
            hi -= 1
            continue
        if value == ref:
            lo = mid
        else:
            hi = mid
    return Boundary(candidates[lo], candidates[hi], tested, skipped)


# ---------------------------------------------------------------------------------------------------------
# Rendering structures in an environment (runs as ``python -m invariants._bisect`` inside it).


def _render_child() -> int:
    """Read ``[[program, config, target], ...]`` on stdin, print ``{"p/c/t": snapshot summary}`` as JSON."""
    from ._compile import compile_here
    from ._hlo import parse_module
    from ._programs import CATALOG
    from ._snapshot import render_summary
    from ._structure import structure_of
    from ._targets import all_targets

    targets = all_targets()
    out = {}
    for program, config, target in json.loads(sys.stdin.read()):
        compiled = compile_here(program, config, targets[target])
        structure = structure_of(parse_module(compiled.hlo_text, f"{program}/{config}/{target}"))
        out[f"{program}/{config}/{target}"] = render_summary(compiled, structure, CATALOG[program].doc)
    json.dump(out, sys.stdout)
    return 0


def render_in(env: Path, keys: Sequence[tuple[str, str, str]]) -> dict[str, str]:
    proc = subprocess.run(
        [str(env_python(env)), "-m", "invariants._bisect"], input=json.dumps([list(k) for k in keys]),
        cwd=REPO_ROOT, env=_suite_env(), capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    if proc.returncode != 0:
        return {"/".join(k): f"(could not render: {_last_line(proc)})" for k in keys}
    return dict(json.loads(proc.stdout))


def _keys_of(items: Iterable[Mapping[str, Any]], limit: int = 2) -> list[tuple[str, str, str]]:
    keys: list[tuple[str, str, str]] = []
    for it in items:
        if it.get("kind") != "invariant":
            continue
        for program in it.get("programs", []):
            key = (str(program), str(it.get("config")), str(it.get("target")))
            if key not in keys:
                keys.append(key)
    return keys[:limit]


def structural_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, n=1, lineterm="")
    return "\n".join(diff) or "(identical structure)"


# ---------------------------------------------------------------------------------------------------------
# The commands.


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--targets", default="cpu", help="suite targets (default: cpu)")
    p.add_argument("--programs", help="restrict the suite to these catalog programs (comma-separated)")
    p.add_argument("--index-url", default=DEFAULT_INDEX, help=f"package index (default: {DEFAULT_INDEX})")
    p.add_argument(
        "--cache-dir", type=Path, default=DEFAULT_CACHE, help=f"environments (default: {DEFAULT_CACHE})"
    )
    p.add_argument(
        "--keep", type=Path, help="keep each release's results, output and HLO dumps under this folder"
    )


def _describe(it: Mapping[str, Any]) -> str:
    measured = ", ".join(f"{k}={v}" for k, v in (it.get("measured") or {}).items())
    name = str(it.get("nodeid", "")).split("[", 1)[-1].rstrip("]")
    return f"{name}" + (f" ({it.get('assert')}: {measured})" if measured else f" ({it.get('problem')})")


def main_bisect(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="python -m invariants bisect",
        description="find the first JAX release where the selected items change verdict",
    )
    p.add_argument("--good", required=True, help="the reference release (its verdict is the 'before')")
    p.add_argument("--bad", required=True, help="a release whose verdict differs (older or newer)")
    p.add_argument("-k", default="test_invariant", help="pytest -k selection (default: every invariant item)")
    _common(p)
    args = p.parse_args(argv)
    start = time.perf_counter()
    check_index(args.index_url)
    jax_releases = list_releases("jax", args.index_url)
    good = resolve_version(args.good, jax_releases, "--good")
    bad = resolve_version(args.bad, jax_releases, "--bad")
    jaxlib_releases = list_releases("jaxlib", args.index_url)
    order = span(jax_releases, good, bad)
    print(f"bisect: {len(order)} releases from {good} to {bad}; "
          f"selection -k {args.k!r} --targets {args.targets}"
          + (f" --programs {args.programs}" if args.programs else ""))  # fmt: skip
    verdicts: dict[Version, ReleaseRun] = {}
    envs: dict[Version, Path] = {}
    with tempfile.TemporaryDirectory(prefix="invariants-bisect-") as tmp:
        workdir = args.keep or Path(tmp)

        def verdict(v: Version) -> bool:
            pins = choose_pins(v, jaxlib_releases)
            try:
                env = ensure_env(pins, args.cache_dir, args.index_url)
            except InvariantsError as err:
                if v in (good, bad):
                    raise
                print(f"  jax {v}: skipped ({err})")
                raise Unusable(str(err)) from None
            envs[v] = env
            results, seconds = run_suite(env, v, args, workdir)
            verdicts[v] = verdict_of(v, results, seconds)
            ver = verdicts[v]
            judged = sum(it.get("kind") in VERDICT_KINDS for it in ver.items)
            print(f"  jax {v} (jaxlib {pins.jaxlib}): {ver.word} "
                  f"({len(ver.failing)} failing of {judged}) in {seconds:.0f} s")  # fmt: skip
            return ver.holds

        boundary = bisect_releases(order, verdict)
        before, after = verdicts[boundary.before], verdicts[boundary.after]
        old, new = sorted((before, after), key=lambda x: x.version)
        change = "breaks" if old.holds else "holds"
        print()
        print(f"first release where the selection {change}: jax {new.version} (last with it "
              f"{'holding' if old.holds else 'failing'}: jax {old.version}); "
              f"{len(boundary.tested)} releases tested, {len(boundary.skipped)} skipped")  # fmt: skip
        for side in (old, new):
            print(f"jax {side.version}: {side.word}")
            for it in side.failing[:8]:
                print(f"  FAILED {_describe(it)}")
            if len(side.failing) > 8:
                print(f"  ... and {len(side.failing) - 8} more")
        keys = _keys_of(old.failing or new.failing)
        if keys:
            old_r = render_in(envs[old.version], keys)
            new_r = render_in(envs[new.version], keys)
            for key in keys:
                name = "/".join(key)
                print(f"\nstructure of {name}, jax {old.version} -> {new.version}:")
                print(structural_diff(old_r.get(name, ""), new_r.get(name, ""), f"jax {old.version}",
                                      f"jax {new.version}"))  # fmt: skip
    print(f"\nbisect: {time.perf_counter() - start:.0f} s")
    return 0


# ---------------------------------------------------------------------------------------------------------
# matrix


MATRIX_PROGRAMS = ("naive", "take", "vmap_naive", "eqx_embedding",
                   "grad_naive", "grad_take", "grad_vmap_naive", "grad_eqx_embedding")  # fmt: skip
MATRIX_METRICS = ("kernels", "while_loops", "dynamic_kernel_launches")
# The predicted-cost row: libtpu's estimate, on the targets whose compiler writes one (see invariants._cost).
PREDICTED_METRIC = "estimated_cycles"
# Only the seed configuration: pytest -k over ids like cpu-naive-f32 (and not f32-large, bf16, ...).
MATRIX_K = "test_structure and f32 and not large and not i8 and not 2d and not bf16"


@dataclasses.dataclass
class MatrixRow:
    version: str
    target: str
    program: str
    metrics: dict[str, int | None]


def matrix_rows(version: str, results: Mapping[str, Any]) -> list[MatrixRow]:
    rows = []
    for it in results.get("items", []):
        if it.get("kind") == "structure" and it.get("config") == "f32":
            rows.append(MatrixRow(version, str(it["target"]), str(it["program"]),
                                  {m: it.get(m) for m in (*MATRIX_METRICS, PREDICTED_METRIC)}))  # fmt: skip
    return rows


def render_matrix(rows: Sequence[MatrixRow], versions: Sequence[str], notes: Mapping[str, str]) -> str:
    """Markdown: one table per target; a cell is ``kernels / while loops / dynamic launches``."""
    out = []
    for target in sorted({r.target for r in rows}):
        programs = list(dict.fromkeys(r.program for r in rows if r.target == target))
        cells = {(r.program, r.version): r.metrics for r in rows if r.target == target}
        out.append(f"### {target}: kernels / while loops / dynamic kernel launches (f32)\n")
        out.append("| program | " + " | ".join(versions) + " |")
        out.append("|---|" + "---|" * len(versions))
        for prog in programs:
            row = []
            for v in versions:
                m = cells.get((prog, v))
                row.append(" / ".join("?" if m.get(k) is None else str(m.get(k)) for k in MATRIX_METRICS)
                           if m else "—")  # fmt: skip
            out.append(f"| {prog} | " + " | ".join(row) + " |")
        out.append("")
        if any(m.get(PREDICTED_METRIC) is not None for m in cells.values()):
            out.append(
                f"### {target}: predicted cost, estimated cycles per call (the compiler's own estimate)\n"
            )
            out.append("| program | " + " | ".join(versions) + " |")
            out.append("|---|" + "---:|" * len(versions))
            for prog in programs:
                row = []
                for v in versions:
                    m = cells.get((prog, v))
                    value = m.get(PREDICTED_METRIC) if m else None
                    row.append("—" if not m else "?" if value is None else f"{value:,}")
                out.append(f"| {prog} | " + " | ".join(row) + " |")
            out.append("")
    for key, note in notes.items():
        out.append(f"- {key}: {note}")
    return "\n".join(out).rstrip() + "\n"


def plot_matrix(rows: Sequence[MatrixRow], versions: Sequence[str], path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        raise InvariantsError(f"{path}: matplotlib is not installed (pip install matplotlib)") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [*MATRIX_METRICS]
    if any(r.metrics.get(PREDICTED_METRIC) is not None for r in rows):
        metrics.append(PREDICTED_METRIC)
    fig, axes = plt.subplots(1, len(metrics), figsize=(6 * len(metrics), 4.5))
    series = sorted({(r.target, r.program) for r in rows})
    # One colour per program (the same on every target), one line style per target: 16 series stay legible.
    programs = sorted({p for _, p in series})
    colours = {p: plt.get_cmap("tab10")(i % 10) for i, p in enumerate(programs)}
    for ax, metric in zip(axes, metrics, strict=True):
        for target, program in series:
            by_v = {
                r.version: r.metrics.get(metric) for r in rows if (r.target, r.program) == (target, program)
            }
            xs = [i for i, v in enumerate(versions) if by_v.get(v) is not None]
            ys = [by_v[versions[i]] for i in xs]
            if xs:
                style = "-" if target == "cpu" else "--"
                ax.plot(xs, ys, style, marker="o", color=colours[program], label=f"{target} {program}")
        ax.set_xticks(range(len(versions)), versions)
        ax.set_xlabel("jax release")
        ax.set_title(metric)
        if metric in ("dynamic_kernel_launches", PREDICTED_METRIC):
            ax.set_yscale("symlog")
            ax.set_ylim(bottom=0)  # launches are counts: no negative half of the symlog axis
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main_matrix(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m invariants matrix", description="key metrics across releases")
    p.add_argument("--versions", required=True, help="comma-separated jax releases, e.g. 0.4.30,0.5.3,0.10.2")
    p.add_argument(
        "--out", type=Path, default=REPO_ROOT / "artifacts" / "matrix", help="folder for table and PNG"
    )
    p.add_argument("--no-tpu", action="store_true", help="skip the TPU (jax[tpu]) environments")
    _common(p)
    args = p.parse_args(argv)
    if args.programs is None:
        args.programs = ",".join(MATRIX_PROGRAMS)
    start = time.perf_counter()
    check_index(args.index_url)
    jax_releases = list_releases("jax", args.index_url)
    wanted = [w.strip() for w in args.versions.split(",") if w.strip()]
    versions = sorted({resolve_version(w, jax_releases, "--versions") for w in wanted})
    jaxlib_releases = list_releases("jaxlib", args.index_url)
    rows: list[MatrixRow] = []
    notes: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="invariants-matrix-") as tmp:
        workdir = args.keep or Path(tmp)
        for v in versions:
            env = ensure_env(choose_pins(v, jaxlib_releases), args.cache_dir, args.index_url)
            args.targets = "cpu"
            results, seconds = run_suite(env, v, args, workdir / "cpu", tests="tests/gate/test_structure.py",
                                         k=MATRIX_K)  # fmt: skip
            rows += matrix_rows(str(v), results)
            print(f"  jax {v}: cpu structures in {seconds:.0f} s")
            if args.no_tpu:
                continue
            try:
                tenv = ensure_env(choose_pins(v, jaxlib_releases, tpu=True), args.cache_dir, args.index_url)
                args.targets = "tpu-v5e"
                results, seconds = run_suite(tenv, v, args, workdir / "tpu",
                                             tests="tests/gate/test_structure.py",
                                             k=MATRIX_K, timeout=240)  # fmt: skip
                got = matrix_rows(str(v), results)
                if not got:
                    raise InvariantsError("no tpu-v5e structure items (target unavailable in that release)")
                rows += got
                print(f"  jax {v}: tpu-v5e structures in {seconds:.0f} s")
            except InvariantsError as err:
                notes[f"tpu-v5e, jax {v}"] = f"skipped: {err}"
                print(f"  jax {v}: tpu-v5e skipped: {err}")
    names = [str(v) for v in versions]
    table = render_matrix(rows, names, notes)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "matrix.md").write_text(table)
    (args.out / "matrix.json").write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1))
    print(table)
    plot_matrix(rows, names, args.out / "matrix.png")
    print(
        f"matrix: {args.out / 'matrix.md'}, {args.out / 'matrix.png'} ({time.perf_counter() - start:.0f} s)"
    )
    return 0


def main(argv: list[str]) -> int:
    return main_bisect(argv)


if __name__ == "__main__":
    sys.exit(_render_child())
