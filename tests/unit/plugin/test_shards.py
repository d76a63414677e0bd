"""``--shard K/N``: how the items split (:mod:`invariants.scope.shard`), and a project's gate run as shards
against the same run whole: disjoint items whose union is the whole run's, each shard compiling only its
own, and ``report`` of every shard's results file counting what the whole run counts."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from gatekit import made_once

from invariants.__main__ import main as cli
from invariants._errors import InvariantsError
from invariants.scope.shard import assign, parse_shard, read_durations, units


@pytest.mark.parametrize("value", ["", "1", "0/2", "3/2", "1/0", "a/b", "1/2/3", "-1/2"])
def test_a_shard_is_k_of_n(value):
    with pytest.raises(InvariantsError, match=r"^--shard .*: takes K/N, shard K of N with 1 <= K <= N"):
        parse_shard(value)
    assert str(parse_shard(" 2/4 ")) == "2/4"


def test_items_that_read_one_compile_are_one_unit_and_a_relation_joins_two():
    reads = [("s::a", ["A"]), ("s::b", ["B"]), ("i::a", ["A"]), ("r::a~b", ["A", "B"]), ("s::c", ["C"])]
    assert sorted(map(sorted, units([*reads, ("none", [])]))) == [
        ["i::a", "r::a~b", "s::a", "s::b"], ["none"], ["s::c"]
    ]  # fmt: skip


def test_without_durations_a_unit_stays_where_its_hash_sends_it():
    groups = [[f"t::p{n}"] for n in range(40)]
    where = assign(groups, 4, {})
    assert set(where) == {1, 2, 3, 4}
    # Another program, or one fewer, moves no other unit: their compile cache stays in its shard.
    assert assign([*groups, ["t::new"]], 4, {})[:40] == where
    assert assign(groups[1:], 4, {}) == where[1:]


def test_recorded_durations_balance_the_shards():
    groups = [["a"], ["b"], ["c"], ["d", "e"]]
    durations = {"a": 9.0, "b": 5.0, "c": 4.0, "d": 1.0}  # e: unknown, weighs the mean
    where = assign(groups, 2, durations)
    load = {s: 0.0 for s in (1, 2)}
    for unit, s in zip(groups, where, strict=True):
        load[s] += sum(durations.get(i, 4.75) for i in unit)
    assert sorted(load.values()) == [10.75, 13.0]  # heaviest first (9, 5.75, 5, 4), each to the lighter


def test_durations_are_pytest_split_s_file(tmp_path):
    path = tmp_path / ".test_durations"
    assert read_durations(path) == {}
    path.write_text(json.dumps({"t::a": 1.5}))
    assert read_durations(path) == {"t::a": 1.5}
    path.write_text(json.dumps([["t::a", 2]]))  # its older form
    assert read_durations(path) == {"t::a": 2.0}
    for bad in ("{", '{"t::a": "slow"}', '{"t::a": -1}', "3"):
        path.write_text(bad)
        with pytest.raises(InvariantsError, match=r"not a durations file pytest-split wrote"):
            read_durations(path)


# Three lookups that lower apart (each its own compile) and optimize alike (the relation holds).
LOOKUP = """import jax.numpy as jnp

def a(table, ids):
    return jnp.take(table, ids, axis=0)

def b(table, ids):
    return jnp.take(table, ids + 0, axis=0)

def c(table, ids):
    return jnp.take(table, ids * 1, axis=0)
"""
PROGRAM = """
[[program]]
name = "{name}"
function = "shardlookup:{name}"
kind = "forward"
configs = ["f32"]
"""
SPEC = """[spec]
targets = ["cpu"]
{programs}
[[invariant]]
id = "no_loop"
programs = ["a", "b", "c"]
assert = "while_loops == 0"
why = "a lookup is a gather"

[[invariant]]
id = "same"
assert = "structure(a) == structure(b)"
why = "two names of one lookup"
"""
T = TypeVar("T")
N = 5  # more shards than units: some have nothing to do


def _gate(root: Path, name: str, *more: str) -> tuple[int, Path]:
    """The project's gate run, with a cold compile cache of its own: the exit status and the results file."""
    results = root / f"{name}.json"
    xdist = [] if "-n" in more else ["-p", "no:xdist"]
    status = cli(["gate", "--spec-dir", "specs", "--no-catalog", "--targets", "cpu", "--snapshot-dir",
                  "snapshots", "-p", "no:cacheprovider", "-p", "no:benchmark", *xdist,
                  "--cache-dir", str(root / f"cache-{name}"), "--results-json", str(results),
                  "--hlo-dump-dir", str(root / "hlo"), *more])  # fmt: skip
    return status, results


def _in(root: Path, run: Callable[[], T]) -> T:
    """``run()`` with the project's folder as the working directory and first on the path."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.syspath_prepend(str(root))
        return run()


def _runs(root: Path) -> dict[str, tuple[int, Path]]:
    (root / "shardlookup.py").write_text(LOOKUP)
    (root / "specs").mkdir()
    (root / "specs" / "lib.toml").write_text(
        SPEC.format(programs="".join(PROGRAM.format(name=n) for n in "abc"))
    )
    assert _gate(root, "record", "--snapshot-update", "--no-cache")[0] == 0
    out = {"whole": _gate(root, "whole")}
    return out | {str(k): _gate(root, str(k), "--shard", f"{k}/{N}") for k in range(1, N + 1)}


@pytest.fixture
def runs(tmp_path_factory) -> tuple[Path, dict[str, tuple[int, Path]]]:
    """The project's gate run whole, then as each of N shards: ``{name: (exit status, results file)}``;
    once per session, whichever xdist worker asks first (``gatekit.made_once``)."""
    return made_once(tmp_path_factory, "shards", lambda root: (root, _in(root, lambda: _runs(root))))


@pytest.fixture
def xdist_run(runs) -> tuple[tuple[int, Path], tuple[int, Path]]:
    """A shard that has items, run again under xdist (its worker a process of its own), and the same shard
    run alone."""
    root, out = runs
    k = next(k for k in range(1, N + 1) if out[str(k)][0] == 0)
    return _in(root, lambda: _gate(root, "xdist", "--shard", f"{k}/{N}", "-n", "1")), out[str(k)]


def _ids(path: Path) -> list[str]:
    return [i["nodeid"] for i in json.loads(path.read_text())["items"]]


def _compiled(root: Path, name: str) -> int:
    """How many compiles the run's own cold compile cache holds: what it compiled."""
    return len(list((root / f"cache-{name}").glob("**/results/*.json.gz")))


def test_shards_split_the_items_and_the_compiles_of_one_run(runs):
    root, out = runs
    whole, shards = out["whole"], [out[str(k)] for k in range(1, N + 1)]
    assert whole[0] == 0
    assert {status for status, _ in shards} == {0, 5}  # a shard left with nothing: pytest's "no tests"
    ids = [_ids(results) for _, results in shards]
    assert sorted(i for shard in ids for i in shard) == sorted(_ids(whole[1]))  # disjoint, and the whole
    assert sum(_compiled(root, str(k)) for k in range(1, N + 1)) == _compiled(root, "whole") == 3
    # The relation's two programs are in one shard, with every item that reads them.
    together = [shard for shard in ids if any("same" in i for i in shard)]
    assert len(together) == 1
    assert {"test_structure.py::cpu::a-f32", "test_structure.py::cpu::b-f32"} <= set(together[0])
    for k, (status, results) in enumerate(shards, 1):
        data = json.loads(results.read_text())
        assert data["shard"]["index"] == k and data["shard"]["count"] == N
        assert (status == 5) == (not data["items"])


# Under xdist the workers split and the controller writes the file: the same shard, told the same. The
# worker is a process of its own: end to end (tests/conftest.py: -m e2e).
@pytest.mark.e2e
def test_under_xdist_a_shard_is_the_same_shard(xdist_run):
    (status, xdist), (_, alone) = xdist_run
    assert status == 0
    assert sorted(_ids(xdist)) == sorted(_ids(alone))
    assert json.loads(xdist.read_text())["shard"] == json.loads(alone.read_text())["shard"]


def _report(*argv: str, capsys) -> tuple[int, str, str]:
    status = cli(["report", *argv])
    said = capsys.readouterr()
    return status, said.out, said.err


def _counts(markdown: str) -> list[str]:
    """The report's verdict line (less the files it names) and its tier table."""
    lines = markdown.splitlines()
    start = lines.index("| tier | passed | failed | xfailed | skipped | error |")
    verdict = next(ln for ln in lines if ln.startswith("- **result**")).split(" from ")[0]
    return [verdict, *lines[start : lines.index("", start)]]


def _less_sources(markdown: str) -> str:
    """Less the files a report names and the seconds its compiles took (each run's own), and so the order
    of its slowest compiles."""
    text = re.sub(r"\d+\.\d+", "S", re.sub(r" from `[^\n]*", "", markdown)).strip()
    slowest = re.compile(r"(\| program \| config \| target \| seconds \|\n\|[-|:]+\|\n)((?:\|[^\n]*\n)+)")
    return slowest.sub(lambda m: m[1] + "".join(sorted(m[2].splitlines(keepends=True))), text + "\n").strip()


def test_the_report_of_every_shard_counts_what_the_whole_run_counts(runs, capsys):
    root, out = runs
    files = [str(out[str(k)][1]) for k in range(1, N + 1)]
    status, whole, _ = _report(str(out["whole"][1]), capsys=capsys)
    assert status == 0
    status, merged, _ = _report(*files, "--plot", str(root / "merged.png"), capsys=capsys)
    assert status == 0, merged
    assert _counts(merged) == _counts(whole)
    # As the whole run's, less the files and seconds: the same tables, failures and ratchet lines; a plot.
    assert _less_sources(merged.replace(f"Plot: `{root / 'merged.png'}`", "")) == _less_sources(whole)
    assert (root / "merged.png").stat().st_size > 0
    status, compared, err = _report("--compare", str(out["whole"][1]), ",".join(files), capsys=capsys)
    assert status == 0, err
    assert "## Outcomes: 0 item(s) changed" in compared and "only in" not in compared


def test_a_missing_or_repeated_shard_is_one_line(runs, capsys):
    _, out = runs
    files = [str(out[str(k)][1]) for k in range(1, N + 1)]
    for given, said in [
        (files[:-1], rf"shard {N}/{N} missing; a split run is reported whole"),
        ([*files, files[0]], rf"{re.escape(files[0])}: shard 1/{N} again \(also {re.escape(files[0])}\)"),
        ([*files, str(out["whole"][1])], r"whole.json: not a shard \(no --shard\)"),
    ]:
        status, md, err = _report(*given, capsys=capsys)
        assert (status, md) == (2, "")
        assert len(err.splitlines()) == 1 and re.search(said, err), err


def test_a_shard_of_another_selection_is_one_line(runs, capsys, tmp_path):
    _, out = runs
    other = json.loads(out["1"][1].read_text())
    other["shard"]["selection"] = "0" * 16
    (tmp_path / "other.json").write_text(json.dumps(other))
    files = [str(tmp_path / "other.json")] + [str(out[str(k)][1]) for k in range(2, N + 1)]
    status, _, err = _report(*files, capsys=capsys)
    assert status == 2 and "shard 2/5 of another run than" in err, err


def test_a_merged_run_is_green_only_if_every_shard_was(runs, capsys, tmp_path):
    _, out = runs
    files: list[Path] = []
    for k in range(1, N + 1):
        data = json.loads(out[str(k)][1].read_text())
        if data["items"] and not files:
            data["exitstatus"] = 1  # a shard that failed
        files.append(tmp_path / f"{k}.json")
        files[-1].write_text(json.dumps(data))
    status, md, _ = _report(*map(str, files), capsys=capsys)
    assert status == 1 and "**failed** (pytest exit status 1)" in md


class _SplitOptions:
    """pytest-split's two options, as it declares them (it is no dependency of the gate)."""

    def pytest_addoption(self, parser):
        parser.addoption("--splits", type=int)
        parser.addoption("--group", type=int)


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (["--shard", "1/x"], "--shard 1/x: takes K/N, shard K of N with 1 <= K <= N (e.g. 1/4)"),
        (["--splits", "2", "--group", "1"], "--splits/--group (pytest-split): it splits item by item"),
    ],
)
def test_a_bad_shard_and_pytest_split_s_own_split_are_one_line(gate_pytester, given, said):
    gate_pytester.project()
    run = gate_pytester.pytest("--targets", "cpu", "--programs", "take", *given, plugins=(_SplitOptions(),))
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1].removeprefix("error: ").startswith(said), run.stderr
