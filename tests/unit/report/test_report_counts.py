"""The report counts a run as pytest did: its tier table adds up to pytest's last line, the items skipped
before they recorded anything (a version scope, a module with nothing to run) included."""

from __future__ import annotations

import json
import re

from invariants.__main__ import main as cli
from invariants.report import markdown as _report

LOOKUP = "import jax.numpy as jnp\n\ndef lookup(table, ids):\n    return jnp.take(table, ids, axis=0)\n"
SPEC = """[spec]
targets = ["cpu"]

[[program]]
name = "counted"
function = "countedlookup:lookup"
kind = "forward"
configs = ["f32"]

[[invariant]]
id = "no_loop"
programs = ["counted"]
assert = "while_loops == 0"
why = "a lookup is a gather"

[[invariant]]
id = "an_old_release_only"
programs = ["counted"]
assert = "kernels >= 1"
why = "skipped here: its scope is an old release"
when = "jax < 0.4"
"""


def _pytest_counts(out: str) -> dict[str, int]:
    last = [ln for ln in out.splitlines() if ln.startswith("=") and " in " in ln][-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|skipped|xfailed|error)", last)}


def test_the_report_s_counts_add_up_to_pytest_s(tmp_path, monkeypatch, capsys):
    (tmp_path / "countedlookup.py").write_text(LOOKUP)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "lib.toml").write_text(SPEC)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    results = tmp_path / "results.json"
    status = cli(["gate", "--spec-dir", "specs", "--no-catalog", "--targets", "cpu", "--snapshot-update",
                  "-p", "no:cacheprovider", "-p", "no:benchmark",
                  "--results-json", str(results)])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0, out
    said = _pytest_counts(out)
    assert said.get("skipped", 0) >= 2, out  # the scoped invariant, and the throughput module skipped whole
    assert json.loads(results.read_text())["pytest"]["skipped"] == said["skipped"]

    md = _report.render(_report.load_results(str(results)))
    header = next(ln for ln in md.splitlines() if ln.startswith("- **result**"))
    assert ", ".join(f"{n} {k}" for k, n in said.items()) in header, (header, said)
    lines = md.splitlines()
    start = lines.index("| tier | passed | failed | xfailed | skipped | error |") + 2
    rows = [ln.strip("|").split("|") for ln in lines[start : lines.index("", start)]]
    columns = ("passed", "failed", "xfailed", "skipped", "error")
    totals = {c: sum(int(r[1 + n].strip() or 0) for r in rows) for n, c in enumerate(columns)}
    assert {k: v for k, v in totals.items() if v} == said, (totals, said, md)
