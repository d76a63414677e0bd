"""The JAX releases the suite serves (invariants._supported): an older one is refused in one line that names
the release needed; a pre-release of a served one is served. The refusal as each command meets it is tested
beside the command (the gate: tests/unit/compile/test_process.py; a versus worker:
tests/unit/versus/test_worker.py; versus, bisect and matrix: tests/unit/releases/test_bisect.py)."""

from __future__ import annotations

import pytest
from packaging.version import Version

from invariants._supported import OLDEST_SUPPORTED, too_old


@pytest.mark.parametrize("version", ["0.4.30", "0.4.30.dev20240601", "0.10.2", "0.10.3.dev20261201"])
def test_a_served_release_is_not_refused(version):
    assert too_old(version) is None


@pytest.mark.parametrize("version", ["0.4.29", "0.4.1", "0.3.25", "0.4.29.post1"])
def test_an_older_release_is_refused_naming_the_release_it_needs(version):
    assert too_old(version) == f"jax {version} is older than this suite supports: it needs jax >= 0.4.30"


def test_the_oldest_supported_is_what_the_docs_claim():
    assert Version("0.4.30") == OLDEST_SUPPORTED
    assert too_old("not a version") is None  # the import of such a jax says more than a version check
