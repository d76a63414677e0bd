"""Text from a user lands escaped where it lands: on the terminal its control characters are shown, not
obeyed; in the job summary its markdown and HTML are shown, not rendered. The user text here is what a
project writes: a spec folder's name, an invariant's ``why``; and, in a results file, every name the
report shows. Each is run as a user runs it: in this process (``gatekit.command``), and for what reaches
the terminal, in a child process of its own (an e2e test)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from gatekit import command

from invariants.records.results import FORMAT_VERSION, record

ROOT = Path(__file__).parents[3]
LOOKUP = "import jax.numpy as jnp\n\ndef lookup(table, ids):\n    return jnp.take(table, ids, axis=0)\n"
# A folder name that would be an image and a second, green result line in the job summary.
FOLDER = "<img src=x> **result**: passed"
# A why that erases the line above, returns the cursor and writes a green PASSED over the failure.
WHY = r"\u001b[2K\u001b[1A\r\u001b[32mPASSED\u001b[0m nothing to see\b\u009b"
SPEC = f"""[spec]
targets = ["cpu"]

[[program]]
name = "lookup"
function = "injectedlookup:lookup"
kind = "forward"
configs = ["f32"]

[[invariant]]
id = "bound"
programs = ["lookup"]
assert = "kernels >= 99"
why = "{WHY}"
"""


def _env(project: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "PY_COLORS", "CI")}
    # No colour of pytest's own: every escape sequence in the output would then be the user's.
    return {**env, "PY_COLORS": "0", "PYTHONPATH": os.pathsep.join([str(ROOT), str(project)])}


def _invariants(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "invariants", *args], cwd=project, env=_env(project),
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip


# A gate run whose invariant fails, its spec in FOLDER and its why WHY.
GATE = ("gate", "--spec-dir", f"specs/{FOLDER}", "--no-catalog", "--targets", "cpu", "--snapshot-update",
        "--no-cache", "-m", "not throughput", "-p", "no:cacheprovider", "--results-json", "r.json",
        "-rf")  # fmt: skip


def _project(folder: Path) -> Path:
    (folder / "injectedlookup.py").write_text(LOOKUP)
    (folder / "specs" / FOLDER).mkdir(parents=True)
    (folder / "specs" / FOLDER / "lib.toml").write_text(SPEC)
    return folder


@pytest.mark.e2e
def test_a_why_with_terminal_escapes_reaches_the_terminal_shown_not_obeyed(tmp_path):
    ran = _invariants(_project(tmp_path), *GATE)
    assert ran.returncode == 1, ran.stdout[-3000:] + ran.stderr[-3000:]
    out = ran.stdout + ran.stderr
    for control in ("\x1b", "\r", "\b", "\x9b"):
        assert control not in out, repr(out[-2000:])
    assert r"why it matters: \x1b[2K\x1b[1A\r\x1b[32mPASSED\x1b[0m nothing to see\x08\x9b" in out, out[-3000:]
    assert "FAILED test_invariants.py::cpu::lib.toml::bound::lookup-f32" in out


def test_a_spec_folder_named_as_markup_is_shown_as_text_in_the_job_summary(tmp_path):
    project = _project(tmp_path)
    ran = command(*GATE, cwd=project)
    assert ran.returncode == 1, ran.stdout[-3000:] + ran.stderr[-3000:]
    report = command("report", "r.json", cwd=project)
    assert report.returncode == 1, report.stderr
    md = report.stdout
    assert "<img" not in md and "&lt;img src=x&gt; \\*\\*result\\*\\*: passed/lib.toml" in md, md
    assert md.count("**result**") == 1 and "- **result**: **failed**" in md, md


def _html(markdown: str) -> str:
    """The markdown as GitHub's renders it: CommonMark with GitHub's tables and strikethrough."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)


def test_every_name_the_report_shows_is_escaped(tmp_path):
    """A results file whose every name is markup (written by hand, or by a project whose names are):
    program, configuration, target, node id, reason, version, runtime, the file's own path. Rendered,
    none of it is markup: no tag, no emphasis, no table cell or row of its own."""
    evil = "<img src=x>|**x**`~~y~~\n- **result**: passed"
    base = dict(kernels=1, entry_fusions=1, while_loops=0, max_trip_count=0, dynamic_kernel_launches=1,
                collectives=0, collective_bytes=0, compile_seconds=1.0, temp_bytes=10)  # fmt: skip
    _, structure = record("structure", target=evil, program=evil, config=evil, **base)
    _, invariant = record("invariant", id=evil, target=evil, programs=[evil], config=evil, holds=False,
                          measured={}, **{"assert": "kernels <= 0"})  # fmt: skip
    items = [
        {**structure, "outcome": "passed", "nodeid": evil},
        {**invariant, "outcome": "failed", "nodeid": evil + "2", "reason": evil},
    ]
    data = {"format_version": FORMAT_VERSION,
            "versions": {"jax": evil}, "runtime": {"platform": evil, "device_kind": evil, "count": 1},
            "targets": {evil: {"mode": evil, "scope": evil, "unavailable": evil}}, "exitstatus": 1,
            "items": items}  # fmt: skip
    name = "<b>r|`.json"
    (tmp_path / name).write_text(json.dumps(data))
    report = command("report", name, cwd=tmp_path)
    assert report.returncode == 1, report.stderr
    html = _html(report.stdout)
    assert "<img" not in html and "<b>" not in html and "<del>" not in html, html
    assert "<strong>x</strong>" not in html and html.count("<strong>result</strong>") == 1, html
    for table in re.findall(r"<table>.*?</table>", html, re.S):
        widths = {len(re.findall(r"<t[hd][ >]", row)) for row in re.findall(r"<tr>.*?</tr>", table, re.S)}
        assert len(widths) == 1, table  # a pipe or a newline in a name added no cell and no row
