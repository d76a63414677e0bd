"""The package's shape: data flows one way between its stage modules (no import cycle, lazy imports
included), and the public face exports only what exists."""

from __future__ import annotations

import ast
import subprocess
import sys
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


# ---------------------------------------------------------------------------------------------------------
# The layer contract: data flows one way, from the floors that read text and name things (no JAX) up to
# the commands. A module imports only from its own floor or the floors below; a lazy import inside a
# function counts (it runs upward all the same), an import under ``if TYPE_CHECKING:`` does not (it never
# runs). Adding a module means placing it here.

LAYERS: tuple[tuple[str, ...], ...] = (
    # 0: what every floor uses
    ("_errors", "_paths", "_stats", "_cores"),
    # 1: data and text, no JAX: configurations, selection, targets, specs, HLO, structure, metrics, kernel
    #    code, predicted cost, the results records
    ("_configs", "_select", "_targets", "_spec", "_hlo", "_structure", "_metrics", "kernels", "_cost",
     "_results"),
    # 2: the catalog and everything that compiles, snapshots, checks or times programs
    ("_programs", "_registry", "_downstream", "_compile", "_child", "_process", "_snapshot",
     "_snapshot_store", "_checks", "_timing", "_jax_timing", "_baselines", "_user_snapshots", "testing"),
    # 3: the pytest session
    ("_plugin", "_outcomes", "_xdist", "pytest_plugin", "gate"),
    # 4: the commands
    ("_report", "_report_run", "_report_plot", "_hlo_stats", "_versus", "_versus_worker",
     "_versus_protocol", "_versus_report", "_versus_sides", "_versus_stats", "_releases", "_bisect",
     "_matrix", "_selfcheck", "_selfcheck_inject", "_gate", "__main__", "__init__"),
)  # fmt: skip

# Upward edges that exist today, each with its reason; the test fails when one is gone too, so that this
# list only shrinks. (Issue 21's layout gives the spec stage the programs' names instead.)
KNOWN_UPWARD = {
    ("_spec", "_programs"): "spec loading checks selectors against the catalog's program names",
    ("_spec", "_registry"): "spec loading checks selectors against the declared programs' names",
}

# The floors that must start without JAX (hlo-stats, the spec validator, selection, the target table).
NO_JAX = ("_errors", "_paths", "_stats", "_configs", "_select", "_targets", "_spec", "_hlo", "_structure",
          "_metrics", "kernels", "kernels.ptx", "kernels.llvm_ir", "_cost", "_results")  # fmt: skip


def _top(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _runtime_imports(tree: ast.AST) -> list[ast.ImportFrom]:
    """Every ``from ... import`` that runs (at import time or inside a function), not under TYPE_CHECKING."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for child in node.body for n in ast.walk(child)}
    return [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and id(n) not in skip]


def package_edges() -> dict[str, set[str]]:
    """Floor entry (a module, or a subpackage as one) -> the package entries it imports at run time."""
    edges: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "snapshots" in path.parts:
            continue
        me = _top(path)
        inner = path.parent != PACKAGE  # a module of a subpackage: its level-1 imports stay inside it
        for node in _runtime_imports(ast.parse(path.read_text())):
            if node.module and node.module.startswith("invariants."):
                names = [node.module.split(".")[1]]
            elif (node.level == 1 and not inner) or (node.level == 2 and inner):
                names = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
            else:
                continue
            edges.setdefault(me, set()).update(n for n in names if n != me)
    return edges


def upward(edges: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[tuple[str, str]]:
    """The edges ``(a, b)`` where ``a`` imports ``b`` from a higher floor."""
    floor = {m: i for i, layer in enumerate(layers) for m in layer}
    return sorted(
        (a, b) for a, deps in edges.items() for b in deps if a in floor and b in floor and floor[b] > floor[a]
    )


def _said(edges: list[tuple[str, str]]) -> str:
    floor = {m: i for i, layer in enumerate(LAYERS) for m in layer}
    return "; ".join(f"{a} (floor {floor[a]}) imports {b} (floor {floor[b]})" for a, b in edges)


def test_every_module_has_a_floor():
    entries = {_top(p) for p in PACKAGE.rglob("*.py") if "snapshots" not in p.parts}
    placed = {m for layer in LAYERS for m in layer}
    assert entries - placed == set(), "place these modules in LAYERS: " + ", ".join(sorted(entries - placed))
    gone = sorted(placed - entries)
    assert not gone, "LAYERS names modules that are gone: " + ", ".join(gone)


def test_no_import_runs_upward():
    found = upward(package_edges(), LAYERS)
    unexpected = [e for e in found if e not in KNOWN_UPWARD]
    assert not unexpected, "imports that run upward: " + _said(unexpected)
    gone = [e for e in KNOWN_UPWARD if e not in found]
    assert not gone, "no longer upward, drop from KNOWN_UPWARD: " + _said(gone)


def test_the_contract_catches_a_planted_upward_import():
    """The checker on the package with one upward import planted (the HLO parser importing the plugin):
    that edge is named, beside the known ones, and nothing else."""
    edges = {k: set(v) for k, v in package_edges().items()}
    edges.setdefault("_hlo", set()).add("_plugin")
    assert [e for e in upward(edges, LAYERS) if e not in KNOWN_UPWARD] == [("_hlo", "_plugin")]
    assert _said([("_hlo", "_plugin")]) == "_hlo (floor 1) imports _plugin (floor 3)"


def test_a_lazy_import_is_an_edge_and_a_type_checking_one_is_not():
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._plugin import GateSession\n"
        "def f():\n    from ._report import render\n"
    )
    assert [n.module for n in _runtime_imports(tree)] == ["typing", "_report"]


def _first_with_jax(modules: tuple[str, ...]) -> str | None:
    """Import ``modules`` in order in a fresh interpreter: the first after which JAX is loaded, or None."""
    code = (
        "import sys, importlib\n"
        f"for m in {list(modules)!r}:\n"
        "    importlib.import_module('invariants.' + m)\n"
        "    if 'jax' in sys.modules:\n"
        "        print(m)\n"
        "        break\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=99)
    return out.stdout.strip() or None


def test_the_lower_floors_import_no_jax():
    """In a fresh interpreter, importing them must not import JAX (hlo-stats, spec checking and selection
    start in a fraction of a second, and on a host without a working jaxlib)."""
    first = _first_with_jax(NO_JAX)
    assert first is None, f"importing invariants.{first} (or what it imports) loads JAX"
    # The check sees JAX where it is: the catalog builds its programs with it.
    assert _first_with_jax(("_hlo", "_programs")) == "_programs"
