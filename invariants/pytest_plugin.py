"""The pytest API for a project's own tests: the ``compile_for`` and ``compiled_snapshot`` fixtures.

Installing the package registers this module through its ``pytest11`` entry point (``invariants``), so a
test file needs no conftest::

    def test_take_has_no_loop(compile_for, compiled_snapshot):
        s = compile_for(embed, params, indices, target="tpu-v5e")
        assert s.while_loops == 0
        assert s.metric("temp_bytes") <= 4 * 2**20
        assert compiled_snapshot == s

Inert in a session that uses neither: importing this module imports neither JAX nor syrupy, and it
defines no hooks. ``-p no:invariants`` turns it off.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .testing import CompiledStructure


def _where(frame: FrameType, rootpath: Path) -> str:
    path = Path(frame.f_code.co_filename)
    try:
        shown = path.resolve().relative_to(rootpath.resolve())
    except ValueError:
        shown = path
    return f"{shown}:{frame.f_lineno}"


@pytest.fixture
def compile_for(request: pytest.FixtureRequest) -> Callable[..., CompiledStructure]:
    """``compile_for(fn, *args, target="runtime", name=None, mesh=None, in_shardings=None,
    donate_argnums=())``: ``fn`` compiled for ``target`` and measured (:func:`invariants.testing.compile_for`,
    which says what each takes); an unavailable target skips, bad input fails in one line."""
    rootpath = Path(request.config.rootpath)

    def compile_(fn: Callable[..., Any], *args: Any, **options: Any) -> Any:
        __tracebackhide__ = True  # so that a skip names the test's line, not this one
        from ._errors import InvariantsError
        from .testing import TargetUnavailable
        from .testing import compile_for as measure

        skip = fail = ""
        try:
            return measure(fn, *args, **options)
        except TargetUnavailable as err:
            skip = str(err)
        except InvariantsError as err:
            fail = f"{_where(sys._getframe(1), rootpath)}: {err}"
        # Outside the except blocks, where pytest would print the error replaced above the one line.
        if skip:
            pytest.skip(skip)
        pytest.fail(fail, pytrace=False)

    return compile_


@pytest.fixture
def compiled_snapshot(request: pytest.FixtureRequest) -> Any:
    """syrupy's ``snapshot`` for ``compile_for`` results: ``assert compiled_snapshot == s`` stores ``s``'s
    snapshot text under ``snapshots/<target>/`` beside the test file (:mod:`invariants.snapshot.user`)."""
    try:
        snapshot = request.getfixturevalue("snapshot")
    except pytest.FixtureLookupError:
        where = os.path.relpath(request.node.path, request.config.rootpath)
        pytest.fail(
            f"{where}: compiled_snapshot needs syrupy's snapshot fixture: pip install syrupy "
            "(or 'jax-embedding-invariants[test]')",
            pytrace=False,
        )
    from .snapshot.user import compiled_assertion

    return compiled_assertion(snapshot)
