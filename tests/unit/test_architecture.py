"""The package's shape: data flows one way between its stage modules (no import cycle, lazy imports
included), and the public face exports only what exists."""

from __future__ import annotations

import ast
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import invariants

PACKAGE = Path(invariants.__file__).parent


def test_no_import_cycle():
    """Between modules (a subpackage's ``__init__`` counts as one), lazy imports included."""
    edges = module_edges()

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
# the commands. It is import-linter's layers contract in pyproject.toml ([tool.importlinter]), which sees
# every form of import; these tests run it, show it failing on each form planted, and check that every
# module has a floor.


def _lint(root: Path = PACKAGE.parent) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the package folder under ``root`` (its pyproject.toml), in a fresh interpreter,
    so that a copy of the package with a planted import is the one read, not the package this process
    imported."""
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which(
        "lint-imports"
    )
    if command is None:
        pytest.fail("lint-imports not found: pip install -e '.[dev]' (import-linter)")
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([command, "--no-logo", "--no-cache", "pyproject.toml"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def _floors() -> list[list[str]]:
    """The contract's floors, top first, each a list of module names below ``invariants``."""
    import tomllib

    contract = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in contract["contracts"] if c["type"] == "layers"]
    return [[m.strip().removeprefix("invariants.") for m in floor.split(":")] for floor in layers]


def test_the_layer_contract_holds():
    result = _lint()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "Contracts: 1 kept, 0 broken." in result.stdout


def test_every_module_has_a_floor():
    """A module the contract does not place is checked by nothing. The floors name whole packages (and the
    top-level modules), never a module inside a package: a package on two floors has no floor of its own."""
    placed = [m for floor in _floors() for m in floor]
    inside = [p for p in placed if "." in p]
    assert not inside, f"the layers place modules inside packages: {inside}"
    gone = sorted(p for p in placed if not _is_module(p))
    assert not gone, f"the layers name modules that are gone: {gone}"
    modules = {m for m in _package_files() if m != "__init__"}
    unplaced = sorted(m for m in modules if m.split(".")[0] not in placed)
    assert not unplaced, f"place these in pyproject.toml's layers: {unplaced}"


# Each form an upward import can take, planted in the HLO floor's package (floor 1) naming the plugin
# (floor 3); the last is lazy, inside a function. One under TYPE_CHECKING never runs, and is no edge.
PLANTED = {
    "import package": "import invariants.plugin\n",
    "from root import package": "from invariants import plugin\n",
    "import": "import invariants.plugin.session\n",
    "from package import module": "from invariants.plugin import session\n",
    "from module import name": "from invariants.plugin.hooks import gate_session\n",
    "relative": "from ..plugin import session\n",
    "lazy": "def f():\n    import invariants.plugin.session\n",
}


@pytest.fixture(scope="module")
def planted_copies(tmp_path_factory) -> dict[str, Path]:
    """A copy of the package and its pyproject.toml for each planted form (and one with a TYPE_CHECKING
    import only)."""
    forms = {**PLANTED, "type checking": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                          "    import invariants.plugin.session\n"}  # fmt: skip
    copies = {}
    for n, (form, code) in enumerate(forms.items()):
        root = tmp_path_factory.mktemp(f"planted{n}")
        shutil.copytree(PACKAGE, root / "invariants", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(PACKAGE.parent / "pyproject.toml", root / "pyproject.toml")
        init = root / "invariants" / "hlo" / "__init__.py"
        init.write_text(init.read_text() + "\n" + code)
        copies[form] = root
    return copies


@pytest.mark.parametrize("form", [*PLANTED, "type checking"])
def test_the_contract_catches_each_form_of_a_planted_upward_import(planted_copies, form):
    """The contract on a copy of the package with one upward import planted (the HLO floor importing the
    plugin), in each form Python has: broken, naming that import; a TYPE_CHECKING import keeps it."""
    result = _lint(planted_copies[form])
    if form == "type checking":
        assert result.returncode == 0, result.stdout[-2000:]
        return
    assert result.returncode == 1 and "1 broken" in result.stdout, result.stdout[-2000:]
    assert "invariants.hlo is not allowed to import invariants.plugin" in result.stdout, result.stdout[-2000:]


# The modules that must start without JAX (hlo-stats, the spec validator, selection, the target table, the
# report's reader of results).
NO_JAX = ("_errors", "_paths", "_stats", "_cores", "_config", "_signals", "_usercode", "_trust", "_supported",
          "scope.configs", "scope.select", "scope.targets", "scope.placement", "scope.installed",
          "records.compiled",
          "records.cache", "records.results", "compile.cache_command",
          "specfile.reader", "specfile.asserts", "hlo.parse", "hlo.structure",
          "hlo.cost", "kernels", "kernels.ptx", "kernels.llvm_ir", "kernels.program", "measure.metrics",
          "measure.measurement", "snapshot.render")  # fmt: skip


def _module_name(path: Path) -> str:
    """``catalog/programs.py`` -> ``catalog.programs``; ``catalog/__init__.py`` -> ``catalog``."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = PACKAGE.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _imported(path: Path, node: ast.ImportFrom) -> list[str]:
    """The package modules one ``from ... import`` names (a name that is a submodule counts as that
    module), as dotted names below ``invariants``; [] for an import from outside the package."""
    if node.level == 0:
        if not (node.module or "").startswith("invariants."):
            return []
        base = node.module.split(".", 1)[1]  # type: ignore[union-attr]
    else:
        name = _module_name(path).split(".")
        package = [p for p in (name if path.name == "__init__.py" else name[:-1]) if p]
        up = node.level - 1
        if up > len(package):
            return []
        base = ".".join(package[: len(package) - up] + ([node.module] if node.module else []))
    subs = [f"{base}.{a.name}" if base else a.name for a in node.names]
    found = [m for m in subs if _is_module(m)]
    return found or ([base] if base else [])


# The import graph, by grimp (import-linter's graph builder): every form of import (``import
# invariants.x``, ``from invariants import x``, relative, inside a function) is an edge, one under
# ``if TYPE_CHECKING:`` is not. Built in a fresh interpreter, so that a copy of the package with a planted
# import is the one read, not the package this process imported.
_GRAPH = """
import json, grimp
g = grimp.build_graph("invariants", cache_dir=None, exclude_type_checking_imports=True)
print(json.dumps({m: sorted(g.find_modules_directly_imported_by(m)) for m in g.modules}))
"""


def module_edges(root: Path = PACKAGE.parent) -> dict[str, set[str]]:
    """Module -> the package modules it imports at run time (``invariants`` itself is ``__init__``), for
    the package folder under ``root``."""
    if root == PACKAGE.parent:
        return {k: set(v) for k, v in _package_graph().items()}
    return _graph_of(root)


@functools.cache
def _package_graph() -> dict[str, frozenset[str]]:
    return {k: frozenset(v) for k, v in _graph_of(PACKAGE.parent).items()}


def _graph_of(root: Path) -> dict[str, set[str]]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", _GRAPH], cwd=root, env=env, capture_output=True, text=True,
                         check=True, timeout=120)  # fmt: skip

    def name(module: str) -> str:
        return module.partition(".")[2] or "__init__"

    graph = json.loads(out.stdout)
    return {name(m): {name(d) for d in deps if d != m} for m, deps in graph.items()}


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


@pytest.mark.e2e
def test_the_lower_floors_import_no_jax():
    """In a fresh interpreter, importing them must not import JAX (hlo-stats, spec checking and selection
    start in a fraction of a second, and on a host without a working jaxlib)."""
    first = _first_with_jax(NO_JAX)
    assert first is None, f"importing invariants.{first} (or what it imports) loads JAX"
    # The check sees JAX where it is: the catalog builds its programs with it.
    assert _first_with_jax(("hlo.parse", "catalog.programs")) == "catalog.programs"


@pytest.mark.e2e
def test_the_project_s_conftest_files_start_no_jax():
    """Under xdist the controller loads every conftest.py and runs no test: JAX imported there (the CUDA
    plugin's notices on a CPU-only host, held by pytest's capture) is printed after the run's summary."""
    root = PACKAGE.parent
    conftests = sorted(str(p) for p in (root / "tests").rglob("conftest.py"))
    assert len(conftests) >= 2, conftests
    code = (
        "import runpy, sys\n"
        f"sys.path[:0] = [{str(root)!r}, {str(root / 'tests' / 'integration')!r}]\n"
        f"for path in {conftests!r}:\n    runpy.run_path(path)\n"
        "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax_')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=99, cwd=root)
    assert proc.returncode == 0, proc.stderr.strip().splitlines()[-1:]
    assert proc.stdout.strip() == "[]", proc.stdout
    assert "cudart_stub" not in proc.stderr, proc.stderr


@pytest.mark.e2e
def test_what_a_release_environment_runs_imports_without_what_it_lacks():
    """A release's environment (versus, bisect, matrix) installs JAX and the suite's test dependencies, not
    this package's own: a versus worker and the gate plugin must start there without the rest (psutil)."""
    import tomllib

    from packaging.requirements import Requirement

    from invariants.releases.environments import SUITE_DEPS

    declared = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    there = {"jax", "jaxlib", "numpy", "equinox", *SUITE_DEPS}
    lacking = sorted({Requirement(r).name for r in declared} - there)
    assert lacking, "every dependency is in a release's environment: this test checks nothing"
    code = (
        f"import sys\nfor m in {lacking!r}:\n    sys.modules[m] = None\n"
        "import invariants.versus.worker, invariants.plugin.hooks, invariants.__main__\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=99)
    assert proc.returncode == 0, proc.stderr.strip().splitlines()[-1:]


@pytest.mark.e2e
def test_what_a_release_environment_runs_imports_on_a_jax_before_axis_types():
    """bisect, matrix and versus run the gate in jax releases back to 0.4.30, whose ``jax.sharding`` has no
    ``AxisType`` nor ``AbstractMesh`` (sharded programs of a project's own need them; nothing else does):
    the plugin, the gate's tests, the compile path and a versus worker import there all the same."""
    modules = (
        "invariants.plugin.hooks", "invariants.plugin.anchors", "invariants.plugin.items",
        "invariants.plugin.timed", "invariants.compile.artifacts", "invariants.catalog.downstream",
        "invariants.testing", "invariants.versus.worker", "invariants.__main__",
    )  # fmt: skip
    code = (
        "import jax.sharding\n"
        "for name in ('AxisType', 'AbstractMesh'):\n    delattr(jax.sharding, name)\n"
        "import importlib\n"
        f"for m in {modules!r}:\n    importlib.import_module(m)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=99)
    assert proc.returncode == 0, proc.stderr.strip().splitlines()[-1:]


def test_every_tox_env_that_installs_the_package_without_dependencies_has_them():
    """tox's nightly and old-release envs install the package with --no-deps (their JAX must stay): each
    lists the package's other dependencies ([base] package_deps), and those are pyproject's."""
    import configparser
    import tomllib

    from packaging.requirements import Requirement

    tox = configparser.ConfigParser(interpolation=None)
    tox.read(PACKAGE.parent / "tox.ini")
    names = {Requirement(r).name for key in ("test_deps", "package_deps") for r in tox["base"][key].split()}
    declared = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    missing = sorted({Requirement(r).name for r in declared} - names - {"jax", "jaxlib", "numpy", "equinox"})
    assert not missing, f"tox.ini [base] package_deps lacks {missing}"
    no_deps = [n for n in tox.sections() if "--no-deps" in tox[n].get("commands_pre", "")]
    assert no_deps, "no tox env installs the package with --no-deps: this test checks nothing"
    lacking = [n for n in no_deps if "{[base]package_deps}" not in tox[n].get("deps", "")]
    assert not lacking, f"tox envs that install the package --no-deps, lacking its dependencies: {lacking}"


_MUTATORS = {"append", "extend", "insert", "pop", "clear", "update", "setdefault", "add", "discard", "remove"}


def _root(node: ast.expr) -> ast.expr:
    """``X`` of ``X.a.b`` and ``X[k].a``: the name whose object a change reaches."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node


def _mutated_globals(tree: ast.Module) -> list[str]:
    """Module-level names that a function of the module changes: in place (``X.append(...)``,
    ``X[k] = v``, ``X.a.b.clear()``, ``X.attr = v``) or rebound (``global X``): state kept in module
    globals, not constants. Another module's object imported by name (at the top or in a function) counts
    as well: changing it from here is the same state, kept one module away (a singleton of one module set
    from another's hooks)."""
    bound = {
        t.id
        for n in tree.body
        if isinstance(n, ast.Assign | ast.AnnAssign)
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        if isinstance(t, ast.Name)
    }
    bound |= {
        alias.asname or alias.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").startswith("invariants"))
        for alias in n.names
    }
    changed: set[str] = set()
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)):
        for node in ast.walk(fn):
            if isinstance(node, ast.Global):
                changed.update(node.names)
                continue
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MUTATORS
            ):
                base = node.func.value
            elif isinstance(node, ast.Assign | ast.AugAssign) and isinstance(
                (target := node.targets[0] if isinstance(node, ast.Assign) else node.target),
                ast.Subscript | ast.Attribute,
            ):
                base = target.value
            else:
                continue
            root = _root(base)
            if isinstance(root, ast.Name) and root.id in bound:
                changed.add(root.id)
    return sorted(changed)


# State that belongs to the process, not to a run (file below invariants/, name) -> why. Everything else a
# run keeps lives on its session (``config.stash``) or in the objects it hands down.
PROCESS_STATE = {
    ("_usercode.py", "_started"): "the non-daemon threads a project's imports started: threads are the "
    "process's, and its exit must not wait for them",
    ("_usercode.py", "_exit_status"): "the status the process exits with, past those threads",
    ("_usercode.py", "_depth"): "how deep guarded calls nest: the alarm and the os._exit stand-in, which "
    "the guard swaps, are the process's",
    ("_usercode.py", "_explicit"): "the guard's timeout, set with the alarm it arms: a compile thread's "
    "trace reads it, where a run's session is not at hand",
    ("scope/targets.py", "_TOPOLOGIES"): "the devices of a topology compiled for ahead of time: a PJRT "
    "plugin starts once per process",
}


def test_no_module_keeps_a_runs_state():
    """A run's state (its programs, items, notes, guards, memos) lives on its session or in what it hands
    down, never in module globals, so that two runs in one process (pytester, the API's tests, a
    self-check's swapped programs) never share it. The whole package is read; what belongs to the process
    itself is listed in PROCESS_STATE with its reason."""
    found = {
        (str(p.relative_to(PACKAGE)), name)
        for p in sorted(PACKAGE.rglob("*.py"))
        if "__pycache__" not in p.parts
        for name in _mutated_globals(_parsed(p.read_text()))
    }
    assert not found - set(PROCESS_STATE), sorted(found - set(PROCESS_STATE))
    assert not set(PROCESS_STATE) - found, (
        f"PROCESS_STATE lists what is gone: {sorted(set(PROCESS_STATE) - found)}"
    )


# The memos of the package (functools.cache, lru_cache) -> why each holds constant data, or the process's, and
# never a run's: a run's memo lives on its session or in what it hands down.
MEMOS = {
    ("catalog/arguments.py", "_arguments"): "the arrays drawn for a shape, configuration and seed: the same "
    "arrays for the same key, bounded",
    ("hlo/tpu_model.py", "_cost_file"): "the package's own cost table, parsed",
    ("records/results.py", "_resolved"): "a record class's resolved type hints: a class is the process's",
    ("records/results.py", "_named"): "a record class's JSON names: a class is the process's",
    ("compile/compat.py", "_abstract_mesh_constrains"): "whether the installed JAX release resolves a "
    "PartitionSpec on an abstract mesh: the release is the process's",
    ("compile/child.py", "stage"): "the folder this process stages the package in: the paths its workers "
    "report below it are recognised, and it is removed at exit",
    ("scope/installed.py", "_owners"): "which distributions install each top-level package, for one set of "
    "installed distributions (its key): the same while none is installed, upgraded or removed",
    ("scope/installed.py", "_plugin_packages"): "the jax_plugins entry points' packages, for one set of "
    "installed distributions (its key)",
    ("scope/installed.py", "_shared_objects"): "the paths of the compiler's shared objects, for one set of "
    "installed distributions (its key); what builds each is read at each call",
    ("scope/installed.py", "_record_rows"): "the shared objects a RECORD file lists, for one reading of it "
    "(its path, mtime and size are the key): an install over it is another reading",
    ("testing.py", "_persistent"): "the pytest API's handle on a compile-cache folder, which compile_for "
    "outside any session needs: its compiler fingerprint read once, the folder pruned once at exit; a "
    "call reads only the outcome of the compile it just made",
}


def _memos(tree: ast.Module) -> list[str]:
    """The functions of a module memoized by ``functools.cache`` or ``lru_cache`` (a decorator or a call)."""

    def is_memo(node: ast.expr) -> bool:
        node = node.func if isinstance(node, ast.Call) and not node.args else node
        name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
        return name in ("cache", "lru_cache")

    found = [
        n.name
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and any(is_memo(d) for d in n.decorator_list)
    ]
    found += [
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and is_memo(n.value.func)
        for t in n.targets
        if isinstance(t, ast.Name)
    ]
    return sorted(found)


def test_every_memo_holds_constant_data():
    """No module memoizes a run's state (the programs built from a project, above all): each memo of the
    package is listed in MEMOS with why it is constant data or the process's own."""
    found = {
        (str(p.relative_to(PACKAGE)), name)
        for p in sorted(PACKAGE.rglob("*.py"))
        if "__pycache__" not in p.parts
        for name in _memos(_parsed(p.read_text()))
    }
    assert found == set(MEMOS), (sorted(found - set(MEMOS)), sorted(set(MEMOS) - found))
    planted = ast.parse("import functools\n@functools.cache\ndef build(d):\n    return d\n")
    assert _memos(planted) == ["build"]


def test_the_state_check_catches_each_form():
    """Shown on plants: in-place changes, a rebinding through ``global``, another module's object changed
    from here, and the program table the registry kept before runs owned their programs."""
    planted = ast.parse(
        "_RESULTS: dict[str, int] = {}\n_NOTES = []\nKINDS = {'a': 1}\n_SEEN = None\n"
        "def f(x):\n    global _SEEN\n    _SEEN = x\n    _RESULTS['a'] = 1\n    _NOTES.append(x)\n"
        "    return KINDS['a']\n"
    )
    assert _mutated_globals(planted) == ["_NOTES", "_RESULTS", "_SEEN"]
    old_hooks = ast.parse(
        "def finish(s):\n    from ..snapshot.store import GUARD\n"
        "    GUARD.known_stems.clear()\n    GUARD.selected = s.selected\n"
    )
    assert _mutated_globals(old_hooks) == ["GUARD"]
    old_registry = ast.parse(
        "_DECLARED: dict = {}\nPROGRAMS = ChainMap(_DECLARED, CATALOG)\n"
        "def declare(programs):\n    for p in programs:\n        _DECLARED[p.name] = p\n"
    )
    assert _mutated_globals(old_registry) == ["_DECLARED"]


# ---------------------------------------------------------------------------------------------------------
# The lazy-import contract: an import inside a function hides what a module needs from its reader, so it
# has a reason, and only three count. The imported module starts a library of LAZY_LIBRARIES when it is
# imported (JAX must start after compile.process sets the environment, and never under a NO_JAX module;
# an optional dependency may be missing); or importing it at the top would close an import cycle; or the
# import is on ALLOWED_LAZY, with its reason. Everything else goes to the top of its file.

# JAX and what starts it (equinox, the libraries of the catalog's programs), and the optional dependencies
# (pyproject's test, libs and tpu extras) that the commands and the lower floors start without.
LAZY_LIBRARIES = frozenset({
    "jax", "jaxlib", "equinox", "flax", "haiku", "libtpu", "scipy", "matplotlib", "pytest", "_pytest",
    "xdist", "syrupy", "pytest_benchmark",
})  # fmt: skip

# (file below invariants/, module) -> why that module is imported inside a function there.
_INERT = "the pytest11 entry point loads in every pytest session: inert, it imports no more until used"
ALLOWED_LAZY: dict[tuple[str, str], str] = {
    ("pytest_plugin.py", "invariants._errors"): _INERT + " (test_pytest_api)",
    ("pytest_plugin.py", "invariants.testing"): _INERT + " (test_pytest_api)",
    ("measure/metrics.py", "numpy"): "the metric registry loads with hlo-stats and the spec validator, which "
    "start without numpy (a tenth of a second); only a configuration's item size needs it",
    ("snapshot/user.py", "invariants.testing"): "the pytest API's value type, checked when a test compares "
    "one: testing is the public face above the snapshot floor, so the reference runs upward and waits",
    ("selfcheck/children.py", "invariants.versus.report"): "numpy and the versus report, read for a versus "
    "injection only: selfcheck --help and --list start in a tenth of a second without them",
    ("report/run.py", "invariants.timing.paired"): "the timer's verdict rules bring numpy: report --help "
    "starts without it (test_main); only a timed record is judged by them",
    ("records/results.py", "fcntl"): "POSIX only: where it is missing (Windows) a run locks nothing",
    ("_signals.py", "psutil"): "a release's environment (a versus worker, a bisect or matrix run) imports "
    "the package without psutil; only the command that was signalled ends its processes",
}


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _imports_by_place(
    tree: ast.AST,
) -> tuple[list[ast.Import | ast.ImportFrom], list[ast.Import | ast.ImportFrom]]:
    """(the imports that run when the module is imported, those inside a function); neither counts one
    under ``if TYPE_CHECKING:`` (it never runs)."""
    top: list[ast.Import | ast.ImportFrom] = []
    inner: list[ast.Import | ast.ImportFrom] = []

    def visit(nodes: list[ast.AST], in_function: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(list(node.orelse), in_function)
                continue
            if isinstance(node, ast.Import | ast.ImportFrom):
                (inner if in_function else top).append(node)
            visit(list(ast.iter_child_nodes(node)), in_function or isinstance(node, _FUNCTIONS))

    visit(list(ast.iter_child_nodes(tree)), False)
    return top, inner


def _targets(path: Path, node: ast.Import | ast.ImportFrom) -> tuple[list[str], list[str]]:
    """(the package modules one import names, as in :func:`module_edges`; the outside libraries it names,
    by their top-level name)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
        mine = [n.partition(".")[2] or "__init__" for n in names if n.split(".")[0] == "invariants"]
        return mine, [n.split(".")[0] for n in names if n.split(".")[0] != "invariants"]
    if node.level == 0 and node.module == "invariants":
        return [a.name if _is_module(a.name) else "__init__" for a in node.names], []
    if node.level == 0 and not (node.module or "").startswith("invariants."):
        return [], [(node.module or "").split(".")[0]]
    return [m or "__init__" for m in _imported(path, node)], []


def _parents(module: str) -> list[str]:
    """What importing ``module`` runs first: ``invariants`` and each package above it."""
    parts = module.split(".") if module != "__init__" else []
    return ["__init__", *(".".join(parts[:n]) for n in range(1, len(parts)))]


@functools.cache
def _parsed(source: str) -> ast.Module:
    """A module's syntax tree, parsed once per source text: the checks here each walk the whole package
    (and read its trees, never change them)."""
    return ast.parse(source)


def _package_files() -> dict[str, Path]:
    return {
        _module_name(p) or "__init__": p
        for p in sorted(PACKAGE.rglob("*.py"))
        if "snapshots" not in p.parts and "__pycache__" not in p.parts
    }


def _import_time_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Module -> (the package modules its top-level imports name; the LAZY_LIBRARIES they name)."""
    modules: dict[str, set[str]] = {}
    libraries: dict[str, set[str]] = {}
    for me, path in _package_files().items():
        top, _ = _imports_by_place(_parsed(path.read_text()))
        for node in top:
            mine, outside = _targets(path, node)
            modules.setdefault(me, set()).update(m for m in mine if m != me)
            libraries.setdefault(me, set()).update(n for n in outside if n in LAZY_LIBRARIES)
    return modules, libraries


def _reach(edges: dict[str, set[str]], start: str, parents: bool) -> set[str]:
    """The modules importing ``start`` runs (``start`` included); with ``parents``, the packages above
    each too (Python runs a package's ``__init__`` before its submodules)."""
    seen: set[str] = set()
    stack = [start, *(_parents(start) if parents else ())]
    while stack:
        m = stack.pop()
        if m in seen:
            continue
        seen.add(m)
        for nxt in edges.get(m, ()):
            stack += [nxt, *(_parents(nxt) if parents else ())]
    return seen


def _lazy_imports(planted: dict[str, str] | None = None) -> list[tuple[str, int, str, str]]:
    """``(file, line, module, reason)`` for each module an import inside a function names; ``reason`` is
    ``"starts"`` (a library of LAZY_LIBRARIES, or a module that imports one when it is imported),
    ``"cycle"``, ``"allowed"`` (ALLOWED_LAZY) or ``""`` (none). ``planted``: file -> a source that replaces
    that file's, to show the check at work."""
    modules, libraries = _import_time_graph()
    found = []

    def started(module: str) -> set[str]:
        """The LAZY_LIBRARIES that importing ``module`` starts."""
        return set().union(*(libraries.get(x, set()) for x in _reach(modules, module, parents=True)))

    for me, path in _package_files().items():
        file = str(path.relative_to(PACKAGE))
        source = (planted or {}).get(file) or path.read_text()
        # What this module starts when it is imported is started before any of its functions runs: a lazy
        # import of it waits for nothing.
        already = started(me)
        for node in _imports_by_place(_parsed(source))[1]:
            mine, outside = _targets(path, node)
            for lib in outside:
                if lib in LAZY_LIBRARIES and lib not in already:
                    reason = "starts"
                else:
                    reason = "allowed" if (file, lib) in ALLOWED_LAZY else ""
                found.append((file, node.lineno, lib, reason))
            for m in mine:
                name = "invariants" if m == "__init__" else f"invariants.{m}"
                if started(m) - already:
                    reason = "starts"
                elif me in _reach(modules, m, parents=False):
                    reason = "cycle"
                else:
                    reason = "allowed" if (file, name) in ALLOWED_LAZY else ""
                found.append((file, node.lineno, name, reason))
    return found


def unneeded_lazy_imports(planted: dict[str, str] | None = None) -> list[tuple[str, int, str]]:
    """``(file, line, module)`` for each import inside a function that has none of the contract's reasons."""
    return [(file, line, m) for file, line, m, reason in _lazy_imports(planted) if not reason]


def _lines(found: list[tuple[str, int, str]]) -> list[str]:
    return [
        f"invariants/{file}:{line} imports {m} inside a function; move it to the top"
        for file, line, m in found
    ]


def test_an_import_inside_a_function_has_a_reason():
    lazy = _lazy_imports()  # one scan of the package for both checks
    found = [(file, line, m) for file, line, m, reason in lazy if not reason]
    assert not found, "\n".join(_lines(found))
    used = {(file, m) for file, _, m, reason in lazy if reason == "allowed"}
    stale = sorted(set(ALLOWED_LAZY) - used)
    assert not stale, f"ALLOWED_LAZY names imports that no function makes any more: {stale}"


def test_the_lazy_contract_catches_a_planted_import():
    """In the timing calls a function imports the HLO parser's neighbour and json (no reason: both are
    named), JAX and the catalog (they start JAX: allowed); in the kernels' facts a function imports the
    kernels' program, which imports the facts at its top (a cycle: allowed); in the compile artifacts, which
    start JAX at their top, a function imports JAX again (no reason: it has started)."""
    calls = (PACKAGE / "timing" / "calls.py").read_text()
    calls += (
        "\n\ndef _planted():\n    import json\n\n    import jax\n\n"
        "    from ..catalog.programs import CATALOG\n    from ..hlo.structure import structure_of\n"
    )
    facts = (
        PACKAGE / "kernels" / "facts.py"
    ).read_text() + "\n\ndef _planted():\n    from .program import ProgramCode\n"
    # A module that starts JAX when it is imported has no reason to import it late.
    artifacts = (PACKAGE / "compile" / "artifacts.py").read_text() + "\n\ndef _planted():\n    import jax\n"
    planted = {"timing/calls.py": calls, "kernels/facts.py": facts, "compile/artifacts.py": artifacts}
    found = [f for f in unneeded_lazy_imports(planted) if f[0] in planted]
    last = len(calls.splitlines())
    assert found == [
        ("compile/artifacts.py", len(artifacts.splitlines()), "jax"),
        ("timing/calls.py", last - 5, "json"),
        ("timing/calls.py", last, "invariants.hlo.structure"),
    ]
    assert _lines(found[1:2]) == [
        f"invariants/timing/calls.py:{last - 5} imports json inside a function; move it to the top"
    ]
