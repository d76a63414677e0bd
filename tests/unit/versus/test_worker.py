"""versus's worker reads an assert through the same typed tree as the checks: what it says is missing is
what the verdict fails with; a worker under a jax the suite does not serve says so in its hello's place."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from invariants.hlo.cost import Missing
from invariants.measure.measurement import Measurement, measure_text
from invariants.records.compiled import Key
from invariants.specfile.reader import load_spec
from invariants.verdict.checks import Case, evaluate
from invariants.versus.worker import missing_metric

DATA = Path(__file__).parents[2] / "data" / "hlo"
MEASURED = measure_text((DATA / "cpu_bwd_index.txt").read_text(), "cpu_bwd_index.txt")


def _with(**metrics: object) -> Measurement:
    """MEASURED with some metrics replaced (a key whose kernel code says otherwise)."""
    return dataclasses.replace(MEASURED, metrics={**MEASURED.metrics, **metrics})


def _case(tmp_path: Path, text: str, program: str | None) -> Case:
    path = tmp_path / "s.toml"
    programs = 'programs = ["grad_naive"]\n' if program else ""
    path.write_text(f'[spec]\ntargets = ["cpu"]\n\n[[invariant]]\nid = "i"\n{programs}assert = "{text}"\n')
    (invariant,) = load_spec(path).invariants
    return Case(invariant, "cpu", "f32", program)


@pytest.mark.parametrize(
    ("text", "program", "missing_on"),
    [
        ("cas_loops == 0", "grad_naive", "grad_naive"),
        ("cas_loops(grad_naive) <= cas_loops(grad_take)", None, "grad_take"),
        ("kernels + cas_loops <= 4", "grad_naive", "grad_naive"),
    ],
)
def test_what_versus_finds_missing_is_what_the_verdict_fails_with(tmp_path, text, program, missing_on):
    case = _case(tmp_path, text, program)

    def measured(key: Key) -> Measurement:
        return _with(cas_loops=Missing("no kernel code on this target") if key.program == missing_on else 0)

    said = missing_metric(case, measured)
    decision = evaluate(case, measured)
    assert said == f"cas_loops of {missing_on} on cpu: no kernel code on this target"
    assert not decision.holds and decision.detail == said


def test_nothing_is_missing_when_every_read_has_a_value(tmp_path):
    case = _case(tmp_path, "cas_loops(grad_naive) <= cas_loops(grad_take)", None)
    assert missing_metric(case, lambda key: _with(cas_loops=1)) is None
    assert evaluate(case, lambda key: _with(cas_loops=1)).holds


def _sides(tmp_path: Path, text: str, base: dict[str, int], cand: dict[str, int]) -> list[dict[str, object]]:
    """The paired verdict of a relation across two installations, each side's entry as its worker gives it
    (``_verdict``), with cas_loops of each program as given."""
    from invariants.versus.report import invariant_changes
    from invariants.versus.worker import _verdict

    case = _case(tmp_path, text, None)
    entries = [_verdict(case, lambda key, loops=loops: _with(cas_loops=loops[key.program]), None)  # type: ignore[misc]
               for loops in (base, cand)]  # fmt: skip
    return invariant_changes([entries[0]], [entries[1]])


@pytest.mark.parametrize("op", ["<=", ">="])
def test_a_relation_that_holds_only_because_a_side_got_worse_is_a_regression(tmp_path, op):
    """``cas_loops(grad_naive) <= cas_loops(grad_take)`` from 10 > 0 to 10 <= 10 holds because grad_take
    gained 10 CAS loops: that side regressed (never "improved"). Written the other way round (``>=``: more
    is better), the same numbers are a genuine improvement of grad_take."""
    text = f"cas_loops(grad_naive) {op} cas_loops(grad_take)"
    before, after = ({"grad_naive": 10, "grad_take": 0}, {"grad_naive": 10, "grad_take": 10})
    if op == ">=":
        before, after = ({"grad_naive": 0, "grad_take": 10}, {"grad_naive": 0, "grad_take": 0})
    (paired,) = _sides(tmp_path, text, before, after)
    assert (paired["baseline"], paired["candidate"]) == (False, True)
    assert paired["change"] == "regressed"
    assert paired["worse"] == [f"cas_loops(grad_take) {before['grad_take']} → {after['grad_take']}"]


def test_a_relation_that_holds_because_its_side_got_better_improved(tmp_path):
    (paired,) = _sides(tmp_path, "cas_loops(grad_naive) <= cas_loops(grad_take)",
                       {"grad_naive": 10, "grad_take": 0}, {"grad_naive": 0, "grad_take": 0})  # fmt: skip
    assert paired["change"] == "improved" and paired["worse"] == []
    # A relation whose sides are not sums or products of reads says nothing of a read alone: as before.
    (paired,) = _sides(tmp_path, "cas_loops(grad_naive) - cas_loops(grad_take) <= 0",
                       {"grad_naive": 10, "grad_take": 0}, {"grad_naive": 10, "grad_take": 10})  # fmt: skip
    assert paired["change"] == "improved" and paired["worse"] == []


def test_a_worker_under_a_jax_older_than_the_suite_supports_refuses_in_its_hello(tmp_path):
    info = tmp_path / "jax-0.4.29.dist-info"  # first on the path: the installed jax reads as 0.4.29
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jax\nVersion: 0.4.29\n")
    root = Path(__file__).parents[3]
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{root}", "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([sys.executable, "-m", "invariants.versus.worker"], input="", capture_output=True,
                          text=True, timeout=120, env=env, check=False)  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    reply = json.loads(proc.stdout)
    said = "worker: jax 0.4.29 is older than this suite supports: it needs jax >= 0.4.30"
    assert (reply["ok"], reply["error"]) == (False, said)
