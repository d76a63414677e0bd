"""A gate item stopped by a JAX release's missing API (``ReleaseLacks``, the tool's limit on that release)
skips with its one line: no verdict on the program. Any other ``InvariantsError`` still fails the item."""

from __future__ import annotations

import types

import pytest

from invariants._errors import InvariantsError
from invariants._supported import ReleaseLacks
from invariants.plugin.hooks import pytest_runtest_call
from invariants.plugin.session import Recorder
from invariants.records.compiled import Key
from invariants.records.results import Skipped

RELATION = [Key("take", "f32", "cpu-8dev"), Key("fsdp_take", "f32", "cpu-8dev")]


def _stopped_by(err: Exception, gate: bool = True) -> tuple[BaseException, types.SimpleNamespace]:
    item = types.SimpleNamespace(
        get_closest_marker=lambda name: object() if gate else None, user_properties=[], reads=RELATION
    )
    call = pytest_runtest_call(item)  # type: ignore[arg-type]
    next(call)
    with pytest.raises(BaseException) as raised:
        call.throw(err)
    return raised.value, item


def test_a_missing_api_skips_the_gate_item_with_its_line_and_records_what_it_stopped() -> None:
    lacks = ReleaseLacks("jax.sharding.use_abstract_mesh", "to trace a program on a mesh without devices")
    stopped, item = _stopped_by(lacks.about("cpu-8dev/fsdp_take[f32]"))
    assert isinstance(stopped, pytest.skip.Exception)
    line = str(stopped.msg)
    assert line.startswith("cpu-8dev/fsdp_take[f32]: jax ")
    assert line.endswith(": a limit of the tool on this release, not of the program")
    assert "jax.sharding.use_abstract_mesh" in line
    # The results file's record of that skip, as the recorder makes it from the item's report.
    report = pytest.TestReport(
        "gate::fsdp_take", ("f", 1, "t"), {"gate": 1}, "skipped", ("f", 1, f"Skipped: {line}"), "call",
        user_properties=item.user_properties,
    )  # fmt: skip
    recorder = Recorder()
    recorder.pytest_runtest_logreport(report)
    (record,) = recorder.items
    assert record == Skipped(
        outcome="skipped",
        nodeid="gate::fsdp_take",
        reason=line,
        lacks="jax.sharding.use_abstract_mesh",
        target="cpu-8dev",
        program="fsdp_take",
        config="f32",
    )


def test_elsewhere_it_is_raised_and_other_errors_are_no_skip() -> None:
    lacks = ReleaseLacks("jax.sharding.AxisType", "to build a mesh with axis types")
    assert _stopped_by(lacks, gate=False)[0] is lacks
    assert not isinstance(_stopped_by(InvariantsError("a finding"), gate=False)[0], pytest.skip.Exception)
