"""A compile child that meets a JAX release's missing API (``ReleaseLacks``) says so for that key alone:
its parent raises the line for the items asking for that key, and the child's other keys compile."""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import jax
import pytest

from invariants._supported import ReleaseLacks
from invariants.catalog.programs import Program
from invariants.catalog.registry import Programs
from invariants.compile import artifacts, compat
from invariants.compile.artifacts import CompileCache
from invariants.records.compiled import Key
from invariants.scope.targets import all_targets


def _on_a_mesh(W: Any, x: Any) -> Any:
    compat.axis_types("auto", 1)  # what a pod program's mesh needs
    return W[x]


def test_the_child_s_other_keys_compile_and_the_key_it_could_not_raises_the_tool_s_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    programs = Programs(
        catalog={
            "meshed": Program("meshed", "forward", _on_a_mesh, "W[x] on a mesh"),
            "plain": Program("plain", "forward", lambda W, x: W[x], "W[x]"),
        }
    )

    def child(module: str, keys: Any, **kwargs: Any) -> Any:
        """The child's own main, in this process: the keys on stdin, its JSON from stdout."""
        out = io.StringIO()
        with monkeypatch.context() as m:
            m.delattr(jax.sharding, "AxisType")  # as a release before it lacks it
            m.setattr(sys, "stdin", io.StringIO(json.dumps([list(k) for k in keys])))
            m.setattr(sys, "stdout", out)
            assert artifacts._child_main(*kwargs["args"]) == 0
        return json.loads(out.getvalue())

    monkeypatch.setattr(artifacts, "keys_child", child)
    monkeypatch.setattr(artifacts, "load_project", lambda project: ([], programs))
    monkeypatch.setattr(artifacts, "from_settings", lambda: None)
    target = all_targets()["cpu-8dev"]
    assert target.in_child
    cache = CompileCache({"cpu-8dev": target}, programs)
    cache.plan([Key(p, "f32", "cpu-8dev") for p in ("meshed", "plain")])
    with pytest.raises(ReleaseLacks) as lacks:
        cache.get("meshed", "f32", "cpu-8dev")
    assert str(lacks.value) == (
        f"cpu-8dev/meshed[f32]: jax {jax.__version__} has no jax.sharding.AxisType, which this tool needs to "
        "build a mesh with axis types: a limit of the tool on this release, not of the program"
    )
    assert "gather" in cache.get("plain", "f32", "cpu-8dev").hlo_text  # compiled in the same child
