"""What every tier of the project's own tests shares: the Hypothesis profiles and the ``e2e`` tier.

Hypothesis: ``fast`` (the default) keeps the property tests to a few dozen examples each; ``full`` runs
the counts they were written with (``HYPOTHESIS_PROFILE=full``, as ``.ci/run`` does). A test that wants
fewer examples than the others says so as a share of the profile's (``settings.default.max_examples``, read
when its module is imported, after this file loaded the profile), so that a profile always decides.

``e2e``: the line between the tiers. The README's test command is the in-process tier: a test there calls
the code, or runs the gate and ``python -m invariants`` in its own process (``gate_pytester``,
``gatekit.command``). A test that starts the gate or the tool as a user does, in a process of its own, is
``e2e``: a child pytest or gate run (xdist's workers included), a fresh interpreter that imports JAX (a
compile child, ``python -m invariants``, a script), signals to real processes, and beyond them fresh
virtual environments, a wheel, the guide as written, the GitHub action's step, the device-check rehearsal,
real versus workers and the self-check proof. A test says so itself (``pytestmark`` for a module,
``@pytest.mark.e2e`` for a test, ``pytest.param(..., marks=...)`` for a case); a run shared by several tests
is made by the first that asks (``gatekit.made_once``), so a child run the in-process tier never asks for
is never made there. The tier takes minutes, so the README's test command leaves it out; ``pytest -m e2e``
(any ``-m`` expression that names ``e2e``) selects it, and ``.ci/run`` runs it after that command.

pytest-benchmark: the project's own tests time nothing with it (the gate's throughput tier has its own
timer), so it is off here, and under xdist it does not warn that it is.

The compile cache: every gate run of the session, in this process (``gate_pytester``) or in a child, reads
and writes one folder of the session's own (``INVARIANTS_CACHE_DIR``, made empty when the session starts,
removed when it ends; xdist's workers and every child inherit it), so a second run never compiles what a
first one compiled. Not the user's folder: what the tests compile (injections, XLA flags, scratch programs)
stays out of it, no test depends on what an earlier session left there, and each gate session's look at
the folder (its header counts the entries, its end checks the size bound) stays small: the suite's
programs compile in seconds, while a user's folder of thousands of entries cost each of the suite's gate
sessions a scan. The tests of the cache itself give their runs folders of their own.

``gate_pytester``: the gate's plugin and ``python -m invariants`` run in the test's own process, through
pytest's ``pytester`` (``gatekit.InProcess``).

The garbage collector: each test runs with what the process held before it frozen (``gc.freeze``), so that
a full collection inside it (the end of every gate run in this process, pytest's unraisable-exception check)
scans what the test made, not the worker's whole heap (JAX, every collected module, what earlier tests
kept); after the test it is unfrozen, and collected as before.

xdist: the suite's workers take a module at a time (``--dist`` left at ``load``), so that what a module
makes once (a fit of the cost model, a shared gate run) is made once, not once in each worker.
"""

from __future__ import annotations

import functools
import gc
import os
import shutil
import tempfile

import pytest
from gatekit import InProcess, preload

# pytest's own fixture for testing plugins in process (gate_pytester below).
pytest_plugins = ["pytester"]

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
    # Made by the controller (or the one process) before xdist starts its workers: they inherit it.
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tempfile.mkdtemp(prefix="invariants-tests-compiled-")
        os.environ["INVARIANTS_CACHE_DIR"] = folder
        config.add_cleanup(functools.partial(shutil.rmtree, folder, ignore_errors=True))


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    if config.getoption("dist") != "load":  # a distribution asked for by name is kept
        return None
    from xdist.scheduler import LoadFileScheduling

    return LoadFileScheduling(config, log)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    gc.freeze()
    try:
        return (yield)
    finally:
        gc.unfreeze()


@pytest.fixture(scope="session")
def _preloaded() -> None:
    """What a gate run imports that pytester must not forget (``gatekit.PRELOADED``): imported before the
    first ``pytester`` of the process takes its snapshot of the modules."""
    preload()


@pytest.fixture
def gate_pytester(_preloaded: None, pytester: pytest.Pytester) -> InProcess:
    """Gate runs in this process, in ``pytester``'s folder: ``.pytest(ARGS)``, ``.command(ARGV)``."""
    return InProcess(pytester)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave the e2e tests out unless the ``-m`` expression names them (``-m e2e``, ``-m "e2e or slow"``)."""
    if E2E in (config.getoption("markexpr", "") or ""):
        return
    kept = [i for i in items if i.get_closest_marker(E2E) is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i.get_closest_marker(E2E) is not None])
        items[:] = kept
