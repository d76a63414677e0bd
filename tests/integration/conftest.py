"""Child pytest runs of the gate, shared between the tests that read them.

Each child run costs seconds (JAX starts, programs compile), so a run is made once per session and every
test that needs its output asserts on it: ``plain_run`` is what ``pytest`` from the root does (no path,
every tier) on two targets and four programs; ``update_run`` is ``pytest --snapshot-update`` on the same
selection; ``parallel_run`` is the structure and invariant tiers under ``-n 2``. The three start together
(the first test that needs one starts all), each in its own copy of the project: the checkout itself is
never written.
"""

from __future__ import annotations

import pytest
from gatekit import Pending, Run, start_shared


@pytest.fixture(scope="session")
def _shared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pending]:
    return {
        "plain": start_shared(tmp_path_factory.mktemp("plain")),
        "update": start_shared(
            tmp_path_factory.mktemp("update"), "--snapshot-update", stale="snapshots/cpu/naive.f32.txt"
        ),
        "parallel": start_shared(
            tmp_path_factory.mktemp("parallel"),
            "tests/gate/test_structure.py",
            "tests/gate/test_invariants.py",
            "-n",
            "2",
            plant_files=False,
        ),
    }


@pytest.fixture(scope="session")
def plain_run(_shared: dict[str, Pending]) -> Run:
    """``pytest`` as from the root (no path, no -k): every tier of the gate, once."""
    return _shared["plain"].result()


@pytest.fixture(scope="session")
def update_run(_shared: dict[str, Pending]) -> Run:
    """``pytest --snapshot-update`` as from the root, with one snapshot made stale first."""
    return _shared["update"].result()


@pytest.fixture(scope="session")
def parallel_run(_shared: dict[str, Pending]) -> Run:
    """The structure and invariant tiers of the same selection under pytest-xdist (``-n 2``)."""
    pytest.importorskip("xdist")
    return _shared["parallel"].result()
