"""A ratchet over a set of programs is judged per program: the item where it now holds fails with "ratchet
can be tightened" and says how to split that program out; the others stay xfail."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gatekit import InProcess

from invariants.compile.child import GATE_DIR

ROOT = Path(__file__).parents[3]

# kernels == 1 holds on cpu for take and naive (one gather fusion), and fails on every gradient of the
# core set: a ratchet over tag:core that is fixed on two of its programs and still bad on the rest.
SPEC = """[spec]
targets = ["cpu"]

[[invariant]]
id = "one_kernel"
programs = ["tag:core"]
configs = ["f32"]
assert = "kernels == 1"
why = "a lookup is one kernel"
ratchet = { reason = "gradients are three kernels today", issue = "https://example.com/issue/1" }
"""


def _gate_run(
    gate_pytester: InProcess, *report: str, programs: str = "grad_take,grad_naive", spec: str = SPEC,
    configs: str = "f32", ratchet: str = "one_kernel",
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """The gate on the ratchet above (or ``spec``'s), as pytest invariants/gate runs it (in this process),
    with ``report`` (-r) options."""
    folder = gate_pytester.path
    (folder / "specs").mkdir(exist_ok=True)
    (folder / "specs" / "r.toml").write_text(spec)
    return gate_pytester.pytest(
        str(GATE_DIR / "test_invariants.py"), "-p", "invariants.plugin.hooks", "-c", os.devnull,
        "--rootdir", str(folder), "-q", *report,
        "--spec-dir", str(folder / "specs"), "--targets", "cpu", "--configs", configs, "-k", ratchet,
        "--programs", programs, "--snapshot-dir", str(ROOT / "snapshots"),
        "--results-json", str(folder / "r.json"),
    )  # fmt: skip


def test_a_ratchet_over_a_set_fails_only_where_it_holds(gate_pytester):
    proc = _gate_run(gate_pytester, "-rfx", programs="take,naive,grad_take,grad_naive")
    assert proc.returncode == 1, proc.stdout[-3000:]
    failed = sorted(ln.split(" - ")[0].split("::", 1)[1] for ln in proc.stdout.splitlines()
                    if ln.startswith("FAILED"))  # fmt: skip
    expected = ["cpu::r.toml::one_kernel::naive-f32", "cpu::r.toml::one_kernel::take-f32"]
    assert failed == expected, proc.stdout[-3000:]
    xfailed = [ln for ln in proc.stdout.splitlines() if ln.startswith("XFAIL")]
    assert len(xfailed) == 2 and all("gradients are three kernels today" in ln for ln in xfailed)
    assert "::grad_take-f32 " in xfailed[0] + xfailed[1] and "::grad_naive-f32 " in xfailed[0] + xfailed[1]
    assert (
        "ratchet can be tightened: one_kernel now holds on cpu take [f32] (assert kernels == 1: measured "
        "kernels = 1); drop its ratchet in specs/r.toml:4 (https://example.com/issue/1), "
        "or, while it still fails on the others of programs = ['tag:core'], move take to an invariant of its "
        "own without the ratchet"
    ) in proc.stdout


def test_the_known_regressions_are_a_line_per_ratchet_and_minus_rx_lists_each(gate_pytester):
    """-ra (the project's addopts) lists every xfailed item, a hundred and more lines at the end of a run:
    the gate says them as one line per ratchet instead; -rx, or -rA, lists each item too."""
    summary = ["invariants: 2 xfailed, known regressions the ratchets hold", "  one_kernel    2 items  cpu"]
    quiet = _gate_run(gate_pytester, "-ra")
    assert quiet.returncode == 0, quiet.stdout[-3000:]
    lines = quiet.stdout.splitlines()
    assert not [ln for ln in lines if ln.startswith("XFAIL")], quiet.stdout[-3000:]
    at = lines.index(summary[0] + " (-rx lists each item):")
    assert lines[at + 1] == summary[1]
    for report in ("-rx", "-rA"):
        listed = _gate_run(gate_pytester, report)
        lines = listed.stdout.splitlines()
        assert len([ln for ln in lines if ln.startswith("XFAIL")]) == 2, listed.stdout[-3000:]
        assert lines[lines.index(summary[0]) + 1] == summary[1]


# kernels <= 3 holds for the f32 gradient of take on cpu and not for its bf16 one (converts around the
# scatter-add): a ratchet over both configurations, fixed in one.
OVER_CONFIGS = """[spec]
targets = ["cpu"]

[[invariant]]
id = "three_kernels"
programs = ["grad_take"]
configs = ["f32", "bf16"]
assert = "kernels <= 3"
ratchet = { reason = "bf16 converts around the scatter", issue = "https://example.com/issue/2" }
"""


def test_a_ratchet_over_configurations_fixed_in_one_says_how_to_narrow_it(gate_pytester):
    """Dropping the ratchet would fail the configuration where it still fails: the line says so."""
    proc = _gate_run(gate_pytester, "-rfx", programs="grad_take", spec=OVER_CONFIGS, configs="f32,bf16",
                     ratchet="three_kernels")  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:]
    outcomes = [ln.split(" - ")[0] for ln in proc.stdout.splitlines() if ln.startswith(("FAILED", "XFAIL"))]
    assert outcomes == [
        "FAILED ::cpu::r.toml::three_kernels::grad_take-f32",
        "XFAIL ::cpu::r.toml::three_kernels::grad_take-bf16",
    ], proc.stdout[-3000:]
    assert (
        "ratchet can be tightened: three_kernels now holds on cpu grad_take [f32] (assert kernels <= 3: "
        "measured kernels = 3); drop its ratchet in specs/r.toml:4 (https://example.com/issue/2), or, while "
        "it still fails in bf16, narrow the ratchet to configs = ['bf16'] and hold f32 without it"
    ) in proc.stdout
