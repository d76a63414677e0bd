"""Numbers that cannot be (a negative trip count, an infinite one, a dimension past an int64, a number
longer than any XLA prints, a negative duration in a trace) are refused in one line naming the file and
the value, exit 2: never a negative cost that meets every bound, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from invariants.__main__ import main as cli

HLO = Path(__file__).resolve().parents[2] / "data" / "hlo" / "tpu_v5e_bwd_vmap_index.txt"
LOOP = "body=%wide.while_body.sunk,"
BOUND = "%constant.49 = s32[]{:T(128)} constant(16384)"
TABLE = "%ct.1 = f32[16384,32]{0,1:T(8,128)}"


def _known(n: str) -> tuple[str, str]:
    return LOOP, f'{LOOP} backend_config={{"known_trip_count":{{"n":{n}}}}},'


@pytest.mark.parametrize(
    "old_new, said",
    [
        (_known('"-9000000"'), r"while\.1: known_trip_count -9000000 is not a trip count"),
        (_known("-5"), r"while\.1: known_trip_count -5 is not a trip count"),
        (_known("1e999"), r"while\.1: known_trip_count inf is not a trip count"),
        (_known("7.5"), r"while\.1: known_trip_count 7\.5 is not a trip count"),
        (_known("9" * 330), r"a number of 330 digits, longer than any XLA prints"),
        (_known("9" * 5000), r"a number of 5000 digits, longer than any XLA prints"),
        ((BOUND, BOUND.replace("16384", "9" * 400)), r"a number of 400 digits"),
        (
            (BOUND, BOUND.replace("16384", "9" * 20)),
            r"while\.1: trip count \(bound minus start\) 9{20} is not",
        ),
        ((TABLE, TABLE.replace("16384,32", "1" + "0" * 200 + ",1" + "0" * 200)), r"a number of 201 digits"),
        ((TABLE, TABLE.replace("16384,32", "9" * 5000)), r"a number of 5000 digits"),
        ((TABLE, TABLE.replace("16384,32", "9" * 20)), r"dimension 9{20} is larger than XLA's int64 sizes"),
        ((TABLE, TABLE.replace("16384,32", "4294967296,4294967296")), r"18446744073709551616 elements"),
        ((f"{TABLE} parameter(1)", f"{TABLE} parameter(x)"), r"a parameter's number is not a number"),
        (('"estimated_cycles":"5932"', '"estimated_cycles":1e999'), r"estimated_cycles not understood: inf"),
        (
            ('"estimated_cycles":"5932"', '"estimated_cycles":"-5932"'),
            r"estimated_cycles not understood: -5932",
        ),
    ],
    ids=lambda v: v[1][:40] if isinstance(v, tuple) else None,
)
def test_an_impossible_number_in_hlo_is_refused_in_one_line(tmp_path, capsys, old_new, said):
    import re

    old, new = old_new
    text = HLO.read_text()
    assert old in text
    path = tmp_path / "m.txt"
    path.write_text(text.replace(old, new, 1))
    status = cli(["hlo-stats", "--target", "tpu-v5e", str(path)])
    out, err = capsys.readouterr()
    assert status == 2 and out == "", out[:500]
    assert err.count("\n") == 1 and str(path) in err and re.search(said, err), err[:500]
    assert len(err) < 400, err


def test_a_known_trip_count_that_is_a_number_is_still_taken(tmp_path, capsys):
    path = tmp_path / "m.txt"
    path.write_text(HLO.read_text().replace(*_known('"12"')))
    assert cli(["hlo-stats", "--target", "tpu-v5e", str(path)]) == 0
    assert "while while.1: trip count 12," in capsys.readouterr().out


@pytest.mark.parametrize("duration_ps", [-50_000, -1_000])
def test_a_trace_event_with_a_negative_duration_is_refused_in_one_line(tmp_path, capsys, duration_ps):
    from xspace import xspace

    path = tmp_path / "t.xplane.pb"
    path.write_bytes(xspace([("jit_f", 0, 1_000_000), ("jit_f", 2_000_000, duration_ps)]))
    status = cli(["trace-stats", str(path)])
    out, err = capsys.readouterr()
    assert status == 2 and out == "", out
    line = err.strip().splitlines()[-1]
    assert str(path) in line and f"lasts {duration_ps / 1000} ns" in line and "below zero" in line, err


def test_a_negative_op_duration_is_refused_too(tmp_path, capsys):
    from xspace import xspace

    path = tmp_path / "t.xplane.pb"
    path.write_bytes(xspace([("jit_f", 0, 1_000_000)], [("%fusion.1 = f32[] fusion()", 10, -7_000)]))
    assert cli(["trace-stats", str(path)]) == 2
    assert "'%fusion.1 = f32[] fusion()' starts at 0.0 ns and lasts -7.0 ns" in capsys.readouterr().err


def test_loops_that_would_launch_a_kernel_past_an_int64_give_no_prediction(tmp_path, capsys):
    import json

    path = tmp_path / "m.txt"
    path.write_text(HLO.read_text().replace(*_known(f'"{2**63 - 1}"')))
    assert cli(["hlo-stats", "--target", "tpu-v5e", "--json", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["trip_counts"] == [2**63 - 1] and out["predicted_seconds"] is None
    assert "more than 2^63-1 times" in out["predicted_seconds_note"]
