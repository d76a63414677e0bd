"""``python -m invariants gate``: the gate's shipped modules (:mod:`invariants.gate`) run on a downstream
project's own programs, and unless ``--no-catalog`` on the catalog's, whose snapshots the package ships
read-only.

The working directory is the project: its modules import from it, and ``artifacts/`` lands in it. pytest
reads no configuration file of the project (``-c`` is the null device), so its ``addopts`` cannot change
the gate. Bad input stops before pytest starts, with one line and exit 2; otherwise the exit status is
pytest's.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .._errors import InvariantsError, Parser
from .._paths import PACKAGE_DIR
from .._usercode import set_timeout
from ..compile.child import pytest_args
from ..compile.process import guard_backend, pin_worker
from ..specfile.reader import SPEC_DIR, ProgramDecl, load_specs
from .options import BUILT_PROGRAMS, OPTIONS, Option

if TYPE_CHECKING:
    from ..catalog.programs import Program


def _parser() -> Parser:
    p = Parser(
        prog="python -m invariants gate",
        description="Run the gate on a project's own programs (and the catalog's), from the package.",
        epilog="Other arguments go to pytest: --targets, --programs, --configs, --hlo-dump-dir, "
        "--results-json, -n auto, -k ...",
    )
    p.add_argument(
        "--spec-dir",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="a folder of *.toml spec files: [[program]], [[invariant]], [[correctness]], "
        "[[known_compile_failure]] (repeatable)",
    )
    p.add_argument(
        "--snapshot-dir",
        type=Path,
        default=Path("snapshots"),
        metavar="DIR",
        help="where the declared programs' snapshots are read and written (default: ./snapshots)",
    )
    p.add_argument(
        "--no-catalog",
        action="store_true",
        help="leave out the catalog's own programs and specs; the catalog programs your relations name "
        "(structure(mine) == structure(take), time(mine) / time(take)) still compile for those relations",
    )
    p.add_argument(
        "--user-code-timeout",
        metavar="SECONDS",
        default=None,
        help="seconds one import of your module, one call of a params or inputs factory, or one trace of "
        "your function may take before the run fails in one line (default 300; INVARIANTS_USER_CODE_TIMEOUT)",
    )
    for option in _FORWARDED:
        p.add_argument(option.flag, **option.flags, help=option.help)
    return p


# The flags this command lists in --help and passes to pytest as given.
_FORWARDED = (
    Option(
        "--snapshot-update",
        "record the snapshots that differ or are missing, and "
        "the efficiency baselines that are missing (never rewriting one)",
        {"action": "store_true"},
    ),
    *(o for o in OPTIONS if o.forwarded),
)


def _forwarded(args: argparse.Namespace) -> list[str]:
    out: list[str] = []
    for o in _FORWARDED:
        value = getattr(args, o.flag.lstrip("-").replace("-", "_"))
        if o.flags.get("action") == "store_true":
            out += [o.flag] if value else []
        elif value is not None:
            out += [o.flag, str(value)]
    return out


def _check(args: argparse.Namespace, selection: str | None) -> _Built:
    """Everything that can be said wrong before pytest starts, as one line; the declared programs, built."""
    from ..catalog.downstream import build_all

    if args.no_catalog and not args.spec_dir:
        raise InvariantsError("--no-catalog: give --spec-dir DIR with the programs to gate")
    snapshot_dir = args.snapshot_dir.resolve()
    if snapshot_dir == PACKAGE_DIR or PACKAGE_DIR in snapshot_dir.parents:
        raise InvariantsError(
            f"--snapshot-dir {args.snapshot_dir}: inside the installed package; use a project folder"
        )
    dirs = [*([] if args.no_catalog else [SPEC_DIR]), *args.spec_dir]
    decls = [d for spec in load_specs(*dirs) for d in spec.programs]
    if args.no_catalog and not decls:
        raise InvariantsError(
            f"{args.spec_dir[0]}: no [[program]] declared; with --no-catalog nothing is gated"
        )
    return _Built(dict(zip(decls, build_all(decls, selection), strict=True)))


class _Built:
    """A pytest plugin: the programs :func:`_check` built, put where the session takes them."""

    def __init__(self, programs: dict[ProgramDecl, Program]) -> None:
        self.programs = programs

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[BUILT_PROGRAMS] = self.programs


def _pytest_options(rest: list[str]) -> argparse.Namespace:
    """The gate's own pytest options among the arguments passed on to pytest, read by this command's
    parser: a mistake in one (``--results-json`` without its path) is the one line, before pytest starts."""
    parser = Parser(prog="python -m invariants gate", add_help=False, allow_abbrev=False)
    for option in OPTIONS:
        parser.add_argument(option.flag, **option.keywords())
    return parser.parse_known_args(rest)[0]


def main(argv: list[str]) -> int:
    # Nothing may write inside the installed package, pytest's rewritten test modules above all.
    sys.dont_write_bytecode = True
    from . import hooks  # noqa: F401  (its environment defaults must precede JAX's backends)

    args, rest = _parser().parse_known_args(argv)
    # The environment first: the checks below import the user's modules, and JAX with them.
    set_timeout(args.user_code_timeout)
    pin_worker(None, False)
    try:
        guard_backend()
    except pytest.UsageError as err:
        raise InvariantsError(str(err)) from None
    built = _check(args, _pytest_options(rest).programs)

    command = ["python -m invariants gate"]
    command += [f"--spec-dir {shlex.quote(str(d))}" for d in args.spec_dir]
    command += [f"--snapshot-dir {shlex.quote(str(args.snapshot_dir))}"] + (
        ["--no-catalog"] if args.no_catalog else []
    )
    full = pytest_args(
        spec_dirs=[d.resolve() for d in args.spec_dir] if args.spec_dir else None,
        snapshot_dir=args.snapshot_dir.resolve(),
        catalog=not args.no_catalog,
        gate_command=" ".join(command),
    )
    forwarded = _forwarded(args)
    if args.user_code_timeout is not None:
        forwarded += ["--user-code-timeout", str(args.user_code_timeout)]
    usage = _OneLineUsage()
    status = int(pytest.main([*full, *forwarded, *rest], plugins=[usage, built]))
    # pytest's own bad input exits 4: here 2, as every bad input. The gate's own 4 stands.
    return 2 if status == pytest.ExitCode.USAGE_ERROR and usage.refused else status


class _OneLineUsage:
    """A pytest plugin: an argument pytest refuses is one line (no usage block, no inifile or rootdir lines:
    those are this command's choice, not the user's), and so is a path to collect that is not there."""

    refused = False

    def _refuse(self, said: str, hint: str) -> pytest.UsageError:
        self.refused = True
        return pytest.UsageError(f"python -m invariants gate: {said} ({hint})")

    @pytest.hookimpl(wrapper=True)
    def pytest_cmdline_parse(self) -> Generator[None, object, object]:
        try:
            return (yield)
        except pytest.UsageError as err:
            lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
            said = next((ln.split(" error: ", 1)[1] for ln in lines if " error: " in ln), lines[0])
            raise self._refuse(said, "see pytest --help for pytest's options") from None

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self) -> Generator[None, object, object]:
        try:
            return (yield)
        except pytest.UsageError as err:
            raise self._refuse(
                str(err), "the gate collects its own items: give it options, not paths"
            ) from None
