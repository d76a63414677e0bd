"""The staged package another interpreter imports: never a folder or link someone else left in the
temporary folder."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from invariants._paths import PACKAGE_DIR
from invariants.compile import child


@pytest.fixture
def tmpdir_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder is ``tmp_path``, and this process has staged nothing yet."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    cache = getattr(child.stage, "cache_clear", None)
    if cache is not None:
        cache()
        yield tmp_path
        cache()
    else:
        yield tmp_path


def _planted_paths(tmp: Path) -> list[Path]:
    """Where the staging folder was (and may be) looked for: the old name, and the new one."""
    tag = hashlib.sha1(str(PACKAGE_DIR).encode()).hexdigest()[:12]
    return [tmp / f"invariants-package-{tag}", tmp / f"invariants-package-{os.getuid()}-{tag}"]


def _patched_copy(tmp: Path) -> Path:
    copy = tmp / "evil" / "invariants"
    copy.mkdir(parents=True)
    (copy / "__init__.py").write_text("raise SystemExit('planted code ran')\n")
    return copy


def test_a_planted_link_is_never_used(tmpdir_here: Path):
    copy = _patched_copy(tmpdir_here)
    for folder in _planted_paths(tmpdir_here):
        folder.mkdir()
        (folder / "invariants").symlink_to(copy, target_is_directory=True)
    staged = child.stage()
    assert (staged / "invariants").resolve() == PACKAGE_DIR
    assert sorted(p.name for p in staged.iterdir()) == ["invariants"]
    mode = staged.lstat().st_mode
    assert staged.lstat().st_uid == os.getuid() and not mode & (stat.S_IWGRP | stat.S_IWOTH)


def test_a_world_writable_staging_folder_is_not_used(tmpdir_here: Path):
    for folder in _planted_paths(tmpdir_here):
        folder.mkdir()
        (folder / "invariants").symlink_to(PACKAGE_DIR, target_is_directory=True)
        folder.chmod(0o777)
    staged = child.stage()
    assert not staged.lstat().st_mode & stat.S_IWOTH
    assert (staged / "invariants").resolve() == PACKAGE_DIR


def test_a_regular_file_at_the_staging_path_is_no_traceback(tmpdir_here: Path):
    for folder in _planted_paths(tmpdir_here):
        folder.write_text("not a folder")
    staged = child.stage()
    assert (staged / "invariants").resolve() == PACKAGE_DIR


def test_a_linked_staging_folder_is_not_used(tmpdir_here: Path):
    elsewhere = tmpdir_here / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "invariants").symlink_to(_patched_copy(tmpdir_here), target_is_directory=True)
    for folder in _planted_paths(tmpdir_here):
        folder.symlink_to(elsewhere, target_is_directory=True)
    staged = child.stage()
    assert (staged / "invariants").resolve() == PACKAGE_DIR


def test_staging_is_one_folder_per_process(tmpdir_here: Path):
    assert child.stage() == child.stage()
