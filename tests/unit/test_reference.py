"""docs/reference.md is what its sources say: every option of the gate (its option table) and of each
command (their parsers), the environment's settings and every metric (the registry), rendered by
``scripts/make_reference.py``. A change to any of them without the page fails here."""

from __future__ import annotations

import difflib
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "reference.md"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_reference", ROOT / "scripts" / "make_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_page_is_generated_from_the_tables() -> None:
    rendered = _generator().render()
    committed = PAGE.read_text()
    diff = "\n".join(
        difflib.unified_diff(committed.splitlines(), rendered.splitlines(), "docs/reference.md", "the tables",
                             lineterm="", n=1)
    )  # fmt: skip
    if committed != rendered:
        pytest.fail(
            "docs/reference.md differs from its tables: run `python scripts/make_reference.py`\n"
            + diff[:4000]
        )


def test_the_page_names_every_option_command_and_metric() -> None:
    """Not an empty page that equals an empty rendering: each source's every entry is on it."""
    from invariants.__main__ import COMMANDS
    from invariants.measure.metrics import METRICS
    from invariants.plugin.options import OPTIONS

    page = PAGE.read_text()
    assert all(f"| `{o.flag}" in page for o in OPTIONS)
    assert all(f"\n### {name}\n" in page for name in COMMANDS)
    assert all(f"| `{name}" in page for name in METRICS)
    parser = _generator().parser_of("versus")
    flags = [f for a in parser._actions if a.dest != "help" for f in a.option_strings]
    assert flags and all(f"`{flag}" in page for flag in flags)
