"""The snapshot tier: each program's compiled structure on each target, against snapshots/<target>/."""

from __future__ import annotations

import pytest

from invariants._cost import value_or_none
from invariants._programs import CATALOG
from invariants._snapshot import render_summary
from invariants._snapshot_store import SNAPSHOT_ROOT, snapshot_stem
from invariants._structure import METRICS

pytestmark = [pytest.mark.gate, pytest.mark.snapshot]


def test_structure(structure_key, gate, structure_snapshot, request, record_property):
    program, config, target = structure_key
    compiled = gate.cache.get(*structure_key)
    structure = gate.structure(structure_key)
    metrics = {name: fn(structure) for name, fn in METRICS.items()}
    # The compiler's predictions go to the results file, never into the snapshot text (they move with
    # every compiler patch release).
    metrics.update({name: value_or_none(v) for name, v in gate.costs(structure_key).items()})
    record_property("structure", {"program": program, "config": config, "target": target, **metrics})
    summary = render_summary(compiled, structure, CATALOG[program].doc)
    path = gate.rootpath / SNAPSHOT_ROOT / target / f"{snapshot_stem(program, config)}.txt"
    if not path.exists() and not request.config.getoption("--snapshot-update"):
        pytest.fail(
            f"{path}: no snapshot for {program}[{config}] on {target}; record it with: "
            f"pytest tests/gate/test_structure.py --targets {target} --programs {program} --snapshot-update",
            pytrace=False,
        )
    assert summary == structure_snapshot
