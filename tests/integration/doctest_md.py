"""Run a markdown guide's commands as its reader would, in order, in one project folder.

What a guide holds, and what becomes of it:

* a ```` ```bash ```` block is run with ``bash -euo pipefail`` in the project folder, and must exit 0, or
  the code named by a ``<!-- doc-test: exit N -->`` comment just before it;
* a block whose info string names a file (```` ```toml file=specs/emb.toml ````) is written there first,
  as the reader would save it;
* a ```` ```text ```` block after ``<!-- doc-test: output -->`` is output the guide promises: each of its
  lines, but for ``...``, must appear in what the bash block before it printed;
* any other block (``yaml`` of a workflow, a ``console`` transcript) is read, not run.

No block is skipped in silence: a guide with no bash block is an error, and every bash block runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^```(\S*)(.*)$")
_DIRECTIVE = re.compile(r"^<!--\s*doc-test:\s*(.*?)\s*-->$")


@dataclass(frozen=True)
class Block:
    line: int  # where its fence opens, 1-based
    lang: str
    file: str | None
    text: str
    directive: str  # the doc-test comment just before it, or ""


def blocks(markdown: str) -> list[Block]:
    out: list[Block] = []
    lines = markdown.splitlines()
    i = 0
    directive = ""
    while i < len(lines):
        line = lines[i]
        if m := _DIRECTIVE.match(line.strip()):
            directive = m.group(1)
            i += 1
            continue
        m = _FENCE.match(line)
        if not m:
            if line.strip():
                directive = ""
            i += 1
            continue
        lang, rest = m.group(1), m.group(2)
        file = re.search(r"\bfile=(\S+)", rest)
        body: list[str] = []
        start = i + 1
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"line {start}: a code block that never closes")
        out.append(Block(start, lang, file.group(1) if file else None, "\n".join(body) + "\n", directive))
        directive = ""
        i += 1
    return out


def run_guide(path: Path, folder: Path, env: dict[str, str], timeout: float = 900) -> list[str]:
    """Run the guide at ``path`` in ``folder``; returns a line per bash block (line, exit, seconds).

    Raises AssertionError naming the guide's line on the first block that does not do what it says."""
    guide = path.read_text()
    found = blocks(guide)
    assert any(b.lang == "bash" and not b.file for b in found), f"{path}: no bash block to run"
    log: list[str] = []
    last_output = ""
    last_line = 0
    for b in found:
        where = f"{path.name}:{b.line}"
        if b.file:
            target = folder / b.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(b.text)
            continue
        if b.lang == "bash":
            want = 0
            if b.directive:
                m = re.fullmatch(r"exit (\d+)", b.directive)
                assert m, f"{where}: unknown doc-test directive {b.directive!r} (known: 'exit N')"
                want = int(m.group(1))
            t0 = time.perf_counter()
            proc = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", b.text],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
            seconds = time.perf_counter() - t0
            last_output = proc.stdout + proc.stderr
            last_line = b.line
            assert proc.returncode == want, (
                f"{where}: exit {proc.returncode}, the guide says {want}:\n{b.text}\n"
                f"--- output (last 4000 characters) ---\n{last_output[-4000:]}"
            )
            log.append(f"{where}: exit {proc.returncode} in {seconds:.1f} s")
            continue
        if b.directive == "output":
            assert last_line, f"{where}: promised output before any command"
            for expected in (ln.strip() for ln in b.text.splitlines()):
                if expected and expected != "...":
                    assert expected in last_output, (
                        f"{where}: the command at line {last_line} did not print {expected!r}:\n"
                        f"{last_output[-4000:]}"
                    )
        elif b.directive:
            kind = b.lang or "plain"
            raise AssertionError(f"{where}: doc-test directive {b.directive!r} on a {kind} block")
    return log


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment without what points at the checkout or its virtual environment."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTEST_ADDOPTS")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PYTEST_XDIST")}
    env.update(extra)
    return env
