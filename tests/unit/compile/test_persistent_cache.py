"""The persistent compile cache: a warm key is served whole, and every input that can change what a compile
returns changes its key (a stale hit would hide the regression the gate exists for)."""

from __future__ import annotations

import dataclasses
import gzip
import importlib.metadata
import os
import shutil
import sys
from pathlib import Path

import jax
import pytest

from invariants._errors import InvariantsError
from invariants.catalog import programs as _programs
from invariants.catalog.programs import CATALOG
from invariants.compile import keys as _keys
from invariants.compile.artifacts import CompileCache, compile_here
from invariants.compile.keys import Persistent
from invariants.records import cache as _store
from invariants.records.cache import Store, from_settings
from invariants.records.compiled import Compiled, Key
from invariants.records.results import Structure
from invariants.scope import installed as _installed
from invariants.scope.targets import all_targets

CPU = all_targets()["cpu"]
TAKE = Key("take", "f32", "cpu")


def _persistent(tmp_path) -> Persistent:
    """A session's view of the store in ``tmp_path`` (a new one: a new run)."""
    return Persistent(Store(tmp_path / "cache"))


def _compile(tmp_path, program: str = "take", config: str = "f32"):
    p = _persistent(tmp_path)
    record = compile_here(program, config, CPU, p)
    return record, p.outcomes[Key(program, config, "cpu")]


def test_a_second_run_is_served_whole_and_equal_to_the_compile(tmp_path):
    first, outcome = _compile(tmp_path)
    assert outcome == "miss"
    second, outcome = _compile(tmp_path)
    assert outcome == "hit"
    assert second == first  # every field, compile_seconds the compile's that made the entry
    assert second.compile_seconds == first.compile_seconds and first.compile_seconds > 0


def test_an_entry_keeps_the_peak_memory_a_tpu_memory_bound_reads(tmp_path):
    """A hit serves the compile's memory analysis whole, its peak included: a TPU memory bound on
    peak_bytes reads the same number warm as cold."""
    from invariants.measure.measurement import measure

    tpu = all_targets()["tpu-v5e"]
    if (why := tpu.unavailable_reason()) is not None:
        pytest.skip(why)
    p = _persistent(tmp_path)
    cold = compile_here("take", "f32", tpu, p)
    warm = compile_here("take", "f32", tpu, _persistent(tmp_path))
    assert p.outcomes[Key("take", "f32", "tpu-v5e")] == "miss"
    peak = measure(warm, tpu).metrics["peak_bytes"]
    assert peak == cold.memory["peak_memory_in_bytes"] and peak >= warm.memory["argument_size_in_bytes"] > 0


def test_no_store_compiles_every_time(tmp_path):
    p = Persistent(None)
    compile_here("take", "f32", CPU, p)
    compile_here("take", "f32", CPU, p)
    assert p.tally.counts == {"off": 2}
    assert p.summary() == "compile cache: off, 2 compiled"


@pytest.mark.parametrize(
    "change",
    ["XLA_FLAGS", "LIBTPU_INIT_ARGS", "JAX_DEFAULT_PRNG_IMPL"],
)
def test_an_environment_variable_that_changes_compiles_misses(tmp_path, monkeypatch, change):
    _compile(tmp_path)
    monkeypatch.setenv(change, "--xla_cpu_prefer_vector_width=32" if change == "XLA_FLAGS" else "x")
    _, outcome = _compile(tmp_path)
    assert outcome == "miss"


def test_a_variable_of_the_gate_alone_still_hits(tmp_path, monkeypatch):
    _compile(tmp_path)
    monkeypatch.setenv("INVARIANTS_RESULTS", str(tmp_path / "elsewhere.json"))
    assert _compile(tmp_path)[1] == "hit"


def _installed_with(monkeypatch, **change):
    real = _keys.Fingerprint.installed

    def installed(self):
        return {**real(self), **change}

    monkeypatch.setattr(_keys.Fingerprint, "installed", installed)


def _another_version_of(monkeypatch, name: str) -> None:
    """``name`` reads as installed at another version, as after an upgrade."""
    real = _installed.name_version

    def read(dist):
        said = real(dist)
        return said + ".post1" if said.partition("==")[0] == name else said

    monkeypatch.setattr(_installed, "name_version", read)


@pytest.mark.parametrize("name", ["jax", "jaxlib", "libtpu", "jax-cuda12-plugin", "jax-cuda12-pjrt"])
def test_another_version_of_each_compiler_distribution_misses(tmp_path, monkeypatch, name):
    """JAX, jaxlib, libtpu, the CUDA plugin and its PJRT plugin (found by its entry point)."""
    assert name in {d.partition("==")[0] for d in _installed.Installed().compiler()}
    _compile(tmp_path)
    _another_version_of(monkeypatch, name)
    assert _compile(tmp_path)[1] == "miss"


def _install(site, name: str, version: str, module: str) -> None:
    """``name`` at ``version`` installed in the folder ``site`` (on sys.path), owning ``module``."""
    for old in site.glob(f"{name.replace('-', '_')}-*.dist-info"):
        shutil.rmtree(old)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"  # as pip names it
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    (info / "top_level.txt").write_text(module + "\n")
    if not (site / f"{module}.py").exists():
        (site / f"{module}.py").write_text("")


def test_each_package_s_owners_are_read_as_importlib_metadata_reads_them(tmp_path, monkeypatch):
    """The gate's own reading of which distributions install each top-level package (a run's start reads
    it) gives what ``importlib.metadata.packages_distributions`` does: on this environment, on a distribution
    that declares its packages, on one whose RECORD alone lists them, and on one whose name its header
    folds onto the next line."""
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "declared-tool", "1.0", "declared_tool")
    recorded = site / "recorded_tool-2.0.dist-info"
    recorded.mkdir()
    (recorded / "METADATA").write_text("Metadata-Version: 2.1\nName: recorded-tool\nVersion: 2.0\n\n")
    (recorded / "RECORD").write_text(
        "recorded_pkg/__init__.py,sha256=x,0\nrecorded_pkg/data.txt,,\nrecorded_mod.py,,\n"
        '"odd,name.py",,\n../../bin/recorded,,\nrecorded_tool-2.0.dist-info/METADATA,,\n'
    )
    folded = site / "folded_tool-3.0.dist-info"
    folded.mkdir()
    (folded / "METADATA").write_text("Metadata-Version: 2.1\nName:\n  folded-tool\nVersion: 3.0\n\n")
    (folded / "top_level.txt").write_text("folded_tool\n")
    monkeypatch.syspath_prepend(str(site))
    got = _installed.packages_distributions()
    assert got == {k: list(v) for k, v in importlib.metadata.packages_distributions().items()}
    assert got["recorded_pkg"] == got["recorded_mod"] == got["odd,name"] == ["recorded-tool"], got
    assert got["declared_tool"] == ["declared-tool"] and "folded_tool" in got
    assert {"jax", "jaxlib", "invariants"} <= got.keys()


def test_a_distribution_installed_beside_a_running_process_is_in_the_next_reading(tmp_path, monkeypatch):
    """Which distributions install each package is read once per set of installed distributions (the
    in-process runs of one session share it): one installed, or upgraded, into a folder already on the path
    is in the next session's reading."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    assert _installed.Installed().distributions(["planted_tool"]) == []
    _install(site, "planted-tool", "1.0", "planted_tool")
    assert _installed.Installed().distributions(["planted_tool"]) == ["planted-tool==1.0"]
    _install(site, "planted-tool", "2.0", "planted_other")
    assert _installed.Installed().distributions(["planted_tool", "planted_other"]) == ["planted-tool==2.0"]


def test_an_unrelated_distribution_installed_keeps_every_hit(tmp_path, monkeypatch):
    """Installed and even imported beside the gate (a linter, tox, a project's other dependencies), a
    distribution the traced code never ran changes no key, nor the CI cache's."""
    from invariants.compile.cache_command import installed_key

    programs = ("take", "grad_take", "eqx_embedding")
    assert [_compile(tmp_path, program)[1] for program in programs] == ["miss"] * len(programs)
    key = installed_key()
    site = tmp_path / "site"
    site.mkdir()
    _install(site, "unrelated-tool", "1.0", "unrelated_tool")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setitem(sys.modules, "unrelated_tool", __import__("unrelated_tool"))
    assert "unrelated-tool" in {d.metadata["Name"] for d in importlib.metadata.distributions()}
    assert [_compile(tmp_path, program)[1] for program in programs] == ["hit"] * len(programs)
    assert installed_key() == key


def test_the_distributions_a_trace_ran_are_named_and_no_others():
    """equinox's Embedding traced: equinox is named, beside JAX and the catalog; the tools that started the
    trace are not."""
    from invariants.compile.artifacts import placement

    program = CATALOG["eqx_embedding"]
    placed = placement(program, "f32", CPU)
    closed = jax.make_jaxpr(program.fn)(*placed.args)
    files = _keys.traced_files(closed, _keys._callers(sys._getframe()))
    names = {d.partition("==")[0] for d in _installed.Installed().of_files(files)}
    assert names == {"equinox", "jax", "jax-embedding-invariants"}, names


def test_a_shared_object_written_over_is_read_anew(tmp_path, monkeypatch):
    """The compiler's shared objects are found once per set of installed distributions, and each reading
    takes their size and mtime again: a build written over another of its version (a nightly, a local
    build) is another compiler."""
    _installed.compiler_files()  # read once before: the plugin's folder joining the path is read anew
    plugin = tmp_path / "site" / "jax_plugins" / "planted"
    plugin.mkdir(parents=True)
    shared = plugin / "planted.so"
    shared.write_bytes(b"x")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    before = _installed.compiler_files()
    assert str(shared) in before
    shared.write_bytes(b"xy")
    assert _installed.compiler_files()[str(shared)] != before[str(shared)]


def _plant_wheel(site, content: bytes = b"built once") -> Path:
    """A JAX plugin as an installer leaves it in ``site``: its shared object, then the RECORD that hashes
    it (written last, as pip and uv write it)."""
    import base64
    import hashlib

    shared = site / "jax_plugins" / "planted" / "planted.so"
    shared.parent.mkdir(parents=True, exist_ok=True)
    shared.write_bytes(content)
    info = site / "planted_plugin-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: planted-plugin\nVersion: 1.0\n\n")
    (info / "top_level.txt").write_text("jax_plugins\n")
    sha = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
    record = info / "RECORD"
    record.write_text(f"jax_plugins/planted/planted.so,sha256={sha},{len(content)}\n"
                      f"{info.name}/RECORD,,\n")  # fmt: skip
    st = shared.stat()
    os.utime(record, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    return shared


def _planted(monkeypatch, site) -> tuple[dict[str, str], str]:
    """What the key holds of the planted plugin with ``site`` the only one on the import path: its entry in
    the compiler's files, and ``TPU_LIBRARY_PATH`` naming its shared object."""
    monkeypatch.setattr(sys, "path", [str(site), *[p for p in sys.path if "-planted-" not in p]])
    files = {k: v for k, v in _installed.compiler_files().items() if "planted" in k}
    monkeypatch.setenv("TPU_LIBRARY_PATH", str(site / "jax_plugins" / "planted" / "planted.so"))
    return files, _keys._compiling_environment()["TPU_LIBRARY_PATH"]


def test_one_wheel_in_two_environments_is_one_compiler(tmp_path, monkeypatch):
    """A CI job installs its environment afresh (new paths, new mtimes): the compiler's files it installed
    as their wheels hold them are named by their RECORD's path and hash, so a compile cache restored from
    an earlier job is served; a build written over one afterwards, or another build of the same version,
    is another compiler."""
    jobs = tmp_path / "-planted-"
    _plant_wheel(jobs / "job1")
    _plant_wheel(jobs / "job2")
    first = _planted(monkeypatch, jobs / "job1")
    assert list(first[0]) == ["jax_plugins/planted/planted.so"], first
    assert first[1].startswith("jax_plugins/planted/planted.so:10:sha256=")
    assert _planted(monkeypatch, jobs / "job2") == first
    # A local build copied over the installed one after its RECORD (of the same size), or with its own
    # older mtime (of another size): its own path, size and mtime.
    shared = jobs / "job2" / "jax_plugins" / "planted" / "planted.so"
    recorded = (jobs / "job2" / "planted_plugin-1.0.dist-info" / "RECORD").stat().st_mtime_ns
    for content, mtime in ((b"BUILT ONCE", recorded + 1), (b"built twice", 1_000_000_000)):
        shared.write_bytes(content)
        os.utime(shared, ns=(0, mtime))
        files, library = _planted(monkeypatch, jobs / "job2")
        assert list(files) == [str(shared)], files
        assert library.startswith(f"{shared}:{len(content)}:"), library
    # Another build installed under the same version: a new RECORD, another hash.
    _plant_wheel(jobs / "job2", b"built again")
    files, library = _planted(monkeypatch, jobs / "job2")
    assert list(files) == list(first[0]) and files != first[0] and library != first[1], (files, library)


def test_a_rebuilt_libtpu_under_the_same_version_misses(tmp_path, monkeypatch):
    """A nightly rebuilt under one version: its shared object's size or mtime moved."""
    _compile(tmp_path)
    files = _keys.Fingerprint().installed()["compiler_files"]
    libtpu = [p for p in files if "libtpu" in p]
    assert libtpu, "libtpu is installed in the test environment; its .so must be in the key"
    _installed_with(monkeypatch, compiler_files={**files, libtpu[0]: "1:2"})
    assert _compile(tmp_path)[1] == "miss"


def test_jax_configuration_misses(tmp_path):
    _compile(tmp_path)
    with jax.enable_x64(True):
        assert _compile(tmp_path)[1] == "miss"


def test_another_host_cpu_misses(tmp_path, monkeypatch):
    _compile(tmp_path)
    monkeypatch.setattr(_keys, "host_cpu", lambda: ["another cpu", "sse2"])
    assert _compile(tmp_path)[1] == "miss"


def test_an_edited_device_description_changes_the_key(tmp_path, monkeypatch):
    gpu = all_targets()["gpu-l4"]
    before = _keys.target_identity(gpu)
    folder = tmp_path / "data"
    folder.mkdir()
    text = (_keys._GPU_CONFIG_DIR / "l4.txtpb").read_text()
    (folder / "l4.txtpb").write_text(text.replace("core_count", "core_count", 1) + "\n# edited\n")
    monkeypatch.setattr(_keys, "_GPU_CONFIG_DIR", folder)
    assert _keys.target_identity(gpu) != before


def test_another_target_misses(tmp_path):
    _compile(tmp_path)
    p = _persistent(tmp_path)
    compile_here("take", "f32", all_targets()["tpu-v5e"], p)
    assert p.outcomes[Key("take", "f32", "tpu-v5e")] == "miss"


@pytest.fixture
def edited_program(tmp_path, monkeypatch):
    """A catalog program whose code lives in a module file the test can edit."""
    folder = tmp_path / "src"
    folder.mkdir()
    module = folder / "edited_lookup.py"
    module.write_text(
        "import jax.numpy as jnp\n\ndef lookup(table, ids):\n    return jnp.take(table, ids, axis=0)\n"
    )
    monkeypatch.syspath_prepend(str(folder))
    import edited_lookup

    program = dataclasses.replace(CATALOG["take"], name="edited_take", fn=edited_lookup.lookup)
    monkeypatch.setitem(_programs.CATALOG, "edited_take", program)  # type: ignore[index]
    yield module
    sys.modules.pop("edited_lookup", None)


def test_an_edited_program_that_lowers_alike_still_hits(tmp_path, edited_program):
    assert _compile(tmp_path, "edited_take")[1] == "miss"
    assert _compile(tmp_path, "edited_take")[1] == "hit"
    edited_program.write_text(
        edited_program.read_text() + "\n# a comment: the module it lowers to is the same\n"
    )
    os.utime(edited_program, ns=(1, 1))
    assert _compile(tmp_path, "edited_take")[1] == "hit"


def test_an_edited_program_that_lowers_otherwise_misses(tmp_path, edited_program):
    first, _ = _compile(tmp_path, "edited_take")
    edited_program.write_text(edited_program.read_text().replace("axis=0)", "axis=0) * 2"))
    sys.modules.pop("edited_lookup")
    import edited_lookup

    CATALOG["edited_take"] = dataclasses.replace(CATALOG["edited_take"], fn=edited_lookup.lookup)  # type: ignore[index]
    second, outcome = _compile(tmp_path, "edited_take")
    assert outcome == "miss"
    assert second.hlo_text != first.hlo_text


def test_another_version_of_a_distribution_the_trace_ran_misses(tmp_path, edited_program):
    """The program's module installed as a distribution: another version of it, the same code, misses."""
    site = edited_program.parent
    _install(site, "edited-lookup", "1.0", "edited_lookup")
    assert _compile(tmp_path, "edited_take")[1] == "miss"
    assert _compile(tmp_path, "edited_take")[1] == "hit"
    _install(site, "edited-lookup", "1.1", "edited_lookup")
    assert _compile(tmp_path, "edited_take")[1] == "miss"


def test_a_swapped_function_misses_although_its_name_stays(tmp_path, monkeypatch):
    """The self-check's swap replaces a catalog program's function under its name."""
    _compile(tmp_path)
    from invariants.selfcheck import inject

    monkeypatch.setitem(
        _programs.CATALOG, "take", dataclasses.replace(CATALOG["take"], fn=inject.take_as_map_loop)
    )  # type: ignore[index]
    assert _compile(tmp_path)[1] == "miss"


def test_two_programs_of_one_module_keep_their_own_names(tmp_path, monkeypatch):
    take, _ = _compile(tmp_path, "take")
    again = dataclasses.replace(CATALOG["take"], name="take_again")
    monkeypatch.setitem(_programs.CATALOG, "take_again", again)  # type: ignore[index]
    mine, outcome = _compile(tmp_path, "take_again")
    assert outcome == "hit"  # the same module as take's: not compiled again
    assert mine.program == "take_again" and mine.hlo_text == take.hlo_text


def test_a_corrupt_entry_is_a_miss_with_one_line(tmp_path):
    _compile(tmp_path)
    for path in (tmp_path / "cache" / "v1" / "results").iterdir():
        path.write_bytes(b"not gzip")
    p = _persistent(tmp_path)
    compile_here("take", "f32", CPU, p)
    assert p.outcomes[TAKE] == "miss"
    assert (
        len(p.store.notes) == 1 and "not a cache entry" in p.store.notes[0] and "\n" not in p.store.notes[0]
    )
    assert _compile(tmp_path)[1] == "hit"  # written again


def test_writes_are_whole_files_and_leave_no_temporary_ones(tmp_path):
    _compile(tmp_path)
    names = [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert names and not [n for n in names if n.startswith(".") or n.endswith(".tmp")]
    for path in (tmp_path / "cache").rglob("*.gz"):
        gzip.decompress(path.read_bytes())


def _record(n: int) -> dict:
    """A record as a compile's (``Compiled.to_json``), ``n`` in its text."""
    return dataclasses.asdict(
        Compiled("p", "f32", "cpu", "{ lambda }", ("gather",), "x" * 2000 + str(n), {}, {}, 0.5)
    )


def test_the_size_bound_prunes_the_least_recently_used(tmp_path):
    store = Store(tmp_path / "cache")
    keys = [_store.digest(i) for i in range(5)]
    for i, key in enumerate(keys):
        store.put(key, _record(i))
        os.utime(store.root / "results" / f"{key}.json.gz", ns=(i * 10**9, i * 10**9))
    store.result(keys[0])  # used now: the newest
    size = store.size()
    deleted = store.prune(max_bytes=size // 2)
    assert deleted >= 2
    assert store.result(keys[0]) is not None and store.result(keys[1]) is None
    assert store.size() <= size // 2


def test_clear_deletes_only_what_the_store_wrote(tmp_path):
    store = Store(tmp_path / "cache")
    store.put(_store.digest("r"), _record(1))
    mine = [tmp_path / "cache" / "README.txt", store.root / "results" / "notes.json.gz"]
    for path in mine:
        path.write_text("not the cache's")
    assert store.clear() == 1
    assert all(p.exists() for p in mine) and store.stats()["results"] == 0


def test_a_folder_others_may_write_is_refused_in_one_line(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(InvariantsError) as err:
        Store(folder).check()
    assert "writable by others" in str(err.value) and "\n" not in str(err.value)


def test_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("INVARIANTS_CACHE_DIR", str(tmp_path / "c"))
    store = from_settings()
    assert store is not None and store.folder == tmp_path / "c"
    assert from_settings(str(tmp_path / "d")).folder == tmp_path / "d"
    assert from_settings(disabled=True) is None
    monkeypatch.setenv("INVARIANTS_NO_CACHE", "1")
    assert from_settings() is None
    monkeypatch.setenv("INVARIANTS_NO_CACHE", "yes")
    with pytest.raises(InvariantsError, match="INVARIANTS_NO_CACHE='yes': takes 1"):
        from_settings()
    monkeypatch.setenv("INVARIANTS_NO_CACHE", "0")
    for bad in ("0", "-5", "lots", "nan"):
        monkeypatch.setenv("INVARIANTS_CACHE_MAX_MB", bad)
        with pytest.raises(InvariantsError, match="INVARIANTS_CACHE_MAX_MB"):
            from_settings()


def test_a_session_serves_a_runtime_key_and_still_times_a_real_executable(tmp_path):
    _compile(tmp_path)
    cache = CompileCache(all_targets(), store=Store(tmp_path / "cache"))
    record = cache.get("take", "f32", "cpu")
    assert cache.outcome(TAKE) == "hit"
    executable = cache.executable("take", "f32", "cpu")  # compiled for real: timing runs it
    assert callable(executable)
    assert executable.as_text() == record.hlo_text
    assert cache.total_seconds == 0.0  # a hit took no compile time in this run
    assert cache.summary_lines([], 0.0)[0].startswith("invariants: compile cache: 1 hits, 0 misses (")


def test_the_summary_of_an_xdist_controller_counts_the_items_records(tmp_path):
    cache = CompileCache(all_targets(), store=Store(tmp_path / "cache"))
    items = [
        Structure(
            outcome="passed", nodeid=f"s{n}", target="cpu", program="take", config="f32", compile_cache=o
        )
        for n, o in enumerate(("hit", "hit", "miss", "hit"))
    ]
    assert cache.summary_lines(items, 0.0)[0].startswith("invariants: compile cache: 3 hits, 1 misses (")


def test_the_header_says_where_and_how_full(tmp_path):
    _compile(tmp_path)
    cache = CompileCache(all_targets(), store=Store(tmp_path / "cache"))
    assert cache.header_line().startswith("compile cache: ") and "(1 compiles, " in cache.header_line()
    assert (
        CompileCache(all_targets()).header_line() == "compile cache: off (--no-cache): every program compiles"
    )


@pytest.mark.e2e
def test_the_cache_command_as_a_user_runs_it(tmp_path):
    """``python -m invariants cache``: where, how full, and clear, in the user's own words."""
    import subprocess

    _compile(tmp_path)
    folder = tmp_path / "cache"

    def run(*words: str) -> str:
        command = [sys.executable, "-m", "invariants", "cache", *words, "--cache-dir", str(folder)]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout

    info = run()
    assert f"compile cache: {folder}" in info and "1 compiles" in info
    assert run("where").strip() == str(folder)
    key = run("key").strip()
    assert len(key) == 16 and int(key, 16) >= 0
    assert "1 files deleted" in run("clear")
    assert "0 compiles" in run("info")


SHARDED = [Key("sharded_rows_batch_take", "f32", "cpu-8dev")]  # a target compiled in a child process


def _child_run(tmp_path, monkeypatch):
    """A run's compile of SHARDED: its records, the children it started (their key counts), its outcomes."""
    from invariants.catalog.registry import Programs
    from invariants.compile import artifacts

    started: list[int] = []
    real = artifacts.keys_child

    def counted(module, keys, **kwargs):
        started.append(len(keys))
        return real(module, keys, **kwargs)

    monkeypatch.setattr(artifacts, "keys_child", counted)
    cache = CompileCache(all_targets(), Programs(), None, Store(tmp_path / "cache"))
    cache.plan(SHARDED)
    records = [cache.get(*k) for k in SHARDED]
    return records, started, dict(cache.persistent.tally.counts)


@pytest.mark.e2e
def test_a_child_target_is_keyed_in_its_child_which_a_warm_run_starts_to_compile_nothing(
    tmp_path, monkeypatch
):
    first, started, counts = _child_run(tmp_path, monkeypatch)
    assert started == [1] and counts == {"miss": 1}
    second, started, counts = _child_run(tmp_path, monkeypatch)
    assert started == [1] and counts == {"hit": 1}  # the child lowers, and compiles nothing
    assert second == first
    # What the child compiles with: an XLA flag in its environment.
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_prefer_vector_width=32")
    _, started, counts = _child_run(tmp_path, monkeypatch)
    assert started == [1] and counts == {"miss": 1}


@pytest.mark.e2e
def test_a_child_compiles_only_what_the_selected_items_read(tmp_path, monkeypatch):
    """The items left after -k, -m or --shard narrow the plan: their target's child compiles only their keys,
    not every key the collection planned."""
    from invariants.catalog.registry import Programs
    from invariants.compile import artifacts

    started: list[list[str]] = []
    real = artifacts.keys_child

    def counted(module, keys, **kwargs):
        started.append([k.program for k in keys])
        return real(module, keys, **kwargs)

    monkeypatch.setattr(artifacts, "keys_child", counted)
    cache = CompileCache(all_targets(), Programs(), None, Store(tmp_path / "cache"))
    cache.plan([*SHARDED, Key("sharded_rows_batch_naive", "f32", "cpu-8dev")])
    cache.narrow_plan(SHARDED)
    cache.get(*SHARDED[0])
    assert started == [["sharded_rows_batch_take"]]


class _Dist(importlib.metadata.Distribution):
    """A distribution whose metadata file is ``text``."""

    def __init__(self, text: str) -> None:
        self.text = text

    def read_text(self, filename):
        return self.text if filename == "METADATA" else None

    def locate_file(self, path):
        raise NotImplementedError


@pytest.mark.parametrize(
    "text",
    [
        "Metadata-Version: 2.1\nName: mine\nVersion: 1.2.3\nSummary: x\n\nVersion: 9 (the description)\n",
        "Metadata-Version: 2.1\nName: mine\nVersion:\n 1.2.3\n\n",  # folded: the email parser's reading
        "Metadata-Version: 2.1\nName: mine\n\nVersion: 9 (the description)\n",  # no version at all
    ],
)
def test_a_distributions_name_and_version_are_what_the_metadata_parser_reads(text):
    """The key's distributions are read from the metadata file's first lines, as ``Distribution.metadata``
    reads them: here where the lines are unusual, and below for each one installed."""
    dist = _Dist(text)
    assert _installed.name_version(dist) == f"{dist.metadata['Name']}=={dist.version}"


def test_each_installed_distribution_is_named_as_the_metadata_parser_names_it():
    installed = list(importlib.metadata.distributions())
    assert len(installed) > 10
    for d in installed:
        assert _installed.name_version(d) == f"{d.metadata['Name']}=={d.version}", d


def test_a_session_keys_two_targets_of_one_name_apart():
    """A target's identity is worked out once per session, under all its fields: another target of the same
    name (a project's own, or one a test swaps in) with another device description is another key."""
    fingerprint = _keys.Fingerprint()
    l4 = all_targets()["gpu-l4"]
    assert fingerprint.of(l4) == fingerprint.of(l4)
    renamed = dataclasses.replace(all_targets()["gpu-a100"], name="gpu-l4")
    assert fingerprint.of(renamed)["target"]["description"] != fingerprint.of(l4)["target"]["description"]
