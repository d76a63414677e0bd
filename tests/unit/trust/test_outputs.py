"""Outputs never overwrite what the gate did not write: a file that is not a results file, an input given
as the output, two outputs that are one file, a link planted where a dump goes; a write that fails leaves
the file before it as it was."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from invariants.__main__ import main as cli
from invariants._errors import InvariantsError
from invariants._paths import write_atomic
from invariants.records import results as _results

RESULTS = {"items": [], "versions": {"jax": "0"}, "targets": []}


def test_results_json_on_a_file_the_gate_did_not_write_is_refused(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# My project\n\nPrecious words.\n")
    with pytest.raises(InvariantsError, match=r"README\.md: a file the gate did not write") as err:
        _results.claim(readme)
    assert "\n" not in str(err.value)
    assert readme.read_text() == "# My project\n\nPrecious words.\n"


@pytest.mark.skipif(not Path("/proc/version").exists(), reason="needs /proc")
def test_results_json_on_proc_version_is_refused():
    with pytest.raises(InvariantsError, match=r"/proc/version"):
        _results.check_path(Path("/proc/version"))


def test_results_json_on_an_earlier_results_file_or_a_new_path_is_taken(tmp_path):
    earlier = tmp_path / "results.json"
    earlier.write_text(json.dumps(RESULTS))
    _results.check_path(earlier)
    _results.check_path(tmp_path / "new.json")
    (tmp_path / "empty.json").write_text("")
    _results.check_path(tmp_path / "empty.json")


def test_a_full_disk_leaves_the_earlier_results_file(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(RESULTS))
    before = path.read_text()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(InvariantsError, match="No space left on device") as err:
        _results.write(path, RESULTS, [_results.skipped_entry("n", "x")])
    assert "\n" not in str(err.value)
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temporary file left


def test_a_link_where_an_output_goes_is_replaced_never_written_through(tmp_path):
    important = tmp_path / "important.txt"
    important.write_text("keep me")
    dump = tmp_path / "hlo" / "cpu"
    dump.mkdir(parents=True)
    link = dump / "take.f32.hlo.txt"
    link.symlink_to(important)
    write_atomic(link, "HloModule take\n", "--hlo-dump-dir")
    assert important.read_text() == "keep me"
    assert not link.is_symlink() and link.read_text() == "HloModule take\n"


def test_a_link_planted_at_a_guessable_temporary_name_is_never_written_through(tmp_path):
    important = tmp_path / "important.txt"
    important.write_text("keep me")
    out = tmp_path / "report.md"
    # The temporary names a naive writer takes: beside the file, named by its pid.
    for name in (f".report.{os.getpid()}.tmp.md", f".report.md.{os.getpid()}.tmp"):
        (tmp_path / name).symlink_to(important)
    write_atomic(out, "# report\n", "--out")
    assert important.read_text() == "keep me" and out.read_text() == "# report\n"


def test_a_planted_link_in_the_dump_folder_is_not_followed_by_the_gate_session(tmp_path):
    """The session's dump writes (HLO, jaxpr, kernel code) go through the atomic writer: a link at a dump
    path is replaced; a link in place of the target's folder is one line."""
    from types import SimpleNamespace

    from invariants.plugin.session import GateSession
    from invariants.records.compiled import Key

    important = tmp_path / "important.txt"
    important.write_text("keep me")
    (tmp_path / "hlo" / "cpu").mkdir(parents=True)
    (tmp_path / "hlo" / "cpu" / "take.f32.hlo.txt").symlink_to(important)
    compiled = SimpleNamespace(hlo_text="HloModule take\n", jaxpr="{ lambda }\n", kernel_code={})
    session = SimpleNamespace(dump_dir=tmp_path / "hlo", cache=SimpleNamespace(get=lambda *k: compiled))
    session._dump_folder = lambda key: GateSession._dump_folder(session, key)
    GateSession.dump(session, Key("take", "f32", "cpu"))  # type: ignore[arg-type]
    assert important.read_text() == "keep me"
    assert (tmp_path / "hlo" / "cpu" / "take.f32.hlo.txt").read_text() == "HloModule take\n"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "hlo" / "tpu").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(InvariantsError, match=r"--hlo-dump-dir .*tpu: a link"):
        GateSession.dump(session, Key("take", "f32", "tpu"))  # type: ignore[arg-type]
    assert list(elsewhere.iterdir()) == []


def _dumping_session(dump_dir: Path):
    from types import SimpleNamespace

    from invariants.plugin.session import GateSession

    compiled = SimpleNamespace(hlo_text="HloModule take\n", jaxpr="{ lambda }\n", kernel_code={})
    session = SimpleNamespace(dump_dir=dump_dir, cache=SimpleNamespace(get=lambda *k: compiled))
    session._dump_folder = lambda key: GateSession._dump_folder(session, key)
    return lambda key: GateSession.dump(session, key)  # type: ignore[arg-type]


def test_a_dump_folder_that_is_a_link_to_nowhere_is_one_line(tmp_path):
    from invariants.records.compiled import Key

    (tmp_path / "hlo").symlink_to(tmp_path / "nowhere" / "deeper", target_is_directory=True)
    said = r"--hlo-dump-dir .*hlo: cannot make cpu/ in it \(a link"
    with pytest.raises(InvariantsError, match=said) as err:
        _dumping_session(tmp_path / "hlo")(Key("take", "f32", "cpu"))
    assert "\n" not in str(err.value)
    assert not (tmp_path / "nowhere").exists()


def test_a_link_loop_in_the_dump_folder_is_one_line(tmp_path, monkeypatch):
    from invariants.records.compiled import Key

    monkeypatch.chdir(tmp_path)
    (tmp_path / "hlo").mkdir()
    (tmp_path / "hlo" / "cpu").symlink_to(tmp_path / "hlo" / "cpu")
    with pytest.raises(InvariantsError, match=r"--hlo-dump-dir .*hlo/cpu: a link") as err:
        _dumping_session(tmp_path / "hlo")(Key("take", "f32", "cpu"))
    assert "\n" not in str(err.value)


def _results_file(tmp_path: Path) -> Path:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(RESULTS))
    return path


def test_report_out_onto_its_input_is_refused_before_it_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = _results_file(tmp_path)
    before = path.read_text()
    assert cli(["report", "r.json", "--out", "r.json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out r.json" in err and "same file" in err, err
    assert path.read_text() == before


def test_report_plot_in_a_format_matplotlib_cannot_write_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _results_file(tmp_path)
    assert cli(["report", "r.json", "--plot", "report.xyz"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "report.xyz" in err and ".png" in err, err


def test_versus_two_outputs_onto_one_file_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    status = cli(["versus", "--baseline", "current", "--candidate", "current", "--json", "x", "--out", "x"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1, err
    assert "--json x and --out x are the same file" in err, err
    assert not (tmp_path / "x").exists()


LOOKUP = "import jax.numpy as jnp\n\ndef lookup(table, ids):\n    return jnp.take(table, ids, axis=0)\n"
SPEC = (
    '[spec]\ntargets = ["cpu"]\n\n[[program]]\nname = "p"\nfunction = "outlookup:lookup"\nkind = "forward"\n'
    'configs = ["f32"]\n'
)


def test_a_results_file_the_run_cannot_write_is_its_last_line_and_not_green(tmp_path, monkeypatch, capsys):
    """A full disk at the run's end: the run says so last and exits 2, never 0, and the earlier run's file
    stays as it was, named as the earlier run's."""
    (tmp_path / "outlookup.py").write_text(LOOKUP)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "lib.toml").write_text(SPEC)
    earlier = tmp_path / "results.json"
    earlier.write_text(json.dumps(RESULTS))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))

    def full(path: object, text: str, option: str = "") -> None:
        raise InvariantsError(f"{path}: cannot write (No space left on device)")

    monkeypatch.setattr(_results, "write_atomic", full)
    status = cli(["gate", "--spec-dir", "specs", "--no-catalog", "--targets", "cpu", "--snapshot-update",
                  "-m", "not throughput", "-p", "no:cacheprovider", "-p", "no:benchmark",
                  "--results-json", str(earlier)])  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 2, out + err
    last = (out + err).strip().splitlines()[-1]
    assert "results.json: cannot write (No space left on device)" in last, last
    assert last.endswith("this run wrote no results file (one there is an earlier run's)"), last
    assert json.loads(earlier.read_text()) == RESULTS
