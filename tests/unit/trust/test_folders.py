"""Every folder the tool reads, runs or deletes in is this user's own: the compile cache and each level
under it, the release environments of bisect, matrix and versus. Another user's folder, one that others
may write, or a link below the root is refused in one line that names it and the option to use instead;
what the tool makes is owner-only whatever the umask. (The tests run as root: another user is a folder
chowned to another uid, or made writable by others.)"""

from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version

from invariants._errors import InvariantsError
from invariants.records.cache import Store, digest, folder_of
from invariants.releases import bisect
from invariants.releases import environments as envs
from invariants.versus import command as versus
from invariants.versus.sides import interpreter_of, resolve

OTHER_UID = 4242
JAXLIBS = [Version("0.10.1"), Version("0.10.2")]


def _one_line(err: pytest.ExceptionInfo[InvariantsError]) -> str:
    text = str(err.value)
    assert text and "\n" not in text, text
    return text


@pytest.fixture
def umask_002() -> Iterator[None]:
    """Ubuntu's default umask for a user, restored after."""
    saved = os.umask(0o002)
    try:
        yield
    finally:
        os.umask(saved)


def _private(path: Path) -> bool:
    st = path.lstat()
    return stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700


# ----------------------------------------------------------------------------------------- the compile cache


def test_the_cache_the_tool_makes_under_umask_002_is_owner_only_and_used(tmp_path: Path, umask_002) -> None:
    folder = tmp_path / "home" / ".cache" / "jax-embedding-invariants" / "compiled"
    store = Store(folder)
    store.check()
    store.put(digest("r"), {"not": "a record"})
    levels = [*[folder, *folder.parents][:4], folder / "v1" / "results"]
    assert all(_private(p) for p in [*levels, folder / "v1"]), [oct(p.stat().st_mode) for p in levels]


def _cache(tmp_path: Path) -> Store:
    """A cache folder of the user's with its layout made."""
    store = Store(tmp_path / "cache")
    store.check()
    (store.root / "results").mkdir(mode=0o700, exist_ok=True)
    return store


@pytest.mark.parametrize(
    ("level", "spoil"),
    [
        ("", lambda p: p.chmod(0o777)),
        ("v1", lambda p: p.chmod(0o777)),
        ("v1/results", lambda p: p.chmod(0o770)),
        ("v1/results", lambda p: os.chown(p, OTHER_UID, -1)),
    ],
    ids=["root world-writable", "v1 world-writable", "results group-writable", "results another user's"],
)
def test_a_level_of_the_cache_that_is_not_the_users_own_is_refused(tmp_path: Path, level, spoil) -> None:
    _cache(tmp_path)
    folder = tmp_path / "cache" / level
    spoil(folder)
    with pytest.raises(InvariantsError) as err:
        Store(tmp_path / "cache").check()
    text = _one_line(err)
    assert (
        text.startswith(f"compile cache {folder}: ")
        and "--cache-dir" in text
        and "INVARIANTS_CACHE_DIR" in text
    )


def test_a_link_below_the_cache_is_never_followed(tmp_path: Path) -> None:
    """A ``v1`` that links to a folder of planted entries (another user's, or anyone's) is refused, and no
    entry there is read."""
    _cache(tmp_path)
    planted = tmp_path / "planted"
    (tmp_path / "cache" / "v1").rename(planted)
    planted.chmod(0o777)
    (tmp_path / "cache" / "v1").symlink_to(planted, target_is_directory=True)
    store = Store(tmp_path / "cache")
    with pytest.raises(InvariantsError) as err:
        store.result(digest("r"))
    assert f"compile cache {tmp_path / 'cache' / 'v1'}: a link" in _one_line(err)


def test_cache_clear_never_deletes_through_a_link(tmp_path: Path) -> None:
    """``cache clear`` on a folder whose ``v1/results`` links to the user's own files: one line, exit 2,
    every file kept."""
    store = _cache(tmp_path)
    mine = tmp_path / "photos"
    mine.mkdir(mode=0o700)
    files = [mine / "holiday.jpg", mine / f"{digest('x')}.json.gz"]
    for f in files:
        f.write_text("the user's")
    results = store.root / "results"
    results.rmdir()
    results.symlink_to(mine, target_is_directory=True)
    command = [sys.executable, "-m", "invariants", "cache", "clear", "--cache-dir", str(tmp_path / "cache")]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "a link" in proc.stderr
    assert all(f.read_text() == "the user's" for f in files)


def test_a_relative_cache_folder_is_absolute_once_given(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert folder_of("rel/cache") == tmp_path / "rel" / "cache"
    monkeypatch.setenv("INVARIANTS_CACHE_DIR", "from-env")
    assert folder_of() == tmp_path / "from-env"


# ------------------------------------------------------------------------------------ release environments


def _planted_env(cache: Path) -> Path:
    """A ``jax-0.10.2`` environment in ``cache`` whose interpreter says it ran, its marker as built."""
    pins = envs.choose_pins(Version("0.10.2"), JAXLIBS)
    env = cache / pins.env_name
    (env / "bin").mkdir(parents=True)
    python = env / "bin" / "python"
    python.write_text(f"#!/bin/sh\ntouch {cache.parent / 'planted-ran'}\n")
    python.chmod(0o755)
    (env / envs.MARKER).write_text(json.dumps(pins.to_json()))
    return env


@pytest.mark.parametrize("how", ["world-writable", "another user's", "a link"])
def test_a_planted_release_environment_is_refused_and_never_run(tmp_path: Path, monkeypatch, how) -> None:
    cache = tmp_path / "envs"
    cache.mkdir(mode=0o700)
    if how == "a link":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        env = _planted_env(elsewhere)
        (cache / env.name).symlink_to(env, target_is_directory=True)
    else:
        _planted_env(cache)
        if how == "world-writable":
            cache.chmod(0o777)
        else:
            os.chown(cache, OTHER_UID, -1)
    ran: list[list[str]] = []
    monkeypatch.setattr(envs.subprocess, "run", lambda cmd, **kw: ran.append(cmd))
    pins = envs.choose_pins(Version("0.10.2"), JAXLIBS)
    with pytest.raises(InvariantsError) as err:
        envs.ensure_env(pins, cache, "https://example.invalid/simple", log=lambda s: None)
    text = _one_line(err)
    assert text.startswith("release environments ") and text.endswith(
        "give a folder of your own with --cache-dir"
    )
    assert not ran and not (tmp_path / "planted-ran").exists()


def _fake_uv(monkeypatch) -> list[dict]:
    """uv and the health check, faked: a venv is a folder with ``bin``; every call's options are kept."""
    calls: list[dict] = []

    def run(cmd, **kwargs):
        calls.append(kwargs)
        if cmd[0] == "uv-stub" and "venv" in cmd:
            (Path(cmd[-1]) / "bin").mkdir(parents=True)
            (Path(cmd[-1]) / "bin" / "python").write_text("")
        return subprocess.CompletedProcess(cmd, 0, "{}", "")

    monkeypatch.setattr(envs, "_uv", lambda: ["uv-stub"])
    monkeypatch.setattr(envs.subprocess, "run", run)
    return calls


def test_a_relative_cache_folder_builds_an_absolute_owner_only_environment(
    tmp_path: Path, monkeypatch, umask_002
) -> None:
    monkeypatch.chdir(tmp_path)
    calls = _fake_uv(monkeypatch)
    env = envs.ensure_env(envs.choose_pins(Version("0.10.2"), JAXLIBS), Path("envs"), "https://x.invalid",
                          log=lambda s: None)  # fmt: skip
    assert env == tmp_path / "envs" / "jax-0.10.2" and env.is_absolute()
    assert _private(tmp_path / "envs")
    assert [c.get("umask") for c in calls[:2]] == [0o077, 0o077]  # uv venv and uv pip install


@pytest.mark.parametrize("command", ["bisect and matrix", "versus"])
def test_cache_dir_is_made_absolute_when_the_option_is_read(tmp_path: Path, monkeypatch, command) -> None:
    monkeypatch.chdir(tmp_path)
    if command == "versus":
        parser = versus._parser()
        args = parser.parse_args(["--baseline", "current", "--candidate", "current", "--cache-dir", "envs"])
    else:
        parser = argparse.ArgumentParser()
        bisect.add_release_options(parser)  # matrix's options too
        args = parser.parse_args(["--cache-dir", "envs"])
    assert args.cache_dir == tmp_path / "envs"


# ------------------------------------------------------------------------------------------- versus' SPECs


def test_a_folder_named_like_a_release_never_stands_for_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    planted = tmp_path / "0.10.2" / "bin"
    planted.mkdir(parents=True)
    (planted / "python").write_text("#!/bin/sh\n")
    built: list[Version] = []

    def build(version: Version, flag: str) -> Path:
        built.append(version)
        return Path("/envs/jax-0.10.2/bin/python")

    side = resolve("baseline", "0.10.2", {}, Path(sys.executable), build)
    assert built == [Version("0.10.2")] and side.python == Path("/envs/jax-0.10.2/bin/python")


def test_a_relative_virtual_environment_is_its_absolute_interpreter(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "oldvenv" / "bin").mkdir(parents=True)
    (tmp_path / "oldvenv" / "bin" / "python").symlink_to(sys.executable)
    side = resolve("baseline", "./oldvenv", {}, Path(sys.executable), lambda v, f: Path("unused"))
    assert side.python == tmp_path / "oldvenv" / "bin" / "python"  # absolute, and not resolved past the link
    proc = subprocess.run([str(side.python), "-c", "print(1)"], cwd="/", capture_output=True, text=True)
    assert proc.stdout.strip() == "1"
    with pytest.raises(InvariantsError) as err:
        interpreter_of("./missing", "--candidate")
    assert _one_line(err) == "--candidate ./missing: no such interpreter or virtual environment"
