"""Spec files at their limits: a name too long for a file, an entry that is not a regular file, a file
that declares nothing, a very long text."""

from __future__ import annotations

import os
import socket

import pytest

from invariants._errors import InvariantsError
from invariants.specfile.reader import MAX_TEXT, load_specs

PROGRAM = '[spec]\ntargets = ["cpu"]\n\n[[program]]\nname = "{name}"\nfunction = "m:f"\nkind = "forward"\n'


def _folder(tmp_path, text: str):
    folder = tmp_path / "specs"
    folder.mkdir()
    (folder / "a.toml").write_text(text)
    return folder


def test_a_program_name_too_long_for_a_file_is_refused_naming_the_limit(tmp_path):
    folder = _folder(tmp_path, PROGRAM.format(name="p" * 300))
    with pytest.raises(InvariantsError, match=r"300 characters; .* at most 100 characters") as err:
        load_specs(folder)
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


def test_a_fifo_named_like_a_spec_is_one_line_never_a_blocking_read(tmp_path):
    folder = _folder(tmp_path, PROGRAM.format(name="p"))
    os.mkfifo(folder / "b.toml")
    with pytest.raises(InvariantsError, match=r"b\.toml: a named pipe, not a spec file"):
        load_specs(folder)


def test_a_folder_or_socket_named_like_a_spec_is_one_line(tmp_path):
    folder = _folder(tmp_path, PROGRAM.format(name="p"))
    (folder / "x.toml").mkdir()
    with pytest.raises(InvariantsError, match=r"x\.toml: a directory, not a spec file"):
        load_specs(folder)
    (folder / "x.toml").rmdir()
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(folder / "s.toml"))
        with pytest.raises(InvariantsError, match=r"s\.toml: a socket, not a spec file"):
            load_specs(folder)
    finally:
        sock.close()


def test_a_spec_file_with_no_entries_is_said(tmp_path):
    folder = _folder(tmp_path, PROGRAM.format(name="p"))
    (folder / "empty.toml").write_text("# " + "x" * 1_000_000 + "\n")
    with pytest.raises(InvariantsError, match=r"empty\.toml:1: declares nothing"):
        load_specs(folder)
    (folder / "empty.toml").write_text("# " + "x" * (16 * 1024 * 1024) + "\n")
    with pytest.raises(InvariantsError, match=r"empty\.toml: 16,777,219 bytes; a spec file may be at most"):
        load_specs(folder)


def test_a_very_long_why_is_cut_and_the_cut_said(tmp_path):
    text = PROGRAM.format(name="p") + (
        '\n[[invariant]]\nid = "i"\nprograms = ["p"]\nassert = "while_loops == 0"\n'
        f'why = "{"w" * 5_000_000}"\n'
    )
    ((inv,),) = (s.invariants for s in load_specs(_folder(tmp_path, text)))
    assert len(inv.why) < MAX_TEXT + 100 and "cut: 5,000,000 characters" in inv.why
