"""The one-file reproducer of a failed compile: run as a user runs it, it compiles the program for the same
target, ahead of time as the gate did, and says so when the compile does not fail there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from invariants.catalog.project import Project
from invariants.compile.reproducer import reproducer
from invariants.records.compiled import Key
from invariants.scope.targets import all_targets, versions


@pytest.mark.e2e
@pytest.mark.parametrize("target", ["tpu-v5e", "gpu-h100"])
def test_the_reproducer_compiles_the_program_for_its_target(tmp_path: Path, target: str):
    chosen = all_targets()[target]
    if (why := chosen.unavailable_reason()) is not None:
        pytest.skip(why)
    key = Key("grad_take", "f32", target)
    script = tmp_path / "repro.py"
    script.write_text(reproducer(key, chosen, Project(), 'INTERNAL: a """quoted""" \\ line', versions()))
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVARIANTS")}
    ran = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, check=False, env=env)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "compiled: the failure does not reproduce with these packages" in ran.stdout
    assert "ShapeDtypeStruct(shape=(" in ran.stdout  # the abstract arguments, printed before the compile
