"""A project's code, contained: importing its modules, calling its factories and tracing its functions run
inside :func:`guarded` (no JAX here).

Whatever that code does to end the process is one line naming what it did, an :class:`InvariantsError`
(exit 2), never a green gate nor the project's exit status passed on: ``SystemExit``, a ``KeyboardInterrupt``
it raises itself (a real Ctrl-C still interrupts), ``os._exit`` (replaced for the call), or a hang past
:func:`timeout` seconds (an alarm; a watchdog thread ends what the alarm cannot interrupt). Non-daemon
threads its imports start do not hold the process at exit (:func:`finished`).

The mechanism is chosen for the warm path, where the spec stage still imports the project's modules and
calls its factories: a guarded call costs a few system calls and no thread of its own. A child process per
call would cost a JAX start each; ``faulthandler.dump_traceback_later`` exits with status 1 and every stack.
"""

from __future__ import annotations

import contextlib
import math
import os
import posix as _posix  # os._exit's own module: the same function, another name
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import NoReturn

from . import _config
from ._errors import InvariantsError
from ._signals import Stopped

# Seconds one import, factory call or trace may take: a large model's factory or trace takes seconds.
DEFAULT_TIMEOUT = 300.0
# After the alarm, how long the watchdog waits for the call to notice it before it ends the process.
_GRACE = 10.0
# The exit status of a run the watchdog ends: bad input's.
_STATUS = 2

_explicit: float | None = None
_depth = 0
_started: list[threading.Thread] = []  # non-daemon threads the project's imports started
_exit_status: int | None = None
_real_exit = os._exit


def parse_timeout(value: str | float, named: str = "--user-code-timeout") -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise InvariantsError(
            f"{named} {value!r}: takes a positive, finite number of seconds (default {DEFAULT_TIMEOUT:g})"
        )
    return seconds


def set_timeout(seconds: str | float | None) -> None:
    """The timeout of every guarded call from now on."""
    global _explicit
    _explicit = None if seconds is None else parse_timeout(seconds)


def timeout() -> float:
    if _explicit is not None:
        return _explicit
    raw = _config.get("INVARIANTS_USER_CODE_TIMEOUT")
    if raw is None or not raw.strip():
        return DEFAULT_TIMEOUT
    return parse_timeout(raw, _config.name("INVARIANTS_USER_CODE_TIMEOUT"))


class _Exited(BaseException):
    def __init__(self, code: object) -> None:
        super().__init__(code)
        self.code = code


class _TimedOut(BaseException):
    """A BaseException, so that the project's ``except Exception`` does not hide it."""


class _Watchdog:
    """One daemon thread that ends the process with one line when a guarded call outlives its deadline."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._deadline: float | None = None
        self._line = ""
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, line: str) -> None:
        with self._cond:
            self._deadline, self._line = time.monotonic() + seconds, line
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="invariants-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()

    def disarm(self) -> None:
        with self._cond:
            self._deadline = None
            self._cond.notify()

    def _watch(self) -> None:
        # Signals are the main thread's: one given to this thread would not wake it (see _signals).
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
        with self._cond:
            while True:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                # os.write, not print: the main thread may hold sys.stderr's lock, stuck in the call.
                with contextlib.suppress(OSError):
                    os.write(2, (self._line + "\n").encode())
                _real_exit(_STATUS)


_WATCHDOG = _Watchdog()


def _ended(what: str, err: SystemExit | _Exited | _TimedOut, seconds: float) -> str:
    if isinstance(err, _TimedOut):
        return (
            f"{what}: still running after {seconds:g} s, stopped (--user-code-timeout SECONDS to allow more)"
        )
    how = "raised SystemExit" if isinstance(err, SystemExit) else "called os._exit"
    said = repr(err.code) if err.code is not None else ""
    return f"{what} {how}({said}): a project's code must not end the gate's process"


@contextlib.contextmanager
def guarded(what: str) -> Iterator[None]:
    """Run the block (a project's code) contained; ``what`` names it for the one line (``FILE:LINE: NAME:
    importing MODULE``)."""
    global _depth
    if _depth:  # already inside a guarded call: that one contains this one
        yield
        return
    seconds = timeout()
    main = threading.current_thread() is threading.main_thread()
    interrupted = False

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        nonlocal interrupted
        interrupted = True
        if callable(saved_int) and saved_int is not signal.default_int_handler:
            # A command's own handler (_signals): it raises Stopped, or returns while the command ends.
            saved_int(signum, frame)
            return
        raise KeyboardInterrupt

    def on_alarm(signum: int, frame: FrameType | None) -> NoReturn:
        raise _TimedOut

    def no_exit(status: int) -> NoReturn:
        raise _Exited(status)

    before = set(threading.enumerate())
    saved_int = saved_alarm = None
    saved_timer = (0.0, 0.0)
    if main:
        saved_int = signal.signal(signal.SIGINT, on_sigint)
        saved_alarm = signal.signal(signal.SIGALRM, on_alarm)
        saved_timer = signal.setitimer(signal.ITIMER_REAL, seconds)
    stuck = f"{what}: still running after {seconds:g} s and could not be interrupted (--user-code-timeout)"
    _WATCHDOG.arm(seconds + (_GRACE if main else 0.0), stuck)
    # The same function under both names: a project calling posix._exit would end the process unseen.
    os._exit = _posix._exit = no_exit
    _depth += 1
    try:
        yield
    except (SystemExit, _Exited, _TimedOut) as err:
        raise InvariantsError(_ended(what, err, seconds)) from None
    except KeyboardInterrupt as err:
        if interrupted or isinstance(err, Stopped):  # a real Ctrl-C, or a signal the command handles
            raise
        raise InvariantsError(
            f"{what} raised KeyboardInterrupt (no Ctrl-C was pressed): a project's code must not end the "
            "gate's process"
        ) from None
    finally:
        _depth -= 1
        os._exit = _posix._exit = _real_exit
        _WATCHDOG.disarm()
        if main:
            signal.setitimer(signal.ITIMER_REAL, *saved_timer)
            signal.signal(signal.SIGALRM, saved_alarm)
            signal.signal(signal.SIGINT, saved_int)
        _keep_out(before)


def _keep_out(before: set[threading.Thread]) -> None:
    leave_behind(*[t for t in threading.enumerate() if t not in before and not t.daemon])


def leave_behind(*new: threading.Thread) -> None:
    """Threads the process ends without waiting for, once :func:`finished` has its status: what a project's
    import left running, a compile past its timeout."""
    if not new:
        return
    if not _started:
        # Runs at interpreter exit before the non-daemon threads are joined (what concurrent.futures uses).
        threading._register_atexit(_leave)  # type: ignore[attr-defined]
    _started.extend(new)


def _leave() -> None:
    if _exit_status is None or not any(t.is_alive() for t in _started):
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    _real_exit(_exit_status)


def finished(status: int) -> int:
    """``status``, remembered: where the project's imports left threads running, the process ends with it
    at exit without waiting for them."""
    global _exit_status
    _exit_status = int(status)
    return _exit_status
