"""The snapshot store's own rules, on real files: what syrupy is shown (obsolete files of ours, of the
selected programs and configurations, in this session's folders only; never the baselines, never a foreign
file), what counts as ours, and that writes are atomic and bad files are one line."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from gatekit import InProcess
from syrupy.location import PyTestLocation

from invariants import _paths
from invariants.snapshot import store as st

ROOT = Path(__file__).resolve().parents[3]


def _ours(folder: Path, stem: str, body: str = "summary: kernels 1\n") -> Path:
    program, config = stem.split(".", 1)
    path = folder / f"{stem}.txt"
    path.write_text(f"# {program} [{config}] on {folder.name}\n\n{body}")
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """``<root>/cpu`` with three snapshots of programs that exist, one of a program that left, a foreign
    README.txt and an efficiency baseline beside them."""
    cpu = tmp_path / "cpu"
    (cpu / "efficiency").mkdir(parents=True)
    for stem in ("naive.f32", "naive.bf16", "take.f32", "gone.f32"):
        _ours(cpu, stem)
    (cpu / "README.txt").write_text("what these files are\n")
    (cpu / "efficiency" / "naive.f32.json").write_text("{}\n")
    return cpu


KNOWN = {"naive.f32", "naive.bf16", "take.f32"}


class _Item:
    """A stand-in pytest item carrying a snapshot_key marker. Never ``request.node``: a marker added to a
    real item stays on it, and syrupy's end-of-session scan (one arbitrary item per test file) then
    discovers that item's folder: the flaky "3 snapshots unused" of the whole suite."""

    def __init__(self, root: Path, guard: st.DeletionGuard | None) -> None:
        self.marker = pytest.mark.snapshot_key("naive", "f32", "cpu", root=str(root)).mark
        self.path = Path(__file__)
        self.name = self.nodeid = "test_structure[cpu-naive-f32]"
        self.obj = _discovered
        # The session's guard, where the plugin puts it (GateSession.start): its config's stash.
        stash = pytest.Stash()
        if guard is not None:
            stash[st.GUARD_KEY] = guard
        self.config = SimpleNamespace(rootpath=ROOT, stash=stash)

    def get_closest_marker(self, name: str) -> object:
        return self.marker if name == st.MARKER else None


def _discovered(folder: Path, guard: st.DeletionGuard | None) -> list[str]:
    location = PyTestLocation(_Item(folder.parent, guard))  # type: ignore[arg-type]
    found = st.StructureSnapshotExtension().discover_snapshots(test_location=location)
    return sorted(Path(c.location).name for c in found)


def test_discovery_shows_only_obsolete_files_of_ours(folder):
    """syrupy's "unused" is then exactly "obsolete": never the snapshot of an item that was skipped or
    did not run, never the README or the baselines."""
    assert _discovered(folder, st.DeletionGuard({str(folder.resolve()): KNOWN})) == ["gone.f32.txt"]


def test_discovery_shows_only_the_selected_stems(folder):
    known = {str(folder.resolve()): {"naive.f32"}}
    selected = {str(folder.resolve()): {"naive.f32", "take.f32"}}
    assert _discovered(folder, st.DeletionGuard(known, selected)) == ["take.f32.txt"]
    assert _discovered(folder, st.DeletionGuard(known, {str(folder.resolve()): set()})) == []


def test_discovery_ignores_a_folder_this_session_does_not_own(folder):
    """The cause of the flaky "3 snapshots unused": a folder that some item's marker names but that is not
    a snapshot folder of a target compiled in this session shows nothing."""
    assert _discovered(folder, st.DeletionGuard()) == []


def test_discovery_reads_the_guard_of_the_items_own_session(folder):
    """No guard is shared: an item of a session without one (the gate plugin not loaded, or an item syrupy
    rebuilt on an xdist controller, which has no config) shows nothing; each session's item shows what its
    own guard owns."""
    assert _discovered(folder, None) == []
    rebuilt = SimpleNamespace(item=SimpleNamespace(nodeid="x", name="x", path=Path(__file__)))
    assert st.guard_of(rebuilt) is None
    mine, other = st.DeletionGuard({str(folder.resolve()): KNOWN}), st.DeletionGuard()
    assert _discovered(folder, mine) == ["gone.f32.txt"] and _discovered(folder, other) == []


def test_only_our_own_files_are_ours(folder):
    assert st.snapshot_header(folder / "naive.f32.txt") == ("naive", "f32", "cpu")
    (folder / "empty.f32.txt").write_text("")
    (folder / "bytes.f32.txt").write_bytes(b"\xff\xfe# bytes [f32] on cpu\n")
    (folder / "renamed.f32.txt").write_text("# naive [f32] on cpu\n")  # a copy under another name
    (folder / "dir.f32.txt").mkdir()
    for name in ("README.txt", "empty.f32.txt", "bytes.f32.txt", "renamed.f32.txt", "dir.f32.txt", "none"):
        assert st.snapshot_header(folder / name) is None, name
    other = folder.parent / "tpu-v5e"
    other.mkdir()
    shutil.copy(folder / "take.f32.txt", other / "take.f32.txt")  # its header names another target
    assert st.snapshot_header(other / "take.f32.txt") is None


def test_only_a_provably_obsolete_file_of_ours_is_obsolete(folder):
    assert st.obsolete_snapshots(folder, KNOWN) == [folder / "gone.f32.txt"]
    assert st.obsolete_snapshots(folder.parent / "missing", KNOWN) == []
    assert not st.DeletionGuard().obsolete(folder / "gone.f32.txt")  # its target did not compile here
    guard = st.DeletionGuard({str(folder.resolve()): KNOWN})
    assert guard.obsolete(folder / "gone.f32.txt")
    assert not guard.obsolete(folder / "naive.bf16.txt")
    assert not guard.obsolete(folder / "README.txt")


def test_a_write_is_atomic_and_keeps_the_file_mode(folder, monkeypatch):
    path = folder / "naive.f32.txt"
    path.chmod(0o640)
    st.write_atomic(path, "# naive [f32] on cpu\nnew\n")
    assert path.read_text() == "# naive [f32] on cpu\nnew\n" and (path.stat().st_mode & 0o777) == 0o640
    st.write_atomic(folder / "new.f32.txt", "fresh\n")
    assert (folder / "new.f32.txt").read_text() == "fresh\n"
    assert not list(folder.glob(".*.tmp"))

    # Interrupted at any point before the rename: the old text stays, and no temporary file.
    def interrupted(src: object, dst: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_paths.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        st.write_atomic(path, "never\n")
    assert path.read_text() == "# naive [f32] on cpu\nnew\n" and not list(folder.glob(".*.tmp"))


def test_a_killed_writes_leftover_is_removed_by_the_next_write(folder):
    leftover = folder / ".take.f32.txt.123-abcd.tmp"
    leftover.write_text("half")
    st.write_atomic(folder / "take.f32.txt", "whole\n")
    assert not leftover.exists() and (folder / "take.f32.txt").read_text() == "whole\n"


def test_bad_snapshot_files_are_one_line_naming_the_path(folder):
    (folder / "dir.f32.txt").mkdir()
    (folder / "bytes.f32.txt").write_bytes(b"# bytes [f32] on cpu\n\xff\n")
    readonly = folder / "take.f32.txt"
    readonly.chmod(0o444)
    blocked = folder / "file"
    blocked.write_text("")
    cases = [
        (lambda: st.read_text(folder / "dir.f32.txt"), "dir.f32.txt: a directory where the snapshot file"),
        (lambda: st.write_atomic(folder / "dir.f32.txt", "x"), "dir.f32.txt: a directory where the snapshot"),
        (lambda: st.read_text(folder / "bytes.f32.txt"), "bytes.f32.txt: not UTF-8 text (byte 21)"),
        (lambda: st.write_atomic(readonly, "x"), "take.f32.txt: read-only; --snapshot-update does not"),
        (lambda: st.write_atomic(blocked / "a.txt", "x"), "file/a.txt: cannot write it"),
    ]
    for call, start in cases:
        with pytest.raises(st.SnapshotFileError) as err:
            call()
        assert start in str(err.value) and "\n" not in str(err.value), str(err.value)
    assert st.read_text(folder / "missing.f32.txt") is None
    assert readonly.read_text().startswith("# take [f32] on cpu")


LEAK = '''
import pytest

def test_leaks_a_marker(request, tmp_path):
    """What the old test of this file did: a snapshot_key marker on its own item, naming a folder with
    three snapshots of ours."""
    folder = tmp_path / "cpu"
    folder.mkdir()
    for stem in ("naive.f32", "naive.bf16", "take.f32"):
        program, config = stem.split(".")
        (folder / f"{stem}.txt").write_text(f"# {program} [{config}] on cpu\\n")
    request.node.add_marker(pytest.mark.snapshot_key("naive", "f32", "cpu", root=str(tmp_path)))
'''

SPEC = """
[spec]
targets = ["*"]

[[program]]
name = "own_getitem"
function = "operator:getitem"
kind = "forward"
configs = ["f32"]
doc = "W[x]"
"""


def test_an_item_with_a_stray_marker_never_makes_snapshots_unused(gate_pytester: InProcess):
    """The flaky "3 snapshots unused" made deterministic: in its own file, the leaking test is the item
    syrupy's end-of-session scan picks for that file. No path is given (as ``pytest`` from the root), and
    no --programs (a selection would hide the folder anyway). The gate runs in this process."""
    tmp_path = gate_pytester.path
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["invariants.plugin.hooks"]\n')
    shutil.copy(ROOT / "invariants" / "gate" / "test_structure.py", tmp_path / "test_structure.py")
    (tmp_path / "test_leak.py").write_text(LEAK)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "own.toml").write_text(SPEC)
    proc = gate_pytester.pytest(
        "-c", os.devnull, "--rootdir", str(tmp_path), "--no-catalog", "--spec-dir", "specs",
        "--snapshot-dir", "snaps", "--snapshot-update", "--results-json=results.json",
        env={"INVARIANTS_TARGETS": "cpu"},
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    assert "1 snapshot generated." in out and "unused" not in out, out[-2000:]
    assert (tmp_path / "snaps" / "cpu" / "own_getitem.f32.txt").read_text().startswith("# own_getitem [f32]")


def test_unreadable_and_read_only_snapshots_fail_their_items_with_one_line(
    gate_pytester: InProcess, tmp_path: Path
):
    """Not UTF-8, a directory where the file should be, read-only on update: each item fails with one line
    naming the path, no traceback; the files are left as they were. The gate runs in this process."""
    gate_pytester.project(targets=())
    snaps = tmp_path / "snaps" / "cpu"
    shutil.copytree(ROOT / "snapshots" / "cpu", snaps)
    (snaps / "take.f32.txt").write_bytes(b"# take [f32] on cpu\n\xff\xfe\n")
    (snaps / "naive.f32.txt").unlink()
    (snaps / "naive.f32.txt").mkdir()
    readonly = snaps / "grad_take.f32.txt"
    readonly.write_text(readonly.read_text().replace("summary: ", "summary: stale ", 1))
    readonly.chmod(0o444)
    before = readonly.read_text()
    proc = gate_pytester.pytest(
        "tests/gate/test_structure.py", "--programs", "take,naive,grad_take", "--configs", "f32",
        f"--snapshot-dir={tmp_path / 'snaps'}", "--snapshot-update", f"--results-json={tmp_path / 'r.json'}",
        f"--hlo-dump-dir={tmp_path / 'hlo'}", "-q", env={"INVARIANTS_TARGETS": "cpu"},
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 1, out[-2000:]
    for name, line in [
        ("take.f32.txt", "take.f32.txt: not UTF-8 text (byte 20); not a snapshot this gate wrote"),
        ("naive.f32.txt", "naive.f32.txt: a directory where the snapshot file should be; remove it"),
        ("grad_take.f32.txt", "grad_take.f32.txt: read-only; --snapshot-update does not replace it"),
    ]:
        assert line in out, out[-3000:]
        assert f"{name}: " in out
    assert "Traceback" not in out and "SnapshotFileError" not in out, out[-3000:]
    assert readonly.read_text() == before and (snaps / "naive.f32.txt").is_dir()
