"""A run split over N jobs (``--shard K/N``), without JAX: which shard each unit of work goes to.

A *unit* is what must not be split: every item that reads one compile (program, configuration, target),
joined with every other item that reads a compile it reads (a relation's two sides), so that no compile
runs in two shards. Every shard computes the same split from the same inputs (the selection's units and a
durations file the checkout keeps), and keeps its own.

With recorded durations (pytest-split's file: node id to seconds), the units go heaviest first to the
shard with the least so far (an item the file lacks weighs the mean of those it has). Without, each unit
goes where a stable hash of its name sends it: a unit stays in its shard as programs come and go, and so
does its part of the compile cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import json
from collections.abc import Hashable, Iterable, Mapping, Sequence
from pathlib import Path

from .._errors import InvariantsError

# pytest-split's durations file, where it writes it by default (``pytest --store-durations``).
DURATIONS_FILE = ".test_durations"


@dataclasses.dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(value: str, option: str = "--shard") -> Shard:
    """``K/N`` with 1 <= K <= N; anything else is one line."""
    k, slash, n = value.strip().partition("/")
    if not (slash and k.isdigit() and n.isdigit()) or not 1 <= int(k) <= int(n):
        raise InvariantsError(f"{option} {value}: takes K/N, shard K of N with 1 <= K <= N (e.g. 1/4)")
    return Shard(int(k), int(n))


def units(members: Iterable[tuple[str, Sequence[Hashable]]]) -> list[list[str]]:
    """``(node id, the compiles it reads)`` grouped into units: items that share a compile, directly or
    through others, in one unit; an item that reads none is a unit alone. Each unit's ids in given order."""
    parent: dict[object, object] = {}

    def root(x: object) -> object:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    members = list(members)
    for nodeid, reads in members:
        for key in reads:
            parent[root(("key", key))] = root(("item", nodeid))
        root(("item", nodeid))
    grouped: dict[object, list[str]] = {}
    for nodeid, _ in members:
        grouped.setdefault(root(("item", nodeid)), []).append(nodeid)
    return list(grouped.values())


def assign(groups: list[list[str]], count: int, durations: Mapping[str, float]) -> list[int]:
    """The shard (1-based) of each unit: by ``durations`` where they know one of its items, else by hash."""
    known = [durations[i] for unit in groups for i in unit if i in durations]
    if not known:
        return [_hash(unit) % count + 1 for unit in groups]
    mean = sum(known) / len(known)
    weights = [sum(durations.get(i, mean) for i in unit) for unit in groups]
    order = sorted(range(len(groups)), key=lambda u: (-weights[u], _hash(groups[u])))
    load = [(0.0, s) for s in range(1, count + 1)]
    out = [0] * len(groups)
    for u in order:
        total, s = heapq.heappop(load)
        out[u] = s
        heapq.heappush(load, (total + weights[u], s))
    return out


def selection_digest(nodeids: Iterable[str], count: int) -> str:
    """What names the whole selection a run split ``count`` ways: shards of one run share it."""
    text = "\n".join([str(count), *sorted(nodeids)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _hash(unit: Sequence[str]) -> int:
    return int.from_bytes(hashlib.sha256(min(unit).encode()).digest()[:8], "big")


def read_durations(path: Path) -> dict[str, float]:
    """pytest-split's durations file (an object of node id to seconds, or its older list of pairs); none
    there is no durations; anything else is one line."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InvariantsError(f"{path}: not a durations file pytest-split wrote ({err})") from None
    pairs = data.items() if isinstance(data, dict) else data if isinstance(data, list) else None
    try:
        out = {str(k): float(v) for k, v in pairs or ()}
    except (TypeError, ValueError):
        out = None
    if pairs is None or out is None or any(not 0 <= v < float("inf") for v in out.values()):
        raise InvariantsError(
            f"{path}: not a durations file pytest-split wrote (an object of node id to seconds)"
        )
    return out
