"""A program that fails to compile, in a downstream project's gate run, as its user meets it: reported
whole once per compile (the compiler's first line, where its HLO before optimization and a one-file
reproducer were saved), one line for each other item of that compile; the earlier run's dumps of that
program removed; and a ``[[known_compile_failure]]`` that xfails its items while it fails and fails the
run once it compiles. The compile fails for real: a call of an FFI handler XLA:CPU does not have, which
lowers and fails in the compiler."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gatekit import command

SPEC = """\
[spec]
targets = ["cpu"]

[[program]]
name = "broken"
function = "brokenlib:lookup"
kind = "forward"
configs = ["f32"]

[[invariant]]
id = "no_loop"
programs = ["broken"]
assert = "while_loops == 0"
"""

KNOWN = """
[[known_compile_failure]]
id = "no_ffi_handler"
programs = ["broken"]
targets = ["cpu"]
ratchet = { reason = "XLA:CPU has no handler for the custom call", issue = "https://example.org/issue/1" }
"""

BROKEN = """\
import jax
import jax.numpy as jnp


def lookup(table, indices):
    rows = jnp.take(table, indices, axis=0)
    extra = jax.ffi.ffi_call("invariants_no_such_handler", jax.ShapeDtypeStruct(rows.shape, rows.dtype))(rows)
    return rows + extra
"""

FIXED = """\
import jax.numpy as jnp


def lookup(table, indices):
    return jnp.take(table, indices, axis=0)
"""

FINE = """

def fine(table, indices):
    return jnp.take(table, indices, axis=0)
"""

COMPILER = "No FFI handler registered for invariants_no_such_handler"


def make(folder: Path, known: bool = False) -> Path:
    (folder / "specs").mkdir(parents=True)
    (folder / "specs" / "broken.toml").write_text(SPEC + (KNOWN if known else ""))
    (folder / "brokenlib.py").write_text(BROKEN)
    return folder


def gate(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m invariants gate`` on the CPU, structure and invariants, in this process."""
    with pytest.MonkeyPatch.context() as mp:
        for name in os.environ:
            if name.startswith(("INVARIANTS_", "PYTEST_")) and name != "INVARIANTS_CACHE_DIR":
                mp.delenv(name)
        return command(
            "gate", "--spec-dir", "specs", "--snapshot-dir", "snapshots", "--no-catalog", "--targets", "cpu",
            "-m", "not throughput", "--hlo-dump-dir", "dumps", "--results-json", "results.json", *args,
            "-p", "no:cacheprovider", "-rA", cwd=project, env={"COLUMNS": "400"},
        )  # fmt: skip


@pytest.mark.e2e
def test_a_failed_compile_is_reported_once_with_its_hlo_and_a_reproducer(tmp_path: Path):
    project = make(tmp_path / "project")
    dumps = project / "dumps" / "cpu"
    dumps.mkdir(parents=True)
    # An earlier run's dumps of the program (the gate's own names), a file of the user's beside them, and
    # another program's dump: only the first go.
    stale = ["hlo.txt", "jaxpr.txt", "snapshot.diff", "ir-with-opt.ll", "repro.py"]
    stale = [f"broken.f32.{name}" for name in stale]
    kept = ["broken.f32.notes.md", "other.f32.hlo.txt"]
    for name in stale + kept:
        (dumps / name).write_text("earlier\n")
    run = gate(project)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out[-3000:]
    failures = out[out.index(" FAILURES ") :]
    assert failures.count("reproducer: python ") == 1 and failures.count("\nversions: ") == 1, failures
    other = next(line for line in out.splitlines() if "reported whole there" in line)
    assert other.startswith("cpu/broken[f32]: compile failed: NOT_FOUND: No FFI") and len(other) < 200, other
    report = out[out.index("cpu/broken[f32]: compile failed: ") :]
    assert COMPILER in report.splitlines()[0]
    assert "HLO before optimization: dumps/cpu/broken.f32.before_optimizations.txt" in out, out
    assert "[[known_compile_failure]]" in out
    assert sorted(p.name for p in dumps.iterdir()) == sorted(
        [*kept, "broken.f32.before_optimizations.txt", "broken.f32.repro.py"]
    )
    assert "invariants_no_such_handler" in (dumps / "broken.f32.before_optimizations.txt").read_text()
    # Each item's entry still reads as that program's compile failure (what bisect and matrix read).
    from invariants.records.results import compile_failure, read

    failed = [compile_failure(it) for it in read(project / "results.json").items if it.outcome == "failed"]
    assert len(failed) == 2 and all(f is not None and f.program == "broken" for f in failed), failed
    # The reproducer, run as the report says, fails as the gate's compile did.
    again = subprocess.run(
        [sys.executable, "dumps/cpu/broken.f32.repro.py"], cwd=project, capture_output=True, text=True,
        timeout=300, check=False, env={k: v for k, v in os.environ.items() if not k.startswith("INVARIANTS")},
    )  # fmt: skip
    assert again.returncode != 0 and COMPILER in again.stderr, again.stdout + again.stderr[-2000:]


def test_a_known_compile_failure_xfails_until_it_compiles(tmp_path: Path):
    project = make(tmp_path / "project", known=True)
    held = gate(project)
    out = held.stdout + held.stderr
    assert held.returncode == 0, out[-3000:]
    assert "2 xfailed" in out and "known compile failures" in out, out
    items = json.loads((project / "results.json").read_text())["items"]
    items = [it for it in items if it["kind"] == "error"]
    assert [it["outcome"] for it in items] == ["xfailed", "xfailed"], items
    assert all("no_ffi_handler: XLA:CPU has no handler" in it["reason"] for it in items), items
    (project / "brokenlib.py").write_text(FIXED)
    fixed = gate(project, "--snapshot-update")
    out = fixed.stdout + fixed.stderr
    assert fixed.returncode == 1, out[-3000:]
    line = "known compile failure fixed: broken[f32] on cpu now compiles; drop no_ffi_handler in specs/"
    assert out.count(line) == 2, out  # its item's failure, and pytest's FAILED line for that item


SHARDED = """\
[spec]
targets = ["cpu-8dev"]

[[program]]
name = "broken_sharded"
function = "brokenlib:lookup"
kind = "forward"
configs = ["f32"]
mesh = { data = 8 }

[[program]]
name = "fine_sharded"
function = "brokenlib:fine"
kind = "forward"
configs = ["f32"]
mesh = { data = 8 }
"""


@pytest.mark.e2e
def test_a_compile_that_fails_in_the_targets_child_fails_alone(tmp_path: Path):
    """The 8-device CPU compiles in a child process: the failed program is reported as in this process
    (with its HLO), and the target's other programs compile all the same."""
    project = make(tmp_path / "project")
    (project / "specs" / "broken.toml").write_text(SHARDED)
    (project / "brokenlib.py").write_text(BROKEN + FINE)
    run = gate(project, "--targets", "cpu-8dev", "--snapshot-update")
    out = run.stdout + run.stderr
    assert run.returncode == 1, out[-3000:]
    assert f"cpu-8dev/broken_sharded[f32]: compile failed: NOT_FOUND: {COMPILER}" in out, out[-3000:]
    assert "child exited" not in out, out[-3000:]
    assert (project / "snapshots" / "cpu-8dev" / "fine_sharded.f32.txt").is_file()
    assert (project / "dumps" / "cpu-8dev" / "broken_sharded.f32.before_optimizations.txt").is_file()
