"""Build (and serve) a stand-in for JAX's nightly index from release wheels, to rehearse ``tox -e nightly``.

JAX's nightly index cannot be reached from every machine, and a real nightly changes every day. The wheels of
the pinned release, re-versioned as a ``.devYYYYMMDD`` pre-release, stand in for one:
``scripts/nightly_install.py`` resolves, installs and imports them as it would the real thing, and the gate
and ``versus`` run on them. ``tests/rehearsal/test_nightly_rehearsal.py`` builds this index, serves it on
127.0.0.1 and runs ``tox -e nightly`` against it.

    python scripts/make_nightly_index.py [DIR] [--version 0.10.3.dev20261201] [--serve]

DIR (default ``~/.cache/jax-embedding-invariants/nightly-rehearsal``) gets:

* ``pypi/``: the release wheels of the pin, from ``pip download --no-deps`` (kept: a rerun downloads nothing);
* ``index/files/``: jax, jaxlib, jax-cuda12-plugin and jax-cuda12-pjrt re-versioned (kept, too), an older
  jax nightly beside the newest (the installer must pick the newest), and the libtpu wheel as released;
* ``index/simple/<project>/index.html``: the PEP 503 pages (links with ``#sha256=``, data-requires-python);
* ``index/libtpu_releases.html``: the find-links page, like JAX's, with the libtpu wheel.

Re-versioning a wheel rewrites the version in the ``*.dist-info`` (and ``*.data``) folder names and in
METADATA; the ``version.py`` files JAX reads its version from (``_version`` gets the release part,
``_release_version`` the whole version); the ``Requires-Dist`` bounds on the other re-versioned projects
(jax's ``jaxlib<=``, the plugin's ``jax-cuda12-pjrt==``); and RECORD (every hash and size recomputed).
libtpu is served as released: its version lives in its metadata only, the installer resolves it from the
find-links page alone, so a re-versioned copy (213 MB, 700 MB unpacked) would test nothing more.

``--serve`` serves the index on 127.0.0.1 until interrupted and prints the two URLs to export.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import functools
import hashlib
import html
import http.server
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import zipfile
from base64 import urlsafe_b64encode
from collections.abc import Iterator, Mapping, Sequence
from email.parser import HeaderParser
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

DEFAULT_DIR = Path.home() / ".cache" / "jax-embedding-invariants" / "nightly-rehearsal"
# The pin (pyproject.toml) and its TPU and CUDA companions (jax[tpu], jax[cuda12-local] of 0.10.2).
PIN = "0.10.2"
RELEASES = {
    "jax": PIN,
    "jaxlib": PIN,
    "jax-cuda12-plugin": PIN,
    "jax-cuda12-pjrt": PIN,
    "libtpu": "0.0.42.1",
}
# What a nightly of the pin would be called; what the day before's jax nightly is called.
VERSION = "0.10.3.dev20261201"
OLDER = "0.10.3.dev20261130"
REVERSIONED = ("jax", "jaxlib", "jax-cuda12-plugin", "jax-cuda12-pjrt")
LIBTPU_PAGE = "libtpu_releases.html"
_CHUNK = 1 << 20


# ---------------------------------------------------------------------------------------------------------
# The release wheels.


def download(dest: Path, releases: Mapping[str, str] = RELEASES) -> dict[str, Path]:
    """The release wheel of each project for this interpreter, ``pip download``-ed into ``dest`` once."""
    dest.mkdir(parents=True, exist_ok=True)
    found = {name: _wheel_in(dest, name, version) for name, version in releases.items()}
    missing = [f"{name}=={releases[name]}" for name, path in found.items() if path is None]
    if missing:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
               "--dest", str(dest), *missing]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=1800)
        if proc.returncode != 0:
            tail = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
            raise RuntimeError(f"pip download {' '.join(missing)} failed: {tail}")
        found = {name: _wheel_in(dest, name, version) for name, version in releases.items()}
    out = {}
    for name, path in found.items():
        if path is None:
            raise RuntimeError(f"pip download left no {name}=={releases[name]} wheel in {dest}")
        out[name] = path
    return out


def _wheel_in(folder: Path, project: str, version: str) -> Path | None:
    """A wheel of ``project`` ``version`` in ``folder`` that this interpreter can install, if there is one."""
    from packaging.tags import sys_tags

    supported = set(sys_tags())
    for path in sorted(folder.glob("*.whl")):
        name, ver, _, tags = parse_wheel_filename(path.name)
        if name == canonicalize_name(project) and ver == Version(version) and tags & supported:
            return path
    return None


# ---------------------------------------------------------------------------------------------------------
# Re-versioning.


def _record_hash(digest: bytes) -> str:
    return "sha256=" + urlsafe_b64encode(digest).rstrip(b"=").decode()


def rewrite_requirement(line: str, old: str, new: str, projects: Sequence[str]) -> str:
    """A ``Requires-Dist`` value with each bound equal to ``old`` on one of ``projects`` moved to ``new``.

    ``jaxlib<=0.10.2,>=0.10.1`` -> ``jaxlib<=NEW,>=0.10.1``; bounds on other versions or other projects
    (``jaxlib==0.10.1; extra == "ci"``, ``libtpu==0.0.42.*``) stay as they are.
    """
    req = Requirement(line)
    if canonicalize_name(req.name) not in {canonicalize_name(p) for p in projects}:
        return line
    if not any(s.version == old for s in req.specifier):
        return line
    specs = sorted(f"{s.operator}{new if s.version == old else s.version}" for s in req.specifier)
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    marker = f"; {req.marker}" if req.marker else ""
    return f"{req.name}{extras}{','.join(specs)}{marker}"


def rewrite_metadata(text: str, old: str, new: str) -> str:
    """METADATA with ``Version:`` and the ``Requires-Dist`` bounds on the re-versioned projects moved."""
    headers, sep, body = text.partition("\n\n")
    lines = []
    for line in headers.split("\n"):
        if line.startswith("Version: "):
            line = f"Version: {new}"
        elif line.startswith("Requires-Dist: "):
            value = line[len("Requires-Dist: ") :]
            line = "Requires-Dist: " + rewrite_requirement(value, old, new, REVERSIONED)
        lines.append(line)
    return "\n".join(lines) + sep + body


def rewrite_version_py(text: str, old: str, new: str) -> str:
    """JAX's ``version.py``: ``_version`` gets the release part, ``_release_version`` the full version."""
    base = Version(new).base_version
    pattern = rf"^(_version\s*=\s*)([\"']){re.escape(old)}\2"
    text = re.sub(pattern, rf"\g<1>\g<2>{base}\g<2>", text, flags=re.M)
    return re.sub(
        rf"^(_release_version(?:\s*:[^=\n]*)?\s*=\s*)([\"']){re.escape(old)}\2",
        rf"\g<1>\g<2>{new}\g<2>",
        text,
        flags=re.M,
    )


def reversioned_name(wheel_name: str, version: str) -> str:
    """``jaxlib-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl`` as ``version``."""
    parts = wheel_name.split("-")
    parts[1] = version
    return "-".join(parts)


def reversion(wheel: Path, version: str, out_dir: Path) -> Path:
    """``wheel`` rebuilt as ``version`` in ``out_dir``; kept when it is there already, newer than both
    ``wheel`` and this script (an edit of the recipe rebuilds it)."""
    old = str(parse_wheel_filename(wheel.name)[1])
    target = out_dir / reversioned_name(wheel.name, version)
    newer_than = max(wheel.stat().st_mtime, Path(__file__).stat().st_mtime)
    if target.exists() and target.stat().st_mtime >= newer_than:
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    with zipfile.ZipFile(wheel) as zin, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zout:
        # The folder names as the wheel spells them (jax_cuda12_plugin-0.10.2.dist-info, ...).
        metadata = next(n for n in zin.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        dist_info = metadata.split("/")[0]
        stem = dist_info[: -len(".dist-info")]
        renames = {f"{stem}{s}/": f"{stem[: -len(old)]}{version}{s}/" for s in (".dist-info", ".data")}
        record = renames[f"{stem}.dist-info/"] + "RECORD"
        rows: list[tuple[str, str, str]] = []
        for info in zin.infolist():
            name = info.filename
            for top, new_top in renames.items():
                if name.startswith(top):
                    name = new_top + name[len(top) :]
            if name == record or name.endswith((".dist-info/RECORD.jws", ".dist-info/RECORD.p7s")):
                continue
            zi = zipfile.ZipInfo(name, date_time=info.date_time)
            zi.external_attr = info.external_attr
            if info.is_dir():
                zout.writestr(zi, b"")
                continue
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi._compresslevel = 1  # type: ignore[attr-defined]  # the big .so files: speed over size
            if name.endswith(".dist-info/METADATA") and name.count("/") == 1:
                data = rewrite_metadata(zin.read(info).decode(), old, version).encode()
            elif name.endswith("/version.py") and b"_release_version" in (raw := zin.read(info)):
                data = rewrite_version_py(raw.decode(), old, version).encode()
            else:
                digest, size = hashlib.sha256(), 0
                with zin.open(info) as src, zout.open(zi, "w", force_zip64=info.file_size > 1 << 30) as dst:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        dst.write(chunk)
                        size += len(chunk)
                rows.append((name, _record_hash(digest.digest()), str(size)))
                continue
            zout.writestr(zi, data)
            rows.append((name, _record_hash(hashlib.sha256(data).digest()), str(len(data))))
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([*rows, (record, "", "")])
        zi = zipfile.ZipInfo(record, date_time=(2026, 12, 1, 0, 0, 0))
        zi.compress_type = zipfile.ZIP_DEFLATED
        zout.writestr(zi, buf.getvalue())
    os.replace(partial, target)
    return target


def wheel_metadata(wheel: Path) -> dict[str, list[str]]:
    """The METADATA headers of ``wheel`` (each header's values, in order)."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        headers = HeaderParser().parsestr(zf.read(meta).decode())
    out: dict[str, list[str]] = {}
    for key, value in headers.items():
        out.setdefault(key, []).append(value)
    return out


# ---------------------------------------------------------------------------------------------------------
# The index.


@dataclasses.dataclass(frozen=True)
class Index:
    """A built index: its folder (what is served), and what it holds, project -> versions."""

    root: Path
    versions: dict[str, list[str]]

    def urls(self, base: str) -> dict[str, str]:
        """The environment of ``tox -e nightly`` for this index served at ``base``."""
        return {"JAX_NIGHTLY_INDEX": f"{base}/simple/", "LIBTPU_FIND_LINKS": f"{base}/{LIBTPU_PAGE}"}


@functools.cache
def _sha256(path: Path, size: int, mtime: float) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _anchor(href_prefix: str, wheel: Path) -> str:
    stat = wheel.stat()
    sha = _sha256(wheel, stat.st_size, stat.st_mtime)
    requires = wheel_metadata(wheel).get("Requires-Python", [""])[0]
    attr = f' data-requires-python="{html.escape(requires)}"' if requires else ""
    return f'<a href="{href_prefix}{wheel.name}#sha256={sha}"{attr}>{html.escape(wheel.name)}</a><br>'


def _page(title: str, lines: Sequence[str]) -> str:
    body = "\n".join(lines)
    return f"<!DOCTYPE html>\n<html><head><title>{title}</title></head><body>\n{body}\n</body></html>\n"


def build(folder: Path = DEFAULT_DIR, version: str = VERSION, older: str | None = OLDER) -> Index:
    """Download the pin's wheels (once), re-version them (once), and write the index pages (each time)."""
    releases = download(folder / "pypi")
    files = folder / "index" / "files"
    served: dict[str, list[Path]] = {}
    for name in REVERSIONED:
        served[name] = [reversion(releases[name], version, files)]
    if older:
        served["jax"].append(reversion(releases["jax"], older, files))
    # libtpu as released, linked (or copied) into files/: only the find-links page lists it.
    libtpu = files / releases["libtpu"].name
    if not libtpu.exists():
        try:
            os.link(releases["libtpu"], libtpu)
        except OSError:
            shutil.copy2(releases["libtpu"], libtpu)
    keep = {p.name for wheels in served.values() for p in wheels} | {libtpu.name}
    for stale in files.glob("*.whl"):
        if stale.name not in keep:
            stale.unlink()
    simple = folder / "index" / "simple"
    if simple.exists():
        shutil.rmtree(simple)
    for name, wheels in served.items():
        page = simple / canonicalize_name(name) / "index.html"
        page.parent.mkdir(parents=True)
        page.write_text(_page(f"Links for {name}", [_anchor("../../files/", w) for w in wheels]))
    projects = [f'<a href="{canonicalize_name(n)}/">{n}</a><br>' for n in served]
    (simple / "index.html").write_text(_page("Simple index", projects))
    (folder / "index" / LIBTPU_PAGE).write_text(_page("libtpu releases", [_anchor("files/", libtpu)]))
    versions = {n: [str(parse_wheel_filename(w.name)[1]) for w in ws] for n, ws in served.items()}
    versions["libtpu"] = [RELEASES["libtpu"]]
    return Index(folder / "index", versions)


# ---------------------------------------------------------------------------------------------------------
# Serving it.


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on 127.0.0.1 (a free port) in a thread; yields the base URL; stops on exit."""
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="nightly-index", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR, help="cache and index folder")
    parser.add_argument("--version", default=VERSION, help="the nightly's version (default: %(default)s)")
    parser.add_argument("--serve", action="store_true", help="serve it on 127.0.0.1 until interrupted")
    args = parser.parse_args(argv)
    try:
        dev = Version(args.version).is_devrelease
    except InvalidVersion:
        dev = False
    if not dev:
        parser.error(f"--version {args.version}: not a .devN pre-release (e.g. {VERSION})")
    try:
        index = build(args.dir, args.version, older=None if args.version == OLDER else OLDER)
    except RuntimeError as err:
        print(f"make_nightly_index: {err}", file=sys.stderr)
        return 1
    print(f"index: {index.root} ({', '.join(f'{k} {v[0]}' for k, v in index.versions.items())})")
    if args.serve:
        # SIGTERM (a background job ignores SIGINT) stops it as cleanly as ^C does.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        with serve(index.root) as base:
            for key, url in index.urls(base).items():
                print(f"export {key}={url}", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
