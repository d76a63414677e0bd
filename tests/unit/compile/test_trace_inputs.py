"""The compile cache sees what a trace reads: a downstream program whose trace reads a data file beside its
module, an environment variable, or a module it imports only where present compiles to the per-row loop
when one of them changes, and a warm run then misses, failing the gate as ``--no-cache`` does. Unchanged,
the warm run compiles nothing.

Each run is ``python -m invariants gate`` in this process (:func:`gatekit.command`), which imports the
project's module afresh, on a cache folder of the test's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from gatekit import command

# One program on the CPU, compiled in this process, and one sharded over the 8-device CPU, compiled in a
# child process.
SPEC = """\
[spec]
targets = ["cpu", "cpu-8dev"]

[[program]]
name = "mine_take"
function = "minelib:take_lookup"
kind = "forward"
configs = ["f32"]

[[program]]
name = "mine_sharded"
function = "minelib:take_lookup"
kind = "forward"
configs = ["f32"]
mesh = { data = 8 }
index_sharding = ["data"]

[[invariant]]
id = "no_loop"
programs = ["tag:user"]
assert = "while_loops == 0"
"""

# Each of the three inputs turns the lookup into a loop over the rows, as a model's configuration, a
# launcher's variable or an installed extension would.
MODULE = """\
import json
import os
from pathlib import Path

import jax
import jax.numpy as jnp

try:
    from mine_extension import lookup as extension
except ImportError:
    extension = None


def take_lookup(table, indices):
    config = json.loads(Path(__file__).with_name("lookup.json").read_text())
    if extension is not None:
        return extension(table, indices)
    if config["per_row"] or os.environ.get("MINE_LOOKUP") == "per_row":
        return jax.lax.map(lambda i: table[i], indices)
    return jnp.take(table, indices, axis=0)
"""

EXTENSION = """\
import jax


def lookup(table, indices):
    return jax.lax.map(lambda i: table[i], indices)
"""


def _data_file(project: Path, env: dict[str, str]) -> None:
    (project / "lookup.json").write_text('{"per_row": true}\n')


def _variable(project: Path, env: dict[str, str]) -> None:
    env["MINE_LOOKUP"] = "per_row"


def _optional_module(project: Path, env: dict[str, str]) -> None:
    (project / "mine_extension.py").write_text(EXTENSION)


@pytest.mark.parametrize(
    ("change", "target"),
    [
        (_data_file, "cpu"),
        (_variable, "cpu"),
        (_optional_module, "cpu"),
        # Compiled in a child of its own (eight host devices): end to end (tests/conftest.py: -m e2e).
        pytest.param(_variable, "cpu-8dev", marks=pytest.mark.e2e),
    ],
)
def test_a_changed_trace_input_misses_and_fails_as_no_cache_does(tmp_path, change, target):
    project = tmp_path / "project"
    (project / "specs").mkdir(parents=True)
    (project / "specs" / "mine.toml").write_text(SPEC)
    (project / "minelib.py").write_text(MODULE)
    (project / "lookup.json").write_text('{"per_row": false}\n')
    env = {"INVARIANTS_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "400"}

    def gate(*more: str) -> tuple[int, str, list[str]]:
        ran = command("gate", "--spec-dir", "specs", "--snapshot-dir", "snapshots", "--no-catalog",
                      "--targets", target, "-k", "no_loop", "-p", "no:cacheprovider", "-rA", *more,
                      cwd=project, env=env)  # fmt: skip
        out = ran.stdout + ran.stderr
        return ran.returncode, out, re.findall(r"^(PASSED|FAILED) \S+::no_loop::", out, re.M)

    status, out, verdicts = gate()
    assert (status, verdicts) == (0, ["PASSED"]) and "compile cache: 0 hits, 1 misses" in out, out[-3000:]
    status, out, _ = gate()
    assert status == 0 and "compile cache: 1 hits, 0 misses" in out, out[-3000:]  # compiles nothing

    change(project, env)
    status, warm, verdicts = gate()
    assert "compile cache: 0 hits, 1 misses" in warm, warm[-3000:]
    assert (status, verdicts) == (1, ["FAILED"]), warm[-3000:]
    assert gate("--no-cache")[::2] == (1, ["FAILED"])
