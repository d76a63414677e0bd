"""The pytest plugin's own logic, in-process: what --programs, --configs and --targets select, and the
results entries it collects. (Whole gate runs in child processes are in tests/integration/.)"""

from __future__ import annotations

import json
import types

import pytest

from invariants._errors import InvariantsError
from invariants.catalog.programs import CATALOG, CONFIGS, select_configs
from invariants.catalog.registry import Programs
from invariants.records import results as _results
from invariants.records.compiled import FailedCompile, Key
from invariants.scope.targets import all_targets, select_targets


def test_programs_take_names_patterns_kinds_and_tags():
    assert Programs().select(None) == list(CATALOG)
    assert Programs().select("take,naive") == [n for n in CATALOG if n in ("naive", "take")]
    vmap = Programs().select("vmap_*")
    assert vmap and all(name.startswith("vmap_") for name in vmap)
    assert Programs().select("kind:backward") == [n for n, p in CATALOG.items() if p.kind == "backward"]


@pytest.mark.parametrize(
    ("select", "value", "message"),
    [
        (Programs().select, "", "--programs: empty selection"),
        (Programs().select, " , ", "--programs: empty selection"),
        (Programs().select, "nave", "--programs: unknown program 'nave' (did you mean 'naive'"),
        (Programs().select, "take,zzz_*", "--programs: unknown program 'zzz_*'"),
        (select_configs, "", "--configs: empty selection"),
        (select_configs, ",", "--configs: empty selection"),
        (select_configs, "f23", "--configs: unknown configuration 'f23' (did you mean 'f32'"),
        (select_configs, "f32,fp8*", "--configs: unknown configuration 'fp8*'; known: f32, bf16, f32-large,"),
    ],
)
def test_a_selection_of_nothing_is_one_line(select, value: str, message: str):
    with pytest.raises(InvariantsError) as err:
        select(value)
    assert str(err.value).startswith(message)


def test_configs_take_ids_and_patterns():
    # The SparseCore offload size compiles for minutes: only when named.
    assert select_configs(None) == set(CONFIGS) - {"f32-offload"}
    assert select_configs("f32-offload") == {"f32-offload"}
    assert select_configs("f32") == {"f32"}
    assert select_configs(" f32 , bf16* ") == {"f32", "bf16", "bf16-llm", "bf16-llm-2d"}
    assert select_configs("*-2d") == {"f32-2d", "bf16-llm-2d"}


def test_targets_empty_is_an_error_not_all():
    assert [t.name for t in select_targets(None)] == list(all_targets())
    for value in ("", " ", ","):
        with pytest.raises(InvariantsError, match=r"^--targets: empty selection"):
            select_targets(value)


def test_results_entries_come_from_records_only():
    name, value = _results.record("correctness", id="c", program="take", config="f32", distribution="u",
                                  problem=None)  # fmt: skip
    entry = _results.entry(name, value, "passed", "t::x")
    assert entry == _results.Correctness(
        outcome="passed", nodeid="t::x", id="c", program="take", config="f32", distribution="u", problem=None
    )
    assert _results.to_json(entry) == {**value, "outcome": "passed", "nodeid": "t::x"}
    assert _results.from_json(_results.to_json(entry)) == entry
    assert _results.entry("selfcheck", {"table": "..."}, "passed", "t::y") is None
    with pytest.raises(InvariantsError, match="a ratio record lacks target, config, median"):
        _results.record("ratio", id="r")
    with pytest.raises(InvariantsError, match="a correctness record 'problem' cannot be 3"):
        _results.record("correctness", id="c", program="take", config="f32", distribution="u", problem=3)


def test_a_record_keeps_its_types_through_the_file(tmp_path):
    """What an item measured is read back as it was measured: numbers as numbers, its failure as a value,
    the fields its kind does not declare (a structure's metrics) kept."""
    import numpy as np

    _, value = _results.record(
        "invariant", id="i", target="cpu", programs=["take"], config="f32", holds=False,
        measured={"scatters(dtype='f32')": np.int64(1), "temp_bytes(take)": 2.5,
                  "structure(take)": "<1 kernels>", "custom_call_targets": ("b", "a"),
                  "opcodes": frozenset({"gather", "add"})},
        **{"assert": "scatters(dtype='f32') == 0"},
    )  # fmt: skip
    failure = _results.Failure("assert", "measured 1", Key("take", "f32", "cpu"))
    item = _results.entry(_results.PROPERTY, value, "failed", "t::i", "why", failure)
    _, structure = _results.record("structure", target="cpu", program="take", config="f32", kernels=1)
    compiled = _results.entry(_results.PROPERTY, structure, "passed", "t::s")
    assert item is not None and compiled is not None
    path = tmp_path / "r.json"
    _results.write(path, {}, [item, compiled])
    assert json.loads(path.read_text())["format_version"] == _results.FORMAT_VERSION
    back, again = _results.read(path).items
    assert back == item and isinstance(back, _results.Invariant) and back.failure == failure
    assert back.measured == {
        "scatters(dtype='f32')": 1,
        "temp_bytes(take)": 2.5,
        "structure(take)": "<1 kernels>",
        "custom_call_targets": ("b", "a"),
        "opcodes": ("add", "gather"),
    }
    assert type(back.measured["scatters(dtype='f32')"]) is int
    assert isinstance(again, _results.Structure) and again.get("kernels") == 1


@pytest.mark.parametrize(
    ("option", "xdist", "collect_only", "want"),
    [
        (None, None, False, "cpus"),  # default: one thread per CPU
        (3, None, False, 3),
        (0, None, False, 0),  # 0: each item compiles what it reads
        (-1, None, False, 0),
        (3, 2, False, 0),  # under xdist the workers use the cores, and none knows its items
        (None, None, True, 0),  # --collect-only compiles nothing
    ],
)
def test_compile_threads(option, xdist, collect_only, want):
    import os
    from types import SimpleNamespace

    from invariants.plugin.generate import compile_threads

    opts = SimpleNamespace(numprocesses=xdist, collectonly=collect_only, compile_threads=option)
    config = SimpleNamespace(option=opts, getoption=lambda name: getattr(opts, name))
    expected = (os.cpu_count() or 1) if want == "cpus" else want
    assert compile_threads(config) == expected  # type: ignore[arg-type]


def test_an_xdist_worker_never_prefetches():
    from types import SimpleNamespace

    from invariants.plugin.generate import compile_threads

    opts = SimpleNamespace(numprocesses=None, collectonly=False, compile_threads=4)
    worker = SimpleNamespace(option=opts, getoption=lambda name: getattr(opts, name), workerinput={})
    assert compile_threads(worker) == 0  # type: ignore[arg-type]


def _session(tmp_path, **given: str | None):
    """A real GateSession of a stand-in pytest config: the gate's defaults on the CPU, with ``given``."""
    from types import SimpleNamespace

    from invariants.plugin.session import GateSession
    from invariants.plugin.suite import Suite

    options = {"targets": "cpu", "programs": None, "configs": None, "spec_dir": None, "no_catalog": False,
               "snapshot_dir": str(tmp_path), "catalog_snapshot_dir": None, "hlo_dump_dir": "d",
               "keep_hlo": False, "raw_invariants": False, "cache_dir": str(tmp_path / "cache"),
               "no_cache": False, "user_code_timeout": None, "compile_threads": None,
               "record_baselines": False, "shard": None, **given}  # fmt: skip

    def getoption(name: str, default: object = KeyError) -> object:
        # pytest's Config.getoption: a dest or an option string, a default for an option not registered.
        key = name.lstrip("-").replace("-", "_")
        if key in options:
            return options[key]
        if default is KeyError:
            raise KeyError(name)
        return default

    config = SimpleNamespace(rootpath=tmp_path, getoption=getoption, stash=pytest.Stash())
    return GateSession(config, Suite.load(config))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "line"),
    [
        ({"configs": "bf16-llm"}, "--targets cpu --configs bf16-llm: selects nothing to compile"),
        (
            {"programs": "lax_gather", "configs": "bf16"},
            "--targets cpu --programs lax_gather --configs bf16:",
        ),
    ],
)
def test_a_selection_that_compiles_nothing_is_one_line(tmp_path, given, line):
    """Each option names something that exists, but not together on these targets (LLM scale is compiled
    ahead of time only; lax_gather only in the seed's configuration): an error, not a green run of nothing."""
    with pytest.raises(InvariantsError) as err:
        _session(tmp_path, **given)
    assert str(err.value).startswith(line) and "\n" not in str(err.value)


def test_a_gate_item_stopped_by_a_compile_error_fails_with_its_line_and_versions():
    """Not a page of stack: the key, the compiler's first line, the versions; other tests keep theirs."""
    from invariants.plugin import hooks as _plugin

    class Item:
        def __init__(self, gate: bool) -> None:
            self.gate = gate
            self.stash = pytest.Stash()
            self.config = types.SimpleNamespace(stash=pytest.Stash())  # no gate session: said as is

        def get_closest_marker(self, name: str) -> object:
            return object() if self.gate and name == "gate" else None

    error = InvariantsError("tpu-v5e/take[f32]: compile failed: INTERNAL: RET_CHECK failure (x.cc:1) ...")
    call = _plugin.pytest_runtest_call(Item(gate=True))  # type: ignore[arg-type]
    next(call)
    with pytest.raises(pytest.fail.Exception) as failed:
        call.throw(error)
    assert not failed.value.pytrace
    first, versions = str(failed.value).splitlines()
    assert first == str(error) and versions.startswith("versions: jax 0.") and "jaxlib" in versions
    assert failed.value.failure == _results.Failure("error", str(error))  # type: ignore[attr-defined]
    # A compile's own error is a compile failure, its key the compile's.
    call = _plugin.pytest_runtest_call(Item(gate=True))  # type: ignore[arg-type]
    next(call)
    with pytest.raises(pytest.fail.Exception) as failed:
        call.throw(_failed_compile("tpu-v5e", "INTERNAL: RET_CHECK failure\nmore"))
    assert str(failed.value).startswith("tpu-v5e/take[f32]: compile failed: INTERNAL: RET_CHECK failure\n")
    assert failed.value.failure == _results.Failure(  # type: ignore[attr-defined]
        "compile", "INTERNAL: RET_CHECK failure", Key("take", "f32", "tpu-v5e")
    )
    other = _plugin.pytest_runtest_call(Item(gate=False))  # type: ignore[arg-type]
    next(other)
    with pytest.raises(InvariantsError):
        other.throw(error)


# ------------------------------------------------------------------------------------- obsolete snapshots


def _snapshot(folder, stem: str) -> None:
    program, config = stem.split(".", 1)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.txt").write_text(f"# {program} [{config}] on {folder.name}\n\nsummary: x\n")


def _obsolete(session, updating: bool, passed: bool = True, ran=("cpu",), delete=False, spec_dirs=False):
    """What ``session``'s snapshot folders say of the obsolete snapshots at the end of a run in which the
    structure items of ``ran`` ran (``spec_dirs``: as in a run given --spec-dir)."""
    from invariants.plugin.snapshots import SnapshotFolders

    folders = session.snapshots
    if spec_dirs:
        folders = SnapshotFolders(
            folders.snapshot_dir, folders.catalog_snapshot_dir, folders.programs, spec_dirs_given=True
        )
    items = [
        _results.Structure(outcome="passed", nodeid=f"s[{t}]", target=t, program="take", config="f32")
        for t in ran
    ]
    return folders.obsolete(session.all_targets, items, passed, updating=updating, delete=delete)


def test_an_update_deletes_only_files_it_wrote_of_programs_that_are_gone(tmp_path):
    """In the catalog's own folder: a file of ours whose program left is deleted by a passing update and
    named by a plain run; a foreign README.txt, the snapshot of a program merely not selected, and a file of
    a target that did not run are never touched."""
    cpu, v4 = tmp_path / "cpu", tmp_path / "tpu-v4"
    for stem in ("gone.f32", "take.f32"):
        _snapshot(cpu, stem)
    _snapshot(v4, "gone.f32")
    (cpu / "README.txt").write_text("# notes on these files\n")
    (cpu / "renamed.f32.txt").write_text("# gone [f32] on cpu\n")  # not under its own name: not ours
    session = _session(tmp_path, programs="naive")
    assert _obsolete(session, updating=False) == [
        "invariants: " + _shown(cpu / "gone.f32.txt") + " is obsolete (no program has it on cpu any more); "
        "--snapshot-update deletes it"
    ]
    lines = _obsolete(session, updating=True, passed=False)
    assert len(lines) == 1 and "this run failed" in lines[0] and (cpu / "gone.f32.txt").exists()
    lines = _obsolete(session, updating=True)
    assert lines == [
        "invariants: deleted " + _shown(cpu / "gone.f32.txt") + " (no program has it on cpu any more)"
    ]
    left = sorted(p.name for p in cpu.iterdir())
    assert left == ["README.txt", "renamed.f32.txt", "take.f32.txt"] and (v4 / "gone.f32.txt").exists()


def test_a_downstream_update_lists_what_it_would_delete_and_deletes_only_with_the_flag(tmp_path):
    """A downstream folder (the catalog read from elsewhere, or spec folders given): a run given a subset of
    the spec folders cannot know the other programs, so it lists them and deletes only when told to; a
    catalog program's file there is never its to judge."""
    import dataclasses

    own, package = tmp_path / "project", tmp_path / "package"
    package.mkdir()
    _snapshot(own / "cpu", "mine_take.f32")
    _snapshot(own / "cpu", "other_specs_program.f32")
    _snapshot(own / "cpu", "take.f32")  # a catalog program: its snapshots live in the package
    session = _session(tmp_path, snapshot_dir=str(own), catalog_snapshot_dir=str(package))
    # This run's spec folders declare mine_take (its snapshots in the project); another's declared more.
    session.snapshots.programs = Programs([dataclasses.replace(CATALOG["take"], name="mine_take")])
    path = own / "cpu" / "other_specs_program.f32.txt"
    assert _obsolete(session, updating=False) == [
        f"invariants: {_shown(path)} is obsolete (no program has it on cpu any more); --snapshot-update "
        "--delete-obsolete-snapshots deletes it"
    ]
    lines = _obsolete(session, updating=True)
    assert lines[0].startswith(
        "invariants: 1 obsolete snapshot(s) that no program of this run's spec folders"
    )
    assert lines[1] == f"invariants:   {_shown(path)}" and "none deleted" in lines[2] and path.exists()
    lines = _obsolete(session, updating=True, delete=True)
    assert lines[-1].startswith(f"invariants: deleted {_shown(path)}") and not path.exists()
    assert (own / "cpu" / "take.f32.txt").exists() and (own / "cpu" / "mine_take.f32.txt").exists()
    # In the checkout's own folder too, once a spec folder is given: listed, not deleted.
    _snapshot(tmp_path / "cpu", "gone.f32")
    mine = _session(tmp_path)
    lines = _obsolete(mine, updating=True, spec_dirs=True)
    assert "none deleted" in lines[-1] and (tmp_path / "cpu" / "gone.f32.txt").exists()


def _shown(path) -> str:
    from invariants._paths import shown

    return shown(path)


def test_a_stopped_gate_items_report_leaves_out_the_c_plus_plus_stack_it_captured():
    from invariants.plugin import hooks as _plugin

    class Item:
        stash = pytest.Stash()
        config = types.SimpleNamespace(stash=pytest.Stash())

        def get_closest_marker(self, name: str) -> object:
            return object()

    class Report:
        longrepr = None

        def __init__(self) -> None:
            self.sections = [
                ("Captured stderr call", "*** Begin stack trace ***\n..."),
                ("Captured log call", "x"),
            ]
            self.user_properties: list[tuple[str, object]] = []

    class Call:
        when = "call"
        excinfo: object = None

    item = Item()
    call = _plugin.pytest_runtest_call(item)  # type: ignore[arg-type]
    next(call)
    with pytest.raises(pytest.fail.Exception) as failed:
        call.throw(_failed_compile("cpu", "INTERNAL: RET_CHECK failure"))
    Call.excinfo = failed
    made = _plugin.pytest_runtest_makereport(item, Call())  # type: ignore[arg-type]
    next(made)
    with pytest.raises(StopIteration) as done:
        made.send(Report())
    assert done.value.value.sections == [("Captured log call", "x")]
    # Its failure goes with the report (as xdist sends it back), for the results file.
    said = _results.recorded_failure(done.value.value.user_properties)
    assert said == _results.Failure("compile", "INTERNAL: RET_CHECK failure", Key("take", "f32", "cpu"))


def test_no_catalog_keeps_the_catalog_programs_the_projects_relations_name(tmp_path):
    """The partners of --no-catalog: named by a relation of the project's spec files beside a selected
    program of its own (or between catalog programs alone); never by an absolute invariant's pattern, never
    by the package's own spec files."""
    from invariants.catalog.registry import Programs
    from invariants.plugin.suite import relation_partners
    from invariants.specfile.reader import SPEC_DIR, load_specs

    (tmp_path / "mine.toml").write_text(
        '[spec]\ntargets = ["*"]\n\n'
        '[[program]]\nname = "mine"\nfunction = "m:f"\nkind = "forward"\n\n'
        '[[invariant]]\nid = "a"\nassert = "structure(mine) == structure(take)"\n\n'
        '[[invariant]]\nid = "b"\nassert = "time(mine) / time(naive) <= 2"\n\n'
        '[[invariant]]\nid = "c"\nprograms = ["*take*"]\nassert = "while_loops == 0"\n\n'
        '[[invariant]]\nid = "d"\nassert = "kernels(grad_take) <= kernels(grad_naive)"\n'
    )
    specs = load_specs(SPEC_DIR, tmp_path)
    assert relation_partners(specs, ["mine"], Programs()) == ["take", "naive", "grad_take", "grad_naive"]
    assert relation_partners(specs, [], Programs()) == ["grad_take", "grad_naive"]


def test_loading_the_plugin_starts_no_jax():
    """pytest imports the hooks before the backend guard runs: JAX must not start then (the guard starts it
    in the environment invariants.compile.process sets)."""
    import subprocess
    import sys

    code = "import sys\nimport invariants.plugin.hooks\nprint('jax' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=99)
    assert out.stdout.split() == ["False"]


def _failed_compile(target: str, why: str) -> FailedCompile:
    """What a failed compile of ``take[f32]`` on ``target`` raises (invariants.compile.artifacts)."""
    key = Key("take", "f32", target)
    first = why.splitlines()[0]
    return FailedCompile(_results.compile_failed(target, "take", "f32", why), key, first, "XlaRuntimeError")
