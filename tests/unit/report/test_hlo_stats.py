"""The hlo-stats subcommand, called in-process."""

from __future__ import annotations

import json
import pathlib
import re
import shutil

import pytest

from invariants.report.hlo_stats import main

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "hlo"
CHIP = pathlib.Path(__file__).resolve().parents[2] / "data" / "tpu-v5e-chip" / "heldout"
TPU_BWD = str(DATA / "tpu_v5e_bwd_vmap_index.txt")
SEED_TAKE = str(DATA / "tpu_seed_jit__take.txt")


def test_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([TPU_BWD]) == 0
    out = capsys.readouterr().out
    assert "entry fusions: 2 (kLoop 2)" in out
    assert "trip count 16384" in out
    assert "while  trips=16384" in out


def test_json_one_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([SEED_TAKE, "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["entry_fusions"] == 4
    assert obj["fusion_kinds"] == {"kCustom": 1, "kLoop": 3}
    assert obj["custom_call_targets"] == ["AssumeGatherIndicesInBound"]
    assert obj["while_loops"] == 0 and obj["collectives"] == 0 and obj["collective_counts"] == {}
    assert isinstance(obj["kernels"], int) and isinstance(obj["opcode_counts"], dict)
    assert obj["opcodes"] == sorted(obj["opcode_counts"])
    assert obj["dynamic_kernel_launches"] == obj["kernels"]


def test_json_several_files_keyed_by_path(capsys: pytest.CaptureFixture[str]) -> None:
    sharded = str(DATA / "tpu_v5e_2x2_sharded_fwd_index.txt")
    assert main(["--json", TPU_BWD, sharded]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert set(obj) == {TPU_BWD, sharded}
    assert obj[TPU_BWD]["trip_counts"] == [16384]
    assert obj[TPU_BWD]["dynamic_kernel_launches"] >= 16384
    assert obj[sharded]["collectives"] == 1 and obj[sharded]["collective_counts"] == {"all-reduce": 1}
    assert obj[sharded]["collective_bytes"] == 16384 * 32 * 4


def test_directory_takes_after_optimizations_files(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(SEED_TAKE, tmp_path / "module_0002.jit__take.after_optimizations.txt")
    shutil.copy(TPU_BWD, tmp_path / "module_0001.jit_bwd.after_optimizations.txt")
    (tmp_path / "module_0001.jit_bwd.before_optimizations.txt").write_text("not read")
    assert main([str(tmp_path), "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert [pathlib.Path(p).name for p in obj] == [
        "module_0001.jit_bwd.after_optimizations.txt", "module_0002.jit__take.after_optimizations.txt",
    ]  # fmt: skip


def test_empty_directory_is_an_error(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "after_optimizations" in err


def test_malformed_input_one_line_exit_2(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("HloModule m\n\nENTRY %main {\n  %x = f32[4]{0} parameter(0)\n  %y = f32[4] what?\n}\n")
    assert main([str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"{bad}:5: ")
    assert "Traceback" not in captured.err


def test_missing_file_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["/nonexistent/x.txt", "--json"]) == 2
    err = capsys.readouterr().err
    assert err == "/nonexistent/x.txt: no such file or directory\n"


def test_help_documents_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "keyed by file path" in out and "after_optimizations" in out


def test_json_keys_and_help_use_the_spec_metric_names(capsys: pytest.CaptureFixture[str]) -> None:
    """What `hlo-stats --help` lists (the TOML example points there) is what an assert accepts: every
    structural metric of the registry is a --json key with the same value an invariant would see."""
    from invariants.hlo.parse import parse_module
    from invariants.hlo.structure import structure_of
    from invariants.measure.metrics import METRICS

    assert main([SEED_TAKE, "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    s = structure_of(parse_module(pathlib.Path(SEED_TAKE).read_text(), SEED_TAKE))
    structural = [m for m in METRICS.values() if m.source == "structure" and m.of and not m.alias_of]
    for m in structural:
        value = m.of(s)
        assert obj[m.name] == (list(value) if isinstance(value, tuple) else value), m.name
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = capsys.readouterr().out
    listed = set(re.findall(r"^  ([a-z_]+)(?:\(PROGRAM\))?  ", help_text, re.M))
    assert set(METRICS) <= listed


DUMP = DATA / "cpu_dump"  # part of a real --xla_dump_to folder (see tests/data/hlo/README.md)


def test_a_whole_dump_folder_skips_what_is_not_a_module(capsys: pytest.CaptureFixture[str]) -> None:
    """`hlo-stats --json dump/*`: reports the modules, and says on stderr what it skipped and why."""
    files = sorted(str(p) for p in DUMP.iterdir())
    assert main(["--json", *files]) == 0
    captured = capsys.readouterr()
    obj = json.loads(captured.out)
    after = str(DUMP / "module_0006.jit__lambda.cpu_after_optimizations.txt")
    before = str(DUMP / "module_0006.jit__lambda.before_optimizations.txt")
    assert set(obj) == {after, before}
    assert obj[after]["optimized"] is True and obj[after]["gathers"] == 1
    skipped = [line for line in captured.err.splitlines() if line.startswith("hlo-stats: skipped ")]
    assert len(skipped) == len(files) - 2 and any("not text" in line for line in skipped)


def test_an_unoptimized_module_is_flagged(capsys: pytest.CaptureFixture[str]) -> None:
    before = str(DUMP / "module_0006.jit__lambda.before_optimizations.txt")
    assert main(["--json", before]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["optimized"] is False
    assert "not optimized" in captured.err and "before_optimizations" in captured.err
    assert main([before]) == 0
    assert "NOT OPTIMIZED" in capsys.readouterr().out.splitlines()[0]


def test_one_file_that_is_not_a_module_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    report = DUMP / "module_0006.jit__lambda.cpu_after_optimizations-buffer-assignment.txt"
    assert main([str(report)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not an HLO module" in err


def test_json_estimated_cycles_for_tpu_dumps_and_null_elsewhere(capsys: pytest.CaptureFixture[str]) -> None:
    seed_gather = str(DATA / "tpu_seed_jit_gather.txt")
    cpu = str(DATA / "cpu_fwd_index.txt")
    assert main(["--json", SEED_TAKE, seed_gather, TPU_BWD, cpu]) == 0
    obj = json.loads(capsys.readouterr().out)
    # Hand counts in tests/unit/hlo/test_cost.py.
    assert obj[SEED_TAKE]["estimated_cycles"] == 61717
    assert obj[seed_gather]["estimated_cycles"] == 22542
    assert obj[TPU_BWD]["estimated_cycles"] == 149_925_672
    assert obj[TPU_BWD]["unestimated_launches"] == 65544
    assert obj[cpu]["estimated_cycles"] is None
    assert "only the TPU compiler" in obj[cpu]["estimated_cycles_note"]


def test_text_shows_estimated_cycles(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([SEED_TAKE]) == 0
    out = capsys.readouterr().out
    assert "estimated cycles: 61717 (2 launches carry no estimate)" in out
    assert "(38214 cycles)" in out


def _jax_0_10_2_dump(tmp_path: pathlib.Path) -> pathlib.Path:
    """A dump folder as jax 0.10.2 writes it: files, and a sub-folder per module (of textprotos)."""
    dump = tmp_path / "dump"
    shutil.copytree(DUMP, dump)
    for module in ("module_0002.jit_broadcast_in_dim", "module_0006.jit__lambda"):
        (dump / module).mkdir()
        for name in ("topology.textproto", "module.mlir", "compile_options.textproto"):
            (dump / module / name).write_text("not hlo\n")
    return dump


def test_the_help_form_dir_star_reads_a_dump_with_module_sub_folders(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hlo-stats --json DIR/*` on a jax 0.10.2 dump: a sub-folder without modules is skipped with a note,
    as a file that is no module is (it was exit 2: 'no *after_optimizations.txt files in this directory')."""
    dump = _jax_0_10_2_dump(tmp_path)
    assert main(["--json", *sorted(str(p) for p in dump.iterdir())]) == 0
    captured = capsys.readouterr()
    assert set(json.loads(captured.out)) == {
        str(dump / "module_0006.jit__lambda.cpu_after_optimizations.txt"),
        str(dump / "module_0006.jit__lambda.before_optimizations.txt"),
    }
    skipped = [ln for ln in captured.err.splitlines() if "module_0006.jit__lambda:" in ln]
    none_here = "no *after_optimizations.txt or *.hlo.txt files in this directory"
    assert skipped == [f"hlo-stats: skipped {dump / 'module_0006.jit__lambda'}: {none_here}"]
    # A folder with modules inside the list is read, as it is alone.
    assert main(["--json", str(dump), str(DATA / "cpu_fwd_take.txt")]) == 0
    assert str(dump / "module_0006.jit__lambda.cpu_after_optimizations.txt") in json.loads(
        capsys.readouterr().out
    )


def test_the_gates_own_dump_folder_is_a_dump_folder(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
):
    """`hlo-stats artifacts/hlo/cpu/` (--hlo-dump-dir: <program>.<config>.hlo.txt beside .jaxpr.txt and the
    kernels' code) reads its modules with their kernel code; it was refused, as no XLA dump."""
    kernels = DATA.parent / "kernels" / "jaxlib-0.10.2" / "cpu" / "grad_take.f32"
    (hlo,) = kernels.glob("*after_optimizations.txt")
    folder = tmp_path / "hlo" / "cpu"
    folder.mkdir(parents=True)
    (folder / "grad_take.f32.hlo.txt").write_text(hlo.read_text())
    (folder / "grad_take.f32.jaxpr.txt").write_text("{ lambda ; a:f32[8192,32]. let  in (a,) }\n")
    from invariants.kernels.dump import module_prefix

    for code in kernels.glob("*.ll"):
        if code.name.endswith("ir-with-opt.ll"):
            (folder / f"grad_take.f32.{module_prefix(code.name)[1]}").write_text(code.read_text())  # type: ignore[index]
    assert main(["--json", str(folder)]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["module"] and obj["kernel_code"], obj.get("kernel_code_note")
    assert obj["scatters"] == 1
    assert main([str(tmp_path / "hlo")]) == 2  # the folder of the target folders: which one, said
    none_here = "no *after_optimizations.txt or *.hlo.txt files in this directory"
    assert (
        capsys.readouterr().err
        == f"{tmp_path / 'hlo'}: {none_here} (its sub-folders cpu have some: name one)\n"
    )


def test_a_path_that_is_not_a_regular_file_says_what_it_is(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fifo and /dev/null exist: they were reported as 'no such file or directory'."""
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert main([str(fifo)]) == 2
    assert capsys.readouterr().err == f"{fifo}: not a regular file (a named pipe)\n"
    assert main(["--json", "/dev/null"]) == 2
    assert capsys.readouterr().err == "/dev/null: not a regular file (a character device)\n"
    assert main([str(fifo), SEED_TAKE]) == 0  # among several: skipped with a note, as other non-modules
    assert f"hlo-stats: skipped {fifo}: not a regular file (a named pipe)" in capsys.readouterr().err


def test_fused_operations_are_counted_as_a_snapshot_counts_them(capsys: pytest.CaptureFixture[str]) -> None:
    """One spelling of a count: ``bitcast×2`` in hlo-stats as in a snapshot, never ``bitcastx2``."""
    from invariants.hlo.parse import parse_module
    from invariants.hlo.structure import structure_of
    from invariants.snapshot.render import kernel_line

    assert main([SEED_TAKE, TPU_BWD]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"\b[a-z-]+x\d+\b", out), re.findall(r"\b[a-z-]+x\d+\b", out)
    fused = [
        kernel_line(k).split(" -> ")[0]
        for path in (SEED_TAKE, TPU_BWD)
        for k in structure_of(parse_module(pathlib.Path(path).read_text())).kernel_list
        if k.fusion_kind
    ]
    assert any("×" in f for f in fused), fused
    for f in fused:
        assert f in out, f


TPU_TAKE = str(DATA / "tpu_v5e_fwd_take.txt")


def test_json_predicted_seconds_for_a_tpu_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", "--target", "tpu-v5e", TPU_TAKE, TPU_BWD]) == 0
    obj = json.loads(capsys.readouterr().out)
    take, looped = obj[TPU_TAKE], obj[TPU_BWD]
    assert 0 < take["predicted_seconds"] < looped["predicted_seconds"]
    assert "fitted on a TPU v5e" in take["predicted_seconds_note"]
    assert "uncalibrated" not in take["predicted_seconds_note"]
    # A chip nobody measured gives a figure and says so.
    assert main(["--json", "--target", "tpu-v6e", TPU_TAKE]) == 0
    v6e = json.loads(capsys.readouterr().out)
    assert v6e["predicted_seconds"] > 0 and v6e["predicted_seconds_note"].startswith("uncalibrated: ")
    assert main(["--target", "tpu-v6e", TPU_TAKE]) == 0
    assert "predicted device time: " in capsys.readouterr().out


def test_a_train_step_shows_the_kernels_that_carry_its_predicted_time(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    """A whole model step (a small language model's train step, with the compiler's online softmax) gets a
    figure, and the kernels that carry most of it, named and each with its share, in the text and JSON."""
    import gzip

    texts = json.loads(gzip.decompress((CHIP / "corpus-heldout-hlo.json.gz").read_bytes()))
    step = tmp_path / "lm_train.hlo.txt"
    step.write_text(texts["lm_train_l2_causal_d256_s256_f32.-"])
    assert main(["--json", "--target", "tpu-v5e", str(step)]) == 0
    obj = json.loads(capsys.readouterr().out)
    kernels = obj["predicted_kernels"]
    assert len(kernels) == 3 and obj["predicted_seconds"] > sum(k["seconds"] for k in kernels) > 0
    assert [k["seconds"] for k in kernels] == sorted((k["seconds"] for k in kernels), reverse=True)
    assert main(["--target", "tpu-v5e", str(step)]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "carried by:" in x]
    first = kernels[0]
    share = f"{first['seconds'] / obj['predicted_seconds']:.0%}"
    assert line.strip().startswith(f"carried by: {first['name']} ({first['kind']}) {share}, ")
    assert main(["--json", TPU_TAKE]) == 0
    assert json.loads(capsys.readouterr().out)["predicted_kernels"] == []


def test_predicted_seconds_is_null_without_a_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", TPU_TAKE]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["predicted_seconds"] is None and "no --target" in obj["predicted_seconds_note"]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--target", "tpu-v5e", str(DATA / "cpu_fwd_take.txt")], "cpu_fwd_take.txt: not TPU HLO"),
        (["--target", "tpu-v5e", str(DATA / "gpu_h100_vmap_segment_sum.txt")], "not TPU HLO"),
        (["--target", "tpu-v5f", TPU_TAKE], "--target: 'tpu-v5f' is not a TPU target with a cost model"),
        (["--target", "cpu", TPU_TAKE], "--target: 'cpu' is not a TPU target"),
        (["--target", "tpu-v5e", "/no/such/file.txt"], "/no/such/file.txt: no such file or directory"),
        (
            ["--target", "tpu-v5e", str(DUMP / "module_0006.jit__lambda.before_optimizations.txt")],
            "before_optimizations.txt: not optimized (no is_scheduled=true)",
        ),
    ],
)
def test_target_errors_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], line: str
) -> None:
    assert main(["--json", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and line in captured.err, captured.err
