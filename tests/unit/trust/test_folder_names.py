"""A project folder's name is taken as it is: a ``$HOME`` or a space in it is no variable pytest expands
and no folder it then fails to find."""

from __future__ import annotations

import pytest

from invariants.__main__ import main as cli

LOOKUP = "import jax.numpy as jnp\n\ndef lookup(table, ids):\n    return jnp.take(table, ids, axis=0)\n"
SPEC = (
    '[spec]\ntargets = ["cpu"]\n\n[[program]]\nname = "p"\nfunction = "namedlookup:lookup"\n'
    'kind = "forward"\nconfigs = ["f32"]\n'
)


@pytest.mark.parametrize("name", ["proj$HOME x", "${HOME}", "café $USER"])
def test_a_project_folder_named_like_a_variable_runs_the_gate(tmp_path, monkeypatch, capsys, name):
    project = tmp_path / name
    (project / "specs").mkdir(parents=True)
    (project / "namedlookup.py").write_text(LOOKUP)
    (project / "specs" / "lib.toml").write_text(SPEC)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("USER", "someone")
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    status = cli(["gate", "--spec-dir", "specs", "--no-catalog", "--targets", "cpu", "--snapshot-update",
                  "-m", "not throughput", "-p", "no:cacheprovider", "-p", "no:benchmark"])  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 0, out + err
    assert (project / "snapshots" / "cpu" / "p.f32.txt").is_file()
    assert f"rootdir: {project}" in out, out
