"""The snapshot tier: each program's compiled structure on each target, against snapshots/<target>/."""

from __future__ import annotations

import pytest

from invariants import _results
from invariants._cost import value_or_none
from invariants._metrics import structure_metrics
from invariants._programs import CATALOG
from invariants._snapshot import render_summary
from invariants._snapshot_store import SNAPSHOT_ROOT, snapshot_stem

pytestmark = [pytest.mark.gate, pytest.mark.snapshot]


def test_structure(structure_key, gate, structure_snapshot, request, record_property):
    program, config, target = structure_key
    compiled = gate.cache.get(*structure_key)
    structure = gate.structure(structure_key)
    # The compiler metrics go to the results file, never into the snapshot text: they move with every
    # compiler patch release. A value the target does not provide is null there.
    predicted = {name: value_or_none(v) for name, v in gate.costs(structure_key).items()}
    record_property(
        *_results.record(
            "structure",
            program=program,
            config=config,
            target=target,
            **structure_metrics(structure),
            **predicted,
        )
    )
    summary = render_summary(compiled, structure, CATALOG[program].doc)
    path = gate.rootpath / SNAPSHOT_ROOT / target / f"{snapshot_stem(program, config)}.txt"
    if not path.exists() and not request.config.getoption("--snapshot-update"):
        # The command records the program on every target present (a new program needs them all), and
        # its gradient with it when there is one.
        programs = ",".join(p for p in (program, f"grad_{program}") if p in CATALOG)
        pytest.fail(
            f"{path}: no snapshot for {program}[{config}] on {target}; record it with: "
            f"pytest tests/gate/test_structure.py --programs {programs} --snapshot-update",
            pytrace=False,
        )
    assert summary == structure_snapshot
