"""``python -m invariants bisect``: the first JAX release where the selected items change verdict.

A release's verdict is ``holds`` when every selected invariant and correctness item passes or xfails in it
(a compile that fails counts as failed), ``fails`` otherwise. Structure snapshots never vote: they were
recorded with one release and differ on every other by design. The gate runs in each release's cached
environment (:mod:`invariants.releases.environments`), in a child, with every assert as written (the specs'
version scopes and ratchets would keep each release green). The search binary-searches from ``--good``
towards ``--bad`` (either may be the newer), skipping a release that does not install as ``git bisect
skip`` does. At the boundary it prints what fails on each side and the structural diff of their programs
rendered in both environments, kernel ``code:`` lines included: a change of code generation behind equal
HLO is a difference too."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from packaging.version import Version

from .._errors import InvariantsError, NothingChecked, Parser
from .._paths import absolute_path, check_output_dir
from ..catalog.project import Project, add_project_options, project_from
from ..compile.child import GateRun, gate_command, gate_env, keys_child, last_line, run_gate, stage
from ..measure.measurement import measure
from ..records.results import Record, Results, compile_failure
from ..scope.placement import aimed_targets
from ..scope.targets import all_targets
from ..snapshot.diff import structural_diff, what_changed
from ..snapshot.render import render_summary
from .environments import (
    DEFAULT_CACHE,
    DEFAULT_INDEX,
    check_index,
    ensure_env,
    env_python,
    left_out,
    list_releases,
    pins_for,
    resolve_version,
    span,
)

_MARKERS = {"structure": "snapshot"}  # a tier's marker where it is not its name
# Timing is not bisectable: the throughput tier is never selected.
VERDICT_KINDS = frozenset({"invariant", "correctness"})


@dataclasses.dataclass
class ReleaseRun:
    version: Version
    holds: bool
    items: list[Record]
    seconds: float

    @property
    def word(self) -> str:
        return "holds" if self.holds else "fails"

    @property
    def failing(self) -> list[Record]:
        return [it for it in _judged(self.items) if it.outcome == "failed"]


def _judged(items: Iterable[Record]) -> list[Record]:
    """The items a verdict is made of: invariants, correctness checks, and compiles that failed."""
    return [it for it in items if it.kind in VERDICT_KINDS or compile_failure(it)]


def suite_run(
    python: Path,
    k: str,
    targets: str,
    programs: str | None,
    results: Path,
    dump: Path,
    tests: str = "",
    configs: str | None = None,
    project: Project | None = None,
) -> GateRun:
    """The gate's run in a release's environment, every assert as written."""
    return GateRun(
        python=python,
        tests=tests,
        targets=targets,
        programs=programs,
        configs=configs,
        k=k,
        results=results,
        dump_dir=dump,
        raw_invariants=True,
        staged=True,
        project=project or Project(),
    )


def run_suite(
    env: Path,
    version: Version,
    workdir: Path,
    *,
    k: str,
    targets: str,
    programs: str | None,
    configs: str | None = None,
    tests: str = "",
    project: Project | None = None,
    timeout: float = 1200,
    kept: bool = True,
) -> tuple[Results, float]:
    """The results file and the seconds it took. A failure's line names the child's output where it is
    ``kept``; a temporary folder is gone when the line is read."""
    folder = workdir / f"jax-{version}"
    results, dump = folder / "results.json", folder / "hlo"
    run = suite_run(env_python(env), k, targets, programs, results, dump, tests, configs, project)
    env_vars = gate_env(_off_gce(), pythonpath=True, project=run.project)
    child = run_gate(gate_command(run), env=env_vars, folder=folder, timeout=timeout)
    if child.timed_out:
        raise InvariantsError(f"jax {version}: the suite did not finish in {timeout:.0f} s")
    if child.returncode == 5 or (child.returncode == 0 and child.results is None):
        raise InvariantsError(f"jax {version}: -k {k!r} selects no items")
    if child.returncode == NothingChecked.status:  # a target asked for that this release cannot compile
        raise NothingChecked(f"jax {version}: {last_line(child.log)}")
    if child.results is None:
        where = f"see {child.log}" if kept else "--keep DIR keeps its whole output"
        raise InvariantsError(
            f"jax {version}: the suite did not run (exit {child.returncode}): {last_line(child.log)}; {where}"
        )
    return child.results, child.seconds


def _off_gce() -> dict[str, str]:
    """A release's children compile for a TPU ahead of time, on any host. Older libtpu asks the GCE metadata
    server for its topology, waits on it off GCE, then fails; and libtpu takes a lock file that another
    process compiling beside it (a test, versus) holds: the child would fail on it."""
    wanted = {"TPU_SKIP_MDS_QUERY": "1", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
    return {k: v for k, v in wanted.items() if k not in os.environ}


# How pytest's last line begins when it refuses its input.
_REFUSED = ("error: ", "ERROR: ")


def check_selection(
    k: str,
    targets: str,
    programs: str | None,
    configs: str | None = None,
    *,
    tests: str = "",
    kinds: Sequence[str] = ("invariant", "correctness"),
    project: Project | None = None,
    said: str | None = None,
) -> int:
    """How many items of ``kinds`` the selection selects, collected here before any release installs: none,
    or a selection the gate refuses, is one line. -1 where the collection cannot run here (in 300 s): the
    releases' runs say what they meet. ``said``: the options as the user gave them."""
    project = project or Project()
    run = GateRun(
        targets, Path(), Path(), tests=tests, programs=programs, configs=configs, k=k, project=project
    )
    proc = _collect_only(run, kinds)
    if proc is None:
        return -1
    if proc.returncode not in (0, 5):
        refused = _refusal(proc.stderr + proc.stdout)
        if refused is None:
            return -1
        raise InvariantsError(refused)
    selected = sum("::" in ln for ln in proc.stdout.splitlines())
    if selected == 0:
        given = said if said is not None else _selection(k, targets, programs, configs, project)
        given = given or f"the default selection (-k {k!r} on {targets})"
        raise InvariantsError(
            f"{given}: selects no {' or '.join(kinds)} item; widen -k or --programs (pytest invariants/gate "
            "--collect-only -q with the same options lists the items)"
        )
    return selected


def _collect_only(run: GateRun, kinds: Sequence[str]) -> subprocess.CompletedProcess[str] | None:
    """``run`` collected as a release's child runs it, in a scratch folder; None past 300 s."""
    with tempfile.TemporaryDirectory(prefix="invariants-selection-") as tmp:
        folder = Path(tmp)
        run = dataclasses.replace(
            run, results=folder / "results.json", dump_dir=folder / "hlo", raw_invariants=True
        )
        try:
            return subprocess.run(
                # The last -m wins: the items of ``kinds`` alone, whatever the run's own -m.
                [*gate_command(run), "--collect-only", "-m", " or ".join(_MARKERS.get(t, t) for t in kinds)],
                cwd=folder,
                env=gate_env(project=run.project),
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return None


def _refusal(output: str) -> str | None:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    refused = next((ln for ln in reversed(lines) if ln.startswith(_REFUSED)), None)
    return None if refused is None else refused.removeprefix("error: ").removeprefix("ERROR: ")


def _selection(
    k: str | None, targets: str | None, programs: str | None, configs: str | None, project: Project
) -> str:
    """The selection's options as given."""
    flags = ("-k", "--targets", "--programs", "--configs")
    given = zip(flags, (None if k is None else repr(k), targets, programs, configs), strict=True)
    said = [f"{flag} {value}" for flag, value in given if value]
    return " ".join(said + ([project.describe()] if project.own else []))


def verdict_of(version: Version, results: Results, seconds: float) -> ReleaseRun:
    """A compile that fails is the release's verdict; any other error says the suite cannot run on it, and
    an item the tool's limit on the release skipped (an API it lacks) that the selection cannot be judged
    there (:class:`~invariants._errors.NothingChecked`, the line naming the API)."""
    items = results.items
    lacking = [it for it in items if it.kind == "skipped" and it.get("lacks")]
    if lacking:
        more = f" (and {len(lacking) - 1} more items)" if len(lacking) > 1 else ""
        raise NothingChecked(f"{lacking[0].reason}{more}")  # it names the release
    errors = [it for it in items if it.kind == "error" and compile_failure(it) is None]
    if errors:
        raise InvariantsError(f"jax {version}: {errors[0].nodeid} errored; the suite may not run on it")
    judged = _judged(items)
    if not judged:
        raise InvariantsError(f"jax {version}: the selection has no invariant or correctness items")
    holds = all(it.outcome in ("passed", "xfailed", "skipped") for it in judged)
    return ReleaseRun(version, holds, items, seconds)


class Unusable(Exception):
    """A release whose environment does not install: the search skips it."""


@dataclasses.dataclass
class Boundary:
    before: Version
    after: Version
    tested: dict[Version, object]  # a verdict, or why it was skipped
    skipped: list[Version]


def bisect_releases(order: Sequence[Version], verdict: Callable[[Version], object]) -> Boundary:
    """The first release along ``order`` whose verdict differs from ``order[0]``'s, each judged at most
    once; the ends must be usable and differ."""
    if len(order) < 2:
        raise InvariantsError("bisect: --good and --bad must be two different releases")
    tested: dict[Version, object] = {}
    skipped: list[Version] = []

    def holds_at(v: Version) -> object:
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


def _render_child() -> int:
    """In a release's environment: ``[[program, config, target], ...]`` on stdin, their snapshot summaries
    out as JSON."""
    # They start JAX: in the release's environment, not when a command imports bisect.
    from ..catalog.downstream import load_project
    from ..compile.artifacts import compile_here

    _, programs = load_project(Project.from_env())
    targets = all_targets()
    out = {}
    for name, config, target in json.loads(sys.stdin.read()):
        program = programs.program(name)
        measured = measure(compile_here(program, config, targets[target]), targets[target])
        out[f"{name}/{config}/{target}"] = render_summary(measured, program.doc)
    json.dump(out, sys.stdout)
    return 0


def render_in(env: Path, keys: Sequence[tuple[str, str, str]], project: Project) -> dict[str, str]:
    child_env = {**gate_env(_off_gce(), pythonpath=True, project=project), **project.environment()}
    try:  # this module, run as __main__ in the release's environment
        out = keys_child(__name__, keys, env=child_env, what="render", python=env_python(env), cwd=stage())
    except InvariantsError as err:
        return {"/".join(k): f"(could not render: {err})" for k in keys}
    return dict(out)


def _keys_of(items: Iterable[Record], limit: int = 2) -> list[tuple[str, str, str]]:
    invariants = [it for it in items if it.kind == "invariant"]
    keys = ((p, str(it.config), str(it.target)) for it in invariants for p in it.program_names())
    return list(dict.fromkeys(keys))[:limit]


def add_release_options(p: argparse.ArgumentParser, targets: str | None = "cpu") -> None:
    """``targets``: the default of ``--targets`` (None: :func:`default_targets`)."""
    what = targets or "the targets a project's spec files name, else cpu"
    p.add_argument("--targets", default=targets, help=f"suite targets (default: {what})")
    p.add_argument(
        "--programs",
        help="restrict the suite to these programs, as the gate's --programs takes them: names, patterns, "
        "kind:K or tag:T (tag:user: every program of --spec-dir); comma-separated",
    )
    add_project_options(p)
    p.add_argument("--index-url", default=DEFAULT_INDEX, help=f"package index (default: {DEFAULT_INDEX})")
    p.add_argument(
        "--cache-dir",
        type=absolute_path,
        default=DEFAULT_CACHE,
        help=f"environments (default: {DEFAULT_CACHE})",
    )
    p.add_argument(
        "--keep", type=Path, help="keep each release's results, output and HLO dumps under this folder"
    )


def default_targets(project: Project, programs: str | None) -> str:
    """Those a project's spec files name for its selected programs, else ``cpu``."""
    if not project.own:
        return "cpu"
    from ..catalog.downstream import load_project  # it imports JAX: not when the command loads

    known = load_project(project)[1]
    declared = [known[p] for p in known.select(programs or "tag:user") if known[p].aimed]
    return ",".join(aimed_targets(declared)) or "cpu"


def _describe(it: Record) -> str:
    measured = ", ".join(f"{k}={v}" for k, v in (it.get("measured") or {}).items())
    name = it.nodeid.split("::", 1)[-1]
    if compile_failure(it) is not None:
        return f"{name} ({it.reason})"
    return f"{name}" + (f" ({it.get('assert')}: {measured})" if measured else f" ({it.get('problem')})")


def _print_failing(side: ReleaseRun, shown: int = 8) -> None:
    print(f"jax {side.version}: {side.word}")
    for it in side.failing[:shown]:
        print(f"  FAILED {_describe(it)}")
    if len(side.failing) > shown:
        print(f"  ... and {len(side.failing) - shown} more")


@dataclasses.dataclass
class _Bisection:
    args: argparse.Namespace
    project: Project
    jaxlib_releases: Sequence[Version]
    ends: tuple[Version, Version]
    workdir: Path
    verdicts: dict[Version, ReleaseRun] = dataclasses.field(default_factory=dict)
    envs: dict[Version, Path] = dataclasses.field(default_factory=dict)

    def verdict(self, v: Version) -> bool:
        """The release's verdict; one the suite cannot judge as asked is skipped (:class:`Unusable`), or, at
        an end, stops the bisect: exit 2 where it does not install, 4 where a target cannot compile or the
        tool's limit on the release (an API it lacks) skipped a selected item."""
        args = self.args
        try:
            pins, missing = pins_for(v, self.jaxlib_releases, args.targets)
            if missing:
                raise NothingChecked(f"jax {v}: {'; '.join(missing.values())}")
            env = ensure_env(pins, args.cache_dir, args.index_url)
            results, seconds = run_suite(
                env,
                v,
                self.workdir,
                k=args.k,
                targets=args.targets,
                programs=args.programs,
                configs=args.configs,
                project=self.project,
                kept=args.keep is not None,
            )
            ver = verdict_of(v, results, seconds)
        except InvariantsError as err:
            if v in self.ends:
                raise
            print(f"  jax {v}: skipped ({err})")
            raise Unusable(str(err)) from None
        self.envs[v] = env
        self.verdicts[v] = ver
        judged = sum(it.kind in VERDICT_KINDS for it in ver.items)
        print(
            f"  jax {v} (jaxlib {pins.jaxlib}): {ver.word} "
            f"({len(ver.failing)} failing of {judged}) in {seconds:.0f} s"
        )
        return ver.holds

    def report(self, boundary: Boundary) -> int:
        """The first release of the change and its proof; exit 4 naming none where a release between the
        last two judged could not be (the change may be in it)."""
        old, new = sorted(
            (self.verdicts[boundary.before], self.verdicts[boundary.after]), key=lambda x: x.version
        )
        change = "breaks" if old.holds else "holds"
        print()
        between = [v for v in boundary.skipped if old.version < v < new.version]
        if between:
            why = "; ".join(_why_skipped(boundary, v) for v in between)
            unjudged = ", ".join(f"jax {v}" for v in between)
            print(
                f"bisect: no first release named: the selection {change} between jax {old.version} and jax "
                f"{new.version}, and {unjudged} between them could not be judged ({why})"
            )
            for side in (old, new):
                _print_failing(side)
            return NothingChecked.status
        print(
            f"first release where the selection {change}: jax {new.version} (last with it "
            f"{'holding' if old.holds else 'failing'}: jax {old.version}); "
            f"{len(boundary.tested)} releases tested, {len(boundary.skipped)} skipped"
            + "".join(f"; jax {v} skipped: {_why_skipped(boundary, v)}" for v in boundary.skipped)
        )
        for side in (old, new):
            _print_failing(side)
        keys = _keys_of(old.failing or new.failing)
        if not keys:
            return 0
        old_r, new_r = (render_in(self.envs[v], keys, self.project) for v in (old.version, new.version))
        for name in ("/".join(key) for key in keys):
            a, b = old_r.get(name, ""), new_r.get(name, "")
            print(f"\nstructure of {name}, jax {old.version} -> {new.version}:")
            print(structural_diff(a, b, f"jax {old.version}", f"jax {new.version}"))
            print(f"changed: {what_changed(a, b)}")
        return 0


def _why_skipped(boundary: Boundary, v: Version) -> str:
    return str(boundary.tested[v]).removeprefix("skipped: ")


def main_bisect(argv: list[str]) -> int:
    p = Parser(
        prog="python -m invariants bisect",
        description="find the first JAX release where the selected items change verdict",
    )
    p.add_argument("--good", required=True, help="the reference release (its verdict is the 'before')")
    p.add_argument("--bad", required=True, help="a release whose verdict differs (older or newer)")
    p.add_argument("-k", help="pytest -k selection (default: test_invariant, every invariant item)")
    p.add_argument(
        "--configs",
        help="restrict the suite to these configurations: ids such as f32, or patterns such as 'bf16*'",
    )
    add_release_options(p, targets=None)
    args = p.parse_args(argv)
    # Said now, not after installing the first release.
    if args.keep is not None:
        check_output_dir(args.keep, "--keep")
    project = project_from(args)
    said = _selection(args.k, args.targets, args.programs, args.configs, project)
    args.k = args.k if args.k is not None else "test_invariant"
    if args.targets is None:
        args.targets = default_targets(project, args.programs)
    selected = check_selection(args.k, args.targets, args.programs, args.configs, project=project, said=said)
    start = time.perf_counter()
    check_index(args.index_url)
    jax_releases = list_releases("jax", args.index_url)
    good = resolve_version(args.good, jax_releases, "--good")
    bad = resolve_version(args.bad, jax_releases, "--bad")
    jaxlib_releases = list_releases("jaxlib", args.index_url)
    order = span(jax_releases, good, bad)
    for flag, v in (("--good", good), ("--bad", bad)):  # one line now, not after installing the other
        if missing := left_out(v, args.targets):
            raise NothingChecked(
                f"bisect: {flag} {v}: {'; '.join(missing.values())}: --targets {args.targets} cannot be "
                "compared there; nothing bisected"
            )
    given = _selection(args.k, args.targets, args.programs, args.configs, project)
    print(
        f"bisect: {len(order)} releases from {good} to {bad}; selection {given}"
        + (f" ({selected} items here)" if selected > 0 else "")
    )
    with tempfile.TemporaryDirectory(prefix="invariants-bisect-") as tmp:
        bisection = _Bisection(args, project, jaxlib_releases, (good, bad), args.keep or Path(tmp))
        status = bisection.report(bisect_releases(order, bisection.verdict))
    print(f"\nbisect: {time.perf_counter() - start:.0f} s")
    return status


if __name__ == "__main__":
    sys.exit(_render_child())
