"""What a run says while it compiles, and the bound on one compile: a line per compile in flight (its
program, configuration, target, n of N and seconds), a compile past ``--compile-timeout`` failing in one
line, here (a thread) and in a child (ended, and the keys after it compiled by a new one)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from invariants.compile import artifacts
from invariants.compile.artifacts import CompileCache, Watch, compile_in_child
from invariants.compile.child import STARTED, KeyTimedOut, keys_child
from invariants.records.compiled import Compiled, FailedCompile, Key
from invariants.scope.targets import all_targets

TAKE = Key("take", "f32", "cpu")


def _slow_compiles(monkeypatch, release: threading.Event) -> None:
    """Every compile of this process waits for ``release`` (a compiler that hangs until told)."""
    real = artifacts._compile

    def slow(*args, **kwargs):
        release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(artifacts, "_compile", slow)


def test_a_compile_in_flight_is_told_with_its_place_and_seconds(monkeypatch):
    lines: list[str] = []
    release = threading.Event()
    _slow_compiles(monkeypatch, release)
    threading.Timer(0.5, release.set).start()
    cache = CompileCache(all_targets(), watch=Watch(lines.append, every=0.1, timeout=0))
    cache.plan([TAKE])
    assert cache.get(*TAKE).program == "take"
    cache.close()
    assert lines and all(
        line.startswith("invariants: compiling take [f32] for cpu (1 of 1), ") for line in lines
    )
    assert lines[-1].endswith(" s") and len(lines) >= 3


def test_a_compile_past_the_timeout_fails_its_items_in_one_line_and_is_left_behind(monkeypatch):
    left: list[threading.Thread] = []
    monkeypatch.setattr(artifacts, "leave_behind", left.append)
    release = threading.Event()
    _slow_compiles(monkeypatch, release)
    cache = CompileCache(all_targets(), watch=Watch(lambda line: None, every=0.05, timeout=0.3))
    start = time.monotonic()
    with pytest.raises(FailedCompile) as err:
        cache.get(*TAKE)
    assert time.monotonic() - start < 10
    assert str(err.value) == "cpu/take[f32]: compile failed: still compiling after 0.3 s (--compile-timeout)"
    assert err.value.kind == "timeout" and len(left) == 1
    with pytest.raises(FailedCompile):  # the next item of that key says the same, at once
        cache.get(*TAKE)
    release.set()
    cache.close()


def test_a_child_key_past_its_bound_ends_the_child_naming_it(tmp_path: Path):
    (tmp_path / "stuck_child.py").write_text(
        "import sys, time\n"
        f"print({STARTED!r} + '0', file=sys.stderr, flush=True)\n"
        f"print({STARTED!r} + '1', file=sys.stderr, flush=True)\n"
        "time.sleep(60)\n"
    )
    heard: list[int] = []
    start = time.monotonic()
    with pytest.raises(KeyTimedOut) as err:
        keys_child(
            "stuck_child", [], env={"PATH": ""}, what="tpu-v5e: compile", cwd=tmp_path,
            python=sys.executable, started=heard.append, key_timeout=1,
        )  # fmt: skip
    assert time.monotonic() - start < 30
    assert heard == [0, 1] and err.value.index == 1
    assert str(err.value).startswith("tpu-v5e: compile: key 1 still compiling after ")


def _record(key: Key) -> Compiled:
    return Compiled(*key, "{ lambda }", ("gather",), "HloModule m", {}, {}, 0.5)


def test_after_a_child_key_past_its_bound_a_new_child_compiles_the_others(monkeypatch):
    keys = [Key(p, "f32", "tpu-v5e") for p in ("a", "b", "c")]
    batches: list[list[Key]] = []

    def batch(todo, target, project, persistent, watch):
        batches.append(list(todo))
        if len(batches) == 1:
            raise KeyTimedOut("tpu-v5e: compile: key 1 still compiling after 9 s", 1)
        return {k: _record(k) for k in todo}

    monkeypatch.setattr(artifacts, "_child_batch", batch)
    watch = Watch(lambda line: None, every=1, timeout=9)
    made = compile_in_child(keys, all_targets()["tpu-v5e"], watch=watch)
    assert batches == [keys, [keys[0], keys[2]]]
    assert made[0] == _record(keys[0]) and made[2] == _record(keys[2])
    assert isinstance(made[1], FailedCompile) and made[1].key == keys[1] and made[1].kind == "timeout"
