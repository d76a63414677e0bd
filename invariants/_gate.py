"""``python -m invariants gate``: the gate on a downstream project's own programs, from an installed package.

::

    python -m invariants gate --spec-dir specs/ --snapshot-dir snapshots/ [--no-catalog]
                              [--targets ...] [--programs ...] [--snapshot-update] [pytest args...]

It runs the gate's pytest modules that ship inside the package (:mod:`invariants.gate`) on:

* the programs the spec files of ``--spec-dir`` declare (``[[program]]``, see
  :mod:`invariants._downstream`), with their snapshots in ``--snapshot-dir`` (default ``snapshots``, below
  the working directory) and the ``[[invariant]]`` and ``[[correctness]]`` entries of those files;
* and, unless ``--no-catalog``, the catalog's programs and specs, compared with the snapshots the package
  ships. Those are read-only: no update rewrites them and no run writes inside the installed package.

The working directory is the project: the user's modules import from it, pytest's rootdir is it, and
``artifacts/`` (results, HLO dumps of failing items) lands in it. pytest reads no configuration file of the
project (``-c`` is the null device), so a project's own ``addopts`` cannot change the gate.

Bad input stops before pytest starts, with one line and exit 2: a spec folder that is missing or holds no
spec, a spec mistake, a function that does not import, a wrong signature or shape, a program name taken by
the catalog, a snapshot folder inside the installed package. Otherwise the exit status is pytest's.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from ._errors import InvariantsError

PACKAGE_DIR = Path(__file__).resolve().parent
GATE_DIR = PACKAGE_DIR / "gate"
PLUGIN = "invariants._plugin"


def catalog_snapshot_dir() -> Path:
    """The catalog's snapshots: package data in an installed wheel (``invariants/snapshots``), the root's
    ``snapshots/`` in a checkout."""
    shipped = PACKAGE_DIR / "snapshots"
    if shipped.is_dir():
        return shipped
    return PACKAGE_DIR.parent / "snapshots"


def staged_package(folder: Path) -> Path:
    """A folder holding only this package (a link to it), for ``PYTHONPATH`` in another environment.

    bisect and matrix run the gate under other JAX releases: their environments must import this package
    and nothing else of this one's site-packages.
    """
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "invariants"
    if not link.exists():
        link.symlink_to(PACKAGE_DIR, target_is_directory=True)
    return folder


def pytest_args(
    *,
    spec_dirs: list[Path] | None = None,
    snapshot_dir: Path | None = None,
    catalog: bool = True,
    rootdir: Path | None = None,
    gate_command: str | None = None,
    tests: str = "",
    gate_dir: Path = GATE_DIR,
) -> list[str]:
    """The pytest command line that runs the packaged gate modules (``tests``: one module of them, e.g.
    ``test_structure.py``; empty: all) in ``rootdir`` (default: the working directory).

    Independent of any checkout and of the project's pytest configuration. Used by this command and by
    every command that runs the gate in a child (selfcheck, bisect, matrix). ``gate_dir``: the gate modules
    as the child imports them (below a :func:`staged_package`).
    """
    root = (rootdir or Path.cwd()).resolve()
    args = [
        str(gate_dir / tests) if tests else str(gate_dir),
        "-p", PLUGIN, "-c", os.devnull, "--rootdir", str(root), "--import-mode=importlib",
        # The gate command imports the plugin, JAX and the user's modules before pytest starts (to check
        # the specs), so pytest cannot rewrite asserts in their pytest plugins: nothing a user can act on.
        "-W", "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning",
        "--catalog-snapshot-dir", str(catalog_snapshot_dir()),
        "--snapshot-dir", str(snapshot_dir if snapshot_dir is not None else catalog_snapshot_dir()),
    ]  # fmt: skip
    if spec_dirs is not None:
        if catalog:
            args += ["--spec-dir", str(PACKAGE_DIR)]
        for d in spec_dirs:
            args += ["--spec-dir", str(d)]
    if not catalog:
        args.append("--no-catalog")
    if gate_command:
        args += ["--gate-command", gate_command]
    return args


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m invariants gate",
        description="Run the gate on a project's own programs (and the catalog's), from the package.",
        epilog="Other arguments go to pytest: --targets, --programs, --snapshot-update, -n auto, -k ...",
    )
    p.add_argument(
        "--spec-dir", action="append", type=Path, default=[], metavar="DIR",
        help="a folder of *.toml spec files: [[program]], [[invariant]], [[correctness]] (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--snapshot-dir", type=Path, default=Path("snapshots"), metavar="DIR",
        help="where the declared programs' snapshots are read and written (default: ./snapshots)",
    )  # fmt: skip
    p.add_argument("--no-catalog", action="store_true", help="leave out the catalog's own programs and specs")
    return p


def _check(args: argparse.Namespace) -> None:
    """Everything that can be said wrong before pytest starts, as one line (InvariantsError)."""
    from ._downstream import build_all
    from ._spec import SPEC_DIR, load_specs

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
    build_all(decls)


def main(argv: list[str]) -> int:
    # Nothing this command does may write inside the installed package: no bytecode caches of the
    # modules imported from here on (pytest's rewritten test modules above all). __main__ says so already;
    # this holds when main() is called directly.
    sys.dont_write_bytecode = True
    from . import _plugin  # noqa: F401  (its environment defaults must precede JAX's backends)

    args, rest = _parser().parse_known_args(argv)
    _check(args)
    import pytest

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
    return int(pytest.main([*full, *rest]))
