"""The package's shape: data flows one way between its stage modules (no import cycle, lazy imports
included), and the public face exports only what exists."""

from __future__ import annotations

import ast
from pathlib import Path

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


def test_public_face_exports_what_exists():
    for name in invariants.__all__:
        assert getattr(invariants, name) is not None, name
