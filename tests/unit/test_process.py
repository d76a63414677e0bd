"""The process a gate runs in (invariants._process): which core an xdist worker is pinned to.

The backend guard's one line, last after libtpu's noise, is run as users meet it, in a child run:
tests/integration/test_gate_session.py."""

from __future__ import annotations

from invariants._process import worker_core


def test_pinned_xdist_workers_get_a_core_each():
    assert worker_core(None, [0, 1]) is None  # the controller (or no xdist) is never pinned
    assert worker_core({"workerid": "gw0", "workercount": 2}, [4, 7]) == 4
    assert worker_core({"workerid": "gw1", "workercount": 2}, [4, 7]) == 7
    assert worker_core({"workerid": "gw2", "workercount": 3}, [4, 7]) is None  # more workers than cores
