"""What both kernel-code parsers share: the counts of one kernel while it is read, and the error form."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator

from .._paths import PACKAGE_DIR
from .facts import KernelCodeError, KernelFacts, Language


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def opcodes(name: str) -> frozenset[str]:
    """An instruction vocabulary kept as data (``invariants/data/NAME``), ``#`` lines naming its groups."""
    text = (PACKAGE_DIR / "data" / name).read_text(encoding="utf-8")
    return words(" ".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))


def depths(text: str, opens: str, closes: str) -> Iterator[tuple[int, str, int]]:
    """Each character of ``text`` with its index and the bracket depth after it."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch in opens) - (ch in closes)
        yield i, ch, depth


def split_top(text: str, opens: str, closes: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    out: list[str] = []
    start = 0
    for i, ch, depth in depths(text, opens, closes):
        if ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


class Reader:
    """Where the text comes from, the facts read so far, and the one form of an error."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.out: list[KernelFacts] = []

    def error(self, line: int, what: str, text: str) -> KernelCodeError:
        """``FILE:LINE: what: 'text'``, the text on one line and cut at 200 characters."""
        text = " ".join(text.split())
        if len(text) > 200:
            text = text[:200] + "..."
        return KernelCodeError(f"{self.where}:{line}: {what}: '{text}'")

    def unclosed(self, fn: Tally, end_line: int, text: str) -> KernelCodeError:
        """A function the file ends inside (both languages close a body with ``}``)."""
        what = (
            f"function '{fn.name}' is not closed ('}}' missing before the end of the file, line {end_line})"
        )
        return self.error(fn.line, what, text)


@dataclasses.dataclass
class Tally:
    """The counts of one kernel while it is read; ``cas``: the instruction index of each compare-and-swap."""

    name: str
    line: int
    instructions: int = 0
    atomics: Counter[str] = dataclasses.field(default_factory=Counter)
    cas: list[int] = dataclasses.field(default_factory=list)
    float_atomics: int = 0
    local_bytes: int = 0
    vector_width: int = 0

    def facts(self, language: Language, where: str, loops: int, spans: list[tuple[int, int]]) -> KernelFacts:
        """The kernel's facts; ``spans``: its loops as instruction index ranges (a CAS in one retries)."""
        cas_loops = sum(1 for i in self.cas if any(a <= i < b for a, b in spans))
        return KernelFacts(
            name=self.name,
            language=language,
            source=where,
            atomics=tuple(sorted(self.atomics.items())),
            cas_atomics=len(self.cas),
            cas_loops=cas_loops,
            float_atomics=self.float_atomics,
            local_bytes=self.local_bytes,
            instructions=self.instructions,
            loops=loops,
            vector_width=self.vector_width,
        )
