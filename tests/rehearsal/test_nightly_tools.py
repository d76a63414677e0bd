"""The rehearsal's tools on small inputs, in seconds and without the network: re-versioning a wheel
(``scripts/make_nightly_index.py``) and how the nightly installer (``scripts/nightly_install.py``) picks its
wheels and fails. ``test_nightly_rehearsal.py`` runs both on the real wheels."""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import io
import os
import socket
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


mni = _script("make_nightly_index")
ni = _script("nightly_install")

VERSION_PY = "_version = \"0.10.2\"\n_release_version: str = '0.10.2'\n__version__ = _release_version\n"
METADATA = """Metadata-Version: 2.4
Name: jax
Version: 0.10.2
Requires-Python: >=3.11
Requires-Dist: jaxlib<=0.10.2,>=0.10.1
Requires-Dist: jaxlib==0.10.1; extra == "ci"
Requires-Dist: libtpu==0.0.42.*; extra == "tpu"
Requires-Dist: jax-cuda12-plugin[with-cuda]<=0.10.2,>=0.10.2; extra == "cuda12"

Version: 0.10.2 in the description stays.
"""


def _record_row(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def _fake_jax_wheel(folder: Path) -> Path:
    files = {
        "jax/__init__.py": b"from jax.version import __version__\n",
        "jax/version.py": VERSION_PY.encode(),
        "jax-0.10.2.dist-info/METADATA": METADATA.encode(),
        "jax-0.10.2.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(
        [*(_record_row(n, d) for n, d in files.items()), ["jax-0.10.2.dist-info/RECORD", "", ""]]
    )
    wheel = folder / "jax-0.10.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr("jax-0.10.2.dist-info/RECORD", buf.getvalue())
    return wheel


def test_a_reversioned_wheel_says_its_new_version_everywhere_and_installs(tmp_path: Path) -> None:
    new = "0.10.3.dev20261201"
    out = mni.reversion(_fake_jax_wheel(tmp_path), new, tmp_path / "out")
    assert out.name == f"jax-{new}-py3-none-any.whl"
    with zipfile.ZipFile(out) as zf:
        names = zf.namelist()
        assert f"jax-{new}.dist-info/METADATA" in names and not any("0.10.2.dist-info" in n for n in names)
        meta = zf.read(f"jax-{new}.dist-info/METADATA").decode()
        version_py = zf.read("jax/version.py").decode()
        rows = list(csv.reader(io.StringIO(zf.read(f"jax-{new}.dist-info/RECORD").decode())))
        # Every file but RECORD itself is in RECORD, with the hash and size of what the wheel holds.
        assert sorted(r[0] for r in rows) == sorted(names)
        for name, digest, size in rows:
            if name.endswith("/RECORD"):
                assert digest == size == ""
            else:
                assert [name, digest, size] == _record_row(name, zf.read(name))
    assert f"Version: {new}\n" in meta
    assert f"Requires-Dist: jaxlib<={new},>=0.10.1\n" in meta
    assert 'Requires-Dist: jaxlib==0.10.1; extra == "ci"\n' in meta  # another version: as it was
    assert 'Requires-Dist: libtpu==0.0.42.*; extra == "tpu"\n' in meta  # another project: as it was
    assert f'Requires-Dist: jax-cuda12-plugin[with-cuda]<={new},>={new}; extra == "cuda12"\n' in meta
    assert meta.endswith("\nVersion: 0.10.2 in the description stays.\n")
    assert '_version = "0.10.3"\n' in version_py and f"_release_version: str = '{new}'\n" in version_py
    # pip takes it (it checks RECORD's hashes), and the package says the new version.
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target)]
    subprocess.run([*pip, str(out)], check=True, capture_output=True, timeout=120)
    code = f"import sys; sys.path.insert(0, {str(target)!r}); import jax; print(jax.__version__)"
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert said.stdout.strip() == new, said.stderr


def test_requirements_move_only_the_pinned_bound_of_the_reversioned_projects() -> None:
    new = "0.10.3.dev1"
    move = mni.rewrite_requirement
    assert move("jax-cuda12-pjrt==0.10.2", "0.10.2", new, mni.REVERSIONED) == f"jax-cuda12-pjrt=={new}"
    assert move("jax-rocm7-plugin==0.10.2.*", "0.10.2", new, mni.REVERSIONED) == "jax-rocm7-plugin==0.10.2.*"
    assert move("numpy>=2.0", "0.10.2", new, mni.REVERSIONED) == "numpy>=2.0"


def _page(*anchors: str) -> str:
    return "<html><body>" + "".join(anchors) + "</body></html>"


def test_the_installer_reads_a_page_as_pip_does() -> None:
    page = _page(
        '<a href="jax-0.10.3.dev1-py3-none-any.whl#sha256=00">a</a>',
        '<a href="../files/jax-0.10.3.dev2-py3-none-any.whl" data-yanked="">yanked</a>',
        '<a href="jax-0.10.3.dev3-py3-none-any.whl" data-requires-python="&lt;3.0">old python</a>',
        '<a href="jax-0.10.3.dev4-cp27-cp27m-win32.whl">another platform</a>',
        '<a href="jax-0.10.3.dev5.tar.gz">an sdist</a>',
        '<a href="https://elsewhere/jaxlib-0.10.3.dev6-py3-none-any.whl">another project</a>',
    )
    wheels = ni.wheels_on("http://host/simple/jax/", page, {"jax"})
    assert [(str(w.version), w.url) for w in wheels] == [
        ("0.10.3.dev1", "http://host/simple/jax/jax-0.10.3.dev1-py3-none-any.whl#sha256=00")
    ]


def _serve_pages(root: Path, pages: dict[str, str]):  # -> context manager of the base URL
    for rel, text in pages.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return mni.serve(root)


def _wheel_anchor(name: str, version: str) -> str:
    return f'<a href="{name}-{version}-py3-none-any.whl">x</a>'


def test_the_installer_takes_the_newest_night_the_jax_packages_share(tmp_path: Path) -> None:
    # jaxlib and the plugin have no dev2 yet: all of jax's family takes dev1; libtpu its own newest.
    one, two = "0.10.3.dev1", "0.10.3.dev2"
    family = {"jax": [one, two], "jaxlib": [one], "jax-cuda12-plugin": [one], "jax-cuda12-pjrt": [one, two]}
    pages = {f"simple/{n}/index.html": _page(*(_wheel_anchor(n.replace("-", "_"), v) for v in vs))
             for n, vs in family.items()}  # fmt: skip
    pages["simple/index.html"] = _page()
    pages["links.html"] = _page(_wheel_anchor("libtpu", "0.0.40"), _wheel_anchor("libtpu", "0.0.43.dev9"))
    with _serve_pages(tmp_path, pages) as base:
        links = f"{base}/links.html"
        chosen = ni.choose(f"{base}/simple/", links, ni.fetch(links))
    assert {p: str(w.version) for p, w in chosen.items()} == {
        "jax": "0.10.3.dev1", "jaxlib": "0.10.3.dev1", "libtpu": "0.0.43.dev9",
        "jax-cuda12-plugin": "0.10.3.dev1", "jax-cuda12-pjrt": "0.10.3.dev1",
    }  # fmt: skip
    assert chosen["libtpu"].url == f"{base}/libtpu-0.0.43.dev9-py3-none-any.whl"


def _run_installer(index: str, links: str) -> subprocess.CompletedProcess[str]:
    # These runs must stop before pip; if one did not, PIP_DRY_RUN keeps this environment as it is.
    env = {**os.environ, "JAX_NIGHTLY_INDEX": index, "LIBTPU_FIND_LINKS": links, "PIP_DRY_RUN": "1"}
    cmd = [sys.executable, str(ROOT / "scripts" / "nightly_install.py")]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_the_installer_fails_in_one_line_without_installing(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    proc = _run_installer(f"{closed}/simple/", f"{closed}/links.html")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"nightly: cannot reach JAX_NIGHTLY_INDEX={closed}/simple/ (")
    # An index without the CUDA plugin's PJRT package (404), nor is it on the libtpu page.
    pages = {"simple/index.html": _page(), "links.html": _page(_wheel_anchor("libtpu", "0.0.40"))}
    for name in ("jax", "jaxlib", "jax_cuda12_plugin"):
        pages[f"simple/{name.replace('_', '-')}/index.html"] = _page(_wheel_anchor(name, "0.10.3.dev1"))
    with _serve_pages(tmp_path, pages) as base:
        proc = _run_installer(f"{base}/simple/", f"{base}/links.html")
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("nightly: no jax-cuda12-pjrt wheel for this interpreter ("), proc.stderr


@pytest.mark.parametrize("version", ["0.10.3", "not-a-version"])
def test_make_nightly_index_wants_a_dev_version(version: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        mni.main(["--version", version])
    assert exc.value.code == 2
    assert f"--version {version}: not a .devN pre-release" in capsys.readouterr().err
