"""What a gate item says when it decides: the pytest outcome of a decided invariant, and the diagnosis a
failing item prints (the verdict, the structural diff against the committed snapshot, versions, dumps)."""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import pytest

from .._errors import InvariantsError
from .._paths import shown
from ..records.compiled import Key
from ..records.results import Failure
from ..scope.targets import versions
from ..snapshot.diff import (
    changed_kernels,
    changed_sections,
    fold_alike,
    structural_diff,
    summary_change,
    summary_of,
    text_change,
)

if TYPE_CHECKING:
    from _pytest.outcomes import Failed as _Failed

    from ..specfile.reader import Invariant
    from .session import GateSession
else:
    _Failed = pytest.fail.Exception


class GateFailed(_Failed):
    """A gate item's failure: pytest's text, without a traceback, and its :class:`Failure`."""

    # Shown as pytest shows its own (``Failed: TEXT``, the prefix its FAILED line and the recorder drop).
    __module__ = "builtins"
    __qualname__ = "Failed"

    def __init__(self, failure: Failure, text: str) -> None:
        super().__init__(text, pytrace=False)
        self.failure = failure


def fail(failure: Failure, text: str) -> NoReturn:
    raise GateFailed(failure, text)


def judge(
    invariant: Invariant,
    holds: bool,
    tightenable: bool,
    where: str,
    describe: str,
    failure: Callable[[], str],
    program: str | None = None,
    key: Key | None = None,
    other_configs: tuple[str, ...] = (),
) -> None:
    """Turn a decided invariant into a pytest outcome, the same way for every tier.

    A ratchet xfails with its reason, and fails when ``tightenable`` (it now holds, beyond noise), saying
    how to split the fixed ``program`` or configuration out of the others (``other_configs``) where it
    still fails. ``failure`` builds the diagnosis lazily, since it may dump files.
    """
    if invariant.ratchet is not None:
        if tightenable:
            advice = f"drop its ratchet in {invariant.where} ({invariant.ratchet.issue})"
            if program is not None and _names_a_set(invariant.programs):
                advice += (
                    f", or, while it still fails on the others of programs = {list(invariant.programs)}, "
                    f"move {program} to an invariant of its own without the ratchet"
                )
            if other_configs:
                advice += (
                    f", or, while it still fails in {', '.join(other_configs)}, narrow the ratchet to "
                    f"configs = {list(other_configs)} and hold {key.config if key else 'this one'} without it"
                )
            line = f"ratchet can be tightened: {invariant.id} now holds on {where} ({describe}); {advice}"
            fail(Failure("assert", line, key), line)
        # Without a traceback: formatting one cost more than deciding the item.
        raise pytest.xfail.Exception(
            f"{invariant.ratchet.reason} ({invariant.ratchet.issue}); {describe}", pytrace=False
        )
    if not holds:
        fail(Failure("assert", describe, key), failure())


def _names_a_set(selectors: tuple[str, ...]) -> bool:
    return len(selectors) > 1 or any(s.startswith("tag:") or any(c in s for c in "*?[") for s in selectors)


# A changed section's diff is shown whole up to this many lines, so that a failure fits a screen.
_SECTION_LINES = 8


def snapshot_comparison(s: GateSession, key: Key, current: str) -> list[str]:
    """What differs between the committed snapshot of ``key`` and ``current``, to fit a screen: the summary
    before and after, the kernels that changed (never cut), short sections whole, where the whole diff is."""
    path = s.snapshots.path(key)
    name = shown(path)
    if not path.exists():
        return [f"no committed snapshot at {name}"]
    committed = path.read_text()
    if committed == current:
        return [f"structure identical to {name}"]
    before, after = summary_of(committed), summary_of(current)
    lines = [f"- {before}", f"+ {after}"] if before != after else [f"  {after} (unchanged)"]
    kernels = fold_alike(changed_kernels(committed, current, context=0))
    if kernels:
        lines += [f"kernels that changed (- {name}, + now):", *kernels]
    for title, whole_section in changed_sections(committed, current):
        diff = fold_alike(whole_section)
        if len(diff) <= _SECTION_LINES:
            lines += [f"{title} changed:", *diff]
        else:
            lines.append(f"{title} changed: {len(whole_section)} lines")
    whole = s.write_diff(key, structural_diff(committed, current, name, "now"))
    return [*lines, f"the whole diff: {shown(whole)}"]


def dumped_line(s: GateSession, *keys: Key) -> str:
    """Dump each of ``keys``; the line that says where."""
    paths = []
    for key in dict.fromkeys(keys):
        try:
            dumped = s.dump(key)
        except InvariantsError as err:  # a compile that fails must not hide the failure being reported
            paths.append(f"{'/'.join(key)} not dumped ({err})")
        else:
            paths.append(f"{dumped}.hlo.txt, {dumped}.jaxpr.txt")
    return "optimized HLO and jaxpr: " + "; ".join(paths)


def versions_line(target: str | None = None) -> str:
    line = "versions: " + ", ".join(f"{k} {v}" for k, v in versions().items())
    return line + (f"; target {target}" if target else "")


def relation_report(s: GateSession, keys: tuple[Key, ...], headline: str, summaries: list[str]) -> str:
    """A failed relation between programs: the verdict, the versions, what differs between the first two
    programs' snapshot texts (the measured values alone say "1 kernel against 1 kernel"), the dumps."""
    a, b = keys[0], keys[1]
    name_a, name_b = f"{a.program}[{a.config}] on {a.target}", f"{b.program}[{b.config}] on {b.target}"
    # The header lines name the program and its doc, where equal programs differ.
    body = [list(itertools.dropwhile(lambda line: line.startswith("#"), t.splitlines())) for t in summaries]
    diff = list(difflib.unified_diff(body[0], body[1], name_a, name_b, lineterm="", n=2))
    between = (
        [f"{name_a} against {name_b} (- {a.program}, + {b.program}):", *diff[2:]]
        if diff
        else [f"{name_a} and {name_b} render the same snapshot text"]
    )
    return "\n".join([headline, versions_line(a.target), *between, dumped_line(s, *keys)])


def structure_failure(s: GateSession, key: Key, current: str, accept: str | None) -> tuple[Failure, str]:
    """What a structure item that differs from its snapshot says (its first line is pytest's ``FAILED``
    line), last the command that ``accept``s the change; and its :class:`Failure`."""
    program, config, target = key
    path = s.snapshots.path(key)
    committed = path.read_text() if path.exists() else ""
    change = summary_change(committed, current)
    if committed and change == text_change(committed, current):  # the file, not the compile, is what differs
        what = f"{shown(path)} holds the structure it compiles to, but {change}"
        headline = f"{program}[{config}] on {target}: {what}"
    else:
        what = change
        headline = f"{program}[{config}] on {target}: compiled structure differs from {shown(path)}: {change}"
    lines = [
        headline,
        *snapshot_comparison(s, key, current),
        versions_line(),
        dumped_line(s, key),
    ]
    if accept:
        lines.append(f"accept it (re-records this snapshot alone): {accept}")
    return Failure("snapshot", what, key), "\n".join(lines)
