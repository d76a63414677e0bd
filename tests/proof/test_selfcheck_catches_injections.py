"""The gate proves it can fail: inject regressions, each in its own child run, and check each is caught.

Slow (it starts one pytest child per injection): an ``e2e`` test, which the README's test command leaves
out and ``pytest -m e2e`` runs (tests/conftest.py). By default it runs
the registry's fast subset on the CPU target (the baseline plus two XLA-flag injections, one of which
changes the kernel code only, and two program injections); ``INVARIANTS_SELFCHECK=all`` runs
every injection on every target (what ``python -m invariants selfcheck`` does). Inside a self-check child
it skips itself, so children never start children.
"""

from __future__ import annotations

import os

import pytest

from invariants import _config
from invariants.compile.child import CHILD_ENV
from invariants.selfcheck import command as sc
from invariants.selfcheck import registry

# A child gate run per injection: end to end (tests/conftest.py: -m e2e).
pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def _injections() -> list[registry.Injection]:
    if _config.get("INVARIANTS_SELFCHECK") == "all":
        return sc.select(None)
    return sc.restrict_targets(sc.select(None, fast_only=True), "cpu")


@pytest.mark.skipif(bool(os.environ.get(CHILD_ENV)), reason="inside a self-check child")
def test_selfcheck(tmp_path, record_property):
    outcomes = sc.run_all(_injections(), tmp_path, jobs=min(2, os.cpu_count() or 1))
    table = sc.render_table(outcomes)
    record_property("selfcheck", {"table": table})
    missed = [o.injection.name for o in outcomes if not o.caught]
    assert not missed, f"not caught (or a failing baseline): {', '.join(missed)}\n{table}"
