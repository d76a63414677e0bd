"""A command stopped by SIGTERM, SIGINT or SIGHUP ends cleanly: every process it started ends (a
grandchild too), its temporary folders are removed, and it exits ``128 + signal`` with one line. Child
processes, as the signals need: the command runs as a user starts it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from invariants._errors import InvariantsError

ROOT = Path(__file__).parents[3]
# The session's compile cache folder (tests/conftest.py): the one variable of the suite's a child keeps.
CACHE = "INVARIANTS_CACHE_DIR"

# A project whose module, when the gate imports it, starts a process that starts another (a server of the
# project's, say), makes a temporary folder, says so in a file, and then waits.
SLOW = """
import os, subprocess, sys, tempfile, time
folder = tempfile.mkdtemp(prefix="invariants-slow-")
child = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time;"
    " g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']);"
    " print(g.pid, flush=True); time.sleep(300)"], stdout=subprocess.PIPE, text=True)
grandchild = child.stdout.readline().strip()
with open(os.environ["SLOW_PIDS"], "w") as f:
    f.write(f"{child.pid} {grandchild} {folder}")
time.sleep(300)
"""

# The gate as a user starts it on that project.
GATE = ("gate", "--spec-dir", "specs", "--snapshot-dir", "snapshots", "--no-catalog",
        "-p", "no:cacheprovider", "-q")  # fmt: skip
ENDED = "processes it started ended, its temporary folders removed"

SPEC = """[spec]
targets = ["cpu"]

[[program]]
name = "slow"
function = "slowlib:embed"
kind = "forward"
"""


# The same, with a thread of the project's that a signal is delivered to (as the kernel may hand a
# process's signal to any thread that does not block it, XLA's among them), while the main thread sleeps.
TO_A_THREAD = SLOW.replace(
    "time.sleep(300)\n",
    "import signal, threading\n"
    "def taken():\n    time.sleep(0.5)\n    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)\n"
    "threading.Thread(target=taken, daemon=True).start()\ntime.sleep(300)\n",
)


def _start(tmp_path: Path, *command: str, module: str = SLOW) -> tuple[subprocess.Popen[str], Path]:
    (tmp_path / "slowlib.py").write_text(module)
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "slow.toml").write_text(SPEC)
    pids = tmp_path / "pids"
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "INVARIANTS_")) or k == CACHE}
    env |= {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "SLOW_PIDS": str(pids),
            "TMPDIR": str(tmp_path / "tmp"),
            "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONFAULTHANDLER": "1"}  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "invariants", *command], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not (pids.is_file() and len(pids.read_text().split()) == 3):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the project's module never started its processes"
        time.sleep(0.1)
    return proc, pids


def _ended(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[str, str]:
    """The command's output once it has ended; where it has not in ``timeout`` seconds, its threads' stacks
    (faulthandler, on SIGABRT) in the failure."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"still running {timeout:g} s after the signal:\n{err[-6000:]}")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _stopped(proc: subprocess.Popen[str], pids: Path, *signals: signal.Signals, timeout: float = 60) -> str:
    """Send ``signals`` to the gate (the first, then the others half a second later, while it ends); its
    stderr once it has ended. Whatever is left running is killed after, so that a failure leaks nothing."""
    try:
        if signals:
            proc.send_signal(signals[0])
        if signals[1:]:
            time.sleep(0.5)  # handled: the command is ending when the next ones come
        for signum in signals[1:]:
            proc.send_signal(signum)
        _, err = _ended(proc, timeout)
    finally:
        proc.kill()
        for pid in map(int, pids.read_text().split()[:2]):
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)
    return err


def _ended_cleanly(tmp_path: Path, proc: subprocess.Popen[str], pids: Path, err: str, signum: int) -> None:
    """128 + the signal, its one line last, the project's processes gone, no traceback, and nothing of the
    gate's left in the temporary folder (the project's own folder is the project's)."""
    child, grandchild, folder = pids.read_text().split()
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, err[-2000:]
    assert err.strip().splitlines()[-1] == f"invariants gate: stopped by {name}; 2 {ENDED}", err[-2000:]
    assert _gone(int(child)) and _gone(int(grandchild))
    assert "Traceback" not in err
    assert [p.name for p in (tmp_path / "tmp").iterdir()] == [Path(folder).name]


@pytest.mark.e2e
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_ends_the_gate_its_processes_and_folders_in_one_line(tmp_path: Path, signum) -> None:
    proc, pids = _start(tmp_path, *GATE)
    _ended_cleanly(tmp_path, proc, pids, _stopped(proc, pids, signum), signum)


@pytest.mark.e2e
def test_a_second_signal_while_ending_does_not_break_the_clean_end(tmp_path: Path) -> None:
    proc, pids = _start(tmp_path, *GATE)
    err = _stopped(proc, pids, signal.SIGTERM, signal.SIGTERM, signal.SIGINT)
    _ended_cleanly(tmp_path, proc, pids, err, signal.SIGTERM)


@pytest.mark.e2e
def test_a_signal_another_thread_took_still_wakes_the_main_thread(tmp_path: Path) -> None:
    """The signal reaches a thread of the project's, not the main thread, which sleeps in the project's
    code: the command still ends, cleanly, at once (without the forwarding it would sleep on)."""
    proc, pids = _start(tmp_path, *GATE, module=TO_A_THREAD)
    _ended_cleanly(tmp_path, proc, pids, _stopped(proc, pids, timeout=30), signal.SIGTERM)


@pytest.mark.e2e
def test_a_signal_ends_versus_and_its_two_workers(tmp_path: Path) -> None:
    """versus keeps a worker process per side while it times; SIGTERM ends both with it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "INVARIANTS_")) or k == CACHE}
    (tmp_path / "tmp").mkdir()
    env |= {"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONFAULTHANDLER": "1",
            "TMPDIR": str(tmp_path / "tmp")}  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "invariants", "versus", "--baseline", "current",
                             "--candidate", "current", "--programs", "take", "--targets", "cpu",
                             "--out", str(tmp_path / "versus.md")], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    workers: list[psutil.Process] = []
    deadline = time.monotonic() + 120
    while len(workers) < 2:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "versus never started its workers"
        time.sleep(0.2)
        children = psutil.Process(proc.pid).children()
        workers = [c for c in children if "invariants.versus.worker" in c.cmdline()]
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = _ended(proc)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("invariants versus: stopped by SIGTERM; ") and last.endswith(ENDED), err[-2000:]
    assert all(_gone(w.pid) for w in workers)
    assert not (tmp_path / "versus.md").exists()  # a stopped run's report is never passed off as one
    # What is left in the temporary folder is the staged package alone, which later runs reuse.
    left = [p.name for p in (tmp_path / "tmp").iterdir()]
    assert all(name.startswith("invariants-package-") for name in left), left


def test_a_signal_inside_an_extensions_import_still_ends_in_the_signals_line(monkeypatch, capsys) -> None:
    """The handler's exception, raised while a C extension initialised, comes out as that import's error
    (what a SIGTERM in the first second of a command gave: a traceback of ``ImportError: Encountered an
    error while initializing the extension`` and exit 1). It is still the signal: its line and 143."""
    from types import SimpleNamespace

    from invariants import __main__ as cli

    def entry(argv: list[str]) -> int:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except KeyboardInterrupt as err:
            raise ImportError("Encountered an error while initializing the extension.") from err
        return 0

    monkeypatch.setitem(cli.COMMANDS, "stand-in", ("stand_in_command", "a command that imports"))
    monkeypatch.setattr(cli.importlib, "import_module", lambda name: SimpleNamespace(main=entry))
    status = cli.main(["stand-in"])
    err = capsys.readouterr().err
    assert status == 128 + signal.SIGTERM, err
    assert err.strip().splitlines() == [f"invariants stand-in: stopped by SIGTERM; 0 {ENDED}"], err


def test_a_signal_python_drops_in_a_gc_callback_still_ends_the_command(monkeypatch, capsys) -> None:
    """A signal that lands in a gc callback (JAX registers one while it imports: the first second of every
    command) raises where Python drops exceptions ("Exception ignored in ..."): the command ran to its end
    before it said it was stopped. It is delivered again, and the command ends at once, in its line."""
    import gc
    from types import SimpleNamespace

    from invariants import __main__ as cli

    def callback(phase: str, info: object) -> None:
        if phase == "start":
            gc.callbacks.remove(callback)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # the handler runs here, inside the callback

    def entry(argv: list[str]) -> int:
        gc.callbacks.append(callback)
        gc.collect()
        time.sleep(30)  # the rest of the command, which the signal must cut short
        return 0

    monkeypatch.setitem(cli.COMMANDS, "stand-in", ("stand_in_command", "a command that imports JAX"))
    monkeypatch.setattr(cli.importlib, "import_module", lambda name: SimpleNamespace(main=entry))
    start = time.monotonic()
    status = cli.main(["stand-in"])
    err = capsys.readouterr().err
    assert status == 128 + signal.SIGTERM and time.monotonic() - start < 10, err
    assert err.strip().splitlines() == [f"invariants stand-in: stopped by SIGTERM; 0 {ENDED}"], err


# A child that makes a compile's dump folder in its temporary folder, then is killed mid-compile: the
# SIGTERM or SIGKILL a stopped command (or a timeout) sends, which runs no cleanup of its own.
KILLED_MID_COMPILE = (
    "import os, signal, tempfile; tempfile.mkdtemp(prefix='invariants-code-'); "
    "os.kill(os.getpid(), signal.SIGKILL)"
)


@pytest.mark.parametrize("how", ["run_gate", "keys_child"])
def test_what_a_killed_child_leaves_in_its_temporary_folder_goes_with_it(
    tmp_path: Path, monkeypatch, how
) -> None:
    """The children of selfcheck, bisect and matrix (gate runs) and of the gate (compile children) each get
    a temporary folder of their own, removed when they end however they end: a dump folder they made is
    never left in the system's."""
    from invariants.compile import child

    system = tmp_path / "tmp"
    system.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(system))
    env = {**os.environ, "TMPDIR": str(system)}
    folder = tmp_path / "run"
    if how == "run_gate":
        command = [sys.executable, "-c", KILLED_MID_COMPILE, "--results-json", str(folder / "results.json")]
        assert child.run_gate(command, env=env, folder=folder, timeout=60).returncode == -signal.SIGKILL
    else:
        (tmp_path / "killed_mid_compile.py").write_text(KILLED_MID_COMPILE)
        with pytest.raises(InvariantsError, match="child exited -9"):
            child.keys_child("killed_mid_compile", [], env=env, what="compile", cwd=tmp_path)
    assert sorted(p.name for p in system.iterdir()) == []
    assert not list(tmp_path.rglob("invariants-code-*"))
