"""The results file's path and writing: atomic, checked when the run starts (a directory is one line before
anything compiles), and claimed for the run (a second run writing the same path concurrently gets a file
of its own, with one line; a lock a killed run left never blocks). The gate runs in this process
(``gate_pytester``); the run that holds a lock and is killed is a child."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gatekit import InProcess

from invariants._errors import InvariantsError
from invariants.records import results as _results

ROOT = Path(__file__).resolve().parents[3]
PAYLOAD = {"versions": {}, "runtime": {}, "targets": {}, "exitstatus": 0}


def test_the_results_file_is_written_atomically(tmp_path: Path, monkeypatch):
    path = tmp_path / "out" / "results.json"
    _results.write(path, {**PAYLOAD, "exitstatus": 1}, [])
    assert json.loads(path.read_text())["exitstatus"] == 1

    def interrupted(src: object, dst: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_results.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _results.write(path, {**PAYLOAD, "exitstatus": 2}, [])
    assert json.loads(path.read_text())["exitstatus"] == 1  # the old file, whole
    assert sorted(p.name for p in path.parent.iterdir()) == ["results.json"]  # no temporary file left


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.mkdir(parents=True), "a directory; give a file path such as"),
        (lambda p: p.parent.write_text(""), "is a file, not a folder"),
    ],
)
def test_a_path_that_cannot_be_written_is_one_line(tmp_path: Path, make, message):
    path = tmp_path / "artifacts" / "results.json"
    make(path)
    with pytest.raises(InvariantsError) as err:
        _results.check_path(path)
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith(f"--results-json {path}")


def test_a_claimed_path_gives_a_second_run_its_own_file(tmp_path: Path):
    path = tmp_path / "results.json"
    first = _results.claim(path)
    assert first.path == path and first.note is None
    second = _results.claim(path)  # a lock is per open file: the same process can stand for another run
    try:
        assert second.path == tmp_path / f"results.{os.getpid()}.json"
        assert second.note and second.note.startswith(f"invariants: {path} is being written by another run")
        assert f"pid {os.getpid()}" in second.note and "\n" not in second.note
    finally:
        second.release()
        first.release()
    assert not _results.lock_path(path).exists()
    again = _results.claim(path)
    assert again.path == path
    again.release()


@pytest.mark.parametrize("plant", ["link", "fifo"])
def test_a_lock_path_that_is_no_lock_file_is_refused_never_written_through(tmp_path: Path, plant: str):
    """A planted link at ``results.json.lock`` would have the lock's line written over the file it names
    (truncated first); a named pipe would hang the open."""
    path, victim = tmp_path / "results.json", tmp_path / "victim.txt"
    victim.write_text("the user's file\n")
    lock = _results.lock_path(path)
    if plant == "link":
        lock.symlink_to(victim)
    else:
        os.mkfifo(lock)
    with pytest.raises(InvariantsError) as err:
        _results.claim(path)
    said = str(err.value)
    assert said.startswith(f"{lock}: ") and "where the gate keeps its" in said and "\n" not in said
    assert victim.read_text() == "the user's file\n"


def test_a_lock_left_by_a_killed_run_never_blocks(tmp_path: Path):
    path = tmp_path / "results.json"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from invariants.records import results as _results;"
         "c = _results.claim(Path(sys.argv[1])); print(c.path, flush=True); time.sleep(60)", str(path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == str(path)
        busy = _results.claim(path)
        assert busy.path != path and f"pid {holder.pid}" in (busy.note or "")
        busy.release()
    finally:
        holder.kill()
        holder.wait()
    assert _results.lock_path(path).exists()  # SIGKILL: the file stays, its lock does not
    after = _results.claim(path)
    assert after.path == path and after.note is None
    after.release()


def _gate(gate_pytester: InProcess, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The gate's structure tier on ``take`` on the CPU, in this process, snapshots in ``tmp_path/s``."""
    gate_pytester.project(targets=())
    return gate_pytester.pytest(
        "tests/gate/test_structure.py", "--targets", "cpu", "--programs", "take", "--configs", "f32",
        f"--snapshot-dir={tmp_path / 's'}", f"--hlo-dump-dir={tmp_path / 'hlo'}", *args,
    )  # fmt: skip


def test_a_results_path_that_is_a_directory_stops_the_run_at_once(gate_pytester: InProcess, tmp_path: Path):
    (tmp_path / "s").mkdir()
    proc = _gate(gate_pytester, tmp_path, f"--results-json={tmp_path}")
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: --results-json {tmp_path}: a directory; give a file path such as {tmp_path / 'results.json'}"
    )
    assert "compiled" not in proc.stdout and "Traceback" not in proc.stderr


def test_a_run_whose_results_path_another_run_holds_writes_its_own(gate_pytester: InProcess, tmp_path: Path):
    import shutil

    shutil.copytree(ROOT / "snapshots" / "cpu", tmp_path / "s" / "cpu")
    path = tmp_path / "results.json"
    other = _results.claim(path)  # the other run, still going, with what it has written
    path.write_text('{"items": [], "from": "the other run"}\n')
    try:
        proc = _gate(gate_pytester, tmp_path, f"--results-json={path}")
    finally:
        other.release()
    assert proc.returncode == 0, proc.stdout[-2000:]
    own = sorted(tmp_path.glob("results.*.json"))
    assert len(own) == 1 and _results.read(own[0]).items, proc.stdout[-2000:]
    assert f"invariants: {path} is being written by another run" in proc.stdout
    assert f"this run writes {own[0]}" in proc.stdout
    assert json.loads(path.read_text())["from"] == "the other run"


def test_every_skipped_item_is_in_the_results_file_with_its_reason(gate_pytester: InProcess, tmp_path: Path):
    """A skipped item records nothing of its own; the file lists it with its skip's reason, so that its
    skips are the ones pytest counted (a run of skips alone reads as such, not as a run of nothing)."""
    gate_pytester.project(targets=())
    path = tmp_path / "results.json"
    proc = gate_pytester.pytest(
        "tests/gate", "--targets", "cpu", "--programs", "take", "--configs", "f32",
        "-k", "ratio or test_structure", f"--snapshot-dir={tmp_path / 's'}", f"--results-json={path}",
        "--snapshot-update",
    )  # fmt: skip
    results = _results.read(path)
    skipped = [it for it in results.items if it.outcome == "skipped"]
    assert results.pytest and len(skipped) == results.pytest["skipped"] > 0, proc.stdout[-2000:]
    assert all(it.kind == "skipped" and it.reason for it in skipped)
    assert "no throughput invariant applies" in {it.reason for it in skipped}


def test_a_run_stopped_by_bad_input_keeps_the_earlier_results_file(gate_pytester: InProcess, tmp_path: Path):
    """The earlier run's file stays until a run writes a new one: a run stopped by bad input loses nobody's
    results (a reader that must know its own run's file gives each run a path of its own, as the Action
    does)."""
    path = tmp_path / "results.json"
    earlier = json.dumps({**PAYLOAD, "items": [{"kind": "error", "outcome": "passed", "nodeid": "x"}]})
    path.write_text(earlier)
    proc = _gate(gate_pytester, tmp_path, f"--results-json={path}", "--configs", "nosuch")
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert proc.stderr.strip().splitlines()[-1].startswith("error: --configs: unknown configuration 'nosuch'")
    assert path.read_text() == earlier and not _results.lock_path(path).exists()


def test_a_run_of_other_tests_alone_keeps_the_earlier_results(gate_pytester: InProcess, tmp_path: Path):
    """A session that loads the gate's plugin but runs none of its items (this repository's own tests) is
    no gate run: the last gate run's file stays."""
    path = tmp_path / "results.json"
    path.write_text(json.dumps({**PAYLOAD, "items": []}))
    gate_pytester.project(targets=())  # its conftest loads the gate's plugin
    gate_pytester.pytester.makepyfile(test_other="def test_other():\n    pass\n")
    proc = gate_pytester.pytest("test_other.py", "--targets", "cpu", f"--results-json={path}")
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert json.loads(path.read_text())["items"] == []


@pytest.mark.parametrize(
    ("option", "line"),
    [
        ("--results-json=/sys/r.json", "error: --results-json /sys/r.json: cannot write in its folder /sys"),
        (
            "--hlo-dump-dir=/sys/x",
            "error: --hlo-dump-dir /sys/x: cannot write in /sys, where it would be made",
        ),
        # pytest-benchmark's: it writes the file after all the timing.
        (
            "--benchmark-json=/sys/b.json",
            "error: --benchmark-json /sys/b.json: cannot write in its folder /sys",
        ),
        ("--benchmark-json=/tmp", "error: --benchmark-json /tmp: a directory; give a file path"),
    ],
)
def test_an_output_path_nothing_can_be_written_to_stops_the_run_at_once(
    gate_pytester: InProcess, tmp_path: Path, option, line
):
    """Root passes os.access on /sys: the folder is tried for real at start, not found out at the end."""
    proc = _gate(gate_pytester, tmp_path, option)
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert proc.stderr.strip().splitlines()[-1].startswith(line)
    assert "compiled" not in proc.stdout and "Traceback" not in proc.stderr


def test_a_benchmark_json_on_someone_elses_file_is_refused_and_the_file_kept(
    gate_pytester: InProcess, tmp_path: Path
):
    """pytest-benchmark writes over any file at its path once the timing ran: a file that is not its JSON
    is refused when the run starts; an empty one, or one of its own, is taken."""
    notes = tmp_path / "NOTES.md"
    notes.write_text("# my notes\n")
    proc = _gate(gate_pytester, tmp_path, f"--benchmark-json={notes}")
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: --benchmark-json {notes}: a file that is not pytest-benchmark's JSON; give another path, or "
        "remove the file"
    )
    assert notes.read_text() == "# my notes\n"
    ours = tmp_path / "b.json"
    ours.write_text('{"benchmarks": []}')
    proc = _gate(gate_pytester, tmp_path, f"--benchmark-json={ours}")
    assert "--benchmark-json" not in proc.stderr, proc.stderr[-1500:]


def test_a_record_with_a_null_field_no_writer_makes_is_one_line(tmp_path: Path):
    """A results file whose entries kept their kind, nodeid and outcome but lost their values is refused,
    naming the entry and the fields; the fields that are null by design (a check with no problem, an
    efficiency item with no baseline) are read."""
    _, record = _results.record("correctness", id="c", program="take", config="f32", distribution="uniform",
                                problem=None)  # fmt: skip
    path = tmp_path / "r.json"
    _results.write(path, PAYLOAD, [_results.entry(_results.PROPERTY, record, "passed", "t.py::c")])  # type: ignore[list-item]
    assert _results.read(path).items[0].get("problem", "absent") is None
    data = json.loads(path.read_text())
    data["items"][0] |= {"program": None, "config": None}
    path.write_text(json.dumps(data))
    with pytest.raises(InvariantsError) as err:
        _results.read(path)
    assert str(err.value) == f"{path}: items[0] (correctness t.py::c): program, config null"


@pytest.mark.parametrize(("version", "said"), [(None, "no format version"), (1, "format version 1")])
def test_a_results_file_of_another_format_is_refused_in_one_line(tmp_path: Path, version, said):
    """A file an older gate wrote (no format version, or an older one) is never read as this one's: the
    line says what to do."""
    path = tmp_path / "r.json"
    _results.write(path, PAYLOAD, [_results.skipped_entry("t.py::s", "no target here")])
    assert len(_results.read(path).items) == 1
    data = json.loads(path.read_text())
    data.pop("format_version")
    if version is not None:
        data["format_version"] = version
    path.write_text(json.dumps(data))
    with pytest.raises(InvariantsError) as err:
        _results.read(path)
    assert str(err.value) == (
        f"{path}: a results file of {said}; this version reads format {_results.FORMAT_VERSION} only: "
        "run the gate again (pytest --results-json) to write a new one"
    )


def test_a_snapshot_folder_that_is_a_file_stops_the_run_at_once(gate_pytester: InProcess, tmp_path: Path):
    (tmp_path / "s").write_text("not a folder\n")
    for update in ((), ("--snapshot-update",)):
        proc = _gate(gate_pytester, tmp_path, *update)
        assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
        line = f"error: --snapshot-dir {tmp_path / 's'}: a file, not a folder"
        assert proc.stderr.strip().splitlines()[-1] == line


def test_a_snapshot_folder_misspelt_beside_the_real_one_is_one_line(gate_pytester: InProcess, tmp_path: Path):
    """Not a suggestion to record every snapshot into the typo: the folder it meant, and how to mean it."""
    (tmp_path / "ss" / "cpu").mkdir(parents=True)
    (tmp_path / "ss" / "cpu" / "take.f32.txt").write_text("")
    (tmp_path / "sx").mkdir()  # a close name that holds no snapshots is no suggestion
    for update in ((), ("--snapshot-update",)):
        proc = _gate(gate_pytester, tmp_path, *update)
        assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
        line = f"error: --snapshot-dir {tmp_path / 's'}: no such folder (did you mean 'ss'?); make it first"
        assert proc.stderr.strip().splitlines()[-1] == line + " to start a new one"
        assert not (tmp_path / "s").exists()


def test_a_keyword_that_deselects_every_gate_item_is_one_line(gate_pytester: InProcess, tmp_path: Path):
    proc = _gate(gate_pytester, tmp_path, "-k", "no_such_item_anywhere")
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    last = (proc.stdout + proc.stderr).strip().splitlines()[-1]
    assert last == "error: -k 'no_such_item_anywhere': deselects every gate item (1), leaving nothing to run"


def test_only_gate_items_are_recorded(tmp_path: Path):
    """A session that loads the gate's plugin may run other tests too (this repository's own do): their
    failures are not the gate's, and a run of nothing but them writes no results file. A gate item's report
    says it is one; a keyword ``gate`` (a test parametrized so has it) does not."""
    from types import SimpleNamespace

    from invariants.plugin.session import Recorder
    from invariants.plugin.tree import GATE_REPORT

    def report(gate: bool, outcome: str) -> object:
        return SimpleNamespace(when="call", skipped=False, failed=outcome == "failed", outcome=outcome,
                               keywords={"gate": 1}, nodeid="tests/t.py::t[gate]", user_properties=[],
                               longrepr="boom", **({GATE_REPORT: True} if gate else {}))  # fmt: skip

    recorder = Recorder()
    recorder.claim_results(tmp_path / "results.json")
    recorder.pytest_runtest_logreport(report(False, "failed"))  # type: ignore[arg-type]
    recorder.write_results({})
    assert recorder.items == [] and not (tmp_path / "results.json").exists() and not recorder.notes
    recorder.pytest_runtest_logreport(report(True, "failed"))  # type: ignore[arg-type]
    assert [i.kind for i in recorder.items] == ["error"]
    recorder.release()


NOT_THE_GATE = """
import pytest


@pytest.mark.parametrize("command", ["gate", "report"])
def test_a_command(command):
    assert command
"""


def test_a_run_of_no_gate_item_says_nothing_of_the_gates_results(gate_pytester: InProcess):
    """A project's own tests in a session that loads the gate's plugin (this repository's do), one of
    them parametrized with "gate": the run's end says nothing of the gate, and writes no results file."""
    gate_pytester.project(targets=())
    (gate_pytester.path / "tests" / "test_mine.py").write_text(NOT_THE_GATE)
    proc = gate_pytester.pytest("tests/test_mine.py")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "2 passed" in out and "invariants: no gate item" not in out, out[-3000:]
    assert not (gate_pytester.path / "artifacts" / "results.json").exists()


def test_a_gate_run_that_records_nothing_says_so(gate_pytester: InProcess, tmp_path: Path):
    """Gate items selected, none of them run (``--setup-only``): the run's end says that no results file
    was written, and why."""
    import shutil

    shutil.copytree(ROOT / "snapshots" / "cpu", tmp_path / "s" / "cpu")
    results = tmp_path / "r.json"
    proc = _gate(gate_pytester, tmp_path, "--setup-only", f"--results-json={results}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert f"invariants: no gate item recorded anything; {results} was not written" in out, out[-3000:]
    assert not results.exists()


def test_a_failed_items_failure_is_a_value_the_closing_table_reads(gate_pytester: InProcess, tmp_path: Path):
    """A snapshot that differs and an assert that does not hold: each failed record carries its failure
    (its kind, the compile it is about, what it says), and the run's closing table says what of each."""
    import shutil

    from invariants.compile.child import GATE_DIR
    from invariants.records.compiled import Key

    folder = gate_pytester.path
    (folder / "specs").mkdir()
    (folder / "specs" / "two.toml").write_text(
        '[spec]\ntargets = ["cpu"]\n\n[[invariant]]\nid = "two_kernels"\nprograms = ["take"]\n'
        'configs = ["f32"]\nassert = "kernels == 2"\n'
    )
    shutil.copytree(ROOT / "snapshots" / "cpu", tmp_path / "s" / "cpu")
    snapshot = tmp_path / "s" / "cpu" / "take.f32.txt"
    snapshot.write_text(snapshot.read_text().replace("summary: kernels 1;", "summary: kernels 2;"))
    path = tmp_path / "r.json"
    proc = gate_pytester.pytest(
        *(str(GATE_DIR / name) for name in ("test_structure.py", "test_invariants.py")),
        *("-p", "invariants.plugin.hooks", "-c", os.devnull, "--rootdir", str(folder)),
        *("--spec-dir", str(folder / "specs"), "--targets", "cpu", "--programs", "take", "--configs", "f32"),
        *("-k", "test_structure or two_kernels", f"--snapshot-dir={tmp_path / 's'}"),
        *(f"--hlo-dump-dir={tmp_path / 'hlo'}", f"--results-json={path}"),
    )
    assert proc.returncode == 1, proc.stdout[-3000:]
    failed = {it.kind: it for it in _results.read(path).items if it.outcome == "failed"}
    key = Key("take", "f32", "cpu")
    assert failed["structure"].failure == _results.Failure("snapshot", "kernels 2 → 1", key)
    measured = "assert kernels == 2: measured kernels = 1"
    assert failed["invariant"].failure == _results.Failure("assert", measured, key)
    table = proc.stdout[proc.stdout.index("invariants: what failed, by program and target:") :].splitlines()
    assert table[1].split() == ["take", "[f32]", "cpu", "structure:", "kernels", "2", "→", "1"]
    assert table[2].split() == ["take", "[f32]", "cpu", "two_kernels:", *measured.split()]
