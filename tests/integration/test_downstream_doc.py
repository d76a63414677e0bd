"""docs/downstream.md, run as its reader runs it: every bash block in order, in an empty project folder.

The package is installed the three ways the guide shows (a checkout, a wheel, git), each by the guide's
own command, none of them building in the checkout, into a fresh virtual environment that borrows this
environment's dependencies (jax, pytest, ...) through a plain path line, so that nothing is downloaded but
the build backend. ``CHECKOUT`` is a copy of this repository's package files, committed to a git
repository of its own (``REPO_URL``), so that the guide's installs install this tree. The guide's
workflow YAML is linted with actionlint where ``$ACTIONLINT`` names it (``.ci/run`` installs it). An
``e2e`` test: it takes minutes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from doctest_md import blocks, clean_env, run_guide

ROOT = Path(__file__).parents[2]
GUIDE = ROOT / "docs" / "downstream.md"
_NOISE = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", "artifacts")


def _checkout(tmp: Path) -> Path:
    """The package as a clone would hold it, committed, so that git can serve it."""
    src = tmp / "checkout"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("invariants", "snapshots", "scripts"):
        shutil.copytree(ROOT / name, src / name, ignore=_NOISE)
    git = ["git", "-c", "user.name=doc", "-c", "user.email=doc@example.invalid", "-C", str(src)]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "package"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return src


def _venv(tmp: Path) -> Path:
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    # This environment's packages after the new one's own, as a plain path: its .pth files (the editable
    # install of this checkout among them) are not processed there, so `invariants` comes from the guide's
    # install alone.
    (Path(site) / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


@pytest.mark.e2e
def test_the_guide_runs_as_written(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    venv = _venv(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    env = clean_env({
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "VIRTUAL_ENV": str(venv),
        "CHECKOUT": str(checkout),
        # pip reads a git+file URL only with a host: file://localhost/PATH, which git takes too.
        "REPO_URL": f"file://localhost{checkout}",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        # Budget only: each ratio item measures for at most a second (its verdict rules are unchanged).
        "INVARIANTS_RATIO_MAX_SECONDS": "1",
    })  # fmt: skip
    log = run_guide(GUIDE, project, env)
    # The package the guide ran is the one it installed last (from git), not this checkout.
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import invariants; print(invariants.__file__)"],
        cwd=project, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert Path(where).is_relative_to(venv) and not Path(where).is_relative_to(ROOT), where
    assert (project / "snapshots" / "tpu-v5e" / "my_embed.f32.txt").exists()
    assert (project / "tests" / "snapshots").is_dir(), "the pytest API's snapshots land beside its tests"
    assert len(log) == sum(1 for b in blocks(GUIDE.read_text()) if b.lang == "bash" and not b.file)


@pytest.mark.e2e
def test_the_install_routes_leave_the_checkout_as_git_has_it(tmp_path: Path) -> None:
    """The guide's installs from a checkout and from a wheel, each by its own command: neither builds in
    the checkout (no build/, no *.egg-info there), which is left exactly as git has it."""
    checkout = _checkout(tmp_path)
    venv = _venv(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    env = clean_env({"PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(venv),
                     "CHECKOUT": str(checkout), "PIP_DISABLE_PIP_VERSION_CHECK": "1"})  # fmt: skip
    text = GUIDE.read_text()
    start = text.index("## 1. Install")
    section = text[start : text.index("\n## 2.", start)]
    installs = [b.text for b in blocks(section) if b.lang == "bash" and "CHECKOUT" in b.text]
    assert len(installs) == 2, installs
    for command in installs:
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=project, env=env,
                              capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
        assert proc.returncode == 0, command + "\n" + proc.stderr[-3000:]
        left = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--ignored"],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert left == "", f"{command}\nleft in the checkout:\n{left}"


def test_the_guide_covers_what_a_downstream_project_needs() -> None:
    """The sections a downstream project needs of the guide, by their headings and commands."""
    text = GUIDE.read_text()
    for needed in ("git+file://localhost$CHECKOUT", "pip wheel", "git+$REPO_URL", "params = ", "targets = [",
                   "--snapshot-update", "efficiency baseline", "compile_for", "uses: OWNER/",
                   "Reading a failure", "accept it"):  # fmt: skip
        assert needed in text, needed


@pytest.mark.skipif(not os.environ.get("ACTIONLINT"), reason="ACTIONLINT unset (.ci/run installs it)")
def test_the_guides_workflows_lint(tmp_path: Path) -> None:
    workflows = [b for b in blocks(GUIDE.read_text()) if b.lang == "yaml"]
    assert len(workflows) == 2
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    for i, block in enumerate(workflows):
        # A released action's ref stands for this repository's: actionlint resolves `uses:` of a real
        # repository only by name, so the placeholder owner is kept as written.
        (folder / f"guide{i}.yml").write_text(block.text)
    proc = subprocess.run(
        [os.environ["ACTIONLINT"], *map(str, sorted(folder.glob("*.yml")))],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_doctest_md_reads_what_it_runs() -> None:
    """The runner itself: files, directives and outputs as the module docstring says, and a guide that
    promises output a command did not print fails naming the guide's line."""
    guide = (
        "```python file=a/b.py\nX = 1\n```\n"
        "<!-- doc-test: exit 3 -->\n```bash\nexit 3\n```\n"
        "```bash\necho hello world\n```\n"
        "<!-- doc-test: output -->\n```text\nhello\n...\n```\n"
    )
    found = blocks(guide)
    assert [(b.lang, b.file, b.directive) for b in found] == [
        ("python", "a/b.py", ""),
        ("bash", None, "exit 3"),
        ("bash", None, ""),
        ("text", None, "output"),
    ]
    assert re.search(r"^X = 1$", found[0].text, re.M)


def test_doctest_md_fails_on_a_broken_promise(tmp_path: Path) -> None:
    guide = tmp_path / "g.md"
    guide.write_text("```bash\necho hello\n```\n<!-- doc-test: output -->\n```text\ngoodbye\n```\n")
    with pytest.raises(AssertionError, match=r"g\.md:5: the command at line 1 did not print 'goodbye'"):
        run_guide(guide, tmp_path, clean_env({}))
    guide.write_text("```bash\nfalse\n```\n")
    with pytest.raises(AssertionError, match=r"g\.md:1: exit 1, the guide says 0"):
        run_guide(guide, tmp_path, clean_env({}))
    guide.write_text("no commands here\n")
    with pytest.raises(AssertionError, match="no bash block"):
        run_guide(guide, tmp_path, clean_env({}))
