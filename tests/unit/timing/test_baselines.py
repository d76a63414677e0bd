"""Efficiency baselines: where they live, whose max loss applies (by target pattern), read and record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gatekit import InProcess

from invariants._errors import InvariantsError
from invariants.specfile.reader import load_spec
from invariants.timing.baselines import (
    DEFAULT_MAX_LOSS,
    baseline_path,
    machine,
    max_loss_for,
    read_baseline,
    record_programs,
    write_baseline,
)
from invariants.timing.paired import RatioResult


def _spec(tmp_path: Path, name: str, targets: str, loss: float):
    path = tmp_path / f"{name}.toml"
    path.write_text(f"[spec]\ntargets = {targets}\nefficiency_max_loss = {loss}\n")
    return load_spec(path)


def test_max_loss_matches_targets_by_pattern_as_specs_do(tmp_path: Path):
    """A spec for ["tpu-*"] sets the loss of tpu-v5e (by pattern, not by equality with a fall back to 0.5)."""
    specs = [_spec(tmp_path, "cpu", '["cpu"]', 0.2), _spec(tmp_path, "tpu", '["tpu-*"]', 0.3)]
    assert max_loss_for(specs, "tpu-v5e") == 0.3
    assert max_loss_for(specs, "cpu") == 0.2
    assert max_loss_for(specs, "gpu-h100") == DEFAULT_MAX_LOSS


def _result(efficiency: float) -> RatioResult:
    return RatioResult(efficiency, efficiency - 0.01, efficiency + 0.01, 40, 0.5, 0.95, None, None,
                       1e-3, 1e-3, 0.01, 1, 1, 1, direction="at_least", name="efficiency")  # fmt: skip


def test_record_is_the_median_of_three_and_reads_back(tmp_path: Path):
    path = baseline_path(tmp_path / "snapshots", "cpu", "take", "f32")
    assert path == tmp_path / "snapshots" / "cpu" / "efficiency" / "take.f32.json"
    assert read_baseline(path) is None
    here = machine("cpu", "cpu")
    record = write_baseline(path, [_result(0.9), _result(0.5), _result(0.7)], here, {"jax": "0.10.2"})
    assert record["efficiency"] == 0.7 and record["runs"] == [0.9, 0.5, 0.7]
    assert read_baseline(path) == record and record["machine"] == here


def test_a_loop_bound_programs_baseline_keeps_its_figures(tmp_path: Path):
    # The device clock gives a 28 ms loop 2.4e-4 of a copy's bandwidth: decimal places would keep 2e-4.
    path = baseline_path(tmp_path, "tpu-v5e", "grad_vmap_naive", "f32")
    runs = [_result(e) for e in (2.3984e-4, 2.3901e-4, 2.4113e-4)]
    record = write_baseline(path, runs, machine("TPU v5 lite", "device"), {"jax": "0.10.2"})
    assert record["efficiency"] == 2.398e-4 and record["runs"] == [2.398e-4, 2.39e-4, 2.411e-4]
    assert read_baseline(path) == record


def test_a_file_that_is_not_a_baseline_is_one_line(tmp_path: Path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"efficiency": "fast"}))
    with pytest.raises(InvariantsError, match=r"b\.json: not a baseline"):
        read_baseline(path)


def test_the_programs_to_record_are_the_relation_not_the_program_alone():
    """An efficiency item exists only for a key of a throughput relation whose sides are all selected:
    `--programs naive` alone selects no item (nothing is timed, the run passes), so the hint names the
    partner too; a relation of one program (equal against uniform indices) needs only it."""
    from types import SimpleNamespace

    def case(id_: str, *programs: str):
        return SimpleNamespace(id=id_, keys=[(p, "f32", "cpu") for p in programs])

    cases = [case("naive_vs_take", "naive", "take"), case("take_vs_naive", "take", "naive"),
             case("grad_equal", "grad_take", "grad_take"),
             case("grad_vs", "grad_naive", "grad_take")]  # fmt: skip
    assert record_programs(("naive", "f32", "cpu"), cases) == ["naive", "take"]
    assert record_programs(("take", "f32", "cpu"), cases) == ["take", "naive"]
    assert record_programs(("grad_take", "f32", "cpu"), cases) == ["grad_take"]
    assert record_programs(("grad_naive", "f32", "cpu"), cases) == ["grad_naive", "grad_take"]


def test_the_hinted_command_records_the_baseline_and_a_rerun_passes(gate_pytester: InProcess, tmp_path: Path):
    """As a user meets it: a run on a scratch --snapshot-dir skips naive's efficiency for want of a
    baseline (nothing to compare with is no regression) and prints a command; that command, run as
    printed, records it (exit 0; naive alone would select no item and time nothing, and it names the
    --snapshot-dir), and the first run then passes, compared. The gate runs in this process (timing is
    not what is tested: each measurement is short)."""
    import re
    import shlex

    gate_pytester.project(targets=())
    scratch = tmp_path / "snapshots"
    env = {"INVARIANTS_RESULTS": str(tmp_path / "results.json"), "INVARIANTS_DUMP_DIR": str(tmp_path / "hlo")}
    first = ["tests/gate/test_throughput.py", "-q", "--snapshot-dir", str(scratch), "--targets", "cpu",
             "--programs", "naive,take", "--configs", "f32",
             "-k", "efficiency and naive-f32 and not vmap_naive", "-rs"]  # fmt: skip
    skipped = gate_pytester.pytest(*first, env=env)
    assert skipped.returncode == 0 and "1 skipped" in skipped.stdout, skipped.stdout[-3000:]
    hint = re.search(r"record it with: (pytest .*--record-baselines)", skipped.stdout)
    assert hint, skipped.stdout[-3000:]
    command = shlex.split(hint.group(1))
    assert command[command.index("--programs") + 1] == "naive,take", hint.group(1)
    assert command[command.index("--snapshot-dir") + 1] == str(scratch), hint.group(1)
    recorded = gate_pytester.pytest(*command[1:], env=env)
    assert recorded.returncode == 0, recorded.stdout[-3000:]
    assert "1 passed" in recorded.stdout, recorded.stdout[-3000:]
    baseline = read_baseline(baseline_path(scratch, "cpu", "naive", "f32"))
    assert baseline is not None and baseline["efficiency"] > 0
    assert sorted(p.name for p in (scratch / "cpu" / "efficiency").iterdir()) == [
        "naive.f32.json"
    ]  # it alone
    rerun = gate_pytester.pytest(*first, env=env)
    assert rerun.returncode == 0 and "1 passed" in rerun.stdout, rerun.stdout[-3000:]


def test_a_baselines_machine_counts_the_cores_this_process_may_use(monkeypatch):
    """An xdist worker pinned to one core is another machine for a baseline recorded on two."""
    from invariants import _cores
    from invariants.timing import baselines as _baselines

    monkeypatch.setattr(_cores, "usable", lambda: [0])
    assert _baselines.machine("cpu", "cpu")["cores"] == 1
    monkeypatch.setattr(_cores, "usable", lambda: [0, 1])
    assert _baselines.machine("cpu", "cpu")["cores"] == 2


def _recorded(tmp_path: Path) -> tuple[Path, dict]:
    path = baseline_path(tmp_path / "snapshots", "tpu-v5e", "take", "f32")
    versions = {"jax": "0.10.2", "jaxlib": "0.10.2", "libtpu": "0.0.42.1"}
    runs = [_result(0.9), _result(0.5), _result(0.7)]
    record = write_baseline(path, runs, machine("TPU v5 lite", "device"), versions)
    return path, record


def test_a_baseline_carries_its_provenance(tmp_path: Path):
    from invariants.timing.baselines import provenance

    path, record = _recorded(tmp_path)
    read = read_baseline(path)
    assert read is not None and read["date"] == record["date"] and len(record["date"]) == 10
    line = provenance(read)
    assert line.startswith(
        "TPU v5 lite, device clock, jax 0.10.2, jaxlib 0.10.2, libtpu 0.0.42.1, recorded 20"
    )


@pytest.mark.parametrize(
    "edit, expected",
    [
        (lambda r: {**r, "efficiency": 1e-9}, r"'efficiency' must be a number in"),
        (lambda r: {**r, "efficiency": True}, r"'efficiency' must be a number in \[.*got true"),
        (lambda r: {**r, "efficiency": 0.2}, r"efficiency 0\.2 is not the median of its recorded runs"),
        (lambda r: {**r, "runs": [0.7]}, r"'runs' must be the three measurements"),
        (lambda r: {k: v for k, v in r.items() if k != "machine"}, r"no 'machine'"),
    ],
)
def test_a_hand_edited_baseline_is_refused_in_one_line_naming_the_file(tmp_path: Path, edit, expected):
    """A baseline edited to a tiny floor (or to a JSON literal) would pass a program made 500x slower."""
    path, record = _recorded(tmp_path)
    path.write_text(json.dumps(edit(record)))
    with pytest.raises(InvariantsError, match=expected) as err:
        read_baseline(path)
    assert str(err.value).startswith(str(path)) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "text", ['{"efficiency": NaN, "runs": [1, 1, 1]}', '{"efficiency": ' + "7" * 400 + "}"]
)
def test_a_baseline_that_is_no_finite_measurement_is_one_line(tmp_path: Path, text):
    path = tmp_path / "b.json"
    path.write_text(text)
    with pytest.raises(InvariantsError, match=r"b\.json: not a baseline") as err:
        read_baseline(path)
    assert "\n" not in str(err.value)


def test_every_committed_baseline_reads():
    root = Path(__file__).parents[3] / "snapshots"
    paths = sorted(root.glob("*/efficiency/*.json"))
    assert paths
    for path in paths:
        assert read_baseline(path) is not None, path
