"""A project's own programs, as every command takes them: its spec folders, with the catalog or without it,
and the folder its modules are imported from (no JAX).

The gate reads ``--spec-dir`` and ``--no-catalog`` from its own option table
(:mod:`invariants.plugin.options`) and imports a project's modules from the folder it runs in. ``versus``,
``bisect`` and ``matrix`` take the same two options (:func:`add_project_options`) and hand the project to
what they start: a gate child gets the options on its command line, a versus worker gets
:meth:`Project.environment`; both import the project's modules from :attr:`Project.root`
(``INVARIANTS_PROJECT_DIR``), whatever folder they run in, the way the gate does from the project's folder.
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

__all__ = ["Project", "add_project_options", "module_folder", "project_from"]

_ENV = _config.name("INVARIANTS_PROJECT")
_DIR_ENV = _config.name("INVARIANTS_PROJECT_DIR")


@dataclasses.dataclass(frozen=True)
class Project:
    """``spec_dirs``: the project's spec folders (absolute; none: the catalog alone). ``catalog``: the
    catalog's programs and the package's own specs run beside them. ``root``: the folder the project's
    modules (a ``[[program]]``'s ``function`` and ``params``) import from."""

    spec_dirs: tuple[Path, ...] = ()
    catalog: bool = True
    root: Path | None = None

    @property
    def own(self) -> bool:
        """Whether a project's spec folders were given (else: the catalog alone)."""
        return bool(self.spec_dirs)

    def spec_folders(self) -> list[Path]:
        """Every spec folder the project's runs read, as the gate's ``--spec-dir`` list: the package's own
        with the catalog, then the project's."""
        return [*([IMPORTED_DIR] if self.catalog else []), *self.spec_dirs]

    def environment(self) -> dict[str, str]:
        """What a process started for this project (a versus worker) reads back with :meth:`from_env`."""
        if not self.own:
            return {}
        data = {"spec_dirs": [str(d) for d in self.spec_dirs], "catalog": self.catalog}
        return {_ENV: json.dumps(data), _DIR_ENV: str(self.root or Path.cwd())}

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Project:
        """The project a parent handed down (:meth:`environment`); the catalog alone when there is none."""
        raw = env.get(_ENV)
        if not raw:
            return cls()
        data = json.loads(raw)
        root = env.get(_DIR_ENV)
        folders = tuple(Path(d) for d in data["spec_dirs"])
        return cls(folders, bool(data["catalog"]), Path(root) if root else None)

    def describe(self) -> str:
        """The options that give this project, as a user writes them (empty for the catalog alone)."""
        words = [f"--spec-dir {shown(d)}" for d in self.spec_dirs]
        return " ".join(words + ([] if self.catalog else ["--no-catalog"]))


def module_folder() -> Path:
    """The folder a project's modules import from in this process: the one its parent named
    (``INVARIANTS_PROJECT_DIR``), else the working directory (the gate, run in the project's folder)."""
    named = _config.get("INVARIANTS_PROJECT_DIR")
    return Path(named) if named else Path.cwd()


def add_project_options(parser: argparse.ArgumentParser) -> None:
    """``--spec-dir`` and ``--no-catalog``, as the gate takes them: the one declaration for every command
    that runs a project's programs."""
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
    """The project ``--spec-dir`` / ``--no-catalog`` name, checked now (one line for a folder that is not
    there, a file given as a folder, or ``--no-catalog`` with nothing else to run)."""
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
