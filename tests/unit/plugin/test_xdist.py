"""Which items share an xdist worker (invariants.plugin.xdist), read from node ids the plugin really
builds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from invariants.catalog.targets import all_targets
from invariants.plugin.items import CORRECTNESS
from invariants.plugin.xdist import worker_group

ROOT = Path(__file__).parents[3]

# Collects the gate and writes, for each item, its node id and the target its parameter belongs to.
_RECORDER = """
import json, os

def pytest_collection_modifyitems(items):
    out = {}
    for item in items:
        params = getattr(item, "callspec", None) and item.callspec.params or {}
        key = params.get("structure_key") or params.get("efficiency_key")
        case = params.get("invariant_case") or params.get("throughput_case")
        out[item.nodeid] = key.target if key is not None else getattr(case, "target", None)
    with open(os.environ["RECORD"], "w") as f:
        json.dump(out, f)
"""


def test_every_collected_gate_item_goes_to_the_unit_of_its_target(tmp_path: Path):
    (tmp_path / "recorder.py").write_text(_RECORDER)
    record = tmp_path / "items.json"
    env = {"PYTHONPATH": str(tmp_path), "RECORD": str(record)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "recorder", "-p", "no:cacheprovider", "--collect-only", "-q",
         "invariants/gate"],
        cwd=ROOT, capture_output=True, text=True, check=False, env={**os.environ, **env},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    items: dict[str, str | None] = json.loads(record.read_text())
    names = list(all_targets())
    by_target = {n: t for n, t in items.items() if t is not None}
    # Every target, the sharded ones whose names extend another's included (tpu-v5e-2x4 is not tpu-v5e).
    assert set(by_target.values()) == set(names)
    assert all(worker_group(n, names) == t for n, t in by_target.items())
    timed = [n for n in by_target if "::test_ratio[" in n or "::test_efficiency[" in n]
    assert timed and {worker_group(n, names) for n in timed} == {"cpu"}  # with the runtime's executables
    checks = [n for n in items if "::test_correctness[" in n]
    assert checks and all(worker_group(n, names) == CORRECTNESS for n in checks)
    others = [n for n in items if n not in by_target and n not in checks]
    assert all(worker_group(n, names) == n for n in others)  # placeholders such as [none]: any worker


def test_an_xdist_group_suffix_keeps_its_group():
    names = ["cpu", "tpu-v5e", "tpu-v5e-2x4"]
    assert worker_group("tests/t.py::test_a[x]@shared", names) == "shared"
    assert worker_group("tests/t.py::test_a[a@b]", names) == "tests/t.py::test_a[a@b]"  # an @ inside the id
    assert worker_group("g/test_structure.py::test_structure[tpu-v5e-2x4-take-f32]", names) == "tpu-v5e-2x4"
    assert worker_group("g/test_structure.py::test_structure[tpu-v5e-take-f32]", names) == "tpu-v5e"
    assert (
        worker_group("g/test_structure.py::test_structure[none]", names)
        == "g/test_structure.py::test_structure[none]"
    )


def test_another_dist_is_left_to_xdist():
    """`--dist worksteal` (or each, loadscope, loadfile) keeps xdist's scheduler; load and loadgroup get the
    gate's (tests/integration/test_gate_session.py runs that one under `-n 2`)."""
    from types import SimpleNamespace

    from invariants.plugin.hooks import pytest_xdist_make_scheduler

    for dist in ("worksteal", "each", "loadscope", "loadfile"):
        config = SimpleNamespace(getoption=lambda name, d=dist: d)
        assert pytest_xdist_make_scheduler(config, None) is None  # type: ignore[arg-type]
