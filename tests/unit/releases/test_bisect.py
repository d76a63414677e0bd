"""Unit tests of the release bisect and matrix: no network, no environments, fake predicates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from invariants._errors import InvariantsError, NothingChecked
from invariants._supported import ReleaseLacks
from invariants.compile.child import gate_command
from invariants.records.compiled import Key
from invariants.records.results import (
    PROPERTY,
    Failure,
    Record,
    Results,
    compile_name,
    entry,
    error_entry,
    from_json,
    lacks_property,
    read,
    record,
    skipped_entry,
    to_json,
    write,
)
from invariants.releases import bisect as b
from invariants.releases import environments as r
from invariants.releases import matrix as m

V = Version
PIP_OUTPUT = """jax (0.10.2)
Available versions: 0.10.2, 0.10.1, 0.9.0.1, 0.9.0, 0.5.3, 0.5.2, 0.4.38, 0.4.37, 0.4.31, 0.4.30, 0.4.1
  INSTALLED: 0.10.2
"""
JAXLIBS = [V(s) for s in ("0.4.30", "0.4.31", "0.4.36", "0.4.38", "0.5.1", "0.5.3", "0.9.0.1", "0.10.2")]


@pytest.fixture
def selection_checked(monkeypatch):
    """For the tests whose fake index and suite stand in for releases: the selection counts as collected
    (the real collection, a child run, is tested on its own below), and their fake environments render no
    snapshot of a failing key."""
    monkeypatch.setattr(b, "check_selection", lambda *args, **kwargs: 1)
    monkeypatch.setattr(b, "render_in", lambda env, keys, project=None: {})
    monkeypatch.setattr(m, "check_selection", lambda *args, **kwargs: 1)


# What a record of each kind holds where a test's item does not say (what it tests is what it says).
_FILLED: dict[str, dict[str, Any]] = {
    "structure": {"target": "cpu", "program": "p", "config": "f32"},
    "invariant": {
        "id": "i",
        "target": "cpu",
        "programs": ["p"],
        "config": "f32",
        "assert": "kernels == 1",
        "holds": True,
        "measured": {},
    },
    "correctness": {"id": "c", "program": "p", "config": "f32", "distribution": "uniform", "problem": None},
}


def _results(items: list[dict]) -> Results:
    """A results file of ``items`` as the reader returns it, each made by the results module's ``record``
    (an outcome and node id where they give none)."""
    made = []
    for i in items:
        fields = {k: v for k, v in i.items() if k not in ("kind", "outcome", "nodeid")}
        _, value = record(i["kind"], **{**_FILLED.get(i["kind"], {}), **fields})
        made.append({**value, "outcome": i.get("outcome", "passed"), "nodeid": i.get("nodeid", "n")})
    return Results.from_json({"items": made})


def test_parse_pip_versions_and_release_filter() -> None:
    raw = r.parse_pip_versions(PIP_OUTPUT)
    assert raw[0] == "0.10.2" and "0.4.1" in raw
    got = r.releases([*raw, "0.11.0rc1", "0.11.0.dev20260101", "not-a-version"])
    assert got == sorted(set(got)), "ascending, no duplicates"
    assert V("0.11.0rc1") not in got and V("0.11.0.dev20260101") not in got
    # packaging orders 0.9.0.1 after 0.9.0 and 0.10 after 0.9 (a string sort would not)
    assert got.index(V("0.9.0.1")) == got.index(V("0.9.0")) + 1
    assert got[-1] == V("0.10.2")
    assert r.parse_pip_versions("ERROR: No matching distribution found for jax") == []


def test_span_walks_in_both_directions() -> None:
    rel = r.releases(r.parse_pip_versions(PIP_OUTPUT))
    up = r.span(rel, V("0.4.30"), V("0.5.3"))
    assert up == [V(s) for s in ("0.4.30", "0.4.31", "0.4.37", "0.4.38", "0.5.2", "0.5.3")]
    assert r.span(rel, V("0.5.3"), V("0.4.30")) == up[::-1]


@pytest.mark.parametrize(
    ("jax", "jaxlib", "numpy", "equinox"),
    [
        ("0.4.30", "0.4.30", "numpy<2", "equinox==0.11.4"),
        ("0.4.31", "0.4.31", "numpy", "equinox"),
        ("0.4.37", "0.4.36", "numpy", "equinox"),  # a jax patch release without its own jaxlib
        ("0.5.2", "0.5.1", "numpy", "equinox"),
        ("0.9.0.1", "0.9.0.1", "numpy", "equinox"),
        ("0.10.2", "0.10.2", "numpy", "equinox"),
    ],
)
def test_choose_pins(jax: str, jaxlib: str, numpy: str, equinox: str) -> None:
    pins = r.choose_pins(V(jax), JAXLIBS)
    assert (pins.jaxlib, pins.numpy, pins.equinox) == (V(jaxlib), numpy, equinox)
    reqs = pins.requirements()
    assert reqs[:2] == [f"jax=={jax}", f"jaxlib=={jaxlib}"]
    assert {"pytest", "syrupy", "pytest-benchmark", "packaging", "scipy"} <= set(reqs)
    assert pins.env_name == f"jax-{jax}"
    if r.tpu_too_old(V(jax)):  # its jax[tpu] pins libtpu-nightly, from Google's storage alone
        with pytest.raises(InvariantsError, match=rf"^jax {jax}: its jax\[tpu\] pins libtpu-nightly"):
            r.choose_pins(V(jax), JAXLIBS, tpu=True)
        return
    tpu = r.choose_pins(V(jax), JAXLIBS, tpu=True)
    assert tpu.requirements()[0] == f"jax[tpu]=={jax}" and tpu.env_name == f"jax-{jax}-tpu"


@pytest.mark.parametrize(
    ("jax", "too_old"), [("0.4.30", True), ("0.5.0", True), ("0.5.1", False), ("0.10.2", False)]
)
def test_tpu_targets_compile_from_the_first_release_whose_libtpu_an_index_serves(
    jax: str, too_old: bool
) -> None:
    """jax[tpu] up to 0.5.0 pins libtpu-nightly (only on Google's storage); 0.5.1's pins libtpu alone."""
    assert (r.tpu_too_old(V(jax)) is not None) is too_old
    assert r.left_out(V(jax), "cpu") == {}
    assert set(r.left_out(V(jax), "cpu,tpu-v5e")) == ({"tpu"} if too_old else set())


def test_choose_pins_without_jaxlib_is_one_line() -> None:
    with pytest.raises(InvariantsError, match=r"^jax 0\.4\.1: no jaxlib release at or below it"):
        r.choose_pins(V("0.4.1"), JAXLIBS)


def _fake(boundary: int, order: list[Version], calls: list[Version], holds_before: bool = True):
    def verdict(v: Version) -> bool:
        calls.append(v)
        return holds_before if order.index(v) < boundary else not holds_before

    return verdict


@pytest.mark.parametrize("boundary", range(1, 12))
def test_bisect_finds_every_boundary_in_both_directions(boundary: int) -> None:
    order = [V(f"0.{i}.0") for i in range(12)]
    for holds_before in (True, False):  # "where X breaks" and "where X holds"
        calls: list[Version] = []
        found = b.bisect_releases(order, _fake(boundary, order, calls, holds_before))
        assert (found.before, found.after) == (order[boundary - 1], order[boundary])
        assert len(calls) == len(set(calls)) <= 2 + 4, "each release at most once, log2 steps"
    # walking downwards (--good newer than --bad): the first differing release going back
    down = order[::-1]
    found = b.bisect_releases(down, lambda v: order.index(v) >= boundary)
    assert (found.before, found.after) == (order[boundary], order[boundary - 1])


def test_bisect_skips_unusable_releases() -> None:
    order = [V(f"0.{i}.0") for i in range(9)]

    def verdict(v: Version) -> bool:
        if v in (V("0.4.0"), V("0.5.0")):
            raise b.Unusable("does not install")
        return order.index(v) < 5

    found = b.bisect_releases(order, verdict)
    # 0.5.0 (the true first differing one) cannot be judged, so the boundary widens to its neighbours
    assert (found.before, found.after) == (V("0.3.0"), V("0.6.0"))
    assert sorted(found.skipped) == [V("0.4.0"), V("0.5.0")]


def test_bisect_same_verdict_at_both_ends_is_one_line() -> None:
    order = [V("0.4.30"), V("0.5.0"), V("0.6.0")]
    with pytest.raises(InvariantsError, match=r"^bisect: the verdict is True at both 0\.4\.30 and 0\.6\.0"):
        b.bisect_releases(order, lambda v: True)
    with pytest.raises(InvariantsError, match="two different releases"):
        b.bisect_releases([V("0.4.30")], lambda v: True)


def test_resolve_version_errors() -> None:
    avail = [V("0.4.30"), V("0.4.31"), V("0.5.0")]
    assert r.resolve_version("0.4.31", avail, "--good") == V("0.4.31")
    with pytest.raises(
        InvariantsError, match=r"^--good 0\.4\.99: not a jax release on the index \(nearest: "
    ):
        r.resolve_version("0.4.99", avail, "--good")
    with pytest.raises(InvariantsError, match=r"^--bad banana: not a version$"):
        r.resolve_version("banana", avail, "--bad")
    too_old = r"^--good 0\.4\.1: jax 0\.4\.1 is older than this suite supports: it needs jax >= 0\.4\.30$"
    with pytest.raises(InvariantsError, match=too_old):
        r.resolve_version("0.4.1", [V("0.4.1"), *avail], "--good")
    with pytest.raises(InvariantsError, match=too_old):  # said for its age, listed on the index or not
        r.resolve_version("0.4.1", avail, "--good")


def test_unreachable_index_fails_fast_in_one_line() -> None:
    with pytest.raises(
        InvariantsError, match=r"^--index-url http://127\.0\.0\.1:9/simple: index unreachable"
    ):
        r.check_index("http://127.0.0.1:9/simple", timeout=5)


@pytest.mark.e2e
def test_cli_unreachable_index_is_one_line_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "invariants", "bisect", "--good", "0.4.30", "--bad", "0.10.2",
         "--index-url", "http://127.0.0.1:9/simple"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "index unreachable" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_install_failure_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_run(cmd, **kwargs):
        if "install" in cmd:
            return subprocess.CompletedProcess(
                cmd,
                1,
                "",
                "  x No solution found when resolving dependencies:\n"
                "  `-> Because jaxlib==0.4.30 has no wheels ...\n",
            )
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(r.subprocess, "run", fake_run)
    pins = r.choose_pins(V("0.4.30"), JAXLIBS)
    with pytest.raises(
        InvariantsError, match=r"^jax==0\.4\.30 jaxlib==0\.4\.30 .*: does not install: .*No solution"
    ):
        r.ensure_env(pins, tmp_path, "https://example.invalid/simple", log=lambda s: None)
    assert not list(tmp_path.iterdir()), "a failed build leaves nothing in the cache"


def test_env_health_marker(tmp_path: Path) -> None:
    pins = r.choose_pins(V("0.4.30"), JAXLIBS)
    env = tmp_path / pins.env_name
    assert not r.env_healthy(env, pins)
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_text("")
    (env / r.MARKER).write_text(json.dumps(pins.to_json()))
    assert r.env_healthy(env, pins)
    assert not r.env_healthy(env, r.choose_pins(V("0.4.31"), JAXLIBS))
    (env / r.MARKER).write_text("{broken")
    assert not r.env_healthy(env, pins)


def test_verdict_ignores_structure_and_counts_xfail_as_holding() -> None:
    items = [
        {"kind": "structure", "outcome": "failed", "nodeid": "s"},
        {"kind": "invariant", "outcome": "passed", "nodeid": "a"},
        {"kind": "invariant", "outcome": "xfailed", "nodeid": "b"},
    ]
    assert b.verdict_of(V("0.5.0"), _results(items), 1.0).holds
    items.append({"kind": "invariant", "outcome": "failed", "nodeid": "c"})
    v = b.verdict_of(V("0.5.0"), _results(items), 1.0)
    assert not v.holds and [it.nodeid for it in v.failing] == ["c"]
    with pytest.raises(InvariantsError, match="no invariant or correctness items"):
        b.verdict_of(V("0.5.0"), _results(items[:1]), 1.0)
    with pytest.raises(InvariantsError, match="errored"):
        b.verdict_of(V("0.5.0"), _results([{"kind": "error", "outcome": "failed", "nodeid": "x"}]), 1.0)


def test_a_compile_that_fails_in_a_release_is_its_verdict_there(tmp_path: Path) -> None:
    """Read from the file the writer wrote: a program that did not compile is that release's finding (the
    selection fails there, the matrix says "compile failed"), where any other error says the suite could
    not run on it; told apart by the item's failure, not by its text."""
    key = Key("take", "f32", "cpu")
    line = "cpu/take[f32]: compile failed: INTERNAL: RET_CHECK failure"
    compile_error = error_entry(
        "failed", "t::take", line, Failure("compile", "INTERNAL: RET_CHECK failure", key)
    )
    _, passed = record("invariant", **{**_FILLED["invariant"], "programs": ["naive"]})
    path = tmp_path / "results.json"
    write(path, {}, [compile_error, entry(PROPERTY, passed, "passed", "t::naive")])  # type: ignore[list-item]
    results = read(path)
    v = b.verdict_of(V("0.5.0"), results, 1.0)
    assert not v.holds and [it.nodeid for it in v.failing] == ["t::take"]
    assert b._describe(v.failing[0]) == f"take ({line})"  # the id below its anchor module
    assert m.matrix_failures("0.5.0", results) == {("0.5.0", "cpu", "take"): line}
    # The same line, said by an error that is no compile's: the suite could not run.
    write(path, {}, [error_entry("failed", "t::take", line, Failure("error", line))])
    with pytest.raises(InvariantsError, match="errored; the suite may not run on it"):
        b.verdict_of(V("0.5.0"), read(path), 1.0)
    assert m.matrix_failures("0.5.0", read(path)) == {}


def test_suite_run_selects_and_never_times() -> None:
    cmd = gate_command(
        b.suite_run(Path("/e/bin/python"), "grad_no_while", "cpu", "grad_naive", Path("r.json"), Path("d"))
    )
    assert cmd[:3] == ["/e/bin/python", "-m", "pytest"]
    assert cmd[cmd.index("-m", 3) + 1] == "not throughput"
    assert cmd[cmd.index("-k") + 1] == "grad_no_while" and cmd[cmd.index("--programs") + 1] == "grad_naive"
    assert "--configs" not in cmd
    seed = gate_command(
        b.suite_run(Path("p"), m.MATRIX_K, "cpu", None, Path("r"), Path("d"), configs=m.MATRIX_CONFIG)
    )
    assert seed[seed.index("--configs") + 1] == "f32" and seed[seed.index("-k") + 1] == "test_structure"


def test_matrix_table_and_plot(tmp_path: Path) -> None:
    results = _results(
        [
            {"kind": "structure", "config": "f32", "target": "cpu", "program": "naive", "kernels": 1,
             "while_loops": 0, "dynamic_kernel_launches": 1},
            {"kind": "structure", "config": "bf16", "target": "cpu", "program": "naive", "kernels": 9},
            {"kind": "invariant", "config": "f32", "target": "cpu", "program": "naive"},
        ]
    )  # fmt: skip
    rows = m.matrix_rows("0.4.30", results) + m.matrix_rows("0.10.2", _results([
        {"kind": "structure", "config": "f32", "target": "cpu", "program": "naive", "kernels": 2,
         "while_loops": 1, "dynamic_kernel_launches": None}]))  # fmt: skip
    assert len(rows) == 2
    text = m.render_matrix(rows, ["0.4.30", "0.5.3", "0.10.2"], {"tpu-v5e, jax 0.4.30": "skipped: no libtpu"})
    lines = text.splitlines()
    assert lines[0].startswith("### cpu:")
    assert "| program | 0.4.30 | 0.5.3 | 0.10.2 |" in lines
    assert "| naive | 1 / 0 / 1 | — | 2 / 1 / ? |" in lines
    assert "- tpu-v5e, jax 0.4.30: skipped: no libtpu" in lines
    m.plot_matrix(rows, ["0.4.30", "0.5.3", "0.10.2"], tmp_path / "m.png")
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_matrix_predicted_cost_row(tmp_path: Path) -> None:
    def item(target: str, cycles: int | None) -> dict:
        return {"kind": "structure", "config": "f32", "target": target, "program": "grad_vmap_naive",
                "kernels": 15, "while_loops": 1, "dynamic_kernel_launches": 73735,
                "estimated_cycles": cycles}  # fmt: skip

    rows = m.matrix_rows("0.5.3", _results([item("tpu-v5e", 119_900_000), item("cpu", None)]))
    rows += m.matrix_rows("0.10.2", _results([item("tpu-v5e", 149_925_672), item("cpu", None)]))
    lines = m.render_matrix(rows, ["0.5.3", "0.10.2"], {}).splitlines()
    assert "### tpu-v5e: predicted cost, estimated cycles per call (the compiler's own estimate)" in lines
    assert "| grad_vmap_naive | 119,900,000 | 149,925,672 |" in lines
    # The CPU compiler writes no estimate: no predicted-cost table for it.
    assert not any(line.startswith("### cpu: predicted") for line in lines)
    m.plot_matrix(rows, ["0.5.3", "0.10.2"], tmp_path / "m.png")
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_structural_diff() -> None:
    assert b.structural_diff("a\nb", "a\nb", "x", "y") == "(identical structure)"
    diff = b.structural_diff("kernels 9\nwhile 1", "kernels 3\nwhile 1", "jax 0.5.3", "jax 0.6.0")
    assert "-kernels 9" in diff and "+kernels 3" in diff


def test_keys_of_failing_items() -> None:
    relation: dict[str, Any] = {
        "kind": "invariant",
        "programs": ["grad_naive"],
        "config": "f32",
        "target": "cpu",
    }
    items = [relation, relation, {"kind": "correctness", "program": "take"}]
    assert b._keys_of(_results(items).items) == [("grad_naive", "f32", "cpu")]


def test_run_suite_takes_explicit_arguments() -> None:
    import inspect

    params = inspect.signature(b.run_suite).parameters
    assert {"k", "targets", "programs"} <= {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY}
    cmd = gate_command(b.suite_run(Path("p"), "x", "cpu", None, Path("r"), Path("d")))
    assert cmd[cmd.index("--hlo-dump-dir") + 1] == "d"
    # Bisect compares the facts themselves: version scopes and ratchets would keep every release green.
    assert "--raw-invariants" in cmd


@pytest.mark.usefixtures("selection_checked")
def test_bisect_command_line_selection_reaches_every_release(monkeypatch, capsys) -> None:
    """`bisect --programs P --configs C -k K --targets T`: each release's suite runs that selection."""
    releases = [V("0.5.1"), V("0.5.3"), V("0.6.2")]
    monkeypatch.setattr(b, "check_index", lambda url: None)
    monkeypatch.setattr(b, "list_releases", lambda name, url: releases)
    monkeypatch.setattr(b, "ensure_env", lambda pins, cache, url: Path(f"env-{pins.jax}"))
    asked = []

    def run_suite(env, version, workdir, **selection):
        asked.append(selection)
        outcome = "passed" if version < V("0.5.3") else "failed"
        return _results([{"kind": "invariant", "outcome": outcome, "nodeid": "n"}]), 1.0

    monkeypatch.setattr(b, "run_suite", run_suite)
    argv = ["--good", "0.5.1", "--bad", "0.6.2", "--programs", "grad_naive", "--configs", "f32",
            "-k", "grad_no_while", "--targets", "tpu-v5e"]  # fmt: skip
    assert b.main_bisect(argv) == 0
    out = capsys.readouterr().out
    assert "selection -k 'grad_no_while' --targets tpu-v5e --programs grad_naive --configs f32" in out
    assert "first release where the selection breaks: jax 0.5.3" in out
    want = {"k": "grad_no_while", "targets": "tpu-v5e", "programs": "grad_naive", "configs": "f32",
            "project": b.Project(), "kept": False}  # fmt: skip
    assert asked and all(s == want for s in asked), asked


@pytest.mark.usefixtures("selection_checked")
@pytest.mark.parametrize("command", ["bisect", "matrix"])
@pytest.mark.parametrize("keep", [False, True])
def test_a_release_whose_suite_did_not_run_names_no_file_that_is_gone(monkeypatch, tmp_path, command, keep):
    """The one line of a release whose suite could not run names its output file only where --keep keeps
    it; the temporary folder of a run without --keep is removed before the line is read."""
    from invariants.compile.child import ChildRun

    monkeypatch.setattr(b, "check_index", lambda url: None)
    monkeypatch.setattr(m, "check_index", lambda url: None)
    for mod in (b, m):
        monkeypatch.setattr(mod, "list_releases", lambda name, url: [V("0.10.1"), V("0.10.2")])
        monkeypatch.setattr(mod, "ensure_env", lambda pins, cache, url: tmp_path / "env")

    def run_gate(cmd, *, env, folder, timeout):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "pytest.txt").write_text("ImportError: this release cannot import the suite\n")
        return ChildRun(3, None, 0.1, folder / "pytest.txt")

    monkeypatch.setattr(b, "run_gate", run_gate)
    kept = ["--keep", str(tmp_path / "kept")] if keep else []
    if command == "bisect":
        argv, main = ["--good", "0.10.1", "--bad", "0.10.2", *kept], b.main_bisect
    else:
        argv, main = (
            ["--versions", "0.10.2", "--no-tpu", "--out", str(tmp_path / "out"), *kept],
            m.main_matrix,
        )
    with pytest.raises(InvariantsError, match="the suite did not run") as err:
        main(argv)
    line = str(err.value)
    assert "cannot import the suite" in line, line
    named = [w for w in line.split() if w.endswith("pytest.txt")]
    if keep:
        assert named and Path(named[0]).is_file(), line
    else:
        assert not named and "--keep DIR" in line, line


@pytest.mark.e2e
def test_bisect_refuses_an_unknown_configuration_before_any_install(monkeypatch) -> None:
    def unreachable(url):
        raise AssertionError("the index was asked before the command line was checked")

    monkeypatch.setattr(b, "check_index", unreachable)
    with pytest.raises(
        InvariantsError,
        match=r"^--configs: unknown configuration 'f64' \(did you mean 'f16'\?\); known: f32, bf16,",
    ):
        b.main_bisect(["--good", "0.4.30", "--bad", "0.10.2", "--configs", "f64"])


@pytest.mark.usefixtures("selection_checked")
@pytest.mark.parametrize(
    ("targets", "plugin", "tpu"),
    [
        ("cpu,gpu-a100", True, False),
        ("gpu", True, False),
        ("cpu,tpu-v5e", False, True),
        ("cpu", False, False),
    ],
)
def test_bisect_selection_installs_each_releases_compilers(monkeypatch, targets, plugin, tpu) -> None:
    """`bisect --targets ...gpu...`: every release's environment has that release's CUDA plugin; with a TPU
    target, its libtpu (jax[tpu]), on this CPU host."""
    releases = [V("0.10.0"), V("0.10.1"), V("0.10.2")]
    monkeypatch.setattr(b, "check_index", lambda url: None)
    monkeypatch.setattr(b, "list_releases", lambda name, url: releases)
    built: list[r.Pins] = []

    def ensure_env(pins, cache, url):
        built.append(pins)
        return Path(f"env-{pins.env_name}")

    def run_suite(env, version, workdir, **selection):
        assert selection["targets"] == targets
        outcome = "passed" if version < V("0.10.2") else "failed"
        return _results([{"kind": "invariant", "outcome": outcome, "nodeid": "n"}]), 1.0

    monkeypatch.setattr(b, "ensure_env", ensure_env)
    monkeypatch.setattr(b, "run_suite", run_suite)
    assert b.main_bisect(["--good", "0.10.0", "--bad", "0.10.2", "--targets", targets]) == 0
    assert {str(p.jax) for p in built} == {"0.10.0", "0.10.1", "0.10.2"}
    for p in built:
        assert p.gpu is plugin and p.tpu is tpu
        assert (p.requirements()[0] == f"jax[cuda12-local]=={p.jax}") is plugin
        assert (p.requirements()[0] == f"jax[tpu]=={p.jax}") is tpu
        assert p.env_name == f"jax-{p.jax}" + ("-gpu" if plugin else "") + ("-tpu" if tpu else "")


@pytest.mark.usefixtures("selection_checked")
@pytest.mark.parametrize(
    ("old", "targets", "said"),
    [
        ("0.9.1", "cpu,gpu-l4", "jax 0.9.1: too old to compile for a GPU on this host (the CUDA plugin"),
        (
            "0.5.0",
            "cpu,tpu-v5e",
            "jax 0.5.0: its jax[tpu] pins libtpu-nightly, which no package index serves",
        ),
    ],
)
def test_bisect_end_that_cannot_compile_a_target_is_exit_4_before_any_install(
    monkeypatch, old, targets, said
) -> None:
    """An end whose release cannot compile a target asked for: nothing is bisected, one line, exit 4."""
    releases = [V(old), V("0.9.2"), V("0.10.2")]
    monkeypatch.setattr(b, "check_index", lambda url: None)
    monkeypatch.setattr(b, "list_releases", lambda name, url: releases)

    def ensure_env(pins, cache, url):
        raise AssertionError(f"installed {pins.env_name} before refusing the selection")

    monkeypatch.setattr(b, "ensure_env", ensure_env)
    # The newer endpoint first: the walk would install it before it reached the older one.
    with pytest.raises(InvariantsError) as err:
        b.main_bisect(["--good", "0.10.2", "--bad", old, "--targets", targets])
    assert str(err.value).startswith(f"bisect: --bad {old}: {said}")
    assert str(err.value).endswith(f"--targets {targets} cannot be compared there; nothing bisected")
    assert "\n" not in str(err.value) and getattr(err.value, "status", 2) == 4


def _fake_releases(monkeypatch, releases, verdicts, unavailable=(), lacking=()) -> None:
    """An index of ``releases``, whose suites hold where ``verdicts`` says; the gate of a release in
    ``unavailable`` cannot compile the target asked for (its exit 4); in a release of ``lacking`` the tool's
    limit there skipped one item (its results file as the gate's recorder writes it)."""
    monkeypatch.setattr(b, "check_index", lambda url: None)
    monkeypatch.setattr(b, "list_releases", lambda name, url: [V(v) for v in releases])
    monkeypatch.setattr(b, "ensure_env", lambda pins, cache, url: Path(f"env-{pins.env_name}"))

    def run_suite(env, version, workdir, **selection):
        if str(version) in unavailable:
            raise NothingChecked(f"jax {version}: --targets tpu-v5e: cannot compile here")
        outcome = "passed" if verdicts.get(str(version), True) else "failed"
        results = _results([{"kind": "invariant", "outcome": outcome, "nodeid": "n"}])
        skipped = [to_json(_lacks_skip(str(version)))] if str(version) in lacking else []
        return Results.from_json({"items": [*map(to_json, results.items), *skipped]}), 1.0

    monkeypatch.setattr(b, "run_suite", run_suite)


@pytest.mark.usefixtures("selection_checked")
def test_bisect_names_no_release_where_one_it_could_not_judge_lies_at_the_change(monkeypatch, capsys) -> None:
    """The change lies between 0.6.0 and 0.7.0, and 0.6.1 between them cannot compile the target: the
    first release may be 0.6.1 or 0.7.0, so none is named, and the exit is 4. A release it could not judge
    away from the change leaves the boundary exact."""
    releases = ["0.5.3", "0.6.0", "0.6.1", "0.7.0", "0.8.0"]
    verdicts = {"0.5.3": True, "0.6.0": True, "0.6.1": True, "0.7.0": False, "0.8.0": False}
    _fake_releases(monkeypatch, releases, verdicts, unavailable={"0.6.1"})
    argv = ["--good", "0.5.3", "--bad", "0.8.0", "--targets", "tpu-v5e"]
    assert b.main_bisect(argv) == 4
    out = capsys.readouterr().out
    assert "  jax 0.6.1: skipped (jax 0.6.1: --targets tpu-v5e: cannot compile here)" in out
    assert (
        "bisect: no first release named: the selection breaks between jax 0.6.0 and jax 0.7.0, and jax 0.6.1 "
        "between them could not be judged (jax 0.6.1: --targets tpu-v5e: cannot compile here)" in out
    )
    assert "first release where" not in out
    # 0.6.0 cannot be judged now, and the change is at 0.7.0: 0.6.0 is not between 0.6.1 and 0.7.0.
    releases = ["0.5.2", *releases]
    _fake_releases(monkeypatch, releases, {**verdicts, "0.5.2": True}, unavailable={"0.6.0"})
    assert b.main_bisect(["--good", "0.5.2", "--bad", "0.8.0", "--targets", "tpu-v5e"]) == 0
    out = capsys.readouterr().out
    assert "  jax 0.6.0: skipped (" in out
    assert "first release where the selection breaks: jax 0.7.0 (last with it holding: jax 0.6.1)" in out


def _lacks_skip(version: str, target: str = "cpu-8dev") -> Record:
    """The skipped record of a pod program's item on a release without ``jax.sharding.AxisType``."""
    lacks = ReleaseLacks("jax.sharding.AxisType", "to build a mesh with axis types", version)
    line = str(lacks.about(compile_name(target, "fsdp_take", "f32")))
    key = Key("fsdp_take", "f32", target)
    return skipped_entry(f"{target}::fsdp_take-f32", line, [lacks_property(lacks.api, key)])


@pytest.mark.usefixtures("selection_checked")
def test_a_release_the_tool_cannot_serve_is_skipped_in_its_line_and_bears_no_boundary(
    monkeypatch, capsys
) -> None:
    """A release whose gate skipped a selected item for want of an API of JAX is skipped by the search
    with that line (the tool's limit, never the program's): no boundary is named across it, the one named
    elsewhere says which releases were skipped, and at an end it is exit 4."""
    limit = (
        "cpu-8dev/fsdp_take[f32]: jax 0.6.0 has no jax.sharding.AxisType, which this tool needs to build a "
        "mesh with axis types: a limit of the tool on this release, not of the program"
    )
    releases = ["0.5.3", "0.6.0", "0.7.0"]
    _fake_releases(monkeypatch, releases, {"0.5.3": True, "0.7.0": False}, lacking={"0.6.0"})
    assert b.main_bisect(["--good", "0.5.3", "--bad", "0.7.0", "--targets", "cpu-8dev"]) == 4
    out = capsys.readouterr().out
    assert f"  jax 0.6.0: skipped ({limit})\n" in out
    assert "between jax 0.5.3 and jax 0.7.0, and jax 0.6.0 between them could not be judged" in out
    assert "first release where" not in out
    releases = ["0.5.2", "0.5.3", "0.6.0", "0.7.0", "0.8.0", "0.9.0"]
    _fake_releases(monkeypatch, releases, {"0.8.0": False, "0.9.0": False}, lacking={"0.6.0"})
    assert b.main_bisect(["--good", "0.5.2", "--bad", "0.9.0", "--targets", "cpu-8dev"]) == 0
    out = capsys.readouterr().out
    assert "first release where the selection breaks: jax 0.8.0 (last with it holding: jax 0.7.0)" in out
    assert f" releases tested, 1 skipped; jax 0.6.0 skipped: {limit}\n" in out
    _fake_releases(monkeypatch, releases, {"0.9.0": False}, lacking={"0.5.2"})
    with pytest.raises(NothingChecked) as stopped:
        b.main_bisect(["--good", "0.5.2", "--bad", "0.9.0", "--targets", "cpu-8dev"])
    assert str(stopped.value) == limit.replace("0.6.0", "0.5.2") and stopped.value.status == 4


@pytest.mark.usefixtures("selection_checked")
def test_bisect_whose_ends_agree_names_no_release(monkeypatch) -> None:
    _fake_releases(
        monkeypatch, ["0.9.2", "0.10.0", "0.10.2"], {"0.9.2": True, "0.10.0": False, "0.10.2": True}
    )
    with pytest.raises(InvariantsError, match=r"^bisect: the verdict is True at both 0.9.2 and 0.10.2"):
        b.main_bisect(["--good", "0.9.2", "--bad", "0.10.2", "--targets", "tpu-v5e"])


@pytest.mark.usefixtures("selection_checked")
def test_matrix_runs_the_gpu_targets_in_each_releases_plugin_environment(monkeypatch, tmp_path) -> None:
    """`matrix --targets cpu,gpu-a100`: a GPU pass per release with its plugin; a release too old: a note,
    and exit 4 with one line naming it, after the table is written."""
    releases = [V("0.9.1"), V("0.10.1")]
    monkeypatch.setattr(m, "check_index", lambda url: None)
    monkeypatch.setattr(m, "list_releases", lambda name, url: releases)
    monkeypatch.setattr(m, "plot_matrix", lambda rows, names, path: None)
    built: list[r.Pins] = []
    suites: list[tuple[str, str]] = []

    def ensure_env(pins, cache, url):
        built.append(pins)
        return Path(f"env-{pins.env_name}")

    def run_suite(env, version, workdir, **selection):
        suites.append((str(env), selection["targets"]))
        item = {"kind": "structure", "config": "f32", "program": "grad_take", "kernels": 3, "while_loops": 0,
                "dynamic_kernel_launches": 3}  # fmt: skip
        return _results([{**item, "target": t} for t in selection["targets"].split(",")]), 1.0

    monkeypatch.setattr(m, "ensure_env", ensure_env)
    monkeypatch.setattr(m, "run_suite", run_suite)
    argv = ["--versions", "0.9.1,0.10.1", "--targets", "cpu,gpu-a100", "--no-tpu", "--out", str(tmp_path)]
    with pytest.raises(NothingChecked, match=r"^matrix: not compiled: gpu-a100, jax 0\.9\.1$") as err:
        m.main_matrix(argv)
    assert err.value.status == 4
    assert [p.env_name for p in built] == ["jax-0.9.1", "jax-0.10.1", "jax-0.10.1-gpu"]
    assert built[-1].requirements()[0] == "jax[cuda12-local]==0.10.1"
    assert suites[-1] == ("env-jax-0.10.1-gpu", "gpu-a100")
    table = (tmp_path / "matrix.md").read_text()
    assert "### gpu-a100: kernels / while loops / dynamic kernel launches (f32)" in table
    assert "- gpu-a100, jax 0.9.1: skipped: jax 0.9.1: too old to compile for a GPU" in table
    built.clear()
    assert m.main_matrix([*argv[:1], "0.10.1", *argv[2:]]) == 0, "every release compiled every target"


@pytest.mark.usefixtures("selection_checked")
def test_a_matrix_cell_the_tool_cannot_compile_in_a_release_says_skipped_and_why(
    monkeypatch, tmp_path
) -> None:
    """A structure the tool's limit on a release skipped (an API of JAX it lacks): its cell says skipped and
    the API, the line under the table says the rest (never a compile failure of the program), the other
    programs fill their cells, and the table with that hole exits 4 naming it."""
    monkeypatch.setattr(m, "check_index", lambda url: None)
    monkeypatch.setattr(m, "list_releases", lambda name, url: [V("0.6.0"), V("0.10.1")])
    monkeypatch.setattr(m, "plot_matrix", lambda rows, names, path: None)
    monkeypatch.setattr(m, "ensure_env", lambda pins, cache, url: Path(f"env-{pins.env_name}"))

    def run_suite(env, version, workdir, **selection):
        structure = {"kind": "structure", "target": "cpu", "config": "f32", "kernels": 3, "while_loops": 0,
                     "dynamic_kernel_launches": 3}  # fmt: skip
        made = _results([{**structure, "program": p} for p in ("take", "fsdp_take")])
        if str(version) == "0.6.0":  # the pod program skipped, as the gate's recorder writes it
            made = _results([{**structure, "program": "take"}])
            made.items.append(from_json(to_json(_lacks_skip("0.6.0", "cpu"))))
        return made, 1.0

    monkeypatch.setattr(m, "run_suite", run_suite)
    argv = ["--versions", "0.6.0,0.10.1", "--no-tpu", "--out", str(tmp_path)]
    with pytest.raises(NothingChecked, match=r"^matrix: not compiled: fsdp_take on cpu, jax 0\.6\.0$"):
        m.main_matrix(argv)
    table = (tmp_path / "matrix.md").read_text()
    assert "| fsdp_take | skipped: no jax.sharding.AxisType | 3 / 0 / 3 |" in table
    assert "| take | 3 / 0 / 3 | 3 / 0 / 3 |" in table
    assert (
        "- fsdp_take on cpu, jax 0.6.0: skipped: cpu/fsdp_take[f32]: jax 0.6.0 has no jax.sharding.AxisType, "
        "which this tool needs to build a mesh with axis types: a limit of the tool on this release, not of "
        "the program"
    ) in table


# What the A100's grad_take f32 renders to in jaxlib 0.10.1 (tests/data/snapshots) and 0.10.2: the HLO
# lines equal, the code not.
A100_0_10_1 = (
    Path(__file__).parents[2] / "data" / "snapshots" / "a100-grad-take" / "gpu-a100.0.10.1.txt"
).read_text()
A100_0_10_2 = A100_0_10_1.replace(
    "atomics atom.add.f32×4; loops 0", "atomics atom.cas.b32×4 (CAS retry loops 4); loops 4"
)


@pytest.mark.usefixtures("selection_checked")
def test_bisect_over_a_gpu_target_finds_a_code_only_change(monkeypatch, capsys) -> None:
    """A fake index and suite: jaxlib 0.10.2's kernel invariant fails on gpu-a100 where 0.10.1's held; the
    output names the boundary, the failing kernel item, and that the snapshots differ in a code line only."""
    releases = [V("0.10.0"), V("0.10.1"), V("0.10.2")]
    monkeypatch.setattr(b, "check_index", lambda url: None)
    monkeypatch.setattr(b, "list_releases", lambda name, url: releases)
    monkeypatch.setattr(b, "ensure_env", lambda pins, cache, url: Path(f"env-{pins.env_name}"))

    def run_suite(env, version, workdir, **selection):
        assert selection["targets"] == "gpu-a100" and str(env).endswith("-gpu")
        cas = 4 if version >= V("0.10.2") else 0
        node = "g/test_invariants.py::gpu-a100::gpu.toml::grad_native_float_atomics_sm8x::grad_take-f32"
        item = {"kind": "invariant", "id": "grad_native_float_atomics_sm8x", "target": "gpu-a100",
                "config": "f32", "programs": ["grad_take"], "assert": "cas_atomics == 0",
                "measured": {"cas_atomics": cas}, "outcome": "failed" if cas else "passed",
                "nodeid": node}  # fmt: skip
        return _results([item]), 1.0

    rendered = {"env-jax-0.10.1-gpu": A100_0_10_1, "env-jax-0.10.2-gpu": A100_0_10_2}
    monkeypatch.setattr(b, "run_suite", run_suite)
    monkeypatch.setattr(
        b, "render_in", lambda env, keys, project: {"/".join(k): rendered[str(env)] for k in keys}
    )
    argv = ["--good", "0.10.0", "--bad", "0.10.2", "--targets", "gpu-a100", "--programs", "grad_take"]
    assert b.main_bisect(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert "first release where the selection breaks: jax 0.10.2 (last with it holding: jax 0.10.1); 3 " \
        "releases tested, 0 skipped" in out  # fmt: skip
    assert "  FAILED gpu-a100::gpu.toml::grad_native_float_atomics_sm8x::grad_take-f32 (cas_atomics == 0: " \
        "cas_atomics=4)" in out  # fmt: skip
    assert "structure of grad_take/f32/gpu-a100, jax 0.10.1 -> 0.10.2:" in out
    assert "-      code ptx: atomics atom.add.f32×4; loops 0; vector 128 bits" in out
    assert "+      code ptx: atomics atom.cas.b32×4 (CAS retry loops 4); loops 4; vector 128 bits" in out
    assert not any(line.startswith(("-summary", "+summary")) for line in out)
    assert ("changed: code lines only (1 changed: fusion kInput {add, scatter, select} -> "
            "f32[8192,32]{1,0}); the HLO lines are equal (summary: kernels 2; entry fusions 2 (kInput 1, "
            "kLoop 1); while loops 0; dynamic launches 2)") in out  # fmt: skip


def _no_index(monkeypatch) -> None:
    def unreachable(url):
        raise AssertionError("the index was asked before the command line was checked")

    monkeypatch.setattr(b, "check_index", unreachable)


def test_bisect_refuses_a_keep_path_it_cannot_write_before_any_install(monkeypatch, tmp_path) -> None:
    """`bisect --keep FILE` (or a folder it cannot write) failed at the first release's run, after its
    install; now one line first."""
    _no_index(monkeypatch)
    monkeypatch.setattr(b, "check_selection", lambda *args, **kwargs: 1)
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvariantsError) as err:
        b.main_bisect(["--good", "0.4.30", "--bad", "0.10.2", "--keep", str(tmp_path / "file")])
    assert str(err.value) == f"--keep {tmp_path / 'file'}: a file, not a folder; give a folder"
    with pytest.raises(InvariantsError, match=r"^--keep /sys/runs: cannot make the folder /sys/runs \("):
        b.main_bisect(["--good", "0.4.30", "--bad", "0.10.2", "--keep", "/sys/runs"])


@pytest.mark.e2e
def test_a_selection_counts_the_items_of_its_tiers_alone() -> None:
    """Collected as each release's child collects it (the gate modules outside its rootdir, so that the
    node ids name no file): the invariant items a -k selects, not its structure items; matrix's structure
    items by their tier too."""
    invariants = b.check_selection("test_invariant or take-f32", "cpu", "take", "f32")
    structures = b.check_selection("test_structure", "cpu", "take", "f32", kinds=("structure",))
    assert invariants > 1 and structures == 1, (invariants, structures)


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["-k", "nomatch"], "-k 'nomatch': selects no invariant or correctness item; widen -k"),
        (["-k", "grad_no_while", "--programs", "naive"],
         "-k 'grad_no_while' --programs naive: selects no invariant or correctness item"),
        (["--targets", "tpu-v5", "-k", "no_while"], "--targets: unknown target 'tpu-v5' (did you mean"),
    ],
)  # fmt: skip
def test_bisect_refuses_a_selection_of_nothing_before_any_install(monkeypatch, argv, said) -> None:
    """The selection is collected here first (the gate modules every release runs): one that selects no
    item a verdict is made of was found only after installing a release ('jax 0.4.30: -k ... selects no
    items'), or, for a target, never."""
    _no_index(monkeypatch)
    with pytest.raises(InvariantsError) as err:
        b.main_bisect(["--good", "0.4.30", "--bad", "0.10.2", *argv])
    assert str(err.value).startswith(said) and "\n" not in str(err.value), str(err.value)


SHARDED_SPEC = """\
[spec]
targets = ["cpu-8dev"]

[[program]]
name = "lookup8"
function = "model:lookup"
kind = "forward"
mesh = { data = 2, tensor = 4 }
table_sharding = ["tensor", ""]
index_sharding = ["data"]

[[invariant]]
id = "no_all_gather"
programs = ["lookup8"]
assert = "all_gathers == 0"
"""


@pytest.mark.e2e
def test_bisect_runs_a_sharded_project_on_its_targets_and_names_only_the_options_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --targets, bisect selects a project's items on the targets its spec files name (the sharded
    program's cpu-8dev here, collected in a child of the gate); a selection of nothing names the options
    given, never a default the user did not write."""
    (tmp_path / "model.py").write_text("def lookup(table, ids):\n    return table[ids]\n")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "s.toml").write_text(SHARDED_SPEC)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))

    class Collected(Exception):
        pass

    def collected(url: str) -> None:
        raise Collected

    monkeypatch.setattr(b, "check_index", collected)
    project = ["--good", "0.10.1", "--bad", "0.10.2", "--spec-dir", "specs", "--no-catalog"]
    with pytest.raises(Collected):  # the selection held items: on to the releases
        b.main_bisect(project)
    with pytest.raises(InvariantsError) as err:
        b.main_bisect([*project, "--programs", "lookup8", "-k", "nothing_here"])
    assert str(err.value).startswith("-k 'nothing_here' --programs lookup8 --spec-dir ")
    assert "--targets" not in str(err.value)


def test_a_release_whose_gate_cannot_compile_a_target_asked_for_is_not_compared(
    monkeypatch, tmp_path
) -> None:
    """The gate's exit 4 (a target named that this release cannot compile) is the release's "not compared",
    with the gate's own line: never a verdict of items that all skipped."""
    from invariants.compile.child import ChildRun

    def run_gate(cmd, *, env, folder, timeout):
        folder.mkdir(parents=True, exist_ok=True)
        line = "error: --targets tpu-v5e: cannot compile here, so nothing would be checked there: tpu-v5e"
        (folder / "pytest.txt").write_text(f"{line}\n")
        return ChildRun(4, None, 0.1, folder / "pytest.txt")

    monkeypatch.setattr(b, "run_gate", run_gate)
    with pytest.raises(
        NothingChecked, match=r"^jax 0\.10\.2: .*--targets tpu-v5e: cannot compile here"
    ) as err:
        b.run_suite(tmp_path / "env", V("0.10.2"), tmp_path, k="x", targets="tpu-v5e", programs=None)
    assert err.value.status == 4


def test_a_releases_render_child_never_waits_on_the_gce_metadata_server(monkeypatch, tmp_path) -> None:
    """Older libtpu asks the GCE metadata server for its topology, waits on it off GCE, then fails: the
    render child of a release is told to skip it, as its suite is; and to share libtpu's lock file."""
    monkeypatch.delenv("TPU_SKIP_MDS_QUERY", raising=False)
    monkeypatch.delenv("ALLOW_MULTIPLE_LIBTPU_LOAD", raising=False)
    seen: dict[str, str] = {}

    def keys_child(module, keys, *, env, what, python, cwd):
        seen.update(env)
        return {}

    monkeypatch.setattr(b, "keys_child", keys_child)
    b.render_in(tmp_path, [("take", "f32", "tpu-v5e")], b.Project())
    assert seen["TPU_SKIP_MDS_QUERY"] == "1" and seen["ALLOW_MULTIPLE_LIBTPU_LOAD"] == "1"
