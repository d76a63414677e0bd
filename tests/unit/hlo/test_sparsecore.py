"""Work libtpu offloads to the SparseCore, read from real ahead-of-time dumps (tests/data/hlo/sparsecore/)."""

from __future__ import annotations

import json
import pathlib

import pytest

from invariants.hlo.cost import Missing
from invariants.hlo.parse import READER, HloParseError, parse_module
from invariants.hlo.structure import structure_of
from invariants.measure.measurement import measure_text
from invariants.report.hlo_stats import main
from invariants.snapshot.render import render_summary

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "hlo" / "sparsecore"


def _text(name: str) -> str:
    return (DATA / f"{name}.txt").read_text()


def test_threads_are_read_from_each_computations_closer() -> None:
    module = parse_module(_text("v6e_scatter_min"), "v6e_scatter_min.txt")
    threads = {c.name: c.execution_thread for c in module.computations.values()}
    assert threads[module.entry.name] == "main"
    offloaded = {name for name, thread in threads.items() if thread == "sparsecore"}
    # The scatter's fused computation, its reducer, and the two call-start bodies that reach it.
    assert len(offloaded) == 4
    starts = [i for i in module.entry if i.opcode == "call-start"]
    assert len(starts) == 1 and starts[0].attrs["async_execution_thread"] == '"sparsecore"'
    assert module.computations[starts[0].called[0]].execution_thread == "sparsecore"


def test_the_offloaded_scatter_is_one_sparsecore_kernel_and_still_a_scatter() -> None:
    s = structure_of(parse_module(_text("v6e_scatter_min"), "v6e_scatter_min.txt"))
    sparse = [k for k in s.kernel_list if k.thread == "sparsecore"]
    # 1 kernel on the SparseCore: the kCustom scatter fusion the entry's call-start hands over; the sort
    # of the indices before it stays on the TensorCore.
    assert [(k.opcode, k.fusion_kind, dict(k.inner_opcodes)["scatter"]) for k in sparse] == [
        ("fusion", "kCustom", 1)
    ]
    assert s.thread_kernels == {"sparsecore": 1} and s.kernels == 8
    assert "sort" in [k.opcode for k in s.kernel_list if k.thread == "main"]
    assert s.scatters == 1 and s.scatter_shapes[0].thread == "sparsecore"
    assert s.scatter_shapes[0].bytes == 1_300_000 * 4  # the f32 updates
    # libtpu's "no estimate" (the largest int64) on the SparseCore kernel is no estimate, not a figure.
    assert sparse[0].estimated_cycles is None


def test_the_offload_flags_move_the_large_gather() -> None:
    default = measure_text(_text("v6e_gather"), "v6e_gather.txt", target="tpu-v6e").metrics
    flagged = measure_text(_text("v6e_gather_offload_flags"), "g.txt", target="tpu-v6e").metrics
    assert (default["gathers"], default["sparsecore_gathers"], default["sparsecore_ops"]) == (1, 0, 0)
    # An offloaded gather is still a gather, and also a SparseCore one.
    assert (flagged["gathers"], flagged["sparsecore_gathers"], flagged["sparsecore_ops"]) == (1, 1, 1)
    assert flagged["sparsecore_bytes"] == 131_072 * 128 * 4


@pytest.mark.parametrize("target", ["tpu-v5e", "gpu-h100", "cpu"])
def test_a_sparsecore_metric_on_a_chip_without_one_says_so(target: str) -> None:
    metrics = measure_text(_text("v6e_scatter_min"), "s.txt", target=target).metrics
    value = metrics["sparsecore_scatters"]
    assert isinstance(value, Missing) and value.reason.startswith(f"{target} has no SparseCore")
    assert metrics["scatters"] == 1


def test_snapshot_names_the_thread_of_what_is_offloaded() -> None:
    text = render_summary(measure_text(_text("v6e_scatter_min"), "s.txt", target="tpu-v6e"))
    assert "; sparsecore kernels 1" in text.splitlines()[1]
    assert (
        "  fusion kCustom {reshape×2, scatter, transpose×2} -> f32[5600000]{0:T(1024)} on sparsecore" in text
    )
    scatters = text.split("scatters:\n", 1)[1].splitlines()[0]
    assert scatters.endswith(" on sparsecore")
    plain = render_summary(measure_text(_text("v6e_gather"), "g.txt", target="tpu-v6e"))
    assert "sparsecore" not in plain


def test_hlo_stats_json_reports_the_offloaded_scatter(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--json", str(DATA / "v6e_scatter_min.txt")]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert (obj["scatters"], obj["sparsecore_scatters"], obj["sparsecore_ops"]) == (1, 1, 1)
    assert obj["sparsecore_bytes"] == 5_200_000 and obj["thread_kernels"] == {"sparsecore": 1}
    assert obj["scatter_shapes"][0]["thread"] == "sparsecore"
    assert [k["opcode"] for k in obj["kernel_list"] if k.get("thread") == "sparsecore"] == ["fusion"]


def test_hlo_stats_text_lists_the_threads(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(DATA / "v6e_scatter_min.txt")]) == 0
    out = capsys.readouterr().out
    assert "kernels off the main thread: sparsecore 1; sparsecore gathers 0, scatters 1" in out
    assert out.count("  on sparsecore") == 1


def test_an_unknown_construct_is_one_line_blaming_the_reader(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mutated = _text("v6e_scatter_min").replace(
        '}, execution_thread="sparsecore"', '}, execution_lane="sc"', 1
    )
    path = tmp_path / "mutated.txt"
    path.write_text(mutated)
    with pytest.raises(HloParseError) as info:
        parse_module(mutated, str(path))
    assert "unknown computation attribute 'execution_lane'" in str(info.value)
    assert main([str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"{path}:") and READER in err and "execution_lane" in err


def test_the_snapshot_header_shows_the_flags_a_target_compiles_under() -> None:
    flagged = measure_text(_text("v6e_gather_offload_flags"), "g.txt", target="tpu-v6e-gather-offload")
    header = render_summary(flagged).splitlines()[:2]
    assert header[1].startswith("# LIBTPU_INIT_ARGS=--xla_tpu_offload_gather_to_sparsecore=true ")
    plain = render_summary(measure_text(_text("v6e_gather"), "g.txt", target="tpu-v6e"))
    assert "LIBTPU_INIT_ARGS" not in plain


# The async-start form of an offload (no recorded dump has it yet): the wrapped computation's kernels count
# on its thread, and the -done half only waits.
_ASYNC = """HloModule m, is_scheduled=true

%wrapped (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %n = f32[8]{0} negate(%p)
}, execution_thread="sparsecore"

ENTRY %main (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %s = ((f32[8]{0}), f32[8]{0}, s32[]) async-start(%x), async_execution_thread="sparsecore", calls=%wrapped
  ROOT %d = f32[8]{0} async-done(%s)
}
"""


def test_an_async_start_to_another_thread_counts_its_wrapped_kernels_there() -> None:
    s = structure_of(parse_module(_ASYNC, "async.txt"))
    assert [(k.opcode, k.thread) for k in s.kernel_list] == [("negate", "sparsecore")]
    assert s.thread_kernels == {"sparsecore": 1} and s.kernels == 1


_WHERE = ("kernels", "gathers", "scatters", "sparsecore_ops", "sparsecore_gathers", "sparsecore_scatters")


@pytest.mark.parametrize(
    "path", sorted(DATA.glob("libtpu-*/*.txt")), ids=lambda p: f"{p.parent.name}/{p.stem}"
)
def test_a_later_libtpu_release_is_read_and_offloads_the_same(path: pathlib.Path) -> None:
    later = measure_text(path.read_text(), path.name).metrics
    pinned = measure_text(_text(path.stem), path.name).metrics
    assert {k: later[k] for k in _WHERE} == {k: pinned[k] for k in _WHERE}


def test_the_pytest_api_says_a_chip_without_a_sparsecore_has_none() -> None:
    """What compile_for(..., target="tpu-v5e") answers, on a module whose text has an offloaded scatter:
    the count, and a dtype's share of it, raise one line that says so, never a count."""
    from invariants.testing import CompiledStructure, MetricUnavailable

    s = CompiledStructure("s", "c", "tpu-v5e", measure_text(_text("v6e_scatter_min"), "s", target="tpu-v5e"))
    for read in (lambda: s.sparsecore_ops, lambda: s.metric("sparsecore_scatters", dtype="f32")):
        with pytest.raises(MetricUnavailable) as err:
            read()
        assert str(err.value).startswith("s on tpu-v5e: sparsecore_") and "\n" not in str(err.value)
        assert "tpu-v5e has no SparseCore" in str(err.value)
    assert s.scatters == 1
