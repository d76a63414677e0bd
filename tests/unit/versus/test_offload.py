"""Versus names what moved to or off the SparseCore between two installations, read from real ahead-of-time
dumps of two libtpu releases (tests/data/hlo/sparsecore/), each side answered as a worker answers a key."""

from __future__ import annotations

import sys
from pathlib import Path

from invariants.measure.measurement import measure_text
from invariants.versus.command import compare_structure
from invariants.versus.report import SideRecord, load_record, make_record, render_markdown, write_json
from invariants.versus.worker import key_answer

DATA = Path(__file__).parents[2] / "data" / "hlo" / "sparsecore"
KEY = ("moe_decode_step", "f32-offload", "tpu-v6e")


def _reply(fixture: str) -> dict:
    """A side's ``structure`` reply for :data:`KEY`, its answer made from a real dump."""
    measured = measure_text((DATA / f"{fixture}.txt").read_text(), fixture, target=KEY[2])
    return {"items": {"/".join(KEY): key_answer(measured)}, "targets": {KEY[2]: None}}


def _report(tmp_path: Path, baseline: str, candidate: str) -> tuple[dict, str]:
    """The structure entry of :data:`KEY` and the markdown, through the record's JSON on disk."""
    structure, targets = compare_structure([_reply(baseline), _reply(candidate)], [KEY])
    side = SideRecord("current", sys.executable, {"libtpu": "0.0.42.1"})
    record = make_record(side, side, {}, [], structure, targets, 1.0)
    write_json(record, tmp_path / "v.json")
    loaded = load_record(tmp_path / "v.json")
    return loaded.structure[0], render_markdown(loaded)


def test_gathers_moved_to_the_sparsecore_are_one_line_per_key(tmp_path: Path) -> None:
    # The flagged compile stands in for a release that offloads the step's 8 expert gathers.
    entry, text = _report(tmp_path, "v6e_moe_decode", "v6e_moe_decode_offload_flags")
    line = "moe_decode_step[f32-offload] on tpu-v6e: 8 gathers moved to sparsecore"
    assert entry["offload"] == line
    assert f"- {line}" in text.splitlines()
    assert "| sparsecore_gathers | sparsecore | 0 | 8 | **differs** |" in text.splitlines()


def test_and_moved_back_off_it(tmp_path: Path) -> None:
    entry, _ = _report(tmp_path, "v6e_moe_decode_offload_flags", "v6e_moe_decode")
    assert entry["offload"] == "moe_decode_step[f32-offload] on tpu-v6e: 8 gathers moved off sparsecore"


def test_two_releases_that_offload_the_same_say_nothing_moved(tmp_path: Path) -> None:
    # libtpu 0.0.42.1 and 0.0.43.2 both run the large scatter-min on the SparseCore: their text differs.
    entry, text = _report(tmp_path, "v6e_scatter_min", "libtpu-0.0.43.2/v6e_scatter_min")
    assert entry["baseline"]["sparsecore_metrics"]["sparsecore_scatters"] == 1
    assert entry["candidate"]["sparsecore_metrics"]["sparsecore_scatters"] == 1
    assert entry["offload"] is None and "moved" not in text
