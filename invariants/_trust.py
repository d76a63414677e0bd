"""The one trust boundary of every folder the tool reads, runs or deletes in (no JAX).

Another user's folder, or one others may write, can hold anything: a planted cache entry passes for this
user's compile, a planted ``bin/python`` runs as this user. So the tool's root folder and every level below
it that it uses must be owned by this user and writable by no one else, and below the root a link is never
followed. A folder that fails is refused in one line naming the option to use instead: the tool never
repairs a folder someone else may already have filled.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from ._errors import InvariantsError
from ._paths import kind_of, shown

# Checked where the system has owners (POSIX); elsewhere only the links below the root are refused.
_UID = os.getuid() if hasattr(os, "getuid") else None
# Opening never follows a link, never blocks on a pipe, and leaks no descriptor into a child.
_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_OPEN |= getattr(os, "O_CLOEXEC", 0)


def foreign(st: os.stat_result) -> str | None:
    """What makes a folder of this ``stat`` untrustworthy, in a few words; None when it is this user's own."""
    if stat.S_ISLNK(st.st_mode):
        return "a link"
    if not stat.S_ISDIR(st.st_mode):
        return f"{kind_of(st.st_mode)}, not a folder"
    if _UID is not None and st.st_uid != _UID:
        return f"owned by another user (uid {st.st_uid})"
    if _UID is not None and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by others (group or world)"
    return None


def made_private(folder: Path) -> None:
    """Make ``folder`` and its missing parents, each owner-only whatever the umask."""
    missing = list(itertools.takewhile(lambda level: not os.path.lexists(level), (folder, *folder.parents)))
    for level in reversed(missing):
        try:
            os.mkdir(level, 0o700)
        except FileExistsError:  # made meanwhile (another worker); checked as any existing level
            continue
        os.chmod(level, 0o700)


def trusted_folder(
    root: str | os.PathLike[str], below: Iterable[str] = (), *, named: str, instead: str, make: bool = True
) -> Path:
    """``root`` as an absolute path, once it and each level of each path of ``below`` are this user's own;
    ``root`` may be a link the user chose, a level below it may not. ``make``: missing levels are made."""
    top = Path(os.path.abspath(os.fspath(root)))
    level = top
    try:
        made_private(top)
        _check(top, os.stat(top), named, instead)
        seen: set[Path] = set()
        for relative in below:
            level = top
            for part in Path(relative).parts:
                level = level / part
                if level in seen:
                    continue
                seen.add(level)
                if make and not os.path.lexists(level):
                    made_private(level)
                elif not os.path.lexists(level):
                    break
                _check(level, os.lstat(level), named, instead)
    except OSError as err:
        why = f"cannot be made ({err.strerror or err})"
        raise InvariantsError(f"{named} {shown(level)}: {why}; {instead}") from None
    return top


def _check(folder: Path, st: os.stat_result, named: str, instead: str) -> None:
    why = foreign(st)
    if why is not None:
        why += ", so what is in it cannot be trusted"
        raise InvariantsError(f"{named} {shown(folder)}: {why}; {instead}")


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes, read without blocking on a pipe or
    a device and without following a link; ValueError (the reason in a few words) for anything else."""
    try:
        fd = os.open(path, _OPEN)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise ValueError("a link, not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{kind_of(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise ValueError(f"{st.st_size} bytes, more than {limit}")
        # The size it has now in one read, and one more to see its end (or that it grew).
        chunks, size, step = [], 0, st.st_size + 1
        while chunk := os.read(fd, min(step, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # grew while read
                raise ValueError(f"more than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)
