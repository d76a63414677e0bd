"""``trace-stats``: the device's own time of each module and op in a JAX profiler trace.

Any program's trace will do, a project's own included: ``jax.profiler.trace(DIR)`` around its calls writes
``DIR/plugins/profile/<run>/<host>.xplane.pb``. It runs on a CPU host (the trace is read, not replayed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from invariants._errors import InvariantsError, Parser, visible
from invariants.timing.trace import ModuleStats, find_traces, read_trace, stats

_EPILOG = """\
For each trace: the device plane read (the first /device:* plane with module events), then per XLA module
(one compiled program) its calls and the median, minimum and maximum device time of one call, then its
HLO ops by total device time, the costliest first (per call: the op's time summed over one call, so a
loop body's op counts once per trip). A folder stands for every *.xplane.pb under it.

--json prints a list with one object per trace file: {"trace", "plane", "clock": "device", "modules":
[{"name", "calls", "median_s", "min_s", "max_s", "total_s", "ops": [{"name", "count", "total_s",
"per_call_s"}]}]}.

Exit status: 0 on success; 2 for a path that holds no trace, a file that is not a profiler trace, a
trace with no device plane (a CPU-only run), or an event whose duration is below zero: one line on stderr.
"""


def _parser() -> Parser:
    parser = Parser(
        prog="python -m invariants trace-stats",
        description="Device time per module and per HLO op, from JAX profiler traces (*.xplane.pb).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "paths", nargs="+", metavar="FILE.xplane.pb|DIR", help="traces, or folders holding them"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument(
        "--top", type=int, default=10, metavar="N", help="ops shown per module (default 10; 0: all)"
    )
    return parser


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}"


def _table(path: str, plane: str, modules: list[ModuleStats]) -> str:
    """The text a terminal shows: every name from the file or the trace escaped to one line."""
    lines = [f"{visible(path, one_line=True)}: {visible(plane, one_line=True)}, device clock"]
    lines.append(f"  {'module':<48} {'calls':>6} {'median us':>12} {'min us':>12} {'max us':>12}")
    for m in modules:
        name = visible(m.name, one_line=True)[:48]
        lines.append(f"  {name:<48} {m.calls:>6} {_us(m.median_s):>12} {_us(m.min_s):>12} {_us(m.max_s):>12}")
        if m.ops:
            lines.append(f"    {'op':<46} {'count':>8} {'us per call':>12} {'share':>7}")
        for op in m.ops:
            share = op.per_call_s / m.median_s if m.median_s else 0.0
            name = visible(op.name, one_line=True)[:46]
            lines.append(f"    {name:<46} {op.count:>8} {_us(op.per_call_s):>12} {share:>7.1%}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    opts = _parser().parse_args(argv)
    if opts.top < 0:
        raise InvariantsError(f"trace-stats: --top must be >= 0, got {opts.top}")
    top = opts.top or None
    out: list[dict[str, object]] = []
    blocks: list[str] = []
    for given in opts.paths:
        for path in find_traces(Path(given)):
            trace = read_trace(path)
            modules = stats(trace, None if opts.json else top)
            found = [m.to_json() for m in modules]
            out.append({"trace": str(path), "plane": trace.plane, "clock": "device", "modules": found})
            blocks.append(_table(str(path), trace.plane, modules))
    if opts.json:
        print(json.dumps(out, indent=1))
    else:
        print("\n\n".join(blocks))
    sys.stdout.flush()
    return 0
