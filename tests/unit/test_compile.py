"""Compiling: one key at a time on the runtime, cached for the session (nothing compiles twice)."""

from __future__ import annotations

from invariants._compile import CompileCache, Key
from invariants._hlo import parse_module
from invariants._targets import all_targets


def test_a_key_compiles_once_to_optimized_hlo():
    cache = CompileCache(all_targets())
    first = cache.get("take", "f32", "cpu")
    assert cache.get(*Key("take", "f32", "cpu")) is first  # from the cache: nothing compiles twice
    assert len(cache.compiled) == 1
    module = parse_module(first.hlo_text, "take")
    assert module.scheduled  # the optimized, scheduled module, what XLA runs
    assert "gather" in first.jaxpr
    assert first.key == Key("take", "f32", "cpu") and first.key.target == "cpu"
    assert callable(cache.executable("take", "f32", "cpu"))
