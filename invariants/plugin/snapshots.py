"""Where a gate session reads and writes snapshots, and the files no program has any more: the session's
half (which files are whose), where :mod:`invariants.snapshot.store` is syrupy's (what a file is).

The catalog's snapshots live in ``--catalog-snapshot-dir``, read-only unless it is ``--snapshot-dir``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .._errors import InvariantsError
from .._paths import check_output_dir, shown, what_is
from ..catalog.registry import Programs
from ..records.results import Record
from ..scope.placement import configs_for
from ..scope.select import CATALOG_PREFIX
from ..scope.targets import Target
from ..snapshot.store import SNAPSHOT_ROOT, SUFFIX, obsolete_snapshots, snapshot_header, snapshot_stem

_GONE = "no program has it on {} any more"


class SnapshotFolders:
    """The snapshot folders of one session."""

    def __init__(
        self, snapshot_dir: Path, catalog_snapshot_dir: Path, programs: Programs, *, spec_dirs_given: bool
    ) -> None:
        self.snapshot_dir = snapshot_dir
        self.programs = programs
        self.catalog_snapshot_dir = catalog_snapshot_dir
        # Only in the catalog's own folder with no spec folder given: a spec folder not given this time may
        # own a file that no program of this run has.
        self.owners_known = not spec_dirs_given and snapshot_dir == catalog_snapshot_dir

    @classmethod
    def from_options(
        cls, config: pytest.Config, programs: Programs, *, spec_dirs_given: bool, updating: bool
    ) -> SnapshotFolders:
        """The folders the options give, checked: a file there is one line now, not an OSError per item."""
        given = config.getoption("snapshot_dir")
        snapshot_dir = (Path(given) if given else Path(config.rootpath) / SNAPSHOT_ROOT).resolve()
        catalog = config.getoption("catalog_snapshot_dir")
        catalog_dir = Path(catalog).resolve() if catalog else snapshot_dir
        for option, folder in (("--snapshot-dir", snapshot_dir), ("--catalog-snapshot-dir", catalog_dir)):
            if folder.exists() and not folder.is_dir():
                raise InvariantsError(f"{option} {shown(folder)}: {what_is(folder)}, not a folder")
        if updating:
            check_output_dir(snapshot_dir, "--snapshot-dir", make=False)
        shadowed = [p for p in programs.declared if programs.is_catalog(CATALOG_PREFIX + p)]
        if shadowed and snapshot_dir == catalog_dir:
            raise InvariantsError(
                f"--snapshot-dir {shown(snapshot_dir)}: the catalog's snapshots are kept there, and the "
                f"project's {shadowed[0]} would share a file with the catalog's; give the project's "
                "snapshots a folder of their own (--snapshot-dir)"
            )
        return cls(snapshot_dir, catalog_dir, programs, spec_dirs_given=spec_dirs_given)

    def folder(self, program: str, target: str) -> Path:
        root = self.catalog_snapshot_dir if self.programs.is_catalog(program) else self.snapshot_dir
        return root / target

    def writable(self, program: str) -> bool:
        return not self.programs.is_catalog(program) or self.catalog_snapshot_dir == self.snapshot_dir

    def path(self, key: tuple[str, str, str]) -> Path:
        program, config, target = key
        return self.folder(program, target) / (snapshot_stem(program, config) + SUFFIX)

    def stems(self, target: Target) -> dict[Path, set[str]]:
        """Per writable snapshot folder of ``target``: the stems of every program that keeps its snapshots
        there, selected or not (leaving a program out of a run never makes its snapshots obsolete)."""
        out: dict[Path, set[str]] = {}
        for p in self.programs.values():
            if self.writable(p.name):
                stems = out.setdefault(self.folder(p.name, target.name), set())
                stems.update(snapshot_stem(p.name, c) for c in configs_for(target, p))
        return out

    def obsolete(
        self,
        targets: dict[str, Target],
        items: list[Record],
        passed: bool,
        *,
        updating: bool,
        delete: bool,
    ) -> list[str]:
        """Name the snapshots of programs that no longer exist, and delete them on an update that passed.

        Obsolete: a file this gate wrote, of a target whose structure items ran here, in a writable folder,
        that no program keeps there (:func:`invariants.snapshot.store.obsolete_snapshots`). It is deleted
        only where every owner is known (:attr:`owners_known`), else only with ``delete``. ``items``: every
        process's records, so this runs in the reporting process, after every item.
        """
        found = self._obsolete_files(targets, items)
        if not found:
            return []
        if not updating:
            how = (
                "--snapshot-update" if self.owners_known else "--snapshot-update --delete-obsolete-snapshots"
            )
            return [
                f"invariants: {shown(p)} is obsolete ({_GONE.format(t)}); {how} deletes it" for p, t in found
            ]
        if not passed:
            return [
                f"invariants: kept {shown(p)}, obsolete ({_GONE.format(t)}): this run failed, and only an "
                "update that passes deletes"
                for p, t in found
            ]
        lines = []
        if not self.owners_known:
            why = (
                "(deleting them: --delete-obsolete-snapshots)" if delete else "(a spec folder not given may)"
            )
            whose = "that no program of this run's spec folders has"
            lines.append(f"invariants: {len(found)} obsolete snapshot(s) {whose} {why}:")
            lines += [f"invariants:   {shown(p)}" for p, _ in found]
            if not delete:
                lines.append(
                    "invariants: none deleted; give every spec folder that uses this snapshot folder, then "
                    "add --delete-obsolete-snapshots to delete them"
                )
                return lines
        for path, target in found:
            try:
                path.unlink(missing_ok=True)
            except OSError as err:
                lines.append(f"invariants: could not delete {shown(path)} ({err.strerror or err})")
                continue
            lines.append(f"invariants: deleted {shown(path)} ({_GONE.format(target)})")
        return lines

    def _obsolete_files(self, targets: dict[str, Target], items: list[Record]) -> list[tuple[Path, str]]:
        found = []
        for target in sorted({str(i.target) for i in items if i.kind == "structure"}):
            for folder, known in self.stems(targets[target]).items():
                for path in obsolete_snapshots(folder, known):
                    program = (snapshot_header(path) or ("",))[0]
                    # A program of another folder is not this folder's to judge.
                    if (
                        program not in self.programs
                        or self.folder(program, target).resolve() == folder.resolve()
                    ):
                        found.append((path, target))
        return found


def recorded_baselines(items: list[Record]) -> list[str]:
    """One line per efficiency baseline this run wrote, in any process."""
    lines = []
    for item in items:
        done = item.get("recorded") if item.kind == "efficiency" else None
        if isinstance(done, dict):
            why = "it was missing" if done.get("why") == "missing" else "--record-baselines"
            lines.append(
                f"invariants: recorded efficiency baseline {shown(Path(done['path']))} "
                f"({item.program}[{item.config}] on {item.target}: {done['efficiency']:.4g}; {why})"
            )
    return lines
