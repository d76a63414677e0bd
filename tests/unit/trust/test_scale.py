"""Cost linear in the module's size: ``hlo-stats --target`` on a synthetic module of ten times the kernels
takes about ten times as long (a pass over the program per async copy made it a hundred)."""

from __future__ import annotations

import time

import pytest

from invariants.measure.measurement import measure_text

TILED = "f32[8,128]{1,0:T(8,128)}"
ON_CHIP = "f32[8,128]{1,0:T(8,128)S(1)}"


def _module(kernels: int) -> str:
    """``kernels`` fusions in a chain, each beside an async copy started before it and waited for after."""
    lines = [
        "HloModule scale, is_scheduled=true",
        "",
        "%fused (p: f32[8,128]) -> f32[8,128] {",
        f"  %p = {TILED} parameter(0)",
        f"  ROOT %n = {TILED} negate(%p)",
        "}",
        "",
        "ENTRY %main (x: f32[8,128]) -> f32[8,128] {",
        f"  %f.0 = {TILED} parameter(0)",
    ]
    for k in range(kernels):
        lines += [
            f"  %cs.{k} = ({TILED}, {ON_CHIP}, u32[]{{:S(2)}}) copy-start(%f.{k})",
            f"  %f.{k + 1} = {TILED} fusion(%f.{k}), kind=kLoop, calls=%fused",
            f"  %cd.{k} = {ON_CHIP} copy-done(%cs.{k})",
        ]
    return "\n".join([*lines, f"  ROOT %r = {TILED} negate(%f.{kernels})", "}", ""])


def _seconds(text: str) -> float:
    """The least CPU time of two predictions (a shared machine's other work aside)."""
    times = []
    for _ in range(2):
        start = time.process_time()
        measured = measure_text(text, "scale.txt", target="tpu-v5e")
        times.append(time.process_time() - start)
    assert isinstance(measured.metrics["predicted_seconds"], float)
    return min(times)


@pytest.mark.slow
def test_predicting_ten_times_the_kernels_takes_about_ten_times_as_long():
    small, large = _seconds(_module(1_000)), _seconds(_module(10_000))
    assert large < 30 * small, f"1,000 kernels: {small:.2f} s; 10,000: {large:.2f} s ({large / small:.0f}x)"
