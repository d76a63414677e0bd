"""``bisect`` from a CPU host traces a TPU structure change to its release, as a user runs it: each release's
``jax[tpu]`` (libtpu) from PyPI, the gate on tpu-v5e in its environment, the spec file of
``tests/data/tpu-bisect`` (whose committed compiles, and the unit test on them, say where the change is).

Slow and networked: it installs two or more libtpu releases (about 1 GB each, cached under the default
cache folder) and compiles in each. ``pytest -m e2e`` runs it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tpu_releases import RELEASES, SPECS, holds

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_bisect_names_the_first_release_of_a_tpu_structure_change() -> None:
    held = [v for v in RELEASES if holds(v)]
    first, last = min(v for v in RELEASES if not holds(v)), held[-1]
    good, bad = held[-2], RELEASES[-1]  # a search over the releases between, not just the two
    cmd = [sys.executable, "-m", "invariants", "bisect", "--good", str(good), "--bad", str(bad),
           "--targets", "tpu-v5e", "--programs", "grad_vmap_naive", "--configs", "f32",
           "--spec-dir", str(SPECS), "-k", "grad_vmap_naive_loop_body_bounded"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3000, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    named = f"first release where the selection breaks: jax {first} (last with it holding: jax {last})"
    assert named in proc.stdout
    assert "FAILED tpu-v5e::loop_body.toml::grad_vmap_naive_loop_body_bounded" in proc.stdout
    assert "structure of grad_vmap_naive/f32/tpu-v5e" in proc.stdout and "changed: HLO lines" in proc.stdout
