"""What a gate item says when it decides: the pytest outcome of a decided invariant, and the diagnosis a
failing item prints (the verdict, the structural diff against the committed snapshot, versions, dumps).

The gate's test files call these; the plugin (:mod:`invariants.plugin.session`) gives them the session.
"""

from __future__ import annotations

import difflib
import itertools
from typing import TYPE_CHECKING, Any

import pytest

from .._errors import InvariantsError
from .._paths import shown
from ..catalog.targets import versions

if TYPE_CHECKING:
    from ..compile.artifacts import Key
    from .session import GateSession

__all__ = ["committed_snapshot_diff", "dumped_line", "failure_report", "judge", "structure_failure"]


def judge(invariant: Any, holds: bool, tightenable: bool, where: str, describe: str, failure: Any) -> None:
    """Turn a decided invariant into a pytest outcome, the same way for every tier.

    A ratchet (known bad today) expects to fail: it xfails with its reason, and when ``tightenable`` (it
    now holds, beyond noise) the item fails with "ratchet can be tightened", never in silence.
    ``failure`` builds the full diagnosis lazily, since it may dump files.
    """
    if invariant.ratchet is not None:
        if tightenable:
            pytest.fail(
                f"ratchet can be tightened: {invariant.id} now holds on {where} ({describe}); "
                f"drop its ratchet in {invariant.where} ({invariant.ratchet.issue})",
                pytrace=False,
            )
        pytest.xfail(f"{invariant.ratchet.reason} ({invariant.ratchet.issue}); {describe}")
    if not holds:
        pytest.fail(failure(), pytrace=False)


def committed_snapshot_diff(s: GateSession, key: Key, current: str) -> str:
    """A focused diff of ``current`` against the committed snapshot of ``key``, or a note if none."""
    path = s.snapshots.path(key)
    name = shown(path)
    if not path.exists():
        return f"no committed snapshot at {name}"
    diff = difflib.unified_diff(
        path.read_text().splitlines(), current.splitlines(), name, "now", n=1, lineterm=""
    )
    text = "\n".join(diff)
    return text or f"structure identical to {name}"


def dumped_line(s: GateSession, *keys: Key) -> str:
    """Dump the optimized HLO and the jaxpr of each of ``keys`` (:meth:`GateSession.dump`); the line that
    says where."""
    paths = []
    for key in dict.fromkeys(keys):
        try:
            dumped = s.dump(key)
        except InvariantsError as err:  # a compile that fails must not hide the failure being reported
            paths.append(f"{'/'.join(key)} not dumped ({err})")
        else:
            paths.append(f"{dumped}.hlo.txt, {dumped}.jaxpr.txt")
    return "optimized HLO and jaxpr: " + "; ".join(paths)


def failure_report(s: GateSession, key: Key, headline: str, current_summary: str) -> str:
    """The diagnosis a compiler engineer needs: the verdict, the structural diff, versions, dumps."""
    return "\n".join(
        [
            headline,
            "versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()) + f"; target {key.target}",
            committed_snapshot_diff(s, key, current_summary),
            dumped_line(s, key),
        ]
    )


def relation_report(s: GateSession, keys: tuple[Key, ...], headline: str, summaries: list[str]) -> str:
    """The diagnosis of a failed relation between programs (``structure(a) == structure(b)``,
    ``temp_bytes(a) <= temp_bytes(b)``): the verdict, the versions, what differs between the first two
    programs' snapshot texts (``-`` the first, ``+`` the second; the measured values alone say only
    "1 kernel against 1 kernel" when the kernels differ), and the dumps of every program it read."""
    a, b = keys[0], keys[1]
    name_a, name_b = f"{a.program}[{a.config}] on {a.target}", f"{b.program}[{b.config}] on {b.target}"
    # The header lines name the program and its doc: equal programs differ there alone, which is no
    # difference.
    body = [list(itertools.dropwhile(lambda line: line.startswith("#"), t.splitlines())) for t in summaries]
    diff = list(difflib.unified_diff(body[0], body[1], name_a, name_b, lineterm="", n=2))
    between = (
        [f"{name_a} against {name_b} (- {a.program}, + {b.program}):", *diff[2:]]
        if diff
        else [f"{name_a} and {name_b} render the same snapshot text"]
    )
    return "\n".join(
        [
            headline,
            "versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()) + f"; target {a.target}",
            *between,
            dumped_line(s, *keys),
        ]
    )


def structure_failure(s: GateSession, key: Key, diff: list[str], accept: str | None) -> str:
    """What a structure item that differs from its snapshot says: one line of reason first (pytest's
    ``FAILED`` short line shows it), then syrupy's diff of the two snapshot texts, whole (``diff``: its
    lines, ``-`` the snapshot, ``+`` now), the versions and the dumps, and last the command that accepts
    the change (``accept``; None for a read-only snapshot, which no update rewrites)."""
    program, config, target = key
    lines = [
        f"{program}[{config}] on {target}: compiled structure differs from {shown(s.snapshots.path(key))}"
        " (- snapshot, + now)",
        *diff,
        "versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()),
        dumped_line(s, key),
    ]
    if accept:
        lines.append(f"accept it (re-records this snapshot alone): {accept}")
    return "\n".join(lines)
