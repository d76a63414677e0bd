"""Fixtures the unit tests of several subpackages share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from invariants.catalog import registry


@pytest.fixture
def declared_programs_stay_in_the_test() -> Iterator[None]:
    """Programs a test declares leave the registry with it: the next test may declare its own 'p'."""
    before = dict(registry._DECLARED)
    yield
    registry._DECLARED.clear()
    registry._DECLARED.update(before)
