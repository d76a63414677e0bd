"""A SIGKILL during ``--snapshot-update`` never leaves a snapshot empty or partial: three trials of
``scripts/kill_update_trials.py`` (which see; ``python scripts/kill_update_trials.py`` runs 20, and with
``--old-write`` shows that the same trials catch syrupy's own, non-atomic write)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

# Real processes killed mid-update: end to end (tests/conftest.py: -m e2e).
pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _trials() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "kill_update_trials", ROOT / "scripts" / "kill_update_trials.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_killed_update_leaves_every_snapshot_old_or_new(tmp_path: Path) -> None:
    kill = _trials()
    trials = kill.run_trials(3, tmp_path, seed=20261201)
    assert [t.bad for t in trials] == [[], [], []], [(t.delay, t.outcome) for t in trials]
    # Not vacuous: each child began writing a snapshot (through the trial's slow open) and was killed.
    assert all(t.opens >= 1 for t in trials), [t.opens for t in trials]
    assert all(t.killed for t in trials), [(t.delay, t.outcome) for t in trials]
