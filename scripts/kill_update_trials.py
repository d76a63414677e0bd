"""Kill ``--snapshot-update`` at random points and check that every snapshot has its old text or its new one.

Each trial copies ``snapshots/cpu`` to a scratch folder, corrupts the two snapshots of a tiny selection
(``--targets cpu --programs take,naive --configs f32``) so that the update must rewrite both, starts the
update on that copy (``--snapshot-dir``), and sends SIGKILL at a random delay after the child opens its
first snapshot file for writing. Afterwards each of the two files must hold its corrupted text (the old
one) or the committed text (the new one), never an empty or partial file, and no other file may have
changed.

A write to a local disk takes microseconds, so a kill would almost never land inside one. The child
therefore writes slowly: it replaces ``open`` with one that, for files in the scratch snapshot folder
only, writes in small chunks, each flushed to the OS and followed by a pause (as a slow or network disk
would). That applies to whatever opens the file, syrupy's write or ours, so the trial tests the write
itself: a non-atomic write (open the snapshot, truncate, write) leaves a partial file when the kill lands
inside it; an atomic one (a temporary file, then ``os.replace``) never does. ``--old-write`` puts syrupy's
own non-atomic write back in the child, to show that the trials catch it.

    python scripts/kill_update_trials.py              # 20 trials; exit 1 if any left a bad file
    python scripts/kill_update_trials.py --old-write  # the same against syrupy's write (expect bad files)

``tests/integration/test_snapshot_kill.py`` runs three trials of :func:`run_trials`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = "cpu"
SELECTED = ("naive.f32.txt", "take.f32.txt")
SELECTION = ("--targets", TARGET, "--programs", "take,naive", "--configs", "f32")
# The slow write: chunks of this many characters, each flushed, then this pause (the 600-byte snapshots
# take about 75 ms each). The kill lands in [0, KILL_WINDOW) seconds after the first open for writing:
# inside the first write, between the two, inside the second or after it.
CHUNK = 32
PAUSE = 0.004
KILL_WINDOW = 0.2

# Runs in the child before pytest: the slow open, and with KILL_TRIAL_OLD_WRITE syrupy's own write.
BOOT = r"""
import builtins, os, sys, time
_open = builtins.open
_dir = os.path.realpath(os.environ["KILL_TRIAL_DIR"]) + os.sep
_log = os.environ["KILL_TRIAL_LOG"]
_chunk, _pause = int(os.environ["KILL_TRIAL_CHUNK"]), float(os.environ["KILL_TRIAL_PAUSE"])

def _note(event, path):
    with _open(_log, "a") as f:
        f.write(f"{time.monotonic():.6f} {event} {path}\n")

class _Slow:
    def __init__(self, f, path):
        self._f, self._path = f, path
    def write(self, data):
        for i in range(0, len(data), _chunk):
            self._f.write(data[i:i + _chunk])
            self._f.flush()
            time.sleep(_pause)
        return len(data)
    def close(self):
        self._f.close()
        _note("close", self._path)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self.close()
    def __getattr__(self, name):
        return getattr(self._f, name)

def _slow_open(file, mode="r", *args, **kwargs):
    f = _open(file, mode, *args, **kwargs)
    if isinstance(file, (str, os.PathLike)) and any(m in mode for m in "wxa+"):
        path = os.path.realpath(file)
        if path.startswith(_dir):
            _note("open", path)
            return _Slow(f, path)
    return f

class _OldWrite:
    def pytest_configure(self, config):
        from syrupy.extensions.single_file import SingleFileSnapshotExtension as Base, WriteMode
        from invariants.snapshot.store import StructureSnapshotExtension as Ours
        Ours._write_mode = WriteMode.TEXT  # how syrupy's own text extensions ask for its text write
        Ours.write_snapshot_collection = classmethod(Base.write_snapshot_collection.__func__)

builtins.open = _slow_open
import pytest
sys.exit(pytest.main(sys.argv[1:], plugins=[_OldWrite()] if os.environ.get("KILL_TRIAL_OLD_WRITE") else []))
"""


@dataclasses.dataclass
class Trial:
    bad: list[str]  # "<file>: empty" / "<file>: partial (N of M bytes)" / "<file>: changed"
    killed: bool  # the kill landed before the child ended by itself
    opens: int  # snapshot files the child opened for writing before the kill
    outcome: dict[str, str]  # per selected file: old, new, or what it was instead
    delay: float


def _setup(folder: Path) -> tuple[Path, dict[str, bytes], dict[str, bytes]]:
    snaps = folder / "snapshots"
    shutil.copytree(ROOT / "snapshots" / TARGET, snaps / TARGET)
    new = {name: (snaps / TARGET / name).read_bytes() for name in SELECTED}
    old = {}
    for name in SELECTED:
        # Still a snapshot of ours (its first line intact), with other text: the update rewrites it.
        old[name] = new[name].replace(b"\nsummary: ", b"\nsummary: corrupted before the update; ", 1)
        assert old[name] != new[name], name
        (snaps / TARGET / name).write_bytes(old[name])
    return snaps, old, new


def _files(snaps: Path) -> dict[str, bytes]:
    return {str(p.relative_to(snaps)): p.read_bytes() for p in snaps.rglob("*") if p.is_file()}


def trial(
    folder: Path,
    rng: random.Random,
    old_write: bool = False,
    sig: signal.Signals = signal.SIGKILL,
    timeout: float = 120.0,
) -> Trial:
    """One update on a fresh copy in ``folder``, sent ``sig`` at a random delay after its first snapshot
    write starts; what it left."""
    folder.mkdir(parents=True, exist_ok=True)
    snaps, old, new = _setup(folder)
    before = _files(snaps)
    log = folder / "writes.log"
    env = {
        # Not an xdist worker's variables (the suite may run this under xdist): the child is a plain run.
        **{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")},
        "KILL_TRIAL_DIR": str(snaps),
        "KILL_TRIAL_LOG": str(log),
        "KILL_TRIAL_CHUNK": str(CHUNK),
        "KILL_TRIAL_PAUSE": str(PAUSE),
        "INVARIANTS_TARGETS": TARGET,
    }
    env.pop("KILL_TRIAL_OLD_WRITE", None)
    if old_write:
        env["KILL_TRIAL_OLD_WRITE"] = "1"
    args = [
        sys.executable, "-c", BOOT, "invariants/gate/test_structure.py", "-q", "-p", "no:cacheprovider",
        *SELECTION, "--snapshot-update", f"--snapshot-dir={snaps}",
        f"--results-json={folder / 'results.json'}", f"--hlo-dump-dir={folder / 'hlo'}",
    ]  # fmt: skip
    child = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    delay = rng.uniform(0.0, KILL_WINDOW)
    deadline = time.monotonic() + timeout
    while child.poll() is None and not (log.exists() and log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.001)
    killed = False
    if child.poll() is None:
        time.sleep(delay)
        if child.poll() is None:
            child.send_signal(sig)
            killed = True
    out, _ = child.communicate()
    opens = log.read_text().count(" open ") if log.exists() else 0
    after = _files(snaps)
    bad, outcome = [], {}
    for name in SELECTED:
        data = after.get(f"{TARGET}/{name}")
        if data == old[name]:
            outcome[name] = "old"
        elif data == new[name]:
            outcome[name] = "new"
        else:
            size = -1 if data is None else len(data)
            what = "missing" if data is None else "empty" if not data else f"partial ({size} bytes)"
            outcome[name] = what
            bad.append(f"{name}: {what}")
    for rel, data in before.items():
        if rel not in {f"{TARGET}/{n}" for n in SELECTED} and after.get(rel) != data:
            bad.append(f"{rel}: changed")
    if child.returncode not in (0, -sig, 2):  # 2: pytest's exit after a KeyboardInterrupt (SIGINT)
        bad.append(f"the update failed by itself (exit {child.returncode}): {out.decode()[-800:]}")
    return Trial(bad, killed, opens, outcome, delay)


def run_trials(n: int, work: Path, seed: int | None = None, old_write: bool = False) -> list[Trial]:
    rng = random.Random(seed)
    return [trial(work / f"trial-{i:02d}", rng, old_write) for i in range(n)]


def _signal(name: str) -> signal.Signals:
    try:
        return signal.Signals[f"SIG{name.upper().removeprefix('SIG')}"]
    except KeyError:
        raise argparse.ArgumentTypeError(f"unknown signal {name!r}") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--old-write", action="store_true", help="syrupy's own (non-atomic) write in the child")
    p.add_argument("--signal", type=_signal, default=signal.SIGKILL, help="KILL (default) or INT (Ctrl-C)")
    p.add_argument("--keep", type=Path, default=None, help="keep the trial folders here")
    args = p.parse_args(argv)
    if args.trials < 1:
        p.error("--trials must be at least 1")
    with tempfile.TemporaryDirectory(prefix="kill-update-") as tmp:
        work = args.keep or Path(tmp)
        trials = []
        rng = random.Random(args.seed)
        for i in range(args.trials):
            t = trial(work / f"trial-{i:02d}", rng, args.old_write, args.signal)
            trials.append(t)
            state = "; ".join(t.bad) if t.bad else ", ".join(f"{k} {v}" for k, v in t.outcome.items())
            when = (
                f"{args.signal.name} at +{t.delay * 1000:.0f} ms" if t.killed else "ended before the signal"
            )
            print(f"trial {i + 1:2d}: {when}, {t.opens} write(s) begun: {state}", flush=True)
    bad = sum(1 for t in trials if t.bad)
    write = "syrupy's write" if args.old_write else "the gate's write"
    print(f"kill_update_trials: {bad} of {len(trials)} trials left a bad file ({write}, {args.signal.name})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
