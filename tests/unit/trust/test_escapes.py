"""Text from a file or a trace reaches a terminal or a page shown, not obeyed: terminal escapes, OSC-8
links, bidi overrides and zero-width characters are written as escapes, and a newline in a name forges no
row. Each command is run as a user runs it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from invariants.__main__ import main as cli
from invariants._errors import visible

HOSTILE = "a\x1b[31mred\x1b]8;;https:evil\x07link\x1b]8;;\x07\nforged row\u202eevil\u200bz\u2066"
SHOWN = r"a\x1b[31mred\x1b]8;;https:evil\x07link\x1b]8;;\x07\nforged row\u202eevil\u200bz\u2066"
HIDDEN = ("\x1b", "\x07", "\u202e", "\u200b", "\u2066", "\x9b", "\u2028")


def _clean(text: str) -> None:
    for c in HIDDEN:
        assert c not in text, repr(text[-2000:])


def test_visible_escapes_what_reads_other_than_it_is_and_keeps_other_scripts():
    assert visible(HOSTILE, one_line=True) == SHOWN
    assert visible("été 日本 😀\tx\ny") == "été 日本 😀\tx\ny"  # letters of any script, newlines and tabs
    assert visible("a\u2028b\ufeffc\xadd") == r"a\u2028b\ufeffc\xadd"
    assert visible("x\ny\tz", one_line=True) == r"x\ny\tz"


def test_trace_names_reach_the_terminal_escaped_on_one_line(tmp_path, capsys):
    from xspace import xspace

    path = tmp_path / "t.xplane.pb"
    path.write_bytes(xspace([(HOSTILE, 0, 1_000_000)], [(f"%op{HOSTILE} = f32[] add()", 10, 10)]))
    assert cli(["trace-stats", str(path)]) == 0
    out = capsys.readouterr().out
    _clean(out)
    module_row, op_row = out.splitlines()[2], out.splitlines()[4]
    assert module_row.startswith(r"  a\x1b[31mred\x1b]8;;https:evil\x07link") and " 1 " in module_row
    assert op_row.startswith(r"    %opa\x1b[31mred") and len(out.splitlines()) == 5


def test_trace_file_names_are_escaped_when_a_folder_is_listed(tmp_path, capsys):
    from xspace import xspace

    (tmp_path / f"{HOSTILE}.xplane.pb").write_bytes(xspace([("jit_f", 0, 1_000_000)]))
    assert cli(["trace-stats", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    _clean(out)
    assert out.splitlines()[0] == f"{tmp_path}/{SHOWN}.xplane.pb: /device:TPU:0, device clock"


HLO = Path(__file__).resolve().parents[2] / "data" / "hlo" / "tpu_v5e_fwd_take.txt"


def test_hlo_file_names_and_notes_are_escaped_when_a_folder_is_listed(tmp_path, capsys):
    shutil.copy(HLO, tmp_path / f"{HOSTILE}.hlo.txt")
    (tmp_path / f"{HOSTILE}.txt").write_text("not a module")
    assert cli(["hlo-stats", str(tmp_path)]) == 0
    out, _ = capsys.readouterr()
    _clean(out)
    assert out.splitlines()[0].startswith(f"{tmp_path}/{SHOWN}.hlo.txt  (module ")
    assert cli(["hlo-stats", str(tmp_path / f"{HOSTILE}.hlo.txt"), str(tmp_path / f"{HOSTILE}.txt")]) == 0
    _, err = capsys.readouterr()
    _clean(err)
    assert (
        err.startswith(f"hlo-stats: skipped {tmp_path}/{SHOWN}.txt: not an HLO module")
        and err.count("\n") == 1
    )


@pytest.mark.parametrize("command", ["hlo-stats", "trace-stats"])
def test_an_error_naming_a_hostile_file_is_one_escaped_line(tmp_path, capsys, command):
    missing = tmp_path / f"{HOSTILE}.xplane.pb"
    assert cli([command, str(missing)]) == 2
    err = capsys.readouterr().err
    _clean(err)
    assert err.count("\n") == 1 and SHOWN in err, err


def test_a_custom_call_target_from_the_hlo_is_escaped(tmp_path, capsys):
    text = HLO.read_text()
    assert 'custom_call_target="AssumeGatherIndicesInBound"' in text
    path = tmp_path / "m.txt"
    hostile = 'custom_call_target="Assume\\u001b[2J\\nforged\\u202e"'
    path.write_text(text.replace('custom_call_target="AssumeGatherIndicesInBound"', hostile))
    assert cli(["hlo-stats", str(path)]) == 0
    out = capsys.readouterr().out
    _clean(out)
    assert r"custom-call targets: Assume\x1b[2J\nforged\u202e" in out
