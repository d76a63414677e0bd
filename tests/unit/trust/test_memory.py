"""A program whose arguments would need more memory than the machine has is refused before they are
drawn, in one line naming the program, the largest argument's shape and the bytes; never a MemoryError's
traceback (or the machine swapping) in a timed or correctness item."""

from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp
import pytest

from invariants._errors import InvariantsError
from invariants.catalog import arguments
from invariants.catalog.programs import CATALOG
from invariants.scope.configs import SEED


def test_arguments_larger_than_the_free_memory_are_not_drawn(monkeypatch):
    monkeypatch.setattr(arguments, "available_memory", lambda: 2**20)
    drawn = []
    monkeypatch.setattr(arguments, "_arguments", lambda *a: drawn.append(a))
    with pytest.raises(InvariantsError) as err:
        arguments.make_arguments(CATALOG["take"], SEED)
    line = str(err.value)
    assert "\n" not in line and not drawn
    assert line.startswith("take [f32]: its arguments need 1.1 MiB"), line
    assert "float32[8192,32]" in line and "1.0 MiB free" in line, line


def test_a_model_s_huge_table_is_named_with_its_shape(monkeypatch):
    """A factory's 10^12-element table: refused by its declared shape, before any drawing."""

    class Huge:
        def specs(self, config):
            table = jax.ShapeDtypeStruct((10**6, 10**6), jnp.float32)
            return (table, jax.ShapeDtypeStruct((4, 8), jnp.int32))

        def draw(self, *a):
            raise AssertionError("drawn")

    program = dataclasses.replace(CATALOG["take"], name="my_model", inputs=Huge())
    with pytest.raises(InvariantsError, match=r"^my_model \[f32\]: .*3\.6 TiB.*float32\[1000000,1000000\]"):
        arguments.make_arguments(program, SEED)


def test_a_draw_that_runs_out_of_memory_is_one_line(monkeypatch):
    def out_of_memory(*a):
        raise MemoryError

    monkeypatch.setattr(arguments, "_arguments", out_of_memory)
    with pytest.raises(InvariantsError, match=r"^take \[f32\]: .* drawing them ran out of memory"):
        arguments.make_arguments(CATALOG["take"], SEED)


def test_reading_a_traces_op_events_holds_none_of_them(tmp_path):
    """A loop's ops are millions of events: what the reader allocates in Python stays below the file's size
    (the decoder's own copy aside), however many events it holds."""
    import tracemalloc

    from xspace import xspace

    from invariants.timing.trace import read_trace, stats

    names = [f"%fusion.{k} = f32[8,128]{{1,0}} fusion(%p)" for k in range(20)]
    ops = ((names[i % 20], i * 1000 + 1, 500) for i in range(100_000))
    path = tmp_path / "t.xplane.pb"
    path.write_bytes(xspace([("jit_f", c * 10_000_000, 10_000_000) for c in range(10)], ops))
    read_trace(path)  # the decoder's import and first use, outside the measure
    tracemalloc.start()
    try:
        (module,) = stats(read_trace(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(op.count for op in module.ops) == 100_000 and len(module.ops) == 20
    size = path.stat().st_size
    assert peak < 2 * size, f"{peak} bytes allocated reading a {size}-byte trace"  # its bytes, once


def test_more_distinct_op_names_than_a_program_has_instructions_is_one_line(tmp_path, monkeypatch):
    from xspace import xspace

    from invariants.timing import trace

    monkeypatch.setattr(trace, "MAX_OP_NAMES", 5)
    path = tmp_path / "t.xplane.pb"
    path.write_bytes(xspace([("jit_f", 0, 10_000_000)], [(f"op{k}", k * 1000, 10) for k in range(6)]))
    with pytest.raises(trace.TraceError, match=r"t\.xplane\.pb: more than 5 distinct op names"):
        trace.stats(trace.read_trace(path))


# The child's own peak: ru_maxrss would start at its parent's (Linux keeps it across fork and exec).
_PEAK_OF_READING = """
import sys
from invariants.timing.trace import _decoder, read_trace, stats

def status(key):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key + ":"))

_decoder()  # the decoder's import, before the baseline
before = status("VmRSS")
(module,) = stats(read_trace(sys.argv[1]))
print(sum(op.count for op in module.ops), (status("VmHWM") - before) * 1024)
"""


@pytest.mark.skipif(
    not os.path.exists("/proc/self/status"), reason="a process's peak memory is read from /proc"
)
def test_a_trace_of_half_a_million_op_events_is_read_in_a_few_times_its_size(tmp_path):
    """Decoded whole, a trace takes many times its file (a message per event); read a run of events at a
    time, the file once and one run's decoding. Measured in a child, as its resident memory's peak while
    reading over what it held before."""
    import subprocess
    import sys

    from xspace import xspace

    names = [f"%fusion.{k} = f32[8,128]{{1,0}} fusion(%p)" for k in range(20)]
    n = 500_000
    path = tmp_path / "t.xplane.pb"
    ops = ((names[i % 20], i * 1000 + 1, 500) for i in range(n))
    path.write_bytes(xspace([("jit_f", c * n * 100, n * 100) for c in range(10)], ops))
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_OF_READING, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    count, peak = map(int, done.stdout.split())
    size = path.stat().st_size
    assert count == n
    assert peak < 4 * size, f"reading a {size}-byte trace took {peak} bytes more at its peak"
