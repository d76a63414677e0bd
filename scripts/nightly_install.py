"""Install pre-release jax, jaxlib, libtpu and the CUDA plugin from JAX's nightly index; print their versions.

Used by ``tox -e nightly`` (and the nightly workflow). The indexes come from the environment, with JAX's
documented defaults (https://docs.jax.dev/en/latest/installation.html, "JAX nightly installation"):

* ``JAX_NIGHTLY_INDEX``: a PEP 503 index holding only nightlies (JAX recommends it for automation: the
  unified index can serve a release as "newest" right after it ships). Default below.
* ``LIBTPU_FIND_LINKS``: the page of libtpu wheels (``pip -f``). Default below.

Contract: exit 0 after printing one ``nightly: ...`` line of resolved versions; otherwise print one line
that says what failed (index unreachable, pip could not resolve) and exit 1. Never a traceback.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import urllib.error
import urllib.request

DEFAULT_INDEX = (
    "https://us-python.pkg.dev/ml-oss-artifacts-published/jax-public-nightly-artifacts-registry/simple/"
)
DEFAULT_LIBTPU = "https://storage.googleapis.com/jax-releases/libtpu_releases.html"
# jax-cuda12-plugin and -pjrt without the [with-cuda] extra: the AOT GPU target, without NVIDIA wheels.
PACKAGES = ("jax", "jaxlib", "libtpu", "jax-cuda12-plugin", "jax-cuda12-pjrt")


def _reachable(url: str, timeout: float = 15.0) -> str | None:
    """None when ``url`` answers, else the reason in a few words."""
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return None
    except urllib.error.HTTPError as err:
        return f"HTTP {err.code}"
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        return str(reason).strip() or type(err).__name__


def main() -> int:
    index = os.environ.get("JAX_NIGHTLY_INDEX") or DEFAULT_INDEX
    libtpu = os.environ.get("LIBTPU_FIND_LINKS") or DEFAULT_LIBTPU
    # Check first: pip retries each unreachable index for minutes and then prints a screenful.
    for name, url in (("JAX_NIGHTLY_INDEX", index), ("LIBTPU_FIND_LINKS", libtpu)):
        why = _reachable(url)
        if why is not None:
            print(f"nightly: cannot reach {name}={url} ({why}); set it to a reachable index", file=sys.stderr)
            return 1
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--upgrade", "--pre"]
    cmd = [*pip, "--extra-index-url", index, "--find-links", libtpu, *PACKAGES]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR")] or lines or ["no output"]
        print(f"nightly: pip could not install {' '.join(PACKAGES)}: {errors[0]}", file=sys.stderr)
        return 1
    found = []
    for dist in PACKAGES:
        try:
            found.append(f"{dist} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{dist} (not installed)")
    print("nightly: " + ", ".join(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
