"""Which items share an xdist worker (invariants.plugin.hooks), read from node ids the plugin really
builds (a collection of the whole gate, in this process)."""

from __future__ import annotations

import os

import pytest
from gatekit import InProcess

from invariants.compile.child import GATE_DIR
from invariants.plugin.hooks import worker_group
from invariants.plugin.items import CorrectnessItem
from invariants.scope.targets import all_targets


class _Recorder:
    """Collects the gate and keeps, for each item, its node id and the target it compiles for or runs on
    (read from what the item decides, not from its id)."""

    def __init__(self) -> None:
        self.items: dict[str, str | None] = {}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            key, case = getattr(item, "key", None), getattr(item, "case", None)
            target = "cpu" if isinstance(item, CorrectnessItem) else getattr(case, "target", None)
            self.items[item.nodeid] = key.target if key is not None else target


def test_every_collected_gate_item_goes_to_the_unit_of_its_target(gate_pytester: InProcess):
    recorder = _Recorder()
    folder = gate_pytester.path
    proc = gate_pytester.pytest(
        str(GATE_DIR), "-p", "invariants.plugin.hooks", "-c", os.devnull, "--rootdir", str(folder),
        "--collect-only", plugins=(recorder,),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    items = recorder.items
    names = list(all_targets())
    by_target = {n: t for n, t in items.items() if t is not None}
    # Every target, the sharded ones whose names extend another's included (tpu-v5e-2x4 is not tpu-v5e),
    # but those that compile only the SparseCore offload size, which runs only when named (--configs).
    offload_only = {n for n, t in all_targets().items() if set(t.extra_configs) == {"f32-offload"}}
    assert offload_only == {"tpu-v5p-gather-offload", "tpu-v6e-gather-offload"}
    assert set(by_target.values()) == set(names) - offload_only
    assert all(worker_group(n, names) == t for n, t in by_target.items())
    timed = [n for n in by_target if n.split("::")[0].endswith("test_throughput.py")]
    assert timed and {worker_group(n, names) for n in timed} == {"cpu"}  # with the runtime's executables
    checks = [n for n in items if n.split("::")[0].endswith("test_correctness.py")]
    assert checks and {worker_group(n, names) for n in checks} == {"cpu"}  # the references' outputs too
    others = [n for n in items if n not in by_target]
    assert all(worker_group(n, names) == n for n in others)  # placeholders such as ::none: any worker


def test_an_xdist_group_suffix_keeps_its_group():
    names = ["cpu", "tpu-v5e", "tpu-v5e-2x4"]
    assert worker_group("tests/t.py::test_a[x]@shared", names) == "shared"
    assert worker_group("tests/t.py::test_a[a@b]", names) == "tests/t.py::test_a[a@b]"  # an @ inside the id
    assert worker_group("g/test_structure.py::tpu-v5e-2x4::take-f32", names) == "tpu-v5e-2x4"
    assert worker_group("g/test_invariants.py::tpu-v5e::tpu.toml::no_while::take-f32", names) == "tpu-v5e"
    assert worker_group("g/test_structure.py::none", names) == "g/test_structure.py::none"
    assert worker_group("tests/t.py::cpu", names) == "tests/t.py::cpu"  # a test named like a target


def test_another_dist_is_left_to_xdist():
    """`--dist worksteal` (or each, loadscope, loadfile) keeps xdist's scheduler; load and loadgroup get the
    gate's (tests/integration/test_gate_session.py runs that one under `-n 2`)."""
    from types import SimpleNamespace

    from invariants.plugin.hooks import pytest_xdist_make_scheduler

    for dist in ("worksteal", "each", "loadscope", "loadfile"):
        config = SimpleNamespace(getoption=lambda name, d=dist: d)
        assert pytest_xdist_make_scheduler(config, None) is None  # type: ignore[arg-type]
