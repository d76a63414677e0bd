"""Where a command writes: its output folders and files, checked when it starts and written atomically.

A command checks each output path before any work (:func:`check_output_dir`, :func:`check_output_file`), so
that a path it cannot write is one line (``OPTION PATH: what is wrong``), never a traceback after the work
is done; :func:`write_atomic` then writes a file whole or not at all. No JAX here.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ._errors import InvariantsError

# This package's folder as imported: in a versus worker, the staged link, so that the spec files it names
# are named as the repository's own. Resolved: what a child is staged from and compared with.
IMPORTED_DIR = Path(__file__).parent
PACKAGE_DIR = IMPORTED_DIR.resolve()


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
    return next((word for test, word in _KINDS if test(mode)), "a special file")


def _writable(folder: Path) -> str | None:
    """Why no file can be made in ``folder`` (tried, not inferred from permissions); None when one can."""
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".invariants-probe-"):
            pass
    except OSError as err:
        return err.strerror or type(err).__name__
    return None


def _made(path: Path, named: str) -> None:
    blocker = next((p for p in (path, *path.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise InvariantsError(f"{named}: {blocker} is {what_is(blocker)}, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InvariantsError(f"{named}: cannot make the folder {path} ({err.strerror or err})") from None


def check_output_dir(path: str | os.PathLike[str], option: str, *, make: bool = True) -> Path:
    """``path`` as a folder this command can write in, made when missing; else one line naming ``option``.
    ``make=False``: a folder written only on demand, checked to be makeable where it would be."""
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


def json_file_of(path: Path, key: str) -> bool:
    """Whether the file at ``path`` is one a writer of JSON objects with a ``key`` list may replace: empty,
    or such an object (what the gate writes, or pytest-benchmark), never someone's other file."""
    try:
        with open(path, "rb") as f:
            head = f.read(1)
            if not head:
                return f.read(1) == b"" and path.stat().st_size == 0
            if head != b"{":
                return False
            data = json.loads(head + f.read())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and isinstance(data.get(key), list)


def check_output_file(path: str | os.PathLike[str], option: str) -> Path:
    """``path`` as a file this command can write (its folder made when missing; a device or named pipe is
    written into); else one line naming ``option``."""
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


# A write's temporary file: a dot file beside the target that no walk for the target's kind (``*.txt``) sees.
TEMP_GLOB = ".{name}.*.tmp*"


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], option: str = "", *, suffix: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path``, renamed onto it when the block ends without an exception (the
    folder then fsynced), removed otherwise: the package's one atomic writer. ``suffix``: the temporary name
    keeps ``path``'s suffix, for a writer that infers the format from it (matplotlib)."""
    target = Path(path)
    # A link is replaced, never written through (a planted link to a file the gate did not write); a device
    # or pipe at the path itself (/dev/null, /dev/stdout) is written into.
    if not target.is_symlink() and target.exists() and not target.is_file() and not target.is_dir():
        yield target
        return
    try:
        tmp = _temporary(target, suffix)
    except OSError as err:
        raise _cannot_write(path, option, err) from None
    try:
        yield tmp
        os.replace(tmp, target)
    except OSError as err:
        raise _cannot_write(path, option, err) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    _fsync_folder(target.parent)


def _temporary(target: Path, suffix: bool) -> Path:
    """A new file beside ``target`` (O_EXCL: nothing planted is written through), with its permissions."""
    mode = target.stat().st_mode & 0o7777 if target.is_file() and not target.is_symlink() else None
    fd, name = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp" + (target.suffix if suffix else "")
    )
    os.close(fd)
    os.chmod(name, mode if mode is not None else 0o666 & ~_umask())
    return Path(name)


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every system opens a folder
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
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
    """One line when two outputs are one file, or an output is one of the inputs; ``outputs`` and
    ``inputs`` are (option, path) pairs, a path None when not given."""
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
    """One line when matplotlib cannot write ``path``'s format (its extension)."""
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
    """``matplotlib.pyplot`` on the Agg backend, imported only when a plot is drawn (optional and heavy)."""
    try:
        import matplotlib
    except ImportError:
        raise InvariantsError(f"{path}: matplotlib is not installed (pip install matplotlib)") from None
    matplotlib.use("Agg")  # before pyplot is imported
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | os.PathLike[str], option: str, **savefig: Any) -> None:
    """Write ``fig`` at ``path`` whole or not at all, then close it."""
    import matplotlib.pyplot as plt

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_path(path, option, suffix=True) as tmp:
            fig.savefig(tmp, dpi=110, **savefig)
    finally:
        plt.close(fig)


def write_atomic(path: str | os.PathLike[str], data: str | bytes, option: str = "") -> None:
    """Write ``data`` (text as UTF-8) to ``path`` whole or not at all (:func:`atomic_path`)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        with atomic_path(path, option) as tmp, open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            if tmp != Path(path):
                os.fsync(f.fileno())
    except OSError as err:
        raise _cannot_write(path, option, err) from None


def _cannot_write(path: str | os.PathLike[str], option: str, err: OSError) -> InvariantsError:
    named = f"{option} {path}" if option else str(path)
    return InvariantsError(f"{named}: cannot write ({err.strerror or err})")


def absolute_path(text: str) -> Path:
    """An option's path made absolute (an argparse ``type``): a child run elsewhere gets the same folder."""
    return Path(os.path.abspath(Path(text).expanduser()))


def shown(path: Path) -> str:
    """``path`` as every message names a file: relative to the working directory when below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except (ValueError, OSError, RuntimeError):  # elsewhere, or a link loop on the way (RuntimeError)
        return str(path)
