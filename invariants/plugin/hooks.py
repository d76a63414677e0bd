"""The pytest plugin of the gate: its options, markers, hooks and fixtures, each handing the work to the
run's :class:`~invariants.plugin.session.GateSession`, kept on ``config.stash`` so that two sessions in one
process share nothing. Importing this module starts no JAX: the backend guard starts it in
``pytest_configure``, and only then is the session's module imported.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .._errors import InvariantsError, visible
from .._supported import ReleaseLacks
from .._usercode import finished
from ..compile.process import guard_backend, pin_worker
from ..records.compiled import FailedCompile, Key
from ..records.results import Failure, compile_name, failure_property, lacks_property
from ..snapshot.store import StructureSnapshotExtension
from .anchors import TierFile, anchor_tier
from .options import OPTIONS
from .outcomes import GateFailed, fail, versions_line
from .sharding import WORKER_OUTPUT
from .tree import GATE_REPORT

if TYPE_CHECKING:
    from _pytest.outcomes import Exit

    from .session import GateSession
else:
    Exit = pytest.exit.Exception


# Registered here so that an installed gate run without this repository's pyproject.toml knows them too.
MARKERS = (
    "gate: the performance gate itself (snapshots, invariants, throughput)",
    "snapshot: structural snapshot items",
    "invariant: declarative invariant items",
    "throughput: paired timing items",
    "correctness: value checks of the programs' outputs",
    "ratio: paired time ratios (throughput)",
    "efficiency: memcpy efficiency against a recorded baseline (throughput)",
    "snapshot_path(PATH): the structural snapshot file an item compares",
)

_SESSION = pytest.StashKey["GateSession"]()
_STOPPED = pytest.StashKey[bool]()


def gate_session(config: pytest.Config) -> GateSession:
    return config.stash[_SESSION]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("invariants", "embedding performance invariants")
    for option in OPTIONS:
        group.addoption(option.flag, **option.keywords())


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    pin_worker(getattr(config, "workerinput", None), config.getoption("pin_workers", default=False))
    try:
        guard_backend()
        from .session import GateSession

        config.stash[_SESSION] = GateSession.start(config)
    except (InvariantsError, pytest.UsageError) as err:
        line, status = str(err), getattr(err, "status", 2)
    else:
        return
    # Bad input exits 2 (a pytest.UsageError would exit 4); NothingChecked exits 4.
    raise Refused(visible(line), returncode=status)


class Refused(Exit):
    """The gate stopping on its input: pytest writes the class's name before the line, ``error: ``."""


Refused.__name__ = "error"


def pytest_unconfigure(config: pytest.Config) -> None:
    s = config.stash.get(_SESSION, None)
    if s is not None:
        s.close()


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [visible(line) for line in gate_session(config).header_lines()]


# What pytest's header says of its configuration file when the gate gave it the null device.
NO_CONFIG = "configfile: none (the gate runs on its own options; no pytest configuration file is read)"


@pytest.hookimpl(wrapper=True, specname="pytest_report_header")
def pytest_report_header_config(config: pytest.Config) -> Any:
    """The gate's runs name the null device as pytest's configuration (``-c``, see
    :func:`~invariants.compile.child.pytest_args`), so that a project's ``addopts`` cannot change the gate:
    pytest's header then names ``../../dev/null``, which this line replaces with what it means."""
    headers = yield
    if config.inipath != Path(os.devnull):
        return headers
    return [
        [NO_CONFIG if line.startswith("configfile: ") else line for line in lines]
        if isinstance(lines, list)
        else lines
        for lines in headers
    ]


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.File | None:
    tier = anchor_tier(module_path)
    if tier is None or _SESSION not in parent.config.stash:
        return None
    return TierFile.from_parent(parent, path=module_path, tier=tier, gate=gate_session(parent.config))


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> Any:
    # Counted before the other plugins' selection (-k, -m) runs: see GateSession.deselected.
    gate_items = sum(1 for i in items if i.get_closest_marker("gate") is not None)
    result = yield
    s = gate_session(config)
    s.deselected(gate_items, items)
    if s.sharding is not None and s.nothing_selected is None:
        s.sharding.take(config, items)
    return result


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """Under xdist the workers split the items: the controller, which writes the results file, learns the
    selection's digest from them."""
    s = gate_session(node.config)
    selection = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT)
    if s.sharding is not None and selection is not None:
        s.sharding.selection = selection


def pytest_collection_finish(session: pytest.Session) -> None:
    gate_session(session.config).collected(session.items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """A gate item stopped by an ``InvariantsError`` fails with its one line and the versions, not a page of
    the gate's own stack."""
    try:
        return (yield)
    except ReleaseLacks as err:  # the tool's limit on this JAX release: no verdict on the program
        if item.get_closest_marker("gate") is None:
            raise
        reads: list[Key] = getattr(item, "reads", [])
        stopped = next((k for k in reads if compile_name(k.target, k.program, k.config) == err.what), None)
        item.user_properties.append(lacks_property(err.api, stopped))
        pytest.skip(str(err))
    except InvariantsError as err:
        if item.get_closest_marker("gate") is None:
            raise
        line, failed = str(err), err if isinstance(err, FailedCompile) else None
        first = (line.splitlines() or [""])[0]
        failure = Failure("error", first) if failed is None else Failure("compile", failed.first, failed.key)
    item.stash[_STOPPED] = True
    if failed is not None and _SESSION in item.config.stash:  # said whole once per compile, or known
        try:
            said = gate_session(item.config).compile_failure(failed, item.nodeid)
        except pytest.xfail.Exception:
            item.user_properties.append(failure_property(failure))  # a known one: its record keeps the key
            raise
        fail(failure, said)
    fail(failure, f"{line}\n{versions_line()}")  # outside the except: no chained stack


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A gate item's report: its failure as a value; without its captured stderr when an ``InvariantsError``
    stopped it, where XLA and libtpu print the C++ stack traces its one line sums up; every text with control
    characters escaped, in place: here, where text leaves for the terminal, one escape covers every source
    of user text, a later one included."""
    report = yield
    if item.get_closest_marker("gate") is None:
        return report
    setattr(report, GATE_REPORT, True)
    if call.excinfo is not None and isinstance(call.excinfo.value, GateFailed):
        report.user_properties.append(failure_property(call.excinfo.value.failure))
    if call.when == "call" and item.stash.get(_STOPPED, False):
        report.sections = [(title, text) for title, text in report.sections if "stderr" not in title]
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    if crash is not None and report.failed:
        # The FAILED short line: its first line alone, since on CI pytest writes the message whole.
        crash.message = crash.message.removeprefix("Failed: ").split("\n", 1)[0]
    report.longrepr = _visible_tree(report.longrepr)
    report.sections = _visible_tree(report.sections)
    if isinstance(getattr(report, "wasxfail", None), str):
        report.wasxfail = visible(report.wasxfail)
    return report


def _visible_tree(value: Any) -> Any:
    """``value`` with every string in it escaped, through lists, tuples and pytest's report dataclasses."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, list | tuple):
        return type(value)(_visible_tree(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            object.__setattr__(value, f.name, _visible_tree(getattr(value, f.name)))
    return value


@pytest.hookimpl(wrapper=True, tryfirst=True, specname="pytest_terminal_summary")
def pytest_terminal_summary_whole_reasons(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> Any:
    """pytest cuts a ``FAILED`` line to 80 columns in a pipe, which a gate item's node id fills: there it is
    written whole, as pytest writes it when ``CI`` is set (for the summary alone)."""
    unset = not any(k in os.environ for k in ("CI", "BUILD_NUMBER"))
    whole = unset and _SESSION in config.stash and not terminalreporter.isatty()
    if whole:
        os.environ["CI"] = "1"
    try:
        return (yield)
    finally:
        if whole:
            os.environ.pop("CI", None)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    s = config.stash.get(_SESSION, None)
    if s is None:
        return
    for line in s.summary_lines(terminalreporter):
        terminalreporter.write_line(visible(line))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    s = session.config.stash.get(_SESSION, None)
    if s is None:
        return
    if s.nothing_selected is not None:
        session.exitstatus = 2  # bad input, as every selection of nothing is (not pytest's 5)
    s.finish(exitstatus, passed=exitstatus == 0 and session.testsfailed == 0)
    if s.recorder.write_error is not None and session.exitstatus == 0:
        session.exitstatus = 2  # an output that cannot be written: the run is not green, its file is old
    _drop_idle_hypothesis(session.config)
    finished(int(session.exitstatus))  # threads a project's import left running do not hold the exit


def _drop_idle_hypothesis(config: pytest.Config) -> None:
    """hypothesis's pytest plugin imports all of hypothesis in its terminal summary, most of a small gate
    run's end, even where the session never imported it, and then has nothing to say."""
    plugin = config.pluginmanager.get_plugin("hypothesispytest")
    if plugin is not None and "hypothesis" not in sys.modules:
        config.pluginmanager.unregister(plugin)


def worker_group(nodeid: str, targets: Iterable[str]) -> str:
    """The xdist unit of an item: an ``@group`` suffix's group, else a gate item's target (the second part of
    its node id, its target's collector), else the item alone."""
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.rsplit("@", 1)[1]
    parts = nodeid.split("::")
    return parts[1] if len(parts) > 2 and parts[1] in targets else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist load`` (or ``loadgroup``), each target's items go to one worker: a target's programs
    compile once per process. The scheduler groups by node id, since xdist's ``loadgroup`` rewrites node ids
    that newer pytest no longer reads."""
    if config.getoption("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    names = frozenset(gate_session(config).all_targets)

    class TargetScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid, names)

    return TargetScheduling(config, log)


@pytest.fixture(scope="session")
def gate(request: pytest.FixtureRequest) -> GateSession:
    """The session's gate state: compile cache, structures, targets."""
    return gate_session(request.config)


@pytest.fixture
def structure_snapshot(snapshot: Any) -> Any:
    """syrupy's ``snapshot``, stored per target under ``snapshots/<target>/``, written atomically; a snapshot
    file that cannot be read or written fails its item with one line (see ``snapshot.store``)."""
    return snapshot.use_extension(StructureSnapshotExtension)
