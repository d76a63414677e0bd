"""Install pre-release jax, jaxlib, libtpu and the CUDA plugin from JAX's nightly index; print their versions.

Used by ``tox -e nightly`` (and the nightly workflow). The indexes come from the environment, with JAX's
documented defaults (https://docs.jax.dev/en/latest/installation.html, "JAX nightly installation"):

* ``JAX_NIGHTLY_INDEX``: a PEP 503 index holding only nightlies (JAX recommends it for automation: the
  unified index can serve a release as "newest" right after it ships). Default below.
* ``LIBTPU_FIND_LINKS``: the page of libtpu wheels (``pip -f``). Default below.

Each package is the newest wheel for this interpreter on those two pages (jax, jaxlib and the CUDA plugin:
the newest version all of them have), and on no other: not PyPI, nor an extra index or find-links of the
pip configuration. ``pip install --pre -U --extra-index-url NIGHTLY`` would
take whatever is newest anywhere, so a release on PyPI newer than the nightly (libtpu 0.0.52 against a
nightly jaxlib built for an older libtpu, or a jax release beside nightlies named after it) would win.
The chosen wheels are installed by URL, in one pip run that also installs their dependencies (from PyPI,
the nightly index and the libtpu page).

Contract: exit 0 after printing one ``nightly: ...`` line of installed versions; otherwise print one line
that says what failed (index unreachable, no wheel for this interpreter, pip could not install, jax does
not import) and exit 1. Never a traceback. ``--record FILE`` writes what was chosen, from where (JSON).
"""

from __future__ import annotations

import argparse
import html.parser
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import NamedTuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

DEFAULT_INDEX = (
    "https://us-python.pkg.dev/ml-oss-artifacts-published/jax-public-nightly-artifacts-registry/simple/"
)
DEFAULT_LIBTPU = "https://storage.googleapis.com/jax-releases/libtpu_releases.html"
# jax-cuda12-plugin and -pjrt without the [with-cuda] extra: the AOT GPU target, without NVIDIA wheels.
PACKAGES = ("jax", "jaxlib", "libtpu", "jax-cuda12-plugin", "jax-cuda12-pjrt")
TIMEOUT = 30.0


class Unreachable(Exception):
    """A page that did not answer; the message is the reason in a few words."""


class Failure(Exception):
    """What stops the install, as the one line to print."""


class Wheel(NamedTuple):
    name: str
    version: Version
    url: str
    rank: int  # the position of its best tag in this interpreter's tag order: lower is better


def fetch(url: str, timeout: float = TIMEOUT) -> str:
    """The page at ``url`` as text; :class:`Unreachable` with the reason when it does not answer."""
    request = urllib.request.Request(url, headers={"Accept": "text/html"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        raise Unreachable(f"HTTP {err.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise Unreachable(str(reason).strip() or type(err).__name__) from None


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.anchors: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.anchors.append(dict(attrs))


def wheels_on(page_url: str, text: str, projects: set[str]) -> list[Wheel]:
    """The wheels of ``projects`` on a PEP 503 or find-links page that this interpreter can install.

    Yanked files (``data-yanked``) and files whose ``data-requires-python`` excludes this Python are left
    out, as pip leaves them out.
    """
    parser = _Anchors()
    parser.feed(text)
    priority = {tag: i for i, tag in enumerate(sys_tags())}
    python = platform.python_version()
    found = []
    for attrs in parser.anchors:
        href = attrs.get("href")
        if not href or "data-yanked" in attrs:
            continue
        url = urllib.parse.urljoin(page_url, href)
        filename = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
        if not filename.endswith(".whl"):
            continue
        try:
            name, version, _, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue
        if name not in projects:
            continue
        requires = attrs.get("data-requires-python")
        try:
            if requires and not SpecifierSet(requires).contains(python, prereleases=True):
                continue
        except InvalidSpecifier:
            pass
        ranks = [priority[t] for t in tags if t in priority]
        if ranks:
            found.append(Wheel(name, version, url, min(ranks)))
    return found


def newest(wheels: list[Wheel], version: Version | None = None) -> Wheel | None:
    """The newest version (or ``version``); among its wheels, the one whose tags this interpreter prefers."""
    wheels = [w for w in wheels if version is None or w.version == version]
    return max(wheels, key=lambda w: (w.version, -w.rank), default=None)


def choose(
    index: str, libtpu: str, libtpu_page: str, packages: tuple[str, ...] = PACKAGES
) -> dict[str, Wheel]:
    """Each package's wheel from its page of ``index`` or from the libtpu page (``libtpu_page``, its text).

    JAX publishes jax, jaxlib and the CUDA plugin under one version each night (``0.10.3.devYYYYMMDD``); the
    plugin pins its PJRT package to that version. So these take the newest version they all have, and a
    night one of them is missing falls back to the night before instead of failing on mismatched pins. libtpu
    (its own versions) takes its newest. :class:`Failure` when a package has no wheel for this interpreter,
    or its index page does not answer (other than 404: a project the index does not hold may be on the
    libtpu page).
    """
    index = index if index.endswith("/") else index + "/"
    links = wheels_on(libtpu, libtpu_page, {canonicalize_name(p) for p in packages})
    found: dict[str, list[Wheel]] = {}
    for package in packages:
        name = canonicalize_name(package)
        page = urllib.parse.urljoin(index, f"{name}/")
        try:
            on_index = wheels_on(page, fetch(page), {name})
        except Unreachable as err:
            if str(err) != "HTTP 404":
                raise Failure(f"nightly: cannot read {page} ({err}); JAX_NIGHTLY_INDEX={index}") from None
            on_index = []
        found[package] = on_index + [w for w in links if w.name == name]
        if not found[package]:
            tag = next(iter(sys_tags()))
            raise Failure(
                f"nightly: no {package} wheel for this interpreter ({tag}) on JAX_NIGHTLY_INDEX={index} "
                f"or LIBTPU_FIND_LINKS={libtpu}"
            )
    family = [p for p in packages if canonicalize_name(p) != "libtpu"]
    shared = set.intersection(*({w.version for w in found[p]} for p in family)) if family else set()
    common = max(shared, default=None)
    chosen = {}
    for package in packages:
        best = newest(found[package], common if package in family else None)
        assert best is not None  # found[package] is not empty, and common is one of its versions
        chosen[package] = best
    return chosen


def installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _pip(args: list[str]) -> str | None:
    """Run ``pip install --quiet ARGS``; None when it worked, else its first ERROR line."""
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return None
    lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")] or lines or ["no output"]
    return errors[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Install JAX nightlies; print their versions.")
    parser.add_argument("--record", type=Path, help="write what was chosen and from where (JSON)")
    args = parser.parse_args(argv)
    index = os.environ.get("JAX_NIGHTLY_INDEX") or DEFAULT_INDEX
    libtpu = os.environ.get("LIBTPU_FIND_LINKS") or DEFAULT_LIBTPU
    # Check first, in one line each: pip retries an unreachable index for minutes, then prints a screenful.
    pages = {}
    for name, url in (("JAX_NIGHTLY_INDEX", index), ("LIBTPU_FIND_LINKS", libtpu)):
        try:
            pages[name] = fetch(url)
        except Unreachable as why:
            print(f"nightly: cannot reach {name}={url} ({why}); set it to a reachable index", file=sys.stderr)
            return 1
    try:
        chosen = choose(index, libtpu, pages["LIBTPU_FIND_LINKS"])
    except Failure as line:
        print(line, file=sys.stderr)
        return 1
    # One pip run: the nightlies by URL (from these pages and nowhere else; a version already installed, as
    # in a rerun of the env, stays), their dependencies (numpy, ml_dtypes, scipy, ...) from PyPI, the
    # nightly index or the libtpu page. pip resolves everything before it installs anything, so pins that
    # do not fit together (the plugin's jax-cuda12-pjrt==) leave the env as it was, with pip's one line.
    fresh = [w.url for p, w in chosen.items() if installed(p) != str(w.version)]
    kept = [f"{p}=={w.version}" for p, w in chosen.items() if w.url not in fresh]
    if error := _pip(["--extra-index-url", index, "--find-links", libtpu, *fresh, *kept]):
        wanted = ", ".join(f"{p} {w.version}" for p, w in chosen.items())
        print(f"nightly: pip could not install {wanted}: {error}", file=sys.stderr)
        return 1
    check = "import jax, jaxlib; print(jax.__version__, jaxlib.__version__)"
    proc = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=False)
    want = f"{chosen['jax'].version} {chosen['jaxlib'].version}"
    if proc.returncode != 0 or proc.stdout.split()[-2:] != want.split():
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()] or [proc.stdout.strip() or "no output"]
        print(f"nightly: jax {want.split()[0]} installed, but `{check}` says: {lines[-1]}", file=sys.stderr)
        return 1
    if args.record:
        record = {
            "index": index,
            "find_links": libtpu,
            "python": sys.executable,
            "packages": {
                p: {"version": str(w.version), "url": w.url, "installed_now": w.url in fresh}
                for p, w in chosen.items()
            },
        }
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(record, indent=1) + "\n")
    print("nightly: " + ", ".join(f"{p} {installed(p) or '(not installed)'}" for p in PACKAGES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
