"""Inputs nested past what a recursive reader survives are one line, never a RecursionError: computations
nested 1,500 deep, a computation that calls itself (a SparseCore ``call-start`` that starts itself, two
that call each other), a trace folder 1,100 levels deep. The deepest nesting taken is read whole."""

from __future__ import annotations

import json
import sys

import pytest

from invariants.__main__ import main as cli
from invariants.hlo.parse import MAX_NESTING


def _nested(depth: int) -> str:
    """ENTRY calls c0, which calls c1, ... down to a negate: ``depth`` computations below ENTRY."""
    out = ["HloModule deep, is_scheduled=true", ""]
    for k in range(depth):
        last = k + 1 == depth
        root = f"negate(%a{k})" if last else f"call(%a{k}), to_apply=%c{k + 1}"
        out += [
            f"%c{k} (a{k}: s32[]) -> s32[] {{",
            f"  %a{k} = s32[] parameter(0)",
            f"  ROOT %r{k} = s32[] {root}",
        ]
        out += ["}", ""]
    entry = [
        "ENTRY %main (p: s32[]) -> s32[] {",
        "  %p = s32[] parameter(0)",
        "  ROOT %r = s32[] call(%p), to_apply=%c0",
    ]
    return "\n".join([*out, *entry, "}", ""])


SELF = """\
HloModule selfcall, is_scheduled=true

%c (a: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  ROOT %r = s32[] call(%a), to_apply=%c
}

ENTRY %main (p: s32[]) -> s32[] {
  %p = s32[] parameter(0)
  ROOT %r = s32[] call(%p), to_apply=%c
}
"""
SPARSECORE_SELF = """\
HloModule scself, is_scheduled=true

%c (a: s32[]) -> s32[] {
  %a = s32[] parameter(0)
  %s = ((s32[]), s32[]) call-start(%a), async_execution_thread="sparsecore", to_apply=%c
  ROOT %d = s32[] call-done(%s)
}, execution_thread="sparsecore"

ENTRY %main (p: s32[]) -> s32[] {
  %p = s32[] parameter(0)
  %s = ((s32[]), s32[]) call-start(%p), async_execution_thread="sparsecore", to_apply=%c
  ROOT %d = s32[] call-done(%s)
}
"""
MUTUAL = SELF.replace("to_apply=%c\n}\n\nENTRY", "to_apply=%b\n}\n\n%b (x: s32[]) -> s32[] {\n  %x = s32[] "
                      "parameter(0)\n  ROOT %y = s32[] call(%x), to_apply=%c\n}\n\nENTRY")  # fmt: skip


@pytest.mark.parametrize(
    "text, said",
    [
        (_nested(1500), rf"m\.txt:1: .*computations nested deeper than {MAX_NESTING}"),
        (SELF, r"m\.txt:5: .*calls 'c', which it is inside: r"),
        (SPARSECORE_SELF, r"m\.txt:5: .*calls 'c', which it is inside: s"),
        (MUTUAL, r"m\.txt:\d+: .*calls '[bc]', which it is inside"),
    ],
    ids=["1500-deep", "calls-itself", "sparsecore-starts-itself", "two-call-each-other"],
)
def test_nesting_no_reader_survives_is_one_line(tmp_path, capsys, text, said):
    import re

    (tmp_path / "m.txt").write_text(text)
    for argv in (["hlo-stats"], ["hlo-stats", "--json"]):
        assert cli([*argv, str(tmp_path / "m.txt")]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and re.search(said, err), err


def test_the_deepest_nesting_taken_is_read_whole_by_every_reader(tmp_path, capsys):
    (tmp_path / "m.txt").write_text(_nested(MAX_NESTING - 1))
    assert cli(["hlo-stats", str(tmp_path / "m.txt")]) == 0
    assert "kernels: 1 static, 1 dynamic launches" in capsys.readouterr().out
    assert cli(["hlo-stats", "--json", str(tmp_path / "m.txt")]) == 0
    assert json.loads(capsys.readouterr().out)["kernels"] == 1


def _frames() -> int:
    frame, n = sys._getframe(), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n


def test_a_trace_folder_deeper_than_the_recursion_limit_is_walked(tmp_path, capsys):
    """A trace folder deeper than Python's recursion limit reaches: the limit is lowered to a few hundred
    frames past this one (a folder past the default limit would also break ``shutil.rmtree``, pytest's
    clean-up of its temporary folders included)."""
    from xspace import xspace

    trace = xspace([("jit_deep", 0, 1_000_000)])
    (tmp_path / "warm.xplane.pb").write_bytes(trace)
    assert cli(["trace-stats", str(tmp_path / "warm.xplane.pb")]) == 0  # the decoder's import, first
    capsys.readouterr()
    here = tmp_path / "deep"
    for _ in range(400):
        here = here / "d"
    here.mkdir(parents=True)
    (here / "t.xplane.pb").write_bytes(trace)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(_frames() + 250)
    try:
        status = cli(["trace-stats", str(tmp_path / "deep")])
    finally:
        sys.setrecursionlimit(limit)
    out = capsys.readouterr().out
    assert status == 0 and out.startswith(str(here / "t.xplane.pb")) and "jit_deep" in out
