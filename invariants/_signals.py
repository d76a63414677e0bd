"""SIGTERM, SIGINT and SIGHUP end a command cleanly (no JAX).

A command stopped by a signal ends every process it started (a worker of versus, a release's gate run in
bisect or matrix, a compile child, and whatever those started in turn), lets its ``with`` blocks remove
their temporary folders, and exits with ``128 + signal`` and one line saying so, as pytest and most CLIs
do. The signal becomes a :class:`Stopped`, a ``KeyboardInterrupt``, so that every place that already ends
cleanly on Ctrl-C (``subprocess.run`` kills its child, pytest ends its session, ``TemporaryDirectory``
removes its folder) does the same on SIGTERM.

The processes are ended from the handler, before the exception unwinds: a child blocked on a pipe, or a
grandchild that ``subprocess.run`` would not see, must not outlive the folder its parent is removing.
psutil finds them (every descendant, on every platform it supports), which is why it is a dependency of
the package; the environments of other releases, where a versus worker or a bisect run imports this
package, lack it, and never end anything themselves.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType

__all__ = ["Stopped", "ending_cleanly", "stopped_by"]

# What each handled signal is called in the one line; SIGHUP where the platform has one (a closed
# terminal, a CI runner's cancel on some hosts).
_HANDLED = tuple(
    s for s in (getattr(signal, n, None) for n in ("SIGTERM", "SIGINT", "SIGHUP")) if s is not None
)
# How long the processes a command started get to end on SIGTERM before they are killed.
_GRACE_SECONDS = 3.0


class Stopped(KeyboardInterrupt):
    """A command was stopped by ``signum``; raised from its signal handler."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def end_descendants(grace: float = _GRACE_SECONDS) -> int:
    """Terminate every process this one started, directly or not; kill what is left after ``grace``
    seconds. Returns how many there were."""
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


class _State:
    """What one :func:`ending_cleanly` block saw: the first signal, and how many processes it ended."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.ended = 0
        # The handler's Stopped was dropped where Python lets no exception out: raise it again.
        self.dropped = False


@contextlib.contextmanager
def ending_cleanly() -> Iterator[_State]:
    """Handle SIGTERM, SIGINT and SIGHUP for the block: the first one ends the block's descendants and
    raises :class:`Stopped` where the block is; a second one while that unwinds is ignored (the unwinding
    is the clean end). The handlers that were there before are restored after. Main thread only."""
    state = _State()
    if threading.current_thread() is not threading.main_thread():
        yield state  # signals are the main thread's: a command run from another thread leaves them be
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        if state.signum is not None and not state.dropped:
            return
        state.signum, state.dropped = signum, False
        state.ended += end_descendants()
        raise Stopped(signum)

    def dropped(info: sys.UnraisableHookArgs) -> None:
        # Where Python cannot let an exception out (a gc callback, which JAX registers while it imports;
        # a __del__), it reports it here and drops it: the command would run to its end. The forwarder
        # sends the signal to the main thread again, where ordinary code takes the handler's Stopped. (No
        # waiting here: a signal that came while this hook waited would be dropped with it.)
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
    # The kernel may hand a process's signal to any of its threads (a watchdog, a compile pool, XLA's own),
    # and then a main thread blocked in a sleep or a read is not woken to run the handler: the command would
    # hang. The wakeup fd hears every signal, whichever thread took it; a thread of ours sends the ones the
    # main thread did not act on to the main thread itself.
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
    """Read the signal numbers the wakeup fd writes; send each that the main thread has not acted on (its
    handler set no ``state.signum``, or the Stopped it raised was dropped) to the main thread, where it
    wakes what blocks."""
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
    """The one line for a command that a signal stopped, on stderr; its exit status, ``128 + signal``."""
    assert state.signum is not None
    name = signal.Signals(state.signum).name
    ended = f"{state.ended} process{'es' if state.ended != 1 else ''} it started ended"
    print(f"invariants {command}: stopped by {name}; {ended}, its temporary folders removed", file=sys.stderr)
    return 128 + state.signum
