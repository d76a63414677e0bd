"""A ``FAILED`` short line carries its reason where the output is a file or a pipe: pytest cuts the line to
80 columns there, which a gate item's node id fills, and would show no reason at all."""

from __future__ import annotations

import os

import pytest

from invariants.__main__ import main as cli

LOOKUP = "import jax.numpy as jnp\n\ndef lookup(table, ids):\n    return jnp.take(table, ids, axis=0)\n"
SPEC = """[spec]
targets = ["cpu"]

[[program]]
name = "a_lookup_with_a_long_name_as_projects_have"
function = "failedlookup:lookup"
kind = "forward"
configs = ["f32"]

[[invariant]]
id = "a_bound_that_fails"
programs = ["tag:user"]
assert = "kernels >= 99"
why = "to fail"
"""


@pytest.mark.parametrize("ci", [None, "true"], ids=["a file", "on CI"])
def test_a_failed_line_written_to_a_file_says_why(tmp_path, monkeypatch, capsys, ci):
    """Written to a file, and on CI (where pytest writes a FAILED line's message whole): the line says the
    reason's first line, and the failure's other lines are not written again after the run's table."""
    for name in ("CI", "BUILD_NUMBER"):
        monkeypatch.delenv(name, raising=False)
    if ci is not None:
        monkeypatch.setenv("CI", ci)
    (tmp_path / "failedlookup.py").write_text(LOOKUP)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "lib.toml").write_text(SPEC)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    status = cli(["gate", "--spec-dir", "specs", "--no-catalog", "--targets", "cpu", "--snapshot-update",
                  "-m", "not throughput", "-p", "no:cacheprovider", "-p", "no:benchmark", "-rf"])  # fmt: skip
    out = capsys.readouterr().out
    assert status == 1, out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("FAILED ")]
    assert line.endswith("a_bound_that_fails failed on cpu a_lookup_with_a_long_name_as_projects_have [f32]: "
                         "assert kernels >= 99: measured kernels = 1"), line  # fmt: skip
    assert out.count("why it matters: to fail") == 1, out
    assert os.environ.get("CI") == ci  # set for the summary alone
