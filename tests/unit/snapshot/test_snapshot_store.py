"""The snapshot store's own rules, on real files: where a snapshot is, that syrupy is shown none of the
gate's files and its extension API only is used, what counts as ours, which files are obsolete, and that
writes are atomic and bad files are one line."""

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
    """A stand-in pytest item carrying a snapshot_path marker, or none."""

    def __init__(self, path: Path | None) -> None:
        self.marker = None if path is None else pytest.mark.snapshot_path(str(path)).mark
        self.path = Path(__file__)
        self.name, self.nodeid = "naive-f32", "test_structure.py::cpu::naive-f32"
        self.obj = test_the_item_names_its_file_and_syrupy_discovers_nothing
        self.config = SimpleNamespace(rootpath=ROOT)

    def get_closest_marker(self, name: str) -> object:
        return self.marker if name == st.MARKER else None


def test_the_item_names_its_file_and_syrupy_discovers_nothing(folder):
    """The marker's path is where syrupy reads and writes; syrupy is shown no file (the gate says which are
    obsolete), so it never calls one unused, whatever ran, was skipped or was picked."""
    extension = st.StructureSnapshotExtension()
    for path in (folder / "naive.f32.txt", None):
        location = PyTestLocation(_Item(path))  # type: ignore[arg-type]
        if path is not None:
            assert extension.get_location(test_location=location, index=0) == str(path)
        assert not list(extension.discover_snapshots(test_location=location))


def _syrupy_bases(cls: type) -> list[type]:
    return [base for base in cls.__mro__[1:] if base.__module__.split(".")[0] == "syrupy"]


def _private_overrides(cls: type) -> list[str]:
    """The ``_``-prefixed names (not dunders: a protocol is public) that ``cls`` or a base of ours defines
    over a syrupy base's; ``_abc_impl`` is what ``ABCMeta`` puts on every class, not a class body."""
    ours = [c for c in cls.__mro__ if c.__module__.split(".")[0] != "syrupy"]
    names = {n for c in ours for n in vars(c) if n.startswith("_") and not n.endswith("__")} - {"_abc_impl"}
    return sorted(n for n in names if any(n in vars(base) for base in _syrupy_bases(cls)))


def test_the_stores_override_no_private_name_of_syrupy():
    """Only syrupy's extension API is overridden: a private method of its (``_assert``, ``_write_mode``)
    changes meaning in any release."""
    from invariants.snapshot.user import CompiledSnapshotAssertion, CompiledSnapshotExtension

    classes = (st.StructureSnapshotExtension, CompiledSnapshotExtension, CompiledSnapshotAssertion)
    assert all(_syrupy_bases(cls) for cls in classes)
    assert {cls.__name__: _private_overrides(cls) for cls in classes} == {cls.__name__: [] for cls in classes}


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
    """A snapshot_path marker on its own item, in a folder with three snapshots of ours."""
    folder = tmp_path / "cpu"
    folder.mkdir()
    for stem in ("naive.f32", "naive.bf16", "take.f32"):
        program, config = stem.split(".")
        (folder / f"{stem}.txt").write_text(f"# {program} [{config}] on cpu\\n")
    request.node.add_marker(pytest.mark.snapshot_path(str(folder / "naive.f32.txt")))
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


USERS = """
def test_{name}(snapshot):
    assert snapshot == 1
"""


def test_beside_the_gate_syrupy_keeps_its_own_options(gate_pytester: InProcess):
    """A project's own syrupy snapshot in a gate session: ``--snapshot-update`` deletes it once no test
    asserts it, unless the user asks ``--snapshot-no-cleanup`` (the gate changes no option of syrupy's).
    An item with a stray marker in a folder of ours (syrupy's end-of-session scan picks it for its file)
    never makes the gate's files unused. No path is given (as ``pytest`` from the root). The gate runs in
    this process."""
    tmp_path = gate_pytester.path
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["invariants.plugin.hooks"]\n')
    shutil.copy(ROOT / "invariants" / "gate" / "test_structure.py", tmp_path / "test_structure.py")
    (tmp_path / "test_leak.py").write_text(LEAK)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "own.toml").write_text(SPEC)
    users = tmp_path / "test_users.py"

    def update(*args: str) -> str:
        proc = gate_pytester.pytest(
            "-c", os.devnull, "--rootdir", str(tmp_path), "--no-catalog", "--spec-dir", "specs",
            "--snapshot-dir", "snaps", "--snapshot-update", "--results-json=results.json", *args,
            env={"INVARIANTS_TARGETS": "cpu"},
        )  # fmt: skip
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, out[-2000:]
        return out

    users.write_text(USERS.format(name="mine"))
    out = update()
    assert "2 snapshots generated." in out and "unused" not in out, out[-2000:]
    assert (tmp_path / "snaps" / "cpu" / "own_getitem.f32.txt").read_text().startswith("# own_getitem [f32]")
    ambr = tmp_path / "__snapshots__" / "test_users.ambr"
    assert "test_mine" in ambr.read_text()
    users.write_text(USERS.format(name="renamed"))
    assert "1 snapshot unused." in update("--snapshot-no-cleanup") and "test_mine" in ambr.read_text()
    assert "1 unused snapshot deleted." in update() and "test_mine" not in ambr.read_text()


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
