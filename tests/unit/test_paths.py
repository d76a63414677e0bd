"""Output paths (invariants._paths): checked when a command starts, one line each; written atomically."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from invariants._errors import InvariantsError
from invariants._paths import atomic_path, check_output_dir, check_output_file, pyplot, write_atomic


@pytest.fixture
def unwritable(tmp_path: Path) -> Path:
    """A folder no file can be made in: read-only for a user; /sys for root (whom permissions do not stop)."""
    if os.geteuid() != 0:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    if not Path("/sys").is_dir():
        pytest.skip("no unwritable folder for root here")
    return Path("/sys")


def _one_line(err: pytest.ExceptionInfo[InvariantsError]) -> str:
    text = str(err.value)
    assert "\n" not in text and text, text
    return text


def test_an_output_folder_is_made_and_a_file_in_its_place_is_one_line(tmp_path: Path) -> None:
    assert check_output_dir(tmp_path / "a" / "b", "--keep") == tmp_path / "a" / "b"
    assert (tmp_path / "a" / "b").is_dir()
    (tmp_path / "f").write_text("x")
    with pytest.raises(InvariantsError) as err:
        check_output_dir(tmp_path / "f", "--keep")
    assert _one_line(err) == f"--keep {tmp_path / 'f'}: a file, not a folder; give a folder"
    with pytest.raises(InvariantsError) as err:
        check_output_dir(tmp_path / "f" / "sub", "--out")
    assert _one_line(err) == f"--out {tmp_path / 'f' / 'sub'}: {tmp_path / 'f'} is a file, not a folder"
    with pytest.raises(InvariantsError) as err:
        check_output_dir("/dev/null", "--out")
    assert _one_line(err) == "--out /dev/null: a character device, not a folder; give a folder"


def test_an_unwritable_folder_is_one_line(unwritable: Path) -> None:
    with pytest.raises(InvariantsError) as err:
        check_output_dir(unwritable, "--keep")
    assert _one_line(err).startswith(f"--keep {unwritable}: cannot write in this folder (")
    with pytest.raises(InvariantsError) as err:
        check_output_file(unwritable / "report.md", "--out")
    assert _one_line(err).startswith(f"--out {unwritable / 'report.md'}: cannot ")


def test_a_folder_made_on_demand_is_checked_and_not_made(tmp_path: Path, unwritable: Path) -> None:
    """``make=False`` (the gate's HLO dumps, written only when an item fails): nothing is made now."""
    later = tmp_path / "hlo" / "cpu"
    assert check_output_dir(later, "--hlo-dump-dir", make=False) == later
    assert not (tmp_path / "hlo").exists()
    with pytest.raises(InvariantsError) as err:
        check_output_dir(unwritable / "hlo", "--hlo-dump-dir", make=False)
    assert _one_line(err).startswith(f"--hlo-dump-dir {unwritable / 'hlo'}: cannot write in {unwritable}")


def test_an_output_file_that_is_a_directory_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InvariantsError) as err:
        check_output_file(tmp_path, "--out")
    assert _one_line(err) == f"--out {tmp_path}: a directory; give a file path"
    assert check_output_file(tmp_path / "new" / "r.md", "--out") == tmp_path / "new" / "r.md"
    assert (tmp_path / "new").is_dir() and not (tmp_path / "new" / "r.md").exists()
    assert check_output_file("/dev/null", "--out") == Path("/dev/null")  # a device is written into


def test_writes_are_whole_or_not_at_all(tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    out.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_path(out) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    assert out.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["r.md"]
    write_atomic(out, "new\n")
    assert out.read_text() == "new\n" and sorted(p.name for p in tmp_path.iterdir()) == ["r.md"]
    with atomic_path(tmp_path / "plot.png", suffix=True) as tmp:
        assert tmp.suffix == ".png" and tmp.parent == tmp_path  # a writer that reads the suffix still can
        tmp.write_bytes(b"png")
    write_atomic("/dev/null", "into the device, never over it\n")
    assert Path("/dev/null").is_char_device()


def test_a_plot_without_matplotlib_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an environment without it imports
    with pytest.raises(
        InvariantsError, match=r"^out.png: matplotlib is not installed \(pip install matplotlib\)$"
    ):
        pyplot("out.png")


def test_the_module_does_not_import_jax() -> None:
    """Every command checks its paths first, JAX or not."""
    code = "import sys, invariants._paths; sys.exit('jax' in sys.modules)"
    root = Path(__file__).parents[2]
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, check=False, capture_output=True)
    assert proc.returncode == 0, proc.stderr
