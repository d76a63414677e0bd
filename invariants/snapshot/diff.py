"""Reading snapshot text back (no JAX): its parts, its kernel-code lines, and what changed between two.

:mod:`invariants.snapshot.render` writes the text; this module is its one reader, for every stage that
compares two renderings (a failing structure item, ``bisect``, ``versus``, the self-check).
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import re
from collections.abc import Sequence

_CODE_BLOCK = "code of no listed kernel:"
_CODE_LINES = ("code ptx:", "code llvm:")
_JAXPR = "jaxpr:"


def older_format(rendering: str) -> bool:
    """Whether a snapshot is of the format before kernels were named (its jaxpr first, its kernels
    numbered): re-recorded, never diffed line by line against this one (every line would differ)."""
    lines = rendering.splitlines()
    jaxpr = next((i for i, ln in enumerate(lines) if ln == _JAXPR), None)
    summary = next((i for i, ln in enumerate(lines) if ln.startswith("summary: ")), None)
    numbered = any(re.match(r"  kernel \d+: ", ln) for ln in lines)
    return numbered or (jaxpr is not None and summary is not None and jaxpr < summary)


def summary_of(rendering: str) -> str | None:
    return next((ln for ln in rendering.splitlines() if ln.startswith("summary: ")), None)


def structure_part(rendering: str) -> str:
    """A rendering from its ``summary:`` line to its jaxpr, not included."""
    lines = rendering.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("summary: ")), len(lines))
    end = next((i for i, ln in enumerate(lines) if ln == _JAXPR and i > start), len(lines))
    return "\n".join(lines[start:end]).rstrip("\n") + "\n"


def structural_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, n=1, lineterm="")
    return "\n".join(diff) or "(identical structure)"


def _code_line_indices(lines: Sequence[str]) -> set[int]:
    out: set[int] = set()
    in_block = False
    for i, line in enumerate(lines):
        if line == _CODE_BLOCK:
            in_block = True
            out.add(i)
        elif in_block and line.startswith("  "):
            out.add(i)
        else:
            in_block = False
            if line.lstrip().startswith(_CODE_LINES):
                out.add(i)
    return out


def _owner(lines: Sequence[str], i: int) -> str:
    for j in range(i - 1, -1, -1):
        text = lines[j].strip()
        if text == _CODE_BLOCK or lines[i].strip() == _CODE_BLOCK:
            return "code of no listed kernel"
        if not text.startswith(_CODE_LINES):
            return text
    return "?"


@dataclasses.dataclass(frozen=True)
class LineChanges:
    """The changed lines of two renderings: code lines as ``(kernel, old or None, new or None)``, the rest
    (the HLO's and the jaxpr's) as text."""

    code: tuple[tuple[str, str | None, str | None], ...]
    hlo: tuple[str, ...]

    @property
    def code_only(self) -> bool:
        return bool(self.code) and not self.hlo

    def describe(self, summary: str | None = None) -> str:
        """One line naming what changed; ``summary``: the (equal) ``summary:`` line, quoted when given."""
        if not self.code and not self.hlo:
            return "no line changed"
        kernels = list(dict.fromkeys(k for k, _, _ in self.code))
        where = ", ".join(kernels)
        if self.code_only:
            text = f"code lines only ({len(self.code)} changed: {where}); the HLO lines are equal"
            return text + (f" ({summary.strip()})" if summary else "")
        first = self.hlo[0].strip()
        shown = first if len(first) <= 100 else first[:97] + "..."
        text = f"HLO lines ({len(self.hlo)} changed, first: {shown})"
        return text + (f" and code lines ({len(self.code)} changed: {where})" if self.code else "")


def line_changes(old: str, new: str) -> LineChanges:
    a, b = old.splitlines(), new.splitlines()
    code_a, code_b = _code_line_indices(a), _code_line_indices(b)
    code: list[tuple[str, str | None, str | None]] = []
    hlo: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        old_code, old_hlo = _parted(range(i1, i2), code_a)
        new_code, new_hlo = _parted(range(j1, j2), code_b)
        hlo += [f"-{a[i]}" for i in old_hlo] + [f"+{b[j]}" for j in new_hlo]
        code += [_code_change(a, b, i, j) for i, j in itertools.zip_longest(old_code, new_code)]
    return LineChanges(tuple(code), tuple(hlo))


def _parted(span: range, code: set[int]) -> tuple[list[int], list[int]]:
    return [i for i in span if i in code], [i for i in span if i not in code]


def _code_change(
    a: Sequence[str], b: Sequence[str], i: int | None, j: int | None
) -> tuple[str, str | None, str | None]:
    owner = _owner(b, j) if j is not None else _owner(a, i or 0)
    return owner, None if i is None else a[i], None if j is None else b[j]


def what_changed(old: str, new: str) -> str:
    changes = line_changes(old, new)
    summary = summary_of(new) if changes.code_only and summary_of(old) == summary_of(new) else None
    return changes.describe(summary)


_FIELD = re.compile(r"([a-z][a-z ]*?) ((?:\d|unknown).*)")


def _summary_fields(line: str | None) -> dict[str, str]:
    """A ``summary:`` line's fields by name (``{"kernels": "3", "while loops": "1 (×16384)"}``)."""
    parts = (line or "").removeprefix("summary: ").split("; ")
    return {m.group(1): m.group(2) for part in parts if (m := _FIELD.fullmatch(part))}


def summary_change(old: str, new: str) -> str:
    """The fields of the ``summary:`` line that changed (``kernels 3 → 12``), else the sections that did."""
    before, after = _summary_fields(summary_of(old)), _summary_fields(summary_of(new))
    changed = [f"{k} {before.get(k, '?')} → {v}" for k, v in after.items() if before.get(k) != v]
    if changed:
        return ", ".join(changed)
    sections = (["kernels"] if changed_kernels(old, new) else []) + [t for t, _ in changed_sections(old, new)]
    if sections:
        return f"summary unchanged; changed: {', '.join(sections)}"
    return text_change(old, new) or "summary unchanged"


_BOM = "\ufeff"


def text_change(old: str, new: str) -> str | None:
    """What differs between a committed snapshot and a rendering where the diff of their lines shows
    nothing a reader can see (a byte-order mark, line endings, a header); None when none of these."""
    if old.startswith(_BOM):
        return "the committed file starts with a UTF-8 byte-order mark, which the gate never writes"
    if "\r" in old and "\r" not in new:
        return "the committed file has Windows line endings (\\r\\n), which the gate never writes"
    header_old, header_new = (_header(text) for text in (old, new))
    if header_old[:1] != header_new[:1]:
        said = header_old[0].removeprefix("# ") if header_old else "nothing"
        return f"the committed file's header names {said}, not {header_new[0].removeprefix('# ')}"
    if header_old != header_new:
        return "the committed file's header (the program's doc) differs"
    return None


def _header(rendering: str) -> list[str]:
    lines = rendering.splitlines()
    return lines[: next((i for i, ln in enumerate(lines) if not ln.startswith("#")), len(lines))]


def changed_kernels(old: str, new: str, context: int = 1) -> list[str]:
    """The diff of the kernel lists alone, with ``context`` kernels around each change. A kernel's code
    lines move with it: diffed line by line, a code line equal to its neighbour's would show as its."""
    a, b = (_units(_titled(text, "kernels")[1:]) for text in (old, new))
    if a == b:
        return []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [line for group in matcher.get_grouped_opcodes(context) for line in _hunk(a, b, group)]


_Units = list[tuple[str, ...]]


def _hunk(a: _Units, b: _Units, group: list[tuple[str, int, int, int, int]]) -> list[str]:
    (_, i1, _, j1, _), (_, _, i2, _, j2) = group[0], group[-1]
    old_lines, new_lines = (sum(map(len, side[:n])) for side, n in ((a, i1), (b, j1)))
    old_count, new_count = sum(map(len, a[i1:i2])), sum(map(len, b[j1:j2]))
    out = [f"@@ -{_range(old_lines, old_count)} +{_range(new_lines, new_count)} @@"]
    for tag, x1, x2, y1, y2 in group:
        if tag == "equal":
            out += [f" {ln}" for unit in a[x1:x2] for ln in unit]
            continue
        out += [f"-{ln}" for unit in a[x1:x2] for ln in unit]
        out += [f"+{ln}" for unit in b[y1:y2] for ln in unit]
    return out


def _units(lines: Sequence[str]) -> _Units:
    units: _Units = []
    for line in lines:
        if units and line.lstrip().startswith(_CODE_LINES):
            units[-1] = (*units[-1], line)
        else:
            units.append((line,))
    return units


def _range(before: int, count: int) -> str:
    """A hunk's range, ``start,count``, as difflib writes it."""
    if count == 1:
        return str(before + 1)
    return f"{before + 1 if count else before},{count}"


# A shape's dimensions, ``[1000,32]`` in ``f32[1000,32]{1,0}``: what tells apart the lines of a change made
# once per table (one loop per table, one copy per table), and nothing else does.
_DIMENSIONS = re.compile(r"\[[0-9,]*\]")


def fold_alike(diff: Sequence[str]) -> list[str]:
    """The changed lines of a diff, those alike but for their shapes' dimensions (a change made once per
    table) shown once with a count of the rest; a block (``{`` to ``}``) is folded whole."""
    groups: dict[tuple[str, ...], list[list[str]]] = {}
    for unit in _changed_units(diff):
        groups.setdefault(tuple(_DIMENSIONS.sub("[]", ln) for ln in unit), []).append(unit)
    out: list[str] = []
    for alike in groups.values():
        first = list(alike[0])
        if len(alike) > 1:
            what = "blocks " if len(first) > 1 else ""
            first[-1] += f"   (and {len(alike) - 1} more {what}alike but for their dimensions)"
        out += first
    return out


def _changed_units(diff: Sequence[str]) -> list[list[str]]:
    units: list[list[str]] = []
    depth = 0  # how many blocks the last unit has open (a loop's body may hold a loop)
    for line in diff:
        if line[:1] not in "+-" or line.startswith(("---", "+++")):
            continue
        if not (depth and units[-1][0][:1] == line[:1]):
            units.append([])
            depth = 0
        units[-1].append(line)
        depth += line.rstrip().endswith("{") - (line[1:].strip() == "}")
    return units


# The sections of a rendering below the kernel list, as their titles start their first line.
_SECTIONS = (
    "code of no listed kernel",
    "custom calls",
    "converts",
    "gathers",
    "scatters",
    "collectives",
    "aliases",
    "root",
    "jaxpr",
)


def changed_sections(old: str, new: str) -> list[tuple[str, list[str]]]:
    """The sections below the kernel list that differ, each with its diff (no context)."""
    out = []
    for title in _SECTIONS:
        a, b = _titled(old, title), _titled(new, title)
        if a != b:
            diff = [ln for ln in difflib.unified_diff(a, b, lineterm="", n=0) if ln[:1] in "+-"]
            out.append((title, [ln for ln in diff if not ln.startswith(("---", "+++"))]))
    return out


def _titled(rendering: str, title: str) -> list[str]:
    lines = rendering.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith(f"{title}:")), None)
    if start is None:
        return []
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return lines[start:end]
