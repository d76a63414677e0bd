"""Library programs (flax, haiku) need the ``libs`` extra; without it they skip, saying how to install it.

The missing library is simulated the way Python itself reports one: ``sys.modules[name] = None`` makes
``import name`` raise ImportError and ``importlib.util.find_spec(name)`` return None.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gatekit import InProcess

from invariants.catalog.programs import CATALOG, LIBS_HINT

ROOT = Path(__file__).parents[3]
LIBRARY_PROGRAMS = [name for name, p in CATALOG.items() if p.requires]


def test_every_library_program_names_its_library_and_the_rest_none():
    assert {CATALOG[n].requires for n in LIBRARY_PROGRAMS} == {("flax",), ("haiku",)}
    assert len(LIBRARY_PROGRAMS) == 14  # 4 modules x (forward, grad, train) + the tied one and its grad
    assert all(p.unavailable_reason() is None for p in CATALOG.values())  # installed here: nothing skips


def test_missing_library_gives_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "haiku", None)
    reason = CATALOG["grad_haiku_embed"].unavailable_reason()
    assert reason == f"grad_haiku_embed: dm-haiku not installed; {LIBS_HINT}"
    assert "pip install -e '.[libs]'" in reason and "pip install 'jax-embedding-invariants[libs]'" in reason
    assert CATALOG["flax_linen_embed"].unavailable_reason() is None
    assert CATALOG["take"].unavailable_reason() is None


def test_the_test_extra_pins_what_is_installed_and_the_libs_extra_pins_nothing():
    """The project's own runs install the versions the catalog's snapshots were recorded with (test-libs);
    the libs extra a user installs leaves a flax-based library its own flax: no version is forced."""
    import importlib.metadata
    import tomllib

    from packaging.requirements import Requirement

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    loose = {Requirement(r).name: Requirement(r).specifier for r in extras["libs"]}
    # Beside the libraries, test-libs caps what the project's own environment needs (ml_dtypes).
    pinned = [Requirement(r) for r in extras["test-libs"] if Requirement(r).name in loose]
    for requirement in pinned:
        (spec,) = requirement.specifier
        assert spec.operator == "==" and importlib.metadata.version(requirement.name) == spec.version
    assert set(loose) == {r.name for r in pinned}
    for requirement in pinned:  # the recorded version and a later one both satisfy it
        (spec,) = requirement.specifier
        later = spec.version.split(".")[0] + ".999"
        assert loose[requirement.name].contains(spec.version) and loose[requirement.name].contains(later)
    readme = (ROOT / "README.md").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("python3 -m venv")]
    assert len(commands) == 2 and all(",test-libs" in c for c in commands), commands
    assert ",test-libs" in (ROOT / ".ci" / "run").read_text()


def test_gate_without_libraries_skips_their_items_with_the_install_command(
    gate_pytester: InProcess, monkeypatch
):
    """In this process, on a host without flax and haiku as far as imports can tell."""
    gate_pytester.project(targets=("cpu",))
    monkeypatch.setitem(sys.modules, "flax", None)
    monkeypatch.setitem(sys.modules, "haiku", None)
    programs = "take,flax_linen_embed,grad_flax_linen_embed,haiku_embed,flax_nnx_embed_attend,tied_take"
    proc = gate_pytester.pytest(
        "-rs", "tests/gate/test_structure.py", "tests/gate/test_invariants.py", "--targets", "cpu",
        "--programs", programs,
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:]
    # Every item about a library program skipped, each with the extra's install command; the rest ran.
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert any("flax not installed" in line and LIBS_HINT in line for line in skipped), out[-3000:]
    assert any("dm-haiku not installed" in line and LIBS_HINT in line for line in skipped), out[-3000:]
    assert "passed" in out.splitlines()[-1]
    assert "::cpu::flax_linen_embed-f32" not in out  # skipped items are not listed as run


def test_a_library_program_imports_its_library_one_thread_at_a_time(monkeypatch):
    """The gate traces programs in several compile threads: two first imports of flax.nnx and flax.linen at
    once met flax's circular imports half done ("partially initialized module 'flax.core'"). Each library
    program imports under the catalog's one lock."""
    import builtins

    import jax

    from invariants.catalog import programs
    from invariants.catalog.arguments import make_arguments

    held: list[bool] = []
    real = builtins.__import__

    def watched(name: str, globals: dict | None = None, *args: object, **kwargs: object) -> object:
        # The catalog's own imports (a library's imports of its own modules are its business).
        if name.split(".")[0] in ("flax", "haiku") and (globals or {}).get("__name__") == programs.__name__:
            held.append(programs.IMPORTING.locked())
        return real(name, globals, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", watched)
    jax.clear_caches()  # a trace cached by an earlier test would run no import at all
    for name in LIBRARY_PROGRAMS:
        program = CATALOG[name]
        jax.make_jaxpr(program.fn)(*make_arguments(program, programs.get_config(program.configs[0])))
    assert held and all(held)
