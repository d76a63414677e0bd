"""Fixtures the unit tests of several subpackages share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def declared_programs_stay_in_the_test() -> Iterator[None]:
    """Programs a test declares leave the registry with it: the next test may declare its own 'p'.

    The registry (and with it JAX) is imported here, not when this file loads: under xdist the controller
    loads it too, and JAX started there prints the CUDA plugin's notices after the run's summary."""
    from invariants.catalog import registry

    before = dict(registry._DECLARED)
    yield
    registry._DECLARED.clear()
    registry._DECLARED.update(before)
