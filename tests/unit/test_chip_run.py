"""The chip run (scripts/chip_run.sh, scripts/chip_times.py), rehearsed on a CPU host: the gate's steps
run on the CPU and recorded TPU v5e traces stand in for the chip in the device-times step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "chip_run.sh"
TRACES = ROOT / "tests" / "data" / "traces" / "tpu-v5e"
DATA = ROOT / "tests" / "data" / "tpu-v5e-chip"


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("CHIP_RUN_")}
    base.update({"INVARIANTS_CACHE_DIR": str(tmp_path / "cache"), **env})
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=base, timeout=600,
                          check=False, cwd=tmp_path)  # fmt: skip


def _snapshots_state() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--", "snapshots"], cwd=ROOT, capture_output=True,
                          text=True, check=False).stdout  # fmt: skip


@pytest.mark.e2e
def test_the_rehearsal_runs_every_step_and_writes_nothing_into_snapshots(tmp_path):
    before = _snapshots_state()
    out = tmp_path / "out"
    done = _run(tmp_path, "--out", str(out), CHIP_RUN_PLATFORM="cpu", CHIP_RUN_TRACES=str(TRACES),
                CHIP_RUN_CONFIGS="f32",
                CHIP_RUN_GATE_ARGS="--targets cpu --programs take,eqx_embedding --configs f32")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for step in ("gate", "throughput", "baselines", "times", "report"):
        assert f"chip_run: {step} (at most" in done.stderr
    # Candidate baselines go to the output folder, never into the committed snapshots.
    candidates = sorted(p.name for p in (out / "candidates" / "cpu" / "efficiency").iterdir())
    assert candidates == ["eqx_embedding.f32.json", "take.f32.json"]
    assert _snapshots_state() == before
    # The device times, in the form a cost model is fitted on: program, configuration, HLO, seconds,
    # provenance; the recorded traces' medians come through.
    record = json.loads((out / "device-times.json").read_text())
    assert record["format_version"] == 1 and record["provenance"]["clock"] == "device"
    assert {"chip", "jax", "jaxlib", "libtpu", "date"} <= set(record["provenance"])
    assert record["complete"] is True and record["not_timed"] == []
    rows = {r["program"]: r for r in record["rows"]}
    assert set(rows) == {"take", "eqx_embedding", "onehot_matmul", "grad_take", "train_take"}
    assert rows["eqx_embedding"]["device_s_median"] / rows["take"]["device_s_median"] == pytest.approx(
        1.97, abs=0.02
    )
    assert (out / rows["take"]["hlo"]).read_text().startswith("HloModule")
    assert rows["eqx_embedding"]["ops_s_per_call"]["gather_fusion"] > 70e-6
    # The cost model's prediction of the same HLO beside what the chip measured.
    assert all(r["predicted_s"] and 0.5 < r["predicted_s"] / r["device_s_median"] < 2 for r in rows.values())
    # One table, a line per program.
    table = [
        line for line in done.stdout.splitlines() if line.startswith(("program ", "take ", "eqx_embedding "))
    ]
    assert len(table) == 3 and "device us" in table[0]
    results = json.loads((out / "results-throughput.json").read_text())
    assert results["items"] and (out / "report.md").is_file()


def test_without_a_chip_it_is_one_line_and_exit_2(tmp_path):
    done = _run(tmp_path, "--out", str(tmp_path / "out"), CHIP_RUN_PLATFORM="tpu")
    if done.returncode == 0:
        pytest.skip("this host has a TPU chip")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("tpu: no TPU chip on this host")


def test_an_unknown_argument_is_one_line(tmp_path):
    done = _run(tmp_path, "--bogus")
    assert done.returncode == 2 and done.stderr.strip() == "chip_run: unknown argument --bogus (see --help)"


# A budget no step fits in: every step is skipped at once, so these runs are quick (exit 124).
QUICK = {"CHIP_RUN_PLATFORM": "cpu", "CHIP_RUN_BUDGET": "1"}


def _theirs(folder: Path) -> dict[str, str]:
    """A folder of someone else's files with the names the chip run writes, and one of their own."""
    files = {"hlo/take.f32.hlo.txt": "mine", "candidates/cpu/efficiency/take.f32.json": "{}",
             "report.md": "# mine", "results.json": '{"items": []}', "notes.txt": "mine"}  # fmt: skip
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return files


def test_a_folder_it_did_not_make_is_refused_and_kept_whole(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    files = _theirs(out)
    done = _run(tmp_path, "--out", str(out), **QUICK)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"chip_run: --out {out}: a folder the chip run did not make (no chip-run.manifest in it), so nothing "
        "there is replaced; give a new or an empty folder"
    )
    assert {name: (out / name).read_text() for name in files} == files


def test_a_relative_out_is_the_callers_and_its_own_folder_is_replaced_on_the_next_run(tmp_path):
    done = _run(tmp_path, "--out", "mine/run", **QUICK)
    assert done.returncode == 124, done.stderr  # every step skipped: the budget is spent
    out = tmp_path / "mine" / "run"
    assert (out / "chip-run.manifest").is_file() and not (ROOT / "mine").exists()
    # What a run wrote there, listed as its steps list it: the next run replaces it.
    (out / "hlo").mkdir()
    (out / "hlo" / "take.f32.hlo.txt").write_text("an earlier run's")
    (out / "report.md").write_text("an earlier run's")
    sealed = subprocess.run(["python", str(ROOT / "scripts" / "chip_out.py"), "seal", str(out)], check=False)
    assert sealed.returncode == 0
    done = _run(tmp_path, "--out", "mine/run", **QUICK)
    assert done.returncode == 124, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["chip-run.manifest"]
    # A file of the user's put there since: refused, and nothing removed.
    (out / "report.md").write_text("an earlier run's")
    (out / "hlo").mkdir()
    (out / "hlo" / "mine.txt").write_text("mine")
    done = _run(tmp_path, "--out", "mine/run", **QUICK)
    assert done.returncode == 2 and "hlo was not made by the chip run" in done.stderr
    assert (out / "hlo" / "mine.txt").read_text() == "mine" and (out / "report.md").exists()


def test_a_folder_another_chip_run_is_writing_is_refused_and_kept(tmp_path):
    import fcntl

    out = tmp_path / "out"
    assert _run(tmp_path, "--out", str(out), **QUICK).returncode == 124
    (out / "report.md").write_text("the other run's")
    subprocess.run(["python", str(ROOT / "scripts" / "chip_out.py"), "seal", str(out)], check=True)
    held = os.open(out, os.O_RDONLY)  # the lock the other run holds on its folder
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        done = _run(tmp_path, "--out", str(out), **QUICK)
    finally:
        os.close(held)
    said = f"chip_run: --out {out}: another chip run is writing there"
    assert (done.returncode, done.stderr.strip()) == (2, said)
    assert (out / "report.md").read_text() == "the other run's"


def test_a_manifest_removes_links_never_what_they_point_to(tmp_path):
    out, victim = tmp_path / "out", tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("mine")
    assert _run(tmp_path, "--out", str(out), **QUICK).returncode == 124
    (out / "hlo").symlink_to(victim)
    (out / "report.md").symlink_to(victim / "precious.txt")
    subprocess.run(["python", str(ROOT / "scripts" / "chip_out.py"), "seal", str(out)], check=True)
    assert _run(tmp_path, "--out", str(out), **QUICK).returncode == 124
    assert (victim / "precious.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == ["chip-run.manifest"]


@pytest.mark.parametrize("budget", ["SECONDS[$(touch {})]", "a[$(touch {})]+1", "1e3", "-5", " 5"])
def test_a_budget_that_is_not_a_number_runs_nothing_and_is_one_line(tmp_path, budget):
    marker = tmp_path / "MARKER"
    budget = budget.format(marker)
    done = _run(tmp_path, "--out", str(tmp_path / "out"), CHIP_RUN_PLATFORM="cpu", CHIP_RUN_BUDGET=budget)
    assert not marker.exists() and not (tmp_path / "out").exists()
    (line,) = done.stderr.strip().splitlines()
    assert done.returncode == 2 and line.startswith("chip_run: CHIP_RUN_BUDGET=")
    assert line.endswith("not a whole number of seconds (at most 6 digits)")


def test_help_lists_the_steps(tmp_path):
    done = _run(tmp_path, "--help")
    assert done.returncode == 0
    for step in ("host", "gate", "throughput", "baselines", "times", "report"):
        assert f"  {step} " in done.stdout or f"{step}  " in done.stdout
    # The comment block at the script's top, all of it and nothing after it.
    assert done.stdout.splitlines()[-1].endswith("recorded traces that stand in for the chip in step 5.")


def _chip_times():
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("chip_times", ROOT / "scripts" / "chip_times.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _row(program: str, device: float, predicted: float | None) -> dict:
    return {"program": program, "config": "f32", "device_s_median": device, "predicted_s": predicted}


def test_every_twin_prints_both_ratios_and_a_disagreement_is_a_finding_in_one_line():
    chip_times = _chip_times()
    agree = [_row("eqx_embedding", 90e-6, 110e-6), _row("take", 45.7e-6, 45e-6)]
    (line,) = chip_times.twin_lines(agree)
    assert (
        line
        == "twin eqx_embedding / take [f32]: chip 1.97, predicted 2.44 (+24%): the same verdict against 1.1"
    )
    # libtpu's own estimate would predict 0.33 here: a pass where the chip fails.
    disagree = [_row("eqx_embedding", 90e-6, 15e-6), _row("take", 45.7e-6, 45e-6)]
    (line,) = chip_times.twin_lines(disagree)
    assert line.startswith("finding: eqx_embedding / take [f32] measures 1.97 on the chip")
    assert "predicts 0.333" in line and "\n" not in line
    (line,) = chip_times.twin_lines([_row("eqx_embedding", 90e-6, None), _row("take", 45.7e-6, 45e-6)])
    assert line == "twin eqx_embedding / take [f32]: chip 1.97, no prediction"
    assert chip_times.twin_lines([_row("take", 45.7e-6, 45e-6)]) == []


def test_a_budget_too_short_times_what_fits_and_names_the_rest(tmp_path, capsys):
    chip_times = _chip_times()
    args = ["--out", str(tmp_path), "--configs", "f32", "--traces", str(TRACES)]
    assert chip_times.main([*args, "--seconds", "0"]) == 0
    record = json.loads((tmp_path / "device-times.json").read_text())
    assert [r["program"] for r in record["rows"]] == ["take"] and record["complete"] is False
    assert record["not_timed"] == [
        "eqx_embedding.f32",
        "onehot_matmul.f32",
        "grad_take.f32",
        "train_take.f32",
    ]
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith(
        "chip_times: the budget of 0 s is spent: 1 of 5 timed; not timed: eqx_embedding.f32"
    )
    assert chip_times.main(args) == 0
    assert json.loads((tmp_path / "device-times.json").read_text())["complete"] is True


def test_a_run_stopped_midway_keeps_the_programs_it_timed(tmp_path, monkeypatch):
    chip_times = _chip_times()
    read = chip_times._from_trace
    seen: list[Path] = []

    def stop_at_the_third(path: Path):
        seen.append(path)
        if len(seen) == 3:
            raise KeyboardInterrupt
        return read(path)

    monkeypatch.setattr(chip_times, "_from_trace", stop_at_the_third)
    with pytest.raises(KeyboardInterrupt):
        chip_times.main(["--out", str(tmp_path), "--configs", "f32", "--traces", str(TRACES)])
    record = json.loads((tmp_path / "device-times.json").read_text())
    assert [r["program"] for r in record["rows"]] == ["take", "eqx_embedding"] and record["complete"] is False
    assert record["not_timed"] == ["onehot_matmul.f32", "grad_take.f32", "train_take.f32"]


def test_a_tree_of_any_depth_it_made_is_replaced_in_one_step(tmp_path):
    """No recursion on the way down or back: 1,100 levels (past Python's recursion limit) are walked,
    listed and removed."""
    chip_out = ["python", str(ROOT / "scripts" / "chip_out.py")]
    out = tmp_path / "out"
    assert subprocess.run([*chip_out, "claim", str(out)], check=False).returncode == 0
    level = out
    try:
        for _ in range(1100):
            level /= "a"
            level.mkdir()
        assert subprocess.run([*chip_out, "seal", str(out)], check=False).returncode == 0
        done = subprocess.run([*chip_out, "claim", str(out)], capture_output=True, text=True, check=False)
        assert (done.returncode, done.stderr) == (0, "")
        assert [p.name for p in out.iterdir()] == ["chip-run.manifest"]
    finally:  # pytest's own clean-up of old temporary folders recurses: it must never meet this tree
        subprocess.run(["rm", "-rf", str(out / "a")], check=True)


def _chip_corpus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "chip_corpus.py"), *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )  # fmt: skip


@pytest.mark.e2e
def test_chip_corpus_says_what_it_records_and_refuses_an_empty_selection(tmp_path):
    done = _chip_corpus("--help")
    assert done.returncode == 0 and "--list" in done.stdout and "--seconds" in done.stdout
    done = _chip_corpus(
        "--list", "steps:families", "--name", "x", "--out", str(tmp_path), "--only", "nothing*"
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip().splitlines()[-1]
        == "chip_corpus: steps:families holds no program matching nothing*"
    )
    assert not list(tmp_path.iterdir())


def test_the_committed_corpora_are_what_the_probe_lists_name():
    """Each committed corpus holds the programs its list names, each once, with the chip's provenance: what
    the fit reads is what steps.py says was timed."""
    sys.path.insert(0, str(DATA))
    import steps

    def names(folder: Path) -> list[str]:
        return [
            r["program"]
            for f in sorted(folder.glob("corpus-*.json"))
            for r in json.loads(f.read_text())["rows"]
        ]

    fitted = names(DATA)
    assert len(fitted) == len(set(fitted))
    assert set(fitted) == {p.name for p in steps.families()}
    held = names(DATA / "heldout")
    listed = steps.held_out() + steps.twins() + steps.held_out_fresh()
    assert sorted(held) == sorted(p.name for p in listed)
    larger = names(DATA / "larger")
    assert sorted(larger) == sorted(p.name for p in steps.larger())
    assert len(held) == len(set(held)) and len(larger) == len(set(larger))
    for f in [
        *DATA.glob("corpus*.json"),
        *(DATA / "heldout").glob("corpus*.json"),
        *(DATA / "larger").glob("corpus*.json"),
    ]:
        prov = json.loads(f.read_text())["provenance"]
        assert prov["chip"] == "TPU v5 lite" and prov["clock"] == "device" and prov["libtpu"], f
