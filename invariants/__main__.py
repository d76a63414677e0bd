"""``python -m invariants COMMAND``: the command-line face of the suite.

Each command lives in the module of its stage as ``main_<command>(argv) -> int``, or ``main`` where the
module has one command; this file only dispatches, and turns an :class:`InvariantsError` into one line on
stderr with exit code 2, and a signal into a clean end (:mod:`invariants._signals`).
"""

from __future__ import annotations

import importlib
import io
import os
import sys
from collections.abc import Callable

from . import _config
from ._errors import InvariantsError, did_you_mean, visible
from ._signals import ending_cleanly, stopped_by

COMMANDS = {
    "gate": (
        "invariants.plugin.command",
        "run the gate on a project's own programs (spec files with [[program]])",
    ),
    "hlo-stats": (
        "invariants.report.hlo_stats",
        "structural metrics of optimized-HLO text files or dump folders",
    ),
    "trace-stats": (
        "invariants.report.trace_stats",
        "device time per module and HLO op from JAX profiler traces (*.xplane.pb)",
    ),
    "report": ("invariants.report.markdown", "markdown tables (and a PNG) from a run's results"),
    "selfcheck": ("invariants.selfcheck.command", "inject regressions and show the suite catches each"),
    "bisect": ("invariants.releases.bisect", "find the JAX release where an item changed verdict"),
    "matrix": ("invariants.releases.matrix", "key metrics across JAX releases, as a table and a plot"),
    "cache": ("invariants.compile.cache_command", "the compile cache: where it is, how full; clear it"),
    "versus": (
        "invariants.versus.command",
        "time the catalog under two JAX installations, paired in one run",
    ),
}


def _usage() -> str:
    lines = ["usage: python -m invariants COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:10} {doc}" for name, (_, doc) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run one command; a reader that stops early (``| head``) ends it quietly."""
    for stream in (sys.stdout, sys.stderr):  # an unencodable character written as its escape, not raised
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    try:
        status = _dispatch(argv)
        sys.stdout.flush()  # a closed pipe shows here, inside the try, not at interpreter exit
        return status
    except BrokenPipeError:
        # Point stdout at /dev/null so that the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _dispatch(argv: list[str] | None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        hint = did_you_mean(command, COMMANDS)
        print(f"invariants: unknown command {command!r}{hint}; known: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    # As in the pytest plugin, JAX runs on the CPU unless asked otherwise; and no command, nor its children,
    # writes bytecode caches inside the installed package (or JAX's).
    _config.default_platforms()
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    module = importlib.import_module(COMMANDS[command][0])
    entry = getattr(module, "main_" + command.replace("-", "_"), None) or module.main
    with ending_cleanly() as signalled:
        try:
            status = _run(entry, rest)
        except BaseException:
            # The signal's Stopped, raised while an extension module initialised, comes out as that
            # import's error: the signal stopped the command all the same.
            if signalled.signum is None:
                raise
            status = 1
    # Also where the command caught the interrupt itself and returned (pytest, in ``gate``).
    return stopped_by(signalled, command) if signalled.signum is not None else status


def _run(entry: Callable[[list[str]], int], rest: list[str]) -> int:
    try:
        return int(entry(rest))
    except InvariantsError as err:
        print(visible(str(err), one_line=True), file=sys.stderr)
        return int(getattr(err, "status", 2))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    from ._usercode import finished  # threads a project's import left running do not hold the exit

    sys.exit(finished(main()))
