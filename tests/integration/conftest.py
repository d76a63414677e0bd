"""Gate runs shared between the tests that read them.

Each run costs seconds (programs compile, the throughput tier times), so a run is made once per session and
every test that needs its output asserts on it: ``plain_run`` is what ``pytest invariants/gate`` does (no
-k, every tier) on two targets and four programs, in the seed's configuration; ``update_run`` is ``pytest
--snapshot-update`` on the same selection; ``parallel_run`` is the structure, invariant and correctness
tiers under ``-n 2``. Each runs in its own copy of the project (the checkout itself is never written), in
the process of the first test that asks (pytester); the parallel run's xdist workers are processes of their
own, so the tests that read it are ``e2e`` ones (tests/conftest.py).

Each run is made when a test first asks for it, and only then: under xdist (the README's ``pytest -n
auto``) the tests that read it may land on any worker, the first worker to need it makes it, the others
read what it made (``gatekit.made_once``); two workers may each make another run at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gatekit import InProcess, Run, made_once, run_shared


def _plain(folder: Path, gate_pytester: InProcess) -> Run:
    return run_shared(gate_pytester, folder / "plain")


def _update(folder: Path, gate_pytester: InProcess) -> Run:
    return run_shared(
        gate_pytester, folder / "update", "--snapshot-update", stale="snapshots/cpu/naive.f32.txt"
    )


def _parallel(folder: Path, gate_pytester: InProcess) -> Run:
    # -vv against -q: one line per item, naming its worker ([gw0] ...).
    tiers = [f"tests/gate/test_{tier}.py" for tier in ("structure", "invariants", "correctness")]
    return run_shared(gate_pytester, folder / "parallel", *tiers, "-n", "2", "-vv", plant_files=False)


@pytest.fixture
def plain_run(tmp_path_factory: pytest.TempPathFactory, gate_pytester: InProcess) -> Run:
    """``pytest invariants/gate`` (no -k): every tier of the gate, once."""
    return made_once(tmp_path_factory, "shared_plain_run", lambda folder: _plain(folder, gate_pytester))


@pytest.fixture
def update_run(tmp_path_factory: pytest.TempPathFactory, gate_pytester: InProcess, plain_run: Run) -> Run:
    """``pytest invariants/gate --snapshot-update``, with one snapshot made stale first; after the plain
    run, whose compiles it reads from the session's compile cache."""
    return made_once(tmp_path_factory, "shared_update_run", lambda folder: _update(folder, gate_pytester))


@pytest.fixture
def parallel_run(tmp_path_factory: pytest.TempPathFactory, gate_pytester: InProcess) -> Run:
    """The structure, invariant and correctness tiers of the same selection under pytest-xdist (``-n 2``)."""
    pytest.importorskip("xdist")
    return made_once(tmp_path_factory, "shared_parallel_run", lambda folder: _parallel(folder, gate_pytester))
