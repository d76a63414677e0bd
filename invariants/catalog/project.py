"""A project's own programs, as every command takes them: its spec folders, with the catalog or without it,
and the folder its modules are imported from (no JAX). What a command starts gets the project on its command
line or in its environment, and imports its modules from :attr:`Project.root`, wherever it runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path

from .. import _config
from .._errors import InvariantsError
from .._paths import IMPORTED_DIR, shown, what_is

_ENV = _config.name("INVARIANTS_PROJECT")
_DIR_ENV = _config.name("INVARIANTS_PROJECT_DIR")


@dataclasses.dataclass(frozen=True)
class Project:
    """``spec_dirs``: absolute (none: the catalog alone); ``catalog``: the catalog runs beside them;
    ``root``: the folder the project's modules import from; ``selection``: the run's ``--programs``, which
    a process started for it builds alone."""

    spec_dirs: tuple[Path, ...] = ()
    catalog: bool = True
    root: Path | None = None
    selection: str | None = None

    @property
    def own(self) -> bool:
        return bool(self.spec_dirs)

    def spec_folders(self) -> list[Path]:
        """The package's own spec folder with the catalog, then the project's."""
        return [*([IMPORTED_DIR] if self.catalog else []), *self.spec_dirs]

    def environment(self) -> dict[str, str]:
        """What a process started for this project (a versus worker) reads back with :meth:`from_env`."""
        if not self.own:
            return {}
        data = {
            "spec_dirs": [str(d) for d in self.spec_dirs],
            "catalog": self.catalog,
            "selection": self.selection,
        }
        return {_ENV: json.dumps(data), _DIR_ENV: str(self.root or Path.cwd())}

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Project:
        """The project a parent handed down (:meth:`environment`); else the catalog alone."""
        raw = env.get(_ENV)
        if not raw:
            return cls()
        data = json.loads(raw)
        root = env.get(_DIR_ENV)
        folders = tuple(Path(d) for d in data["spec_dirs"])
        return cls(folders, bool(data["catalog"]), Path(root) if root else None, data.get("selection"))

    def describe(self) -> str:
        """The options that give this project, as a user writes them (empty for the catalog alone)."""
        words = [f"--spec-dir {shown(d)}" for d in self.spec_dirs]
        return " ".join(words + ([] if self.catalog else ["--no-catalog"]))


def module_folder() -> Path:
    """The folder a project's modules import from: the one a parent named, else the working directory."""
    named = _config.get("INVARIANTS_PROJECT_DIR")
    return Path(named) if named else Path.cwd()


def add_project_options(parser: argparse.ArgumentParser) -> None:
    """``--spec-dir`` and ``--no-catalog``, as the gate takes them, for every command."""
    parser.add_argument(
        "--spec-dir",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="a project's spec folder (its [[program]]s and invariants), as the gate's --spec-dir; repeat "
        "it for several. Its modules are imported from the folder the command runs in",
    )
    parser.add_argument(
        "--no-catalog",
        action="store_true",
        help="leave the catalog's programs and specs out: only the project's programs (with --spec-dir)",
    )


def project_from(args: argparse.Namespace) -> Project:
    """The project ``--spec-dir`` / ``--no-catalog`` name, checked now."""
    dirs: list[Path] = []
    for given in args.spec_dir:
        path = Path(given).expanduser()
        if not path.exists():
            raise InvariantsError(f"--spec-dir {shown(path)}: spec folder not found")
        if not path.is_dir():
            raise InvariantsError(
                f"--spec-dir {shown(path)}: {what_is(path)}; --spec-dir takes the folder that holds the spec "
                f"files ({shown(path.parent)})"
            )
        dirs.append(path.resolve())
    if args.no_catalog and not dirs:
        raise InvariantsError("--no-catalog: no --spec-dir given; nothing would run")
    return Project(tuple(dirs), not args.no_catalog, Path.cwd().resolve() if dirs else None)
