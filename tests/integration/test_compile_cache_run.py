"""The compile cache as a user meets it: a second gate run compiles nothing and gives the same verdicts,
``--no-cache`` compiles everything, and an XLA flag on a warm cache still misses and changes the verdict.

The runs share a cache folder of their own and nothing else: each is a session of its own, in this process
(``gate_pytester``), but the flagged one, a child (XLA reads its flags when the process starts)."""

from __future__ import annotations

import json
import re

import gatekit
import pytest

# The flagged run is a child (XLA reads its flags when it starts): end to end (tests/conftest.py: -m e2e).
pytestmark = pytest.mark.e2e

SELECTION = ("--targets", "cpu", "--programs", "take,grad_take", "--configs", "f32", "-m", "not throughput")


def _verdicts(project, name):
    data = json.loads((project / name).read_text())
    items = {(i["kind"], i.get("id"), i.get("program"), str(i.get("programs")), i["target"]): i["outcome"]
             for i in data["items"] if i["kind"] in ("structure", "invariant")}  # fmt: skip
    caches = {i["program"]: i["compile_cache"] for i in data["items"] if i["kind"] == "structure"}
    return items, caches


def test_a_warm_run_compiles_nothing_and_an_xla_flag_still_misses(gate_pytester: gatekit.InProcess, tmp_path):
    project = gate_pytester.project(targets=("cpu",))
    env = {"INVARIANTS_CACHE_DIR": str(tmp_path / "cache")}

    def gate(results, *more):
        return gate_pytester.pytest(*SELECTION, "--results-json", results, *more, env=env)

    def child(results, *more, extra=None):
        given = {**env, **(extra or {})}
        return gatekit.run(project, *SELECTION, "--results-json", results, *more, env=given)

    first = gate("first.json")
    assert first.returncode == 0, first.stdout[-3000:]
    assert re.search(r"compile cache: 0 hits, 2 misses \(", first.stdout), first.stdout[-2000:]
    second = gate("second.json")
    assert second.returncode == 0, second.stdout[-3000:]
    assert re.search(r"compile cache: 2 hits, 0 misses \(", second.stdout), second.stdout[-2000:]
    (v1, c1), (v2, c2) = _verdicts(project, "first.json"), _verdicts(project, "second.json")
    assert v1 == v2 and set(c1.values()) == {"miss"} and set(c2.values()) == {"hit"}

    off = gate("off.json", "--no-cache")
    assert off.returncode == 0 and "compile cache: off" in off.stdout, off.stdout[-2000:]
    assert set(_verdicts(project, "off.json")[1].values()) == {"off"}

    # XLA:CPU's kernels scalar: only XLA_FLAGS changed, and the warm cache must not hide it.
    flagged = child("flag.json", extra={"XLA_FLAGS": "--xla_cpu_prefer_vector_width=32"})
    assert re.search(r"compile cache: 0 hits, 2 misses \(", flagged.stdout), flagged.stdout[-2000:]
    assert flagged.returncode == 1 and "grad_scatter_vectorized" in flagged.stdout, flagged.stdout[-3000:]
