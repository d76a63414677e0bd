"""A compiled program's kernel code tied to its kernel list: the kernel metrics, the snapshot's code lines,
and hlo-stats on real XLA dumps of two jaxlib releases (tests/data/kernels)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from invariants.hlo.cost import Missing
from invariants.hlo.structure import Kernel
from invariants.kernels import parse_kernel_code
from invariants.kernels.dump import code_beside, module_prefix, read_kernel_code
from invariants.kernels.program import ProgramCode, code_line, lookup_kernels
from invariants.measure.measurement import Measurement, measure, measure_text
from invariants.measure.metrics import METRICS
from invariants.report.hlo_stats import main as hlo_stats

DATA = Path(__file__).resolve().parents[2] / "data" / "kernels"


def _dump(release: str, target: str, program: str) -> Path:
    return DATA / f"jaxlib-{release}" / target / program


def _measured(folder: Path) -> Measurement:
    (hlo,) = folder.glob("*after_optimizations.txt")
    files = code_beside(hlo)
    assert files, hlo
    code = {Path(name).name: text for name, text in files.items()}
    return measure_text(hlo.read_text(), str(hlo), code=code, code_folder=str(folder))


def _program_code(folder: Path) -> ProgramCode:
    return _measured(folder).code


def kernel_metrics(measured: Measurement) -> dict[str, object]:
    return {k: v for k, v in measured.metrics.items() if METRICS[k].source == "kernel"}


def _hand_count(folder: Path, pattern: str) -> int:
    """Counted straight from the PTX text, without the parser: the instructions matching ``pattern``."""
    return sum(len(re.findall(pattern, p.read_text())) for p in folder.glob("*.ptx"))


CAS = r"\batom(?:\.\w+)*\.cas\.b32\b"
FLOAT_ADD = r"\b(?:atom|red)(?:\.\w+)*\.add(?:\.\w+)*\.f32\b|\b(?:atom|red)(?:\.\w+)*\.f32\.add\b"


@pytest.mark.parametrize("target", ["gpu-a100", "gpu-l4"])
def test_the_f32_scatter_add_became_a_cas_loop_in_0_10_2(target):
    """xla#46225, as the metrics and the hand count both see it: 4 native adds, then 4 CAS retry loops."""
    before = kernel_metrics(_measured(_dump("0.10.1", target, "grad_take.f32")))
    after = kernel_metrics(_measured(_dump("0.10.2", target, "grad_take.f32")))
    assert (before["cas_atomics"], before["float_atomics"]) == (0, 4)
    assert (after["cas_atomics"], after["cas_loops"], after["float_atomics"]) == (4, 4, 0)
    for release, metrics in (("0.10.1", before), ("0.10.2", after)):
        folder = _dump(release, target, "grad_take.f32")
        assert metrics["cas_atomics"] == _hand_count(folder, CAS)
        assert metrics["float_atomics"] == _hand_count(folder, FLOAT_ADD)


def test_h100_adds_a_row_with_one_vector_atomic_in_both_releases():
    for release in ("0.10.1", "0.10.2"):
        metrics = kernel_metrics(_measured(_dump(release, "gpu-h100", "grad_take.f32")))
        assert (metrics["cas_atomics"], metrics["float_atomics"]) == (0, 1)
        assert metrics["vector_width"] == 128  # the scatter kernel's atom.add.v4.f32
        assert metrics["local_bytes"] == 0


def test_every_kernel_of_the_list_finds_its_code_by_name():
    code = _program_code(_dump("0.10.2", "gpu-a100", "grad_take.f32"))
    kernels = code.structure.kernel_list
    assert [code.of(k) is not None for k in kernels] == [True, True]
    scatter = code.of(kernels[1])
    assert scatter is not None and scatter.name == "input_scatter_fusion"
    assert code.unmatched == ()
    assert lookup_kernels(code.structure) == [kernels[1]]


def test_cpu_vector_width_is_the_lookup_kernels_own():
    measured = _measured(_dump("0.10.2", "cpu", "grad_take.f32"))
    # The zero-fill broadcast is scalar; the scatter's row update is <8 x float>: the metric reads the latter.
    widths = {f.name: f.vector_width for f in measured.code.facts or ()}
    assert 0 in widths.values() and kernel_metrics(measured)["vector_width"] == 256


def test_a_target_without_kernel_code_gives_missing_metrics_with_the_reason():
    text = (DATA.parent / "hlo" / "tpu_seed_jit__take.txt").read_text()
    metrics = kernel_metrics(measure_text(text, "seed", no_code="tpu-v5e: no kernel code"))
    assert set(metrics) == {m.name for m in METRICS.values() if m.source == "kernel"}
    assert all(isinstance(v, Missing) and "tpu-v5e" in v.reason for v in metrics.values())


def test_a_lookup_kernel_without_code_is_missing_not_zero():
    code = _program_code(_dump("0.10.2", "gpu-a100", "grad_take.f32"))
    shown = ProgramCode(code.structure, tuple(f for f in code.facts or () if "scatter" not in f.name))
    assert isinstance(shown.lookup_vector_width(), Missing)
    assert shown.total("cas_atomics") == 0  # the counts cover the code there is


def test_kernel_names_are_not_part_of_equality():
    assert Kernel("fusion", "f32[2]", name="a.1") == Kernel("fusion", "f32[2]", name="b.7")


def test_the_code_line_holds_nothing_volatile():
    code = _program_code(_dump("0.10.2", "gpu-a100", "grad_take.f32"))
    scatter = code.of(code.structure.kernel_list[1])
    assert scatter is not None
    line = code_line(scatter)
    assert line == "ptx: atomics atom.cas.b32×4 (CAS retry loops 4); loops 4; scalar"
    assert str(scatter.instructions) not in line and "%" not in line


def test_module_prefixes_tie_a_dump_folders_files_to_their_module(tmp_path):
    assert module_prefix("module_0005.jit_loss.3.ptx") == ("module_0005.jit_loss", "3.ptx")
    assert module_prefix("README.txt") is None
    for name, text in (
        ("module_0001.jit_a.1.ptx", "// a"),
        ("module_0001.jit_a.1.ir-with-opt.ll", "; the NVPTX module before PTX"),
        ("module_0002.jit_b.k.ir-with-opt.ll", "; b"),
        ("notes.txt", "x"),
    ):
        (tmp_path / name).write_text(text)
    assert read_kernel_code(tmp_path) == {
        "module_0001.jit_a": {"1.ptx": "// a"},  # a GPU module: its PTX, not the NVPTX IR
        "module_0002.jit_b": {"k.ir-with-opt.ll": "; b"},
    }


@pytest.mark.parametrize("release,cas,floats", [("0.10.1", 0, 4), ("0.10.2", 4, 0)])
def test_hlo_stats_json_reports_the_atomics_of_an_a100_dump(release, cas, floats, capsys):
    folder = _dump(release, "gpu-a100", "grad_take.f32")
    assert hlo_stats(["--json", str(folder)]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert (obj["cas_atomics"], obj["float_atomics"]) == (cas, floats)
    assert (obj["cas_atomics"], obj["float_atomics"]) == (
        _hand_count(folder, CAS),
        _hand_count(folder, FLOAT_ADD),
    )
    assert [k["name"] for k in obj["kernel_code"]] == ["loop_broadcast_fusion", "input_scatter_fusion"]
    assert obj["kernel_code_note"] is None


def test_hlo_stats_says_why_a_lone_file_has_no_kernel_metrics(capsys):
    assert hlo_stats(["--json", str(DATA.parent / "hlo" / "cpu_fwd_take.txt")]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["cas_atomics"] is None and "not named as a dump file" in obj["kernel_code_note"]


def test_hlo_stats_reads_the_kernel_code_the_gate_dumps(tmp_path, capsys):
    """--hlo-dump-dir writes <program>.<config>.hlo.txt beside <program>.<config>.<code file>."""
    folder = _dump("0.10.2", "gpu-a100", "grad_take.f32")
    (hlo,) = folder.glob("*after_optimizations.txt")
    (tmp_path / "grad_take.f32.hlo.txt").write_text(hlo.read_text())
    for ptx in folder.glob("*.ptx"):
        (tmp_path / f"grad_take.f32.{module_prefix(ptx.name)[1]}").write_text(ptx.read_text())  # type: ignore[index]
    assert hlo_stats(["--json", str(tmp_path / "grad_take.f32.hlo.txt")]) == 0
    assert json.loads(capsys.readouterr().out)["cas_atomics"] == 4


def test_hlo_stats_names_the_line_of_kernel_code_it_does_not_understand(tmp_path, capsys):
    folder = _dump("0.10.2", "gpu-a100", "grad_take.f32")
    for path in folder.iterdir():
        (tmp_path / path.name).write_text(path.read_text())
    (ptx,) = (p for p in tmp_path.glob("*.ptx") if "atom" in p.read_text())
    lines = ptx.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if "atom." in line)
    lines[at] = "\tfrobnicate.b32 %r1, %r2;"
    ptx.write_text("\n".join(lines) + "\n")
    assert hlo_stats(["--json", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{ptx}:{at + 1}:") and "frobnicate" in err[0]


def test_vector_width_is_the_narrowest_of_the_lookup_kernels():
    """A training step gathers (a scalar row copy on CPU) and scatters (a vector loop): the metric is the
    gather's 0, not the scatter's 256: one scalar lookup kernel is enough to say so."""
    from invariants.compile.artifacts import compile_here
    from invariants.scope.targets import all_targets

    measured = measure(compile_here("train_take", "f32", all_targets()["cpu"]))
    code = measured.code
    widths = sorted({code.of(k).vector_width for k in lookup_kernels(code.structure)})  # type: ignore[union-attr]
    assert widths[0] == 0 and widths[-1] >= 128
    assert kernel_metrics(measured)["vector_width"] == 0


def test_jaxlib_0_10_0s_one_ptx_file_per_module_is_read(tmp_path):
    """0.10.0 names its PTX module_NNNN.<name>.ptx (no per-LLVM-module number): its short name is 'ptx'."""
    from invariants.kernels import kernel_files

    (text,) = (
        t
        for p in _dump("0.10.1", "gpu-a100", "grad_take.f32").glob("*.ptx")
        if "atom" in (t := p.read_text())
    )
    (tmp_path / "module_0007.jit_grad_take.ptx").write_text(text)
    (tmp_path / "module_0007.jit_grad_take.ir-with-opt.ll").write_text("; the NVPTX module")
    assert kernel_files(["ptx", "ir-with-opt.ll"]) == ["ptx"]
    assert kernel_files(["ir-with-opt.ll"]) == ["ir-with-opt.ll"]
    (files,) = read_kernel_code(tmp_path).values()
    assert list(files) == ["ptx"]
    facts = parse_kernel_code(files)
    assert sum(f.float_atomics for f in facts) == 4
    assert parse_kernel_code({"grad_take.f32.gpu-a100/ptx": text}) == [  # as a key's code names it
        dataclasses.replace(f, source="grad_take.f32.gpu-a100/ptx") for f in facts
    ]


# XLA:CPU of jax 0.4.30: a large fusion is called through a parallel computation, and the code is one
# function per computation (``@parallel_fusion``), none per kernel.
WRAPPED_HLO = """HloModule m

%fused_computation.clone (p0: f32[8,512], p1: s32[4]) -> f32[4,512] {
  %p0 = f32[8,512]{1,0} parameter(0)
  %p1 = s32[4]{0} parameter(1)
  ROOT %gather.1 = f32[4,512]{1,0} gather(f32[8,512]{1,0} %p0, s32[4]{0} %p1), offset_dims={1}, \
collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,512}
}

%parallel_fusion (p: f32[8,512], q: s32[4]) -> f32[4,512] {
  %p = f32[8,512]{1,0} parameter(0)
  %q = s32[4]{0} parameter(1)
  ROOT %fusion.clone = f32[4,512]{1,0} fusion(f32[8,512]{1,0} %p, s32[4]{0} %q), kind=kLoop, \
calls=%fused_computation.clone
}

ENTRY %main.4 (a: f32[8,512], b: s32[4]) -> f32[4,512] {
  %a = f32[8,512]{1,0} parameter(0)
  %b = s32[4]{0} parameter(1)
  ROOT %call = f32[4,512]{1,0} call(f32[8,512]{1,0} %a, s32[4]{0} %b), to_apply=%parallel_fusion
}
"""
WRAPPED_IR = """define void @parallel_fusion(ptr %0) {
entry:
  %v = load <8 x float>, ptr %0, align 4
  store <8 x float> %v, ptr %0, align 4
  ret void
}

define void @main.4(ptr %0) {
entry:
  ret void
}
"""


def test_a_kernel_called_alone_through_a_computation_finds_that_computation_s_code():
    measured = measure_text(WRAPPED_HLO, "wrapped", code={"m.ir-with-opt.ll": WRAPPED_IR})
    (kernel,) = measured.code.structure.kernel_list
    assert (kernel.name, kernel.caller) == ("fusion.clone", "parallel_fusion")
    assert kernel_metrics(measured)["vector_width"] == 256
    assert [f.name for f in measured.code.unmatched] == ["main.4"]
