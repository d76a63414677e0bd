"""A compile cache entry is read bounded and checked before use: only a regular file, never through a
link, never past its size or its inflated size, and only with the fields and types a record has. Anything
else (a pipe, a bomb, an ``hlo_text`` that is a number) is a miss with one
note, and is removed so that it is never served again."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import threading
from pathlib import Path

import pytest

from invariants.compile.artifacts import compile_here
from invariants.compile.keys import Persistent
from invariants.records import cache as _store
from invariants.records import compiled as _record
from invariants.records.cache import Store
from invariants.records.compiled import Compiled, Key, json_problem
from invariants.scope.targets import all_targets

CPU = all_targets()["cpu"]
TAKE = Key("take", "f32", "cpu")


def _run(tmp_path: Path) -> Persistent:
    """One run's compile of ``take`` on the cache in ``tmp_path``."""
    persistent = Persistent(Store(tmp_path / "cache"))
    compile_here("take", "f32", CPU, persistent)
    return persistent


def _entries(tmp_path: Path, sub: str) -> list[Path]:
    return sorted((tmp_path / "cache" / "v1" / sub).iterdir())


def _rewrite(path: Path, change) -> None:
    data = json.loads(gzip.decompress(path.read_bytes()))
    change(data)
    path.write_bytes(gzip.compress(json.dumps(data).encode()))


def _a_miss_with_one_note(tmp_path: Path, words: str) -> None:
    """The next run misses with one note holding ``words``, and the run after it is served again."""
    run = _run(tmp_path)
    assert run.outcomes[TAKE] == "miss"
    assert len(run.store.notes) == 1 and words in run.store.notes[0], run.store.notes
    assert "\n" not in run.store.notes[0]
    again = _run(tmp_path)
    assert again.outcomes[TAKE] == "hit" and not again.store.notes


def _off_thread(call, seconds: float = 20.0):
    """``call()``'s value, or a failure when it is still running after ``seconds`` (a read that blocks)."""
    out: list = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still blocked after {seconds:.0f} s"
    return out[0]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda r: r.update(hlo_text=5), "hlo_text is not text"),
        (lambda r: r.pop("cost"), "no field 'cost'"),
        (lambda r: r.update(memory={"temp_size_in_bytes": "lots"}), "memory is not a table of whole numbers"),
        (lambda r: r.update(extra=1), "unknown field 'extra'"),
    ],
    ids=["hlo_text a number", "a field missing", "a memory that is text", "an unknown field"],
)
def test_a_record_of_the_wrong_shape_is_a_miss_removed(tmp_path: Path, change, words) -> None:
    _run(tmp_path)
    [result] = _entries(tmp_path, "results")
    _rewrite(result, change)
    _a_miss_with_one_note(tmp_path, words)


def test_a_named_pipe_for_an_entry_is_a_miss_not_a_hang(tmp_path: Path) -> None:
    _run(tmp_path)
    [result] = _entries(tmp_path, "results")
    result.unlink()
    os.mkfifo(result)
    try:
        _off_thread(lambda: _a_miss_with_one_note(tmp_path, "a named pipe, not a regular file"))
    finally:  # a reader still blocked in open(), had the read blocked, gets its end of file
        if result.exists() and not result.is_file():
            fd = os.open(result, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)


def test_a_link_for_an_entry_is_not_followed(tmp_path: Path) -> None:
    _run(tmp_path)
    [result] = _entries(tmp_path, "results")
    kept = tmp_path / "kept.json.gz"
    result.rename(kept)
    result.symlink_to(kept)
    _a_miss_with_one_note(tmp_path, "a link, not a regular file")
    assert kept.is_file()  # the link went, never what it named


def test_an_entry_that_inflates_past_the_bound_is_a_miss(tmp_path: Path, monkeypatch) -> None:
    """A bomb: a small file that inflates past :data:`MAX_JSON_BYTES` (made small here) is never inflated
    whole."""
    _run(tmp_path)
    [result] = _entries(tmp_path, "results")
    _rewrite(result, lambda r: r.update(hlo_text=r["hlo_text"] + " " * 4_000_000))
    assert result.stat().st_size < 100_000
    monkeypatch.setattr(_store, "MAX_JSON_BYTES", 1_000_000, raising=False)
    run = _run(tmp_path)
    assert run.outcomes[TAKE] == "miss"
    assert len(run.store.notes) == 1 and "inflates past 1000000 bytes" in run.store.notes[0]


def test_an_entry_past_the_read_bound_is_a_miss(tmp_path: Path, monkeypatch) -> None:
    _run(tmp_path)
    monkeypatch.setattr(_store, "MAX_ENTRY_BYTES", 100, raising=False)
    run = _run(tmp_path)
    assert run.outcomes[TAKE] == "miss" and "more than 100" in run.store.notes[0]


def test_the_fields_checked_are_the_records_fields() -> None:
    record = Compiled("p", "f32", "cpu", "{ lambda }", ("gather",), "HloModule m", {"flops": 1.0},
                      {"temp_size_in_bytes": 0}, None, {"k.ll": "define"})  # fmt: skip
    assert json_problem(json.loads(json.dumps(record.to_json()))) is None
    assert set(_record._FIELDS) == {f.name for f in dataclasses.fields(Compiled)}
