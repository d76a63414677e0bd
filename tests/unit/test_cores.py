"""Core affinity: a pin holds for the process, and its children get the cores back."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from invariants import _cores

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="core affinity is Linux-only")

_CHILD = "from invariants import _cores; _cores.free(); print(','.join(map(str, _cores.usable())))"


def test_a_pinned_process_runs_on_its_core_and_its_children_get_every_core_back(monkeypatch):
    before = _cores.usable()
    monkeypatch.delenv(_cores.FREED_ENV, raising=False)
    code = (
        "import subprocess, sys\n"
        "from invariants import _cores\n"
        f"_cores.pin({{{before[-1]}}})\n"
        "print(','.join(map(str, _cores.usable())))\n"
        f"inherited = subprocess.run([sys.executable, '-c', {_CHILD!r}], capture_output=True, text=True)\n"
        "print(inherited.stdout.strip())\n"
        "raw = subprocess.run([sys.executable, '-c', 'import os; print(sorted(os.sched_getaffinity(0)))'],\n"
        "                     capture_output=True, text=True)\n"
        "print(raw.stdout.strip())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    pinned, freed, raw = out.splitlines()
    assert pinned == str(before[-1])
    assert freed == ",".join(map(str, before))  # a child that frees itself has every core again
    assert raw == str([before[-1]])  # one that does not stays on the parent's core: the pin is inherited


def test_free_without_a_pinned_parent_changes_nothing(monkeypatch):
    monkeypatch.delenv(_cores.FREED_ENV, raising=False)
    before = _cores.usable()
    _cores.free()
    assert _cores.usable() == before
