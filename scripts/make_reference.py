"""docs/reference.md, generated: every option of the gate and of each command, the settings read from the
environment, and every metric.

    python scripts/make_reference.py           # rewrite docs/reference.md
    python scripts/make_reference.py --check   # exit 1, with a diff, when the page differs from its sources

Its sources, each the one place its subject is written:

* the gate's pytest options: the option table, ``invariants/plugin/options.py`` (``OPTIONS``);
* the commands: the command table, ``invariants/__main__.py`` (``COMMANDS``), and each command's own
  ``argparse`` parser, taken from the command's entry point as ``python -m invariants COMMAND`` runs it: the
  entry is called with no arguments, and the parser stops it as it starts to parse (nothing else runs);
* the environment: ``invariants/data/environment.toml`` (``invariants._config.VARIABLES``), its settings;
* the metrics: the metric registry, ``invariants/measure/metrics.py`` (``METRICS``, ``markdown_table``).

``tests/unit/test_reference.py`` renders the page and fails when the committed one differs.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference.md"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # as every command does, before JAX starts

HEADER = """\
# Reference

Every option of the gate and of each `python -m invariants` command, the settings read from the
environment, and every metric a spec's `assert` may name. This page is generated from the tables in the
code by `python scripts/make_reference.py`; `tests/unit/test_reference.py` fails when it differs from
them, so edit the tables, not this page.
"""


def _cell(text: object) -> str:
    """One markdown table cell: one line, pipes escaped, this machine's home folder as ``~``."""
    one = re.sub(r"\s+", " ", str(text)).strip().replace(str(Path.home()), "~")
    return one.replace("|", "\\|")


def _para(text: str) -> str:
    return textwrap.fill(text, width=110, break_on_hyphens=False, break_long_words=False)


def _default(value: object) -> str:
    if value is None or value is False or value == [] or value == argparse.SUPPRESS:
        return ""
    return f"`{value}`"


GATE_INTRO = (
    "`pytest invariants/gate [OPTIONS]`, from the option table (`invariants/plugin/options.py`). "
    "`python -m invariants gate` passes them to pytest too. Besides them, syrupy's `--snapshot-update` "
    "records the snapshots that differ or are missing, and pytest's own options (`-k`, `-m`, `-n auto`, "
    "...) work as usual. An option's default comes from its environment variable when that is set."
)


def gate_options() -> str:
    from invariants.plugin.options import OPTIONS

    rows = [
        "## The gate's options",
        "",
        _para(GATE_INTRO),
        "",
        "| option | default | environment | meaning |",
        "|---|---|---|---|",
    ]
    for o in OPTIONS:
        metavar = o.flags.get("metavar", o.flag.lstrip("-").replace("-", "_").upper())
        value = "" if o.flags.get("action") == "store_true" else f" {metavar}"
        env = f"`{o.env}`" if o.env else ""
        rows.append(f"| `{o.flag}{value}` | {_default(o.default)} | {env} | {_cell(o.help)} |")
    return "\n".join(rows)


def environment() -> str:
    from invariants import _config

    rows = [
        "## Environment",
        "",
        _para(
            "The `INVARIANTS_*` settings, from `invariants/data/environment.toml` (the variables the suite "
            "sets for its own child processes are left out)."
        ),
        "",
        "| variable | meaning |",
        "|---|---|",
    ]
    for v in _config.VARIABLES.values():
        if v.kind == "setting":
            rows.append(f"| `{v.name}` | {_cell(v.meaning)} |")
    return "\n".join(rows)


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


@contextmanager
def _stop_at_parse() -> Iterator[None]:
    def stop(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> NoReturn:
        raise _Parsed(self)

    saved = argparse.ArgumentParser.parse_known_args
    argparse.ArgumentParser.parse_known_args = stop  # type: ignore[assignment,method-assign]
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_known_args = saved  # type: ignore[method-assign]


def parser_of(command: str) -> argparse.ArgumentParser:
    """The parser ``python -m invariants COMMAND`` parses its arguments with."""
    from invariants.__main__ import COMMANDS

    module = importlib.import_module(COMMANDS[command][0])
    entry = getattr(module, "main_" + command.replace("-", "_"), None) or module.main
    with _stop_at_parse():
        try:
            entry([])
        except _Parsed as parsed:
            return parsed.parser
    raise RuntimeError(f"{command}: its entry point returned without parsing its arguments")


def _argument(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest.upper()}`"
    if action.nargs == 0:
        return ", ".join(f"`{s}`" for s in action.option_strings)
    if action.choices:
        value = "{" + ",".join(map(str, action.choices)) + "}"
    else:
        metavar = action.metavar or action.dest.upper()
        value = " ".join(metavar) if isinstance(metavar, tuple) else str(metavar)
    return ", ".join(f"`{s} {value}`" for s in action.option_strings)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    text = action.help or ""
    if "%(" in text:
        text = text % {**vars(action), "prog": parser.prog}
    if action.required:
        text = f"(required) {text}"
    return _cell(text)


def commands() -> str:
    from invariants.__main__ import COMMANDS

    rows = [
        "## Commands",
        "",
        _para(
            "`python -m invariants COMMAND [ARGS]`, from the command table (`invariants/__main__.py`) and "
            "each command's parser: what `python -m invariants COMMAND --help` says. Bad input to any of "
            "them is one line on stderr and exit 2."
        ),
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    rows += [f"| [`{name}`](#{name}) | {_cell(doc)} |" for name, (_, doc) in COMMANDS.items()]
    for name in COMMANDS:
        parser = parser_of(name)
        rows += ["", f"### {name}", "", _para(f"`{parser.prog}`: {_cell(parser.description or '')}"), ""]
        rows += ["| argument | meaning |", "|---|---|"]
        for action in parser._actions:
            if not isinstance(action, argparse._HelpAction):
                rows.append(f"| {_argument(action)} | {_help(parser, action)} |")
        if parser.epilog and name == "gate":
            rows += ["", _para(_cell(parser.epilog))]
    return "\n".join(rows)


def metrics() -> str:
    from invariants.measure.metrics import markdown_table

    return "\n".join([
        "## Metrics",
        "",
        _para(
            "What a spec's `assert` may name, from the metric registry "
            "(`invariants/measure/metrics.py`, where a metric is added). `python -m invariants hlo-stats "
            "--help` lists them too, by source. Both sides of a comparison must have the same type."
        ),
        "",
        markdown_table(),
    ])  # fmt: skip


def render() -> str:
    return "\n\n".join([HEADER.rstrip("\n"), gate_options(), environment(), commands(), metrics()]) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--check", action="store_true", help="compare with docs/reference.md instead of writing it"
    )
    args = p.parse_args(argv)
    text = render()
    if not args.check:
        PAGE.write_text(text)
        print(f"make_reference: wrote {PAGE.relative_to(ROOT)}")
        return 0
    committed = PAGE.read_text() if PAGE.exists() else ""
    if committed == text:
        return 0
    diff = difflib.unified_diff(
        committed.splitlines(), text.splitlines(), "docs/reference.md", "generated", lineterm=""
    )
    print("\n".join(diff))
    print("make_reference: docs/reference.md differs from the tables; run python scripts/make_reference.py")
    return 1


if __name__ == "__main__":
    sys.exit(main())
