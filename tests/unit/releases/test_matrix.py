"""Unit tests of the matrix's kernel-code rows: no network, no environments (the records are the structure
tier's, as the results file holds them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from invariants._errors import InvariantsError
from invariants.records.results import Results, record
from invariants.releases import matrix as m

VERSIONS = ["0.10.0", "0.10.1", "0.10.2"]


# What a record of each kind holds where a test's item does not say (what it tests is what it says).
_FILLED: dict[str, dict[str, Any]] = {
    "structure": {"target": "cpu", "program": "p", "config": "f32"},
    "invariant": {
        "id": "i",
        "target": "cpu",
        "programs": ["p"],
        "config": "f32",
        "assert": "kernels == 1",
        "holds": True,
        "measured": {},
    },
    "correctness": {"id": "c", "program": "p", "config": "f32", "distribution": "uniform", "problem": None},
}


def _results(items: list[dict]) -> Results:
    """A results file of ``items`` as the reader returns it, each made by the results module's ``record``
    (an outcome and node id where they give none)."""
    made = []
    for i in items:
        fields = {k: v for k, v in i.items() if k not in ("kind", "outcome", "nodeid")}
        _, value = record(i["kind"], **{**_FILLED.get(i["kind"], {}), **fields})
        made.append({**value, "outcome": i.get("outcome", "passed"), "nodeid": i.get("nodeid", "n")})
    return Results.from_json({"items": made})


def _item(
    target: str, program: str, cas: int | None, native: int | None, width: int | None
) -> dict[str, Any]:
    return {"kind": "structure", "config": "f32", "target": target, "program": program, "kernels": 2,
            "while_loops": 0, "dynamic_kernel_launches": 2, "estimated_cycles": None, "cas_atomics": cas,
            "float_atomics": native, "cas_loops": cas, "vector_width": width}  # fmt: skip


def _rows() -> list[m.MatrixRow]:
    """What the A100 and the CPU record in 0.10.0 (no kernel code read), 0.10.1 and 0.10.2 (xla#46225)."""
    per_version = {
        "0.10.0": [_item("gpu-a100", "grad_take", None, None, None),
                   _item("gpu-a100", "take", None, None, None), _item("cpu", "grad_take", 0, 0, 256)],
        "0.10.1": [_item("gpu-a100", "grad_take", 0, 4, 128), _item("gpu-a100", "take", 0, 0, 128),
                   _item("cpu", "grad_take", 0, 0, 256)],
        "0.10.2": [_item("gpu-a100", "grad_take", 4, 0, 128), _item("gpu-a100", "take", 0, 0, 128),
                   _item("cpu", "grad_take", 0, 0, 256)],
    }  # fmt: skip
    return [row for v, items in per_version.items() for row in m.matrix_rows(v, _results(items))]


def test_kernel_table_shows_native_atomics_becoming_cas_behind_equal_hlo(tmp_path: Path) -> None:
    rows = _rows()
    assert rows[3].metrics["cas_atomics"] == 0 and rows[3].metrics["float_atomics"] == 4
    notes = m.kernel_notes(rows, VERSIONS)
    assert list(notes) == ["gpu-a100, jax 0.10.0"], "one line for the release without code; none for TPU"
    lines = m.render_matrix(rows, VERSIONS, notes).splitlines()
    # The HLO's counts are the same in every release ...
    assert "| grad_take | 2 / 0 / 2 | 2 / 0 / 2 | 2 / 0 / 2 |" in lines
    # ... the code is not: CAS atomics / native float atomics / vector width, the change in bold.
    title = f"### gpu-a100: {m.KERNEL_TITLE} (f32)"
    assert title in lines
    table = lines[lines.index(title) :]
    assert "| grad_take | ? / ? / ? | 0 / 4 / 128 | **4 / 0 / 128** |" in table
    assert "| take | ? / ? / ? | 0 / 0 / 128 | 0 / 0 / 128 |" in table
    assert f"### cpu: {m.KERNEL_TITLE} (f32)" in lines
    assert "| grad_take | 0 / 0 / 256 | 0 / 0 / 256 | 0 / 0 / 256 |" in lines
    assert any(ln.startswith("- gpu-a100, jax 0.10.0: no kernel metrics recorded") for ln in lines)
    m.plot_matrix(rows, VERSIONS, tmp_path / "m.png")
    assert (tmp_path / "m.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_plot_draws_the_kernel_panels(tmp_path: Path, monkeypatch) -> None:
    """The atomics panels draw the series that move (grad_take on gpu-a100: float 4 -> 0, CAS 0 -> 4) and
    leave out the ones at 0 throughout; without kernel metrics there are no kernel panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn: dict[str, list[tuple[str, list[Any]]]] = {}
    real_savefig = plt.Figure.savefig

    def savefig(fig: Any, path: Any, **kwargs: Any) -> None:
        for ax in fig.axes:
            if ax.get_visible():
                drawn[ax.get_title()] = [(ln.get_label(), list(ln.get_ydata())) for ln in ax.get_lines()]
        real_savefig(fig, path, **kwargs)

    monkeypatch.setattr(plt.Figure, "savefig", savefig)
    m.plot_matrix(_rows(), VERSIONS, tmp_path / "m.png")
    cas = next(v for k, v in drawn.items() if k.startswith("cas_atomics"))
    native = next(v for k, v in drawn.items() if k.startswith("float_atomics"))
    assert cas == [("gpu-a100 grad_take", [0, 4])]
    assert native == [("gpu-a100 grad_take", [4, 0])]
    assert sorted(label for label, _ in drawn["vector_width"]) == ["cpu grad_take", "gpu-a100 grad_take",
                                                                   "gpu-a100 take"]  # fmt: skip
    drawn.clear()
    hlo_only = [m.MatrixRow(r.version, r.target, r.program, {k: r.metrics[k] for k in m.MATRIX_METRICS})
                for r in _rows()]  # fmt: skip
    m.plot_matrix(hlo_only, VERSIONS, tmp_path / "h.png")
    assert set(drawn) == set(m.MATRIX_METRICS)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--versions", ","], "--versions: empty selection; name jax releases"),
        (["--versions", "0.10.2", "--targets", "nosuch"], "--targets: unknown target 'nosuch'; known: all,"),
        (["--versions", "0.10.2", "--targets", "cpu,gpu-h10"], "--targets: unknown target 'gpu-h10' (did"),
        (["--versions", "0.10.2", "--targets", "tpu-v4"], "--targets tpu-v4: matrix does not run tpu-v4"),
        # Found by collecting the selection in a child pytest: end to end (tests/conftest.py: -m e2e).
        pytest.param(["--versions", "0.10.2", "--programs", "nosuch"], "--programs: unknown program 'nosuch'",
                     marks=pytest.mark.e2e),
        (["--versions", "0.10.2", "--out", "/dev/null"], "--out /dev/null: a character device, not a folder"),
        (["--versions", "0.10.2", "--keep", "/sys/runs"], "--keep /sys/runs: cannot write in /sys, where it"),
    ],
)  # fmt: skip
def test_matrix_refuses_what_it_cannot_do_before_any_install(monkeypatch, tmp_path, argv, said) -> None:
    """Each was found after the releases' installs and runs, or never: `--versions ,` ran nothing, an
    unknown --targets word was ignored, and an --out that is no folder crashed at the end, the runs lost."""

    def unreachable(url):
        raise AssertionError("the index was asked before the command line was checked")

    monkeypatch.setattr(m, "check_index", unreachable)
    monkeypatch.chdir(tmp_path)  # the default --out, artifacts/matrix, would be made here
    with pytest.raises(InvariantsError) as err:
        m.main_matrix(argv)
    assert str(err.value).startswith(said) and "\n" not in str(err.value), str(err.value)
    assert not (tmp_path / "artifacts").exists()  # bad input leaves no folder behind


def test_a_gather_moved_to_the_sparsecore_between_releases_is_one_line(tmp_path: Path) -> None:
    """Real v6e dumps of the MoE decode step (tests/data/hlo/sparsecore/): libtpu 0.0.42.1 and 0.0.43.2
    keep its gathers on the TensorCore; the gather-offload flags stand in for a release that moves them."""
    from invariants.measure.measurement import measure_text

    data = Path(__file__).parents[2] / "data" / "hlo" / "sparsecore"
    dumps = {"0.10.0": "v6e_moe_decode", "0.10.1": "libtpu-0.0.43.2/v6e_moe_decode",
             "0.10.2": "libtpu-0.0.43.2/v6e_moe_decode_offload_flags"}  # fmt: skip
    rows = []
    for version, dump in dumps.items():
        numbers = measure_text((data / f"{dump}.txt").read_text(), dump, target="tpu-v6e").numbers()
        item = {"kind": "structure", "target": "tpu-v6e", "program": "moe", **numbers}
        rows += m.matrix_rows(version, _results([item]))
    lines = m.render_matrix(rows, VERSIONS, {}).splitlines()
    assert [ln for ln in lines if "sparsecore" in ln] == [
        "- moe[f32] on tpu-v6e, jax 0.10.1 → 0.10.2: 8 gathers moved to sparsecore"
    ]
