"""The chip run's output folder: ``scripts/chip_run.sh`` writes only into a folder it made, and replaces
only what it made there.

    python scripts/chip_out.py claim DIR   # before the run: DIR made, or what a run made there removed
    python scripts/chip_out.py seal DIR    # after each step: DIR's manifest lists everything below DIR

``claim`` takes a folder that is not there (made, with its parents), an empty one, or one whose manifest
(``DIR/chip-run.manifest``, written by ``seal``) lists every file and folder below it: those are removed.
Anything else below DIR was not made by the chip run, so nothing is removed: one line, exit 2. A folder
of another user, or one others may write in, is refused too (a shared host's other users could plant
files in it). ``seal`` lists what is below DIR now; the run calls it after each step, so a run stopped
between steps leaves a folder the next run can take.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package, as every step's
from invariants._errors import InvariantsError, visible
from invariants._paths import write_atomic
from invariants._trust import foreign, read_regular

MANIFEST = "chip-run.manifest"
_HEAD = "# made by scripts/chip_run.sh, which replaces these on its next run here; one path a line\n"
_LIMIT = 16 << 20


def _below(folder: Path) -> list[str]:
    """Every path below ``folder``, relative, without following a link (a stack, not recursion: a tree of
    any depth is walked)."""
    found: list[str] = []
    stack = [""]
    while stack:
        relative = stack.pop()
        with os.scandir(folder / relative) as entries:
            for entry in entries:
                path = f"{relative}/{entry.name}" if relative else entry.name
                if path == MANIFEST or entry.name.startswith(f".{MANIFEST}."):
                    continue
                found.append(path)
                if entry.is_dir(follow_symlinks=False):
                    stack.append(path)
    return sorted(found)


def _listed(folder: Path) -> set[str]:
    """The paths the manifest in ``folder`` lists; InvariantsError when there is none or it is not one."""
    manifest = folder / MANIFEST
    try:
        text = read_regular(manifest, _LIMIT).decode("utf-8")
    except FileNotFoundError:
        raise InvariantsError(
            f"{_named(folder)}: a folder the chip run did not make (no {MANIFEST} in it), so nothing there "
            "is replaced; give a new or an empty folder"
        ) from None
    except (OSError, ValueError) as err:
        raise InvariantsError(f"{_named(manifest)}: not the chip run's manifest ({err})") from None
    if not text.startswith(_HEAD):
        raise InvariantsError(f"{_named(manifest)}: not the chip run's manifest (its first line differs)")
    return set(text[len(_HEAD) :].splitlines())


def _named(path: Path) -> str:
    return f"chip_run: --out {visible(str(path))}"


def claim(folder: Path) -> None:
    if not os.path.lexists(folder):
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            folder.mkdir()
        except OSError as err:
            raise InvariantsError(f"{_named(folder)}: cannot make it ({err.strerror or err})") from None
        seal(folder)
        return
    why = foreign(os.stat(folder))
    if why is not None:
        raise InvariantsError(f"{_named(folder)}: {why}; give a folder of your own, or a new one")
    present = _below(folder)
    if not present and not os.path.lexists(folder / MANIFEST):
        seal(folder)  # an empty folder: nothing in it to lose
        return
    stray = sorted(set(present) - _listed(folder))
    if stray:
        raise InvariantsError(
            f"{_named(folder)}: {visible(stray[0])} was not made by the chip run (not in its {MANIFEST}), so "
            f"nothing there is replaced; give a new or an empty folder, or move what is yours out of it"
        )
    for name in sorted(present, key=lambda p: p.count("/"), reverse=True):  # deepest first, no recursion
        path = folder / name
        if stat.S_ISDIR(os.lstat(path).st_mode):
            path.rmdir()
        else:
            path.unlink()
    seal(folder)


def seal(folder: Path) -> None:
    write_atomic(folder / MANIFEST, _HEAD + "".join(f"{p}\n" for p in _below(folder) if "\n" not in p))


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("claim", "seal"):
        print("chip_out: usage: chip_out.py claim|seal DIR", file=sys.stderr)
        return 2
    try:
        (claim if argv[0] == "claim" else seal)(Path(os.path.abspath(argv[1])))
    except (InvariantsError, OSError) as err:
        said = err if isinstance(err, InvariantsError) else f"{_named(Path(argv[1]))}: {err.strerror or err}"
        print(said, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
