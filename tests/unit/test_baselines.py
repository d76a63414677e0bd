"""Efficiency baselines: where they live, whose max loss applies (by target pattern), read and record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from invariants._baselines import (
    DEFAULT_MAX_LOSS,
    baseline_path,
    machine,
    max_loss_for,
    read_baseline,
    write_baseline,
)
from invariants._errors import InvariantsError
from invariants._spec import load_spec
from invariants._timing import EfficiencyResult


def _spec(tmp_path: Path, name: str, targets: str, loss: float):
    path = tmp_path / f"{name}.toml"
    path.write_text(f"[spec]\ntargets = {targets}\nefficiency_max_loss = {loss}\n")
    return load_spec(path)


def test_max_loss_matches_targets_by_pattern_as_specs_do(tmp_path: Path):
    """A spec for ["tpu-*"] sets the loss of tpu-v5e (it used to match by equality, and fall back to 0.5)."""
    specs = [_spec(tmp_path, "cpu", '["cpu"]', 0.2), _spec(tmp_path, "tpu", '["tpu-*"]', 0.3)]
    assert max_loss_for(specs, "tpu-v5e") == 0.3
    assert max_loss_for(specs, "cpu") == 0.2
    assert max_loss_for(specs, "gpu-h100") == DEFAULT_MAX_LOSS


def _result(efficiency: float) -> EfficiencyResult:
    return EfficiencyResult(efficiency, efficiency - 0.01, efficiency + 0.01, 40, 0.5, 0.95, None, None,
                            1e-3, 1e-3, 0.01, 1, 1, 1)  # fmt: skip


def test_record_is_the_median_of_three_and_reads_back(tmp_path: Path):
    path = baseline_path(tmp_path / "snapshots", "cpu", "take", "f32")
    assert path == tmp_path / "snapshots" / "cpu" / "efficiency" / "take.f32.json"
    assert read_baseline(path) is None
    here = machine("cpu", "cpu")
    record = write_baseline(path, [_result(0.9), _result(0.5), _result(0.7)], here, {"jax": "0.10.2"})
    assert record["efficiency"] == 0.7 and record["runs"] == [0.9, 0.5, 0.7]
    assert read_baseline(path) == record and record["machine"] == here


def test_a_file_that_is_not_a_baseline_is_one_line(tmp_path: Path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"efficiency": "fast"}))
    with pytest.raises(InvariantsError, match=r"b\.json: not a baseline"):
        read_baseline(path)
