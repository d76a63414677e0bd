"""A gate item stopped by a JAX release's missing API (``ReleaseLacks``, the tool's limit on that release)
skips with its one line: no verdict on the program. Any other ``InvariantsError`` still fails the item."""

from __future__ import annotations

import types

import pytest

from invariants._errors import InvariantsError
from invariants._supported import ReleaseLacks
from invariants.plugin.hooks import pytest_runtest_call


def _stopped_by(err: Exception, gate: bool = True) -> BaseException:
    item = types.SimpleNamespace(get_closest_marker=lambda name: object() if gate else None)
    call = pytest_runtest_call(item)  # type: ignore[arg-type]
    next(call)
    with pytest.raises(BaseException) as raised:
        call.throw(err)
    return raised.value


def test_a_missing_api_skips_the_gate_item_with_its_line() -> None:
    lacks = ReleaseLacks("jax.sharding.use_abstract_mesh", "to trace a program on a mesh without devices")
    stopped = _stopped_by(lacks)
    assert isinstance(stopped, pytest.skip.Exception)
    assert str(stopped.msg).endswith(": a limit of the tool on this release, not of the program")
    assert "jax.sharding.use_abstract_mesh" in str(stopped.msg)


def test_elsewhere_it_is_raised_and_other_errors_are_no_skip() -> None:
    lacks = ReleaseLacks("jax.sharding.AxisType", "to build a mesh with axis types")
    assert _stopped_by(lacks, gate=False) is lacks
    assert not isinstance(_stopped_by(InvariantsError("a finding"), gate=False), pytest.skip.Exception)
