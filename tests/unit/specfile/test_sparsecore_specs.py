"""Invariants on what runs where, decided on real ahead-of-time dumps (tests/data/hlo/sparsecore/).

The MoE decode step gathers each chosen expert's weights; libtpu's gather-offload flags move those gathers
to the SparseCore. "The gathers stay on the TensorCore" passes without the flags and fails with them, on
both chips that have SparseCores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from invariants.measure.measurement import Measurement, measure_text
from invariants.specfile.reader import Invariant, load_spec
from invariants.verdict.checks import Case, evaluate

DATA = Path(__file__).parents[2] / "data" / "hlo" / "sparsecore"


def measured(name: str, target: str) -> Measurement:
    return measure_text((DATA / f"{name}.txt").read_text(), name, target=target)


def invariant(tmp_path: Path, assertion: str) -> Invariant:
    path = tmp_path / "s.toml"
    path.write_text(f'[spec]\ntargets = ["tpu-*"]\n\n[[invariant]]\nid = "i"\nprograms = ["naive"]\n'
                    f"assert = '{assertion}'\n")  # fmt: skip
    (inv,) = load_spec(path).invariants
    return inv


def decide(inv: Invariant, name: str, target: str):
    return evaluate(Case(inv, target, "f32", "naive"), lambda key: measured(name, target))


# Every gather of the step moves: all 8 of the v6e compile, all 16 of the v5p (megacore) one.
@pytest.mark.parametrize(("chip", "moved"), [("v5p", 16), ("v6e", 8)])
def test_gathers_stay_on_the_tensorcore_fails_under_the_offload_flags(
    tmp_path: Path, chip: str, moved: int
) -> None:
    inv = invariant(tmp_path, "sparsecore_gathers == 0")
    assert decide(inv, f"{chip}_moe_decode", f"tpu-{chip}").holds
    verdict = decide(inv, f"{chip}_moe_decode_offload_flags", f"tpu-{chip}")
    assert not verdict.holds and verdict.measured == {"sparsecore_gathers": moved}


def test_a_scoped_count_reads_the_offloaded_dtype(tmp_path: Path) -> None:
    inv = invariant(tmp_path, 'sparsecore_gathers(dtype="bf16") == 0')
    assert not decide(inv, "v6e_moe_decode_offload_flags", "tpu-v6e").holds
    assert decide(invariant(tmp_path, 'sparsecore_gathers(dtype="f32") == 0'),
                  "v6e_moe_decode_offload_flags", "tpu-v6e").holds  # fmt: skip


def test_the_lookup_runs_on_sparsecore(tmp_path: Path) -> None:
    inv = invariant(tmp_path, "sparsecore_scatters == scatters")
    assert decide(inv, "v6e_scatter_min", "tpu-v6e").holds
    # The same module read as a v5e compile: no SparseCore there, and the verdict says so in one line.
    verdict = decide(inv, "v6e_scatter_min", "tpu-v5e")
    assert not verdict.holds
    assert "tpu-v5e has no SparseCore" in verdict.describe(inv) and "\n" not in verdict.describe(inv)


def test_a_scoped_sparsecore_count_on_a_chip_without_one_says_so(tmp_path: Path) -> None:
    inv = invariant(tmp_path, 'sparsecore_gathers(dtype="f32") == 0')
    verdict = decide(inv, "v6e_gather", "tpu-v5e")
    assert not verdict.holds and "tpu-v5e has no SparseCore" in verdict.describe(inv)


def _tpu_invariant(invariant_id: str) -> Invariant:
    from invariants._paths import PACKAGE_DIR

    spec = load_spec(PACKAGE_DIR / "tpu.toml")
    return next(inv for inv in spec.invariants if inv.id == invariant_id)


@pytest.mark.parametrize("chip", ["v5p", "v6e"])
def test_tpu_toml_guards_where_the_offload_size_gather_runs(chip: str) -> None:
    """The gate's own invariants, on dumps of the f32-offload take (the same table and indices)."""
    default = _tpu_invariant("offload_gather_on_tensorcore_by_default")
    flagged = _tpu_invariant("offload_flags_move_the_gather")

    def holds(inv: Invariant, name: str, target: str) -> bool:
        case = Case(inv, target, "f32-offload", "take")
        return evaluate(case, lambda key: measured(name, target)).holds

    assert holds(default, f"{chip}_gather", f"tpu-{chip}")
    assert not holds(default, f"{chip}_gather_offload_flags", f"tpu-{chip}")
    assert holds(flagged, f"{chip}_gather_offload_flags", f"tpu-{chip}-gather-offload")
    assert not holds(flagged, f"{chip}_gather", f"tpu-{chip}-gather-offload")


def test_the_gate_says_a_chip_without_a_sparsecore_has_none(gate_pytester) -> None:
    """A project's invariant on a SparseCore count, aimed at tpu-v5e: its item fails in one line that says
    v5e has no SparseCore, not with a count of 0 that would pass."""
    folder = gate_pytester.path
    (folder / "sclib.py").write_text(
        "import jax.numpy as jnp\n\ndef lookup(t, i):\n    return jnp.take(t, i, axis=0)\n"
    )
    (folder / "specs").mkdir()
    (folder / "specs" / "lib.toml").write_text(
        '[spec]\ntargets = ["tpu-v5e"]\n\n[[program]]\nname = "p"\nfunction = "sclib:lookup"\n'
        'kind = "forward"\n\n[[invariant]]\nid = "on_tensorcore"\nprograms = ["p"]\n'
        'assert = "sparsecore_gathers == 0"\n'
    )
    proc = gate_pytester.command("gate", "--spec-dir", "specs", "--snapshot-dir", "snapshots", "--no-catalog",
                                 "-k", "test_invariant", "-p", "no:cacheprovider", "-q")  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    (line,) = [ln for ln in out.splitlines() if ln.startswith("FAILED") and "on_tensorcore" in ln]
    assert "tpu-v5e has no SparseCore" in line, out[-3000:]


@pytest.mark.parametrize("chip", ["v5p", "v6e"])
def test_tpu_toml_records_where_the_scatter_and_the_moe_gathers_run(chip: str) -> None:
    """The gate's own invariants on the catalog's scatter_min, grad_embedding_bag and moe_decode_step,
    decided on dumps of the same programs at the same sizes, with libtpu's default flags and with the
    gather-offload flags."""

    def holds(invariant_id: str, program: str, name: str, target: str) -> bool:
        case = Case(_tpu_invariant(invariant_id), target, "f32-offload", program)
        return evaluate(case, lambda key: measured(name, target)).holds

    flagged = f"tpu-{chip}-gather-offload"
    scatter = "offload_scatter_min_on_sparsecore"
    assert holds(scatter, "scatter_min", f"{chip}_scatter_min", f"tpu-{chip}")
    assert holds(scatter, "scatter_min", f"{chip}_scatter_min_offload_flags", flagged)
    # A compile with no scatter on the SparseCore (the large gather's) reads as one whose scatter stayed.
    assert not holds(scatter, "scatter_min", f"{chip}_gather", f"tpu-{chip}")
    bag = "offload_bag_gradient_on_tensorcore"
    assert holds(bag, "grad_embedding_bag", f"{chip}_bag_grad", f"tpu-{chip}")
    assert holds(bag, "grad_embedding_bag", f"{chip}_bag_grad_offload_flags", flagged)
    assert not holds(bag, "grad_embedding_bag", f"{chip}_scatter_min", f"tpu-{chip}")
    default, moved = f"{chip}_moe_decode", f"{chip}_moe_decode_offload_flags"
    assert holds("offload_moe_decode_gathers_on_tensorcore", "moe_decode_step", default, f"tpu-{chip}")
    assert not holds("offload_moe_decode_gathers_on_tensorcore", "moe_decode_step", moved, f"tpu-{chip}")
    assert holds("offload_flags_move_the_moe_decode_gathers", "moe_decode_step", moved, flagged)
    assert not holds("offload_flags_move_the_moe_decode_gathers", "moe_decode_step", default, flagged)
