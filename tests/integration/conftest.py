"""Child pytest runs of the gate, shared between the tests that read them.

Each child run costs seconds (JAX starts, programs compile), so a run is made once per session and every
test that needs its output asserts on it: ``plain_run`` is what ``pytest invariants/gate`` does (no -k,
every tier) on two targets and four programs, in the seed's configuration; ``update_run`` is ``pytest
--snapshot-update`` on the same selection; ``parallel_run`` is the structure and invariant tiers under
``-n 2``. The three start together, each in its own copy of the project: the checkout itself is never
written.

Under xdist (the README's ``pytest -n auto``) the tests that read them may land on any worker: the first
worker to need them makes them, the others read what it made (``gatekit.made_once``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gatekit import Run, made_once, start_shared


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
    return made_once(tmp_path_factory, "shared_child_runs", _make)


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
