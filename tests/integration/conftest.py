"""Child pytest runs of the gate, shared between the tests that read them.

Each child run costs seconds (JAX starts, programs compile), so a run is made once per session and every
test that needs its output asserts on it: ``plain_run`` is what ``pytest`` from the root does (no path,
every tier) on two targets and four programs; ``update_run`` is ``pytest --snapshot-update`` on the same
selection. Both copy the project first, so the checkout itself is never written.
"""

from __future__ import annotations

import pytest
from gatekit import Run, shared_run


@pytest.fixture(scope="session")
def plain_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``pytest`` as from the root (no path, no -k): every tier of the gate, once."""
    return shared_run(tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="session")
def update_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``pytest --snapshot-update`` as from the root, with one snapshot made stale first."""
    return shared_run(
        tmp_path_factory.mktemp("update"), "--snapshot-update", stale="snapshots/cpu/naive.f32.txt"
    )
