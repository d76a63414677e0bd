"""The environment-variable table (invariants._config): the one place an ``INVARIANTS_*`` name is read."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import invariants
from invariants import _config

PACKAGE = Path(invariants.__file__).parent
ROOT = PACKAGE.parent
NAME = re.compile(r"INVARIANTS_[A-Z_]+")


def _stray_names(tree: ast.AST) -> list[tuple[int, str]]:
    """``INVARIANTS_*`` string constants that are not the argument of a ``_config`` call."""
    through_config: set[int] = set()
    for node in ast.walk(tree):
        func = node.func if isinstance(node, ast.Call) else None
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "_config"
        ):
            through_config |= {id(a) for a in node.args}  # type: ignore[attr-defined]
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and NAME.fullmatch(n.value)
        if id(n) not in through_config
    ]


def test_every_variable_is_read_through_the_table():
    stray = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_config.py" or "snapshots" in path.parts:
            continue
        stray += [
            f"{path.relative_to(ROOT)}:{line}: {name}"
            for line, name in _stray_names(ast.parse(path.read_text()))
        ]
    assert not stray, "read these through invariants._config: " + "; ".join(stray)


def test_the_check_sees_a_direct_read():
    tree = ast.parse(
        'import os\nx = os.environ.get("INVARIANTS_TARGETS")\ny = _config.get("INVARIANTS_TARGETS")\n'
    )
    assert _stray_names(tree) == [(2, "INVARIANTS_TARGETS")]


def test_an_unknown_name_is_an_error_not_nothing():
    with pytest.raises(KeyError):
        _config.get("INVARIANTS_TARGET")  # one letter short
    with pytest.raises(KeyError):
        _config.name("INVARIANTS_NOPE")


def test_reads_the_environment(monkeypatch):
    monkeypatch.setenv("INVARIANTS_TARGETS", "cpu")
    assert _config.get("INVARIANTS_TARGETS") == "cpu"
    monkeypatch.delenv("INVARIANTS_TARGETS")
    assert _config.get("INVARIANTS_TARGETS", "all") == "all"


def test_the_docs_name_only_variables_that_exist():
    """A variable the README or docs tell a user to set is in the table (so it is read somewhere)."""
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = {m for p in texts for m in NAME.findall(p.read_text())}
    assert named, "the docs name no variable: the check reads nothing"
    assert named <= set(_config.VARIABLES), sorted(named - set(_config.VARIABLES))


def test_a_broken_row_of_the_table_is_said_at_import(tmp_path, monkeypatch):
    """The table is the package's own data: a row with an unknown kind is refused when it is read, with
    the file and the variable, not taken as a setting."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "environment.toml").write_text('[INVARIANTS_X]\nkind = "settng"\nmeaning = "m"\n')
    monkeypatch.setattr(_config, "PACKAGE_DIR", tmp_path)
    with pytest.raises(
        RuntimeError, match=r"environment\.toml: INVARIANTS_X: kind must be 'setting' or 'protocol'"
    ):
        _config._table()
    assert set(_config.VARIABLES) >= {"INVARIANTS_TARGETS", "INVARIANTS_INJECT"}  # the real table is intact
