"""The snapshot store's own rules, on real files: what syrupy is shown (our snapshots, of the selected
programs and configurations, never the baselines beside them) and what may be deleted."""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.location import PyTestLocation

from invariants import _snapshot_store as st


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """``<root>/cpu`` with three snapshots and an efficiency baseline beside them."""
    cpu = tmp_path / "cpu"
    (cpu / "efficiency").mkdir(parents=True)
    for name in ("naive.f32.txt", "naive.bf16.txt", "take.f32.txt"):
        (cpu / name).write_text("summary: kernels 1\n")
    (cpu / "efficiency" / "naive.f32.json").write_text("{}\n")
    return cpu


def _discovered(request: pytest.FixtureRequest, folder: Path) -> list[str]:
    request.node.add_marker(pytest.mark.snapshot_key("naive", "f32", "cpu", root=str(folder.parent)))
    found = st.StructureSnapshotExtension().discover_snapshots(test_location=PyTestLocation(request.node))
    return sorted(Path(c.location).name for c in found)


def test_discovery_shows_our_snapshots_and_never_the_baselines(request, folder, monkeypatch):
    monkeypatch.setattr(st.GUARD, "selected", None)
    assert _discovered(request, folder) == ["naive.bf16.txt", "naive.f32.txt", "take.f32.txt"]


def test_discovery_shows_only_the_selected_stems(request, folder, monkeypatch):
    monkeypatch.setattr(st.GUARD, "selected", {str(folder.resolve()): {"naive.f32", "take.f32"}})
    assert _discovered(request, folder) == ["naive.f32.txt", "take.f32.txt"]
    monkeypatch.setattr(st.GUARD, "selected", {str(folder.resolve()): set()})
    assert _discovered(request, folder) == []


def test_only_a_provably_obsolete_file_may_be_deleted(folder, monkeypatch):
    monkeypatch.setattr(st.GUARD, "known_stems", {})
    assert not st.GUARD.may_delete(folder / "gone.f32.txt")  # its target did not compile here
    monkeypatch.setattr(st.GUARD, "known_stems", {str(folder.resolve()): {"naive.f32", "naive.bf16"}})
    assert not st.GUARD.may_delete(folder / "naive.bf16.txt")
    assert st.GUARD.may_delete(folder / "take.f32.txt")
    assert st.obsolete_snapshots(folder, {"naive.f32", "naive.bf16"}) == [folder / "take.f32.txt"]
