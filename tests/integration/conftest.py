"""Child pytest runs of the gate, shared between the tests that read them.

Each child run costs seconds (JAX starts, programs compile), so a run is made once per session and every
test that needs its output asserts on it: ``plain_run`` is what ``pytest invariants/gate`` does (no -k,
every tier) on two targets and four programs, in the seed's configuration; ``update_run`` is ``pytest
--snapshot-update`` on the same selection; ``parallel_run`` is the structure and invariant tiers under
``-n 2``. The three start together, each in its own copy of the project: the checkout itself is never
written.

Under xdist (the README's ``pytest -n auto``) the tests that read them may land on any worker. The first
worker to need them makes them, under a file lock in the folder every worker's temporary folder sits in;
the others wait for that lock and read what it left (pytest-xdist's recipe for a session fixture made once).
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
from filelock import FileLock
from gatekit import Run, start_shared


def _make(folder: Path) -> dict[str, Run]:
    pending = {
        "plain": start_shared(folder / "plain"),
        "update": start_shared(folder / "update", "--snapshot-update", stale="snapshots/cpu/naive.f32.txt"),
        # -vv against start()'s -q: one line per item, naming its worker ([gw0] ...).
        "parallel": start_shared(
            folder / "parallel",
            "tests/gate/test_structure.py",
            "tests/gate/test_invariants.py",
            "-n",
            "2",
            "-vv",
            plant_files=False,
        ),
    }
    return {name: p.result() for name, p in pending.items()}


@pytest.fixture(scope="session")
def _shared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    base = tmp_path_factory.getbasetemp()
    # An xdist worker's temporary folder sits in the session's; without xdist the session's is its own.
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared_child_runs"
    folder.mkdir(exist_ok=True)
    made = folder / "runs.pickle"
    with FileLock(str(folder / "runs.lock")):
        if not made.exists():
            made.write_bytes(pickle.dumps(_make(folder)))
        runs: dict[str, Run] = pickle.loads(made.read_bytes())
    return runs


@pytest.fixture(scope="session")
def plain_run(_shared: dict[str, Run]) -> Run:
    """``pytest invariants/gate`` (no -k): every tier of the gate, once."""
    return _shared["plain"]


@pytest.fixture(scope="session")
def update_run(_shared: dict[str, Run]) -> Run:
    """``pytest invariants/gate --snapshot-update``, with one snapshot made stale first."""
    return _shared["update"]


@pytest.fixture(scope="session")
def parallel_run(_shared: dict[str, Run]) -> Run:
    """The structure and invariant tiers of the same selection under pytest-xdist (``-n 2``)."""
    pytest.importorskip("xdist")
    return _shared["parallel"]
