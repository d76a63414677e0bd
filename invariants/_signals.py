"""SIGTERM, SIGINT and SIGHUP end a command cleanly (no JAX).

A command stopped by a signal ends every process it started, lets its ``with`` blocks remove their
temporary folders, and exits with ``128 + signal`` and one line. The signal becomes a :class:`Stopped`, a
``KeyboardInterrupt``, so that everything that already ends cleanly on Ctrl-C does so on SIGTERM. The
processes are ended from the handler, before the exception unwinds: a grandchild that ``subprocess.run``
would not see must not outlive the folder its parent is removing. psutil finds them; the environments of
other releases, where a versus worker or a bisect run imports this package, lack it and end nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType

# SIGHUP where the platform has one (a closed terminal, a CI runner's cancel on some hosts).
_HANDLED = tuple(
    s for s in (getattr(signal, n, None) for n in ("SIGTERM", "SIGINT", "SIGHUP")) if s is not None
)
# How long the processes a command started get to end on SIGTERM before they are killed.
_GRACE_SECONDS = 3.0


class Stopped(KeyboardInterrupt):
    """Raised from a command's signal handler."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def end_descendants(grace: float = _GRACE_SECONDS) -> int:
    """Terminate every descendant of this process, kill what is left after ``grace``; how many there were."""
    import psutil  # a release's environment (a versus worker, bisect's gate) runs this package without it

    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return 0
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=grace)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(alive, timeout=grace)
    return len(children)


@dataclasses.dataclass
class _State:
    signum: int | None = None
    ended: int = 0
    # The handler's Stopped was dropped where Python lets no exception out (see ending_cleanly).
    dropped: bool = False


@contextlib.contextmanager
def ending_cleanly() -> Iterator[_State]:
    """Handle the signals for the block: the first ends its descendants and raises :class:`Stopped`; a
    second while that unwinds is ignored (the unwinding is the clean end). Main thread only."""
    state = _State()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        if state.signum is not None and not state.dropped:
            return
        state.signum, state.dropped = signum, False
        state.ended += end_descendants()
        raise Stopped(signum)

    def dropped(info: sys.UnraisableHookArgs) -> None:
        # Where Python lets no exception out (a gc callback, a __del__), the Stopped is dropped here: the
        # forwarder sends the signal to the main thread again, where ordinary code takes it.
        if isinstance(info.exc_value, Stopped) and state.signum is not None:
            state.dropped = True
            with contextlib.suppress(OSError):
                os.write(write_end, bytes([state.signum]))
            return
        saved_hook(info)

    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    saved_hook = sys.unraisablehook
    sys.unraisablehook = dropped
    saved = {s: signal.signal(s, handler) for s in _HANDLED}
    # The kernel may hand a signal to any thread, and then a main thread blocked in a sleep or a read is not
    # woken to run the handler. The wakeup fd hears every signal; _forward sends it on to the main thread.
    saved_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    forwarder = threading.Thread(
        target=_forward,
        args=(read_end, state, threading.main_thread()),
        name="invariants-signals",
        daemon=True,
    )
    forwarder.start()
    try:
        yield state
    finally:
        signal.set_wakeup_fd(saved_fd)
        for s, old in saved.items():
            signal.signal(s, old)
        sys.unraisablehook = saved_hook
        os.close(write_end)  # the forwarder reads the end of the pipe and stops
        forwarder.join(timeout=5)


# How long the main thread has to act on a signal before it is sent to the main thread again.
_FORWARD_AFTER_SECONDS = 0.2


def _forward(read_end: int, state: _State, main: threading.Thread) -> None:
    """Send each signal the wakeup fd hears that the main thread has not acted on to the main thread."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED)  # never this thread's: it would only forward again
    handled = {int(s) for s in _HANDLED}
    echoes = dict.fromkeys(handled, 0)  # a signal sent on to the main thread is heard here once more
    try:
        while data := os.read(read_end, 64):
            for signum in data:
                if signum not in handled:
                    continue
                if echoes[signum]:
                    echoes[signum] -= 1
                    continue
                time.sleep(_FORWARD_AFTER_SECONDS)
                if (state.signum is None or state.dropped) and main.ident is not None and main.is_alive():
                    echoes[signum] += 1
                    signal.pthread_kill(main.ident, signum)
    finally:
        os.close(read_end)


def stopped_by(state: _State, command: str) -> int:
    assert state.signum is not None
    name = signal.Signals(state.signum).name
    ended = f"{state.ended} process{'es' if state.ended != 1 else ''} it started ended"
    print(f"invariants {command}: stopped by {name}; {ended}, its temporary folders removed", file=sys.stderr)
    return 128 + state.signum
