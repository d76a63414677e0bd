"""The JAX releases the suite serves: :data:`OLDEST_SUPPORTED` on (its APIs:
``jax.ShapeDtypeStruct(sharding=)``, ``jax.experimental.topologies``, ...; the differences after it meet in
:mod:`invariants.compile.compat`). An older release is refused in one line that names the release needed,
before anything compiles: by the gate and a versus worker before JAX starts (from the installed
distribution's metadata), and by versus, bisect and matrix when a version is named."""

from __future__ import annotations

import importlib.metadata

from packaging.version import InvalidVersion, Version

from ._errors import InvariantsError

OLDEST_SUPPORTED = Version("0.4.30")


def too_old(version: str | Version) -> str | None:
    """Why the suite cannot serve jax ``version``; None when it can (or when ``version`` is no version: the
    import says more). A pre-release of a supported release is served."""
    try:
        parsed = Version(str(version))
    except InvalidVersion:
        return None
    if Version(parsed.base_version) >= OLDEST_SUPPORTED:
        return None
    return f"jax {version} is older than this suite supports: it needs jax >= {OLDEST_SUPPORTED}"


def installed_too_old() -> str | None:
    """:func:`too_old` of the installed jax, read without importing it."""
    installed = _installed_jax()
    return too_old(installed) if installed[0].isdigit() else None


class ReleaseLacks(InvariantsError):
    """The installed JAX release lacks an API the tool needs (:mod:`invariants.compile.compat` raises it): a
    limit of the tool on that release, never a fault of the program being compiled. The gate skips what
    meets it, with this line; ``what``: the compile it stopped (:meth:`about`). A compile child sends
    :meth:`fields` to its parent, which raises it again for that key alone."""

    def __init__(self, api: str, needed_for: str, release: str | None = None, what: str = "") -> None:
        self.api, self.needed_for, self.what = api, needed_for, what
        self.release = release if release is not None else _installed_jax()
        super().__init__(
            f"{what}{': ' if what else ''}jax {self.release} has no {api}, which this tool needs "
            f"{needed_for}: a limit of the tool on this release, not of the program"
        )

    def about(self, what: str) -> ReleaseLacks:
        """The same limit, said of the compile ``what`` (a key, as the compile's own lines name it)."""
        return ReleaseLacks(self.api, self.needed_for, self.release, what)

    def fields(self) -> list[str]:
        """What rebuilds it in another process: ``ReleaseLacks(*fields)``."""
        return [self.api, self.needed_for, self.release, self.what]


def _installed_jax() -> str:
    try:
        return importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"
