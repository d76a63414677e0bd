"""What every tier of the project's own tests shares: the Hypothesis profiles and the ``e2e`` tier.

Hypothesis: ``fast`` (the default) keeps the property tests to a few dozen examples each; ``full`` runs
the counts they were written with (``HYPOTHESIS_PROFILE=full``, as ``.ci/run`` does). A test that wants
fewer examples than the others says so as a share of the profile's (``settings.default.max_examples``, read
when its module is imported, after this file loaded the profile), so that a profile always decides.

``e2e``: tests that run the project end to end as its users do (fresh virtual environments, a wheel, the
guide as written, the GitHub action's step, the device-check rehearsal, real versus workers, the self-check
proof). They take minutes together, so the README's test command leaves them out; ``pytest -m e2e`` (any
``-m`` expression that names ``e2e``) selects them, and ``.ci/run`` runs them after that command.

pytest-benchmark: the project's own tests time nothing in process (their gate runs are child processes,
with options of their own), so it is off here, and under xdist it does not warn that it is.
"""

from __future__ import annotations

import os

import pytest

try:
    from hypothesis import settings
except ImportError:  # the dev extra is not installed: the property tests fail on their own import
    pass
else:
    # The examples per property test when nothing scales them (test_spec_fuzz's FUZZ runs this many).
    settings.register_profile("full", max_examples=500)
    settings.register_profile("fast", max_examples=40)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))


E2E = "e2e"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "benchmark_disable"):
        config.option.benchmark_disable = True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave the e2e tests out unless the ``-m`` expression names them (``-m e2e``, ``-m "e2e or slow"``)."""
    if E2E in (config.getoption("markexpr", "") or ""):
        return
    kept = [i for i in items if i.get_closest_marker(E2E) is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i.get_closest_marker(E2E) is not None])
        items[:] = kept
