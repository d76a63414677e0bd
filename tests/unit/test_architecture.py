"""The package's shape: data flows one way between its stage modules (no import cycle, lazy imports
included), and the public face exports only what exists."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import invariants

PACKAGE = Path(invariants.__file__).parent


def _imports() -> dict[str, set[str]]:
    """Module -> the package modules it imports, anywhere in its body (a lazy import is still an edge)."""
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    edges: dict[str, set[str]] = {}
    for path in PACKAGE.glob("*.py"):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1:
                    deps |= {node.module} if node.module else {a.name for a in node.names}
                elif node.module and node.module.startswith("invariants."):
                    deps.add(node.module.split(".")[1])
        edges[path.stem] = deps & modules
    return edges


def test_no_import_cycle():
    edges = _imports()

    def reachable(start: str) -> set[str]:
        seen: set[str] = set()
        stack = [start]
        while stack:
            for nxt in edges.get(stack.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    cycles = sorted(f"{a} -> {b}" for a in edges for b in edges[a] if a in reachable(b))
    assert not cycles, "import cycles: " + ", ".join(cycles)


def test_public_face_as_a_user_calls_it(tmp_path):
    """Every public name, used the way a user of the library would: read HLO, measure it, load a spec."""
    used = set()
    text = (Path(__file__).parents[1] / "data" / "hlo" / "cpu_fwd_take.txt").read_text()
    module = invariants.parse_module(text, "take.hlo")
    assert isinstance(module, invariants.HloModule)
    structure = invariants.structure_of(module)
    assert isinstance(structure, invariants.Structure)
    assert invariants.METRICS["gathers"].of(structure) == 1
    used |= {"parse_module", "HloModule", "structure_of", "Structure", "METRICS"}
    with pytest.raises(invariants.HloParseError) as err:
        invariants.parse_module("HloModule m\n%x = what?", "bad.hlo")
    assert isinstance(err.value, invariants.InvariantsError) and str(err.value).startswith("bad.hlo:2")
    used |= {"HloParseError", "InvariantsError"}
    spec = tmp_path / "cpu.toml"
    spec.write_text(
        '[spec]\ntargets = ["cpu"]\n[[invariant]]\nid = "g"\nprograms = ["take"]\nassert = "gathers == 1"\n'
    )
    assert isinstance(invariants.load_spec(spec), invariants.Spec)
    assert all(isinstance(s, invariants.Spec) for s in invariants.load_specs())
    used |= {"load_spec", "Spec", "load_specs"}
    assert invariants.get_program("take") is invariants.CATALOG["take"]
    used |= {"get_program", "CATALOG"}
    assert used == set(invariants.__all__)


def test_every_subpackage_ships_in_the_wheel():
    """A subpackage missing from pyproject's package list installs nothing: the wheel fails to import."""
    import tomllib

    listed = set(
        tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(p.parent.relative_to(PACKAGE.parent).parts)
        for p in PACKAGE.rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert found <= listed, f"pyproject.toml [tool.setuptools] packages lacks {sorted(found - listed)}"
