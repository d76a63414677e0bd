"""What the README and the docs say about the repository itself: the two commands at the README's top are
the ones CI runs, every path of the README's layout map exists, and every link between the pages (and
each anchor it names) resolves. What they say a command prints is checked by running it
(tests/integration/test_readme.py, test_downstream_doc.py and the tests each page names)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
GATE = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test,tpu,gpu,test-libs]' && "
    "pytest invariants/gate"
)
TESTS = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test,tpu,gpu,test-libs,dev]' && "
    "pytest -n auto --pin-workers"
)
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md",
         *sorted((ROOT / "examples").glob("*/README.md"))]  # fmt: skip


def block_after(marker: str, text: str | None = None) -> str:
    """The fenced block that follows the README's ``<!-- readme-test: MARKER -->`` comment."""
    text = README.read_text() if text is None else text
    tag = f"<!-- readme-test: {marker} -->\n"
    assert tag in text, f"README.md: no {tag.strip()}"
    return text.split(tag, 1)[1].split("\n", 1)[1].split("\n```", 1)[0] + "\n"


def test_the_two_commands_open_the_readme_and_are_what_ci_runs() -> None:
    blocks = re.findall(r"```bash\n(.*?)\n```", README.read_text(), re.S)
    assert blocks[:2] == [GATE, TESTS]
    assert README.read_text().index(TESTS) < README.read_text().index("\n## ")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -q -e '.[test,tpu,gpu,test-libs,dev]'" in ci
    assert 'step "the README\'s test command" pytest -n auto --pin-workers\n' in ci
    assert re.search(r'step "the gate" pytest invariants/gate ', ci)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {_slug(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    broken = []
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: no heading #{anchor} in {target.relative_to(ROOT)}")
    assert not broken, broken


PATHLIKE = ("/", ".py", ".toml", ".yml")


def test_the_layout_map_names_what_exists() -> None:
    """Each path of the README's layout map, under the folder its indentation puts it in (a line whose
    first words are no paths continues the description above it)."""
    parents: list[str] = []
    missing, seen = [], 0
    for line in block_after("layout").splitlines():
        names = re.split(r"\s{2,}", line.strip())[0].split()
        if not names or not names[0].endswith(PATHLIKE):
            continue
        parents = parents[: (len(line) - len(line.lstrip())) // 2]
        for name in (n for n in names if n.endswith(PATHLIKE)):
            seen += 1
            if not ROOT.joinpath(*parents, name).exists():
                missing.append("".join([*parents, name]))
        if len(names) == 1 and names[0].endswith("/"):
            parents.append(names[0])
    assert seen > 20 and not missing, missing


def test_the_layout_map_covers_every_subpackage() -> None:
    layout = block_after("layout")
    packages = [p.name for p in (ROOT / "invariants").iterdir() if (p / "__init__.py").exists()]
    assert packages and not [name for name in packages if f"{name}/" not in layout]


# What history written into the tree looks like: this project's issue and defect numbers, notes kept
# outside the repository, one machine's timings, asides about what the code once did. Public upstream
# issues (openxla/xla#20899) are sources, not history.
HISTORY = re.compile(
    r"(?<![/\w#])(?:issue|defect)s? #?\d+\b|(?:issue|defect) \"|FIELD-NOTES|\d(?: ?s| ?ms| minutes) here\b"
    r"|\bbefore (?:the|this) (?:fix|change)\b|\bit used to\b|closing note",
    re.IGNORECASE,
)
TREE = ("README.md", "docs", "invariants", "tests", "examples", "scripts", "benchmarks", "tox.ini", ".github",
        "action.yml", ".ci", "conftest.py", "pyproject.toml")  # fmt: skip


def tree_files() -> list[Path]:
    """The project's own files under TREE: what git tracks or would add, not what an install put there
    (CI installs npm packages under .ci/node, whose changelogs are other projects' history)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *TREE],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if listed.returncode == 0 and listed.stdout.strip():
        return [ROOT / line for line in listed.stdout.splitlines()]
    return [  # not a git checkout (an unpacked sdist): every file, less the ignored install folders
        p
        for name in TREE
        for p in ([ROOT / name] if (ROOT / name).is_file() else (ROOT / name).rglob("*"))
        if "node_modules" not in p.parts
    ]


def test_no_history_in_the_tree() -> None:
    files = tree_files()
    found = []
    for path in files:
        if not path.is_file() or "data" in path.relative_to(ROOT).parts[:3] or path == Path(__file__):
            continue
        if (
            path.suffix not in (".py", ".md", ".toml", ".yml", ".yaml", ".sh", ".ini", ".txt", "")
            or "__pycache__" in path.parts
        ):
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if HISTORY.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert files
    if found:
        pytest.fail("history written into the tree:\n" + "\n".join(found))


def test_the_guides_example_files_are_the_examples_as_tested() -> None:
    """docs/downstream.md shows examples/message_passing's files; test_examples.py runs those files, so a
    block that drifted from them would show what no test runs."""
    guide = (ROOT / "docs" / "downstream.md").read_text()
    shown = re.findall(r"<!-- example-file: (\S+) -->\n```\w*\n(.*?)```", guide, re.S)
    assert [path for path, _ in shown] == [
        "examples/message_passing/gnn.py", "examples/message_passing/specs/gnn.toml"]  # fmt: skip
    for path, body in shown:
        assert body == (ROOT / path).read_text(), path
