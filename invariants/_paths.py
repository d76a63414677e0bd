"""Where a command writes: its output folders and files, checked when it starts and written atomically.

A command that writes at the end (a report, a bisect's kept runs, a matrix, a baseline) checks each output
path before any work, with :func:`check_output_dir` or :func:`check_output_file`: a directory where a file
should be, a file where a folder should be, or a folder that cannot be made or written is one line
(:class:`InvariantsError`, ``OPTION PATH: what is wrong``), never a traceback after the work is done. The
checks make a missing folder, as the write would. :func:`write_atomic` then writes a file whole or not at
all: a temporary file beside it, then a rename, so that a reader (or a killed run) never sees half of it.

No JAX here: every command imports it before deciding whether it needs JAX at all.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ._errors import InvariantsError

# This package's folder as this process imported it: in a versus worker, the staged link
# (invariants.compile.child.stage), so that the spec files it names are named as the repository's own. One
# place, so that moving a module never moves what it finds.
IMPORTED_DIR = Path(__file__).parent
# The same folder resolved, a checkout's or an installed copy: what a child is staged from and compared with.
PACKAGE_DIR = IMPORTED_DIR.resolve()

__all__ = [
    "absolute_path",
    "atomic_path",
    "check_distinct",
    "check_output_dir",
    "check_output_file",
    "check_plot_path",
    "kind_of",
    "pyplot",
    "save_figure",
    "what_is",
    "write_atomic",
]


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISREG, "a file"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def what_is(path: Path) -> str:
    """What is at ``path`` (which exists), in a few words: ``a directory``, ``a named pipe``, ..."""
    return kind_of(path.stat().st_mode)


def kind_of(mode: int) -> str:
    """What a file of this ``st_mode`` is, in a few words (:func:`what_is`)."""
    return next((word for test, word in _KINDS if test(mode)), "a special file")


def _writable(folder: Path) -> str | None:
    """None when a file can be made in ``folder`` (tried: permissions, a read-only file system, root on
    /proc), else why not."""
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".invariants-probe-"):
            pass
    except OSError as err:
        return err.strerror or type(err).__name__
    return None


def _made(path: Path, named: str) -> None:
    """Make folder ``path`` and its parents; a file in the way or a folder that cannot be made: one line."""
    blocker = next((p for p in (path, *path.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise InvariantsError(f"{named}: {blocker} is {what_is(blocker)}, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InvariantsError(f"{named}: cannot make the folder {path} ({err.strerror or err})") from None


def check_output_dir(path: str | os.PathLike[str], option: str, *, make: bool = True) -> Path:
    """``path`` as a folder this command can write in, made when missing (``make=False``: not made now,
    only named makeable: its nearest existing folder takes files, for a folder written only on demand,
    such as the gate's HLO dumps of failing items); else one line naming ``option``.

    Raises:
        InvariantsError: a file (or other non-folder) at ``path`` or on the way to it, a folder that cannot
            be made, or one in which no file can be written.
    """
    folder = Path(path)
    named = f"{option} {path}"
    if folder.exists() and not folder.is_dir():
        raise InvariantsError(f"{named}: {what_is(folder)}, not a folder; give a folder")
    if make:
        _made(folder, named)
        where = folder
    else:
        where = next(p for p in (folder, *folder.absolute().parents) if p.exists())
        if not where.is_dir():
            raise InvariantsError(f"{named}: {where} is {what_is(where)}, not a folder")
    why = _writable(where)
    if why is not None:
        place = "this folder" if where == folder else f"{where}, where it would be made"
        raise InvariantsError(f"{named}: cannot write in {place} ({why})")
    return folder


def check_output_file(path: str | os.PathLike[str], option: str) -> Path:
    """``path`` as a file this command can write (its folder made when missing); else one line naming
    ``option``. A device or named pipe (``/dev/null``, ``/dev/stdout``) is accepted: it is written into.

    Raises:
        InvariantsError: a directory at ``path``, a file on the way to its folder, a folder that cannot be
            made or written, or a file there that cannot be written.
    """
    file = Path(path)
    named = f"{option} {path}"
    if file.is_dir():
        raise InvariantsError(f"{named}: a directory; give a file path")
    if file.exists() and not file.is_file():
        if not os.access(file, os.W_OK):
            raise InvariantsError(f"{named}: {what_is(file)} that cannot be written")
        return file
    _made(file.parent, named)
    why = _writable(file.parent)
    if why is not None:
        raise InvariantsError(f"{named}: cannot write in its folder {file.parent} ({why})")
    if file.exists() and not os.access(file, os.W_OK):
        raise InvariantsError(f"{named}: the file there cannot be written")
    return file


# The temporary file of a write: a dot file beside the target, named after it, never a name of the target's
# kind (a snapshot folder's walk, ``*.txt``, never sees one). A writer that picks its format by the file's
# suffix (matplotlib) gets the target's suffix after it.
TEMP_GLOB = ".{name}.*.tmp*"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], option: str = "", *, suffix: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path`` to write the whole output to; renamed onto ``path`` when the block
    ends without an exception (the folder then fsynced, so that the rename outlives a power cut), removed
    otherwise. ``suffix``: the temporary name ends with ``path``'s suffix too (a writer that infers the
    format from it, such as matplotlib). A device or named pipe at ``path`` is yielded itself. The one
    atomic writer of the package: outputs, snapshots, results, baselines and the compile cache.

    Raises:
        InvariantsError: the temporary file could not be made or renamed onto ``path`` (one line).
    """
    target = Path(path)
    named = f"{option} {path}" if option else str(path)
    # A link is replaced, never written through (a planted link to a file the gate did not write); a device
    # or pipe at the path itself (/dev/null, /dev/stdout) is written into.
    if not target.is_symlink() and target.exists() and not target.is_file() and not target.is_dir():
        yield target
        return
    try:
        tmp = _temporary(target, suffix)
    except OSError as err:
        raise InvariantsError(f"{named}: cannot write ({err.strerror or err})") from None
    try:
        yield tmp
        os.replace(tmp, target)
    except OSError as err:
        raise InvariantsError(f"{named}: cannot write ({err.strerror or err})") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    _fsync_folder(target.parent)


def _temporary(target: Path, suffix: bool) -> Path:
    """A new file beside ``target``, made with O_EXCL (nothing planted at a guessable name is written
    through), with the permissions the old file had, else those open() would give."""
    mode = target.stat().st_mode & 0o7777 if target.is_file() and not target.is_symlink() else None
    fd, name = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp" + (target.suffix if suffix else "")
    )
    os.close(fd)
    os.chmod(name, mode if mode is not None else 0o666 & ~_umask())
    return Path(name)


def _fsync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable, where the system allows opening a folder (not everywhere)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_distinct(
    outputs: Sequence[tuple[str, str | os.PathLike[str] | None]],
    inputs: Sequence[tuple[str, str | os.PathLike[str] | None]] = (),
    command: str = "",
) -> None:
    """One line when two outputs are one file, or an output is one of the inputs (it would be overwritten
    before, or while, it is read): checked before any work. ``outputs`` and ``inputs``: (option, path)
    pairs, a path None when not given."""
    prefix = f"{command}: " if command else ""
    given = [(o, p) for o, p in outputs if p is not None and str(p)]
    for i, (option, path) in enumerate(given):
        clash = _clash(path, given[i + 1 :], inputs)
        if clash is not None:
            raise InvariantsError(f"{prefix}{option} {path}{clash}")


def _clash(
    path: str | os.PathLike[str],
    later: Sequence[tuple[str, str | os.PathLike[str] | None]],
    inputs: Sequence[tuple[str, str | os.PathLike[str] | None]],
) -> str | None:
    """What ``path`` is besides an output: a later output, or an input it would overwrite (None: nothing)."""
    for other, where in later:
        if where is not None and _same(path, where):
            return f" and {other} {where} are the same file; give two"
    for name, source in inputs:
        if source is not None and _same(path, source):
            return f": the same file as {name} {source}, which it would overwrite; give another output path"
    return None


def _same(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def check_plot_path(path: str | os.PathLike[str], option: str) -> None:
    """One line when matplotlib cannot write ``path``'s format (its extension); checked before any work.
    Imports matplotlib: call it only when a plot is asked for."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix and suffix not in formats:
        raise InvariantsError(
            f"{option} {path}: matplotlib cannot write .{suffix} files; give one of "
            + ", ".join(f".{f}" for f in sorted(formats))
        )


def pyplot(path: str | os.PathLike[str]) -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display on CI), imported only when a plot is drawn: it
    is optional (the test extra) and heavy. Not installed: one line naming ``path``."""
    try:
        import matplotlib
    except ImportError:
        raise InvariantsError(f"{path}: matplotlib is not installed (pip install matplotlib)") from None
    matplotlib.use("Agg")  # before pyplot is imported
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | os.PathLike[str], option: str, **savefig: Any) -> None:
    """Write ``fig`` at ``path`` (its folder made) whole or not at all, then close it. The temporary file
    keeps ``path``'s suffix, which matplotlib picks the format from."""
    import matplotlib.pyplot as plt

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_path(path, option, suffix=True) as tmp:
            fig.savefig(tmp, dpi=110, **savefig)
    finally:
        plt.close(fig)


def write_atomic(path: str | os.PathLike[str], data: str | bytes, option: str = "") -> None:
    """Write ``data`` (text as UTF-8) to ``path`` whole or not at all (:func:`atomic_path`): a reader sees
    the old file or the new one, and a full disk or a killed run leaves the old one.

    Raises:
        InvariantsError: the file could not be written (one line).
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        with atomic_path(path, option) as tmp, open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            if tmp != Path(path):
                os.fsync(f.fileno())
    except OSError as err:
        named = f"{option} {path}" if option else str(path)
        raise InvariantsError(f"{named}: cannot write ({err.strerror or err})") from None


def absolute_path(text: str) -> Path:
    """An option's path as an absolute one, against the working directory when it is given (an argparse
    ``type``): a child run in another folder gets the same folder."""
    return Path(os.path.abspath(Path(text).expanduser()))


def shown(path: Path) -> str:
    """``path`` relative to the working directory when it is below it (what a reader can click), else as
    given: how every message names a file."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except (ValueError, OSError, RuntimeError):  # elsewhere, or a link loop on the way (RuntimeError)
        return str(path)
