"""A small model of optimized-HLO module text, and its parser.

``parse_module`` reads what ``compiled.as_text()`` returns, or one ``--xla_dump_to``
``*after_optimizations.txt`` file, into frozen dataclasses: the current format (``%name = f32[8,4]{1,0}
op(%a, %b), attr=...``, signatures, the source-location tables), the older one whose operands carry their
shapes (``fusion(f32[8,4]{1,0} %a, ...)``) and TPU text (names without ``%``, tiled layouts
``{1,0:T(8,128)S(1)}``, ``} // name`` closers, ``/*index=5*/`` comments, JSON ``backend_config``).

The contract is strict: text not understood raises ``HloParseError`` naming the source, the line and the
text, because a silently dropped instruction becomes a wrong count downstream. Only the metadata tables,
comments and blank lines are ignored. Attribute values are kept as raw text, their brackets and strings
checked; an instruction whose brackets stay open at the end of a line goes on to the next.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from invariants._errors import InvariantsError


class HloParseError(InvariantsError):
    """HLO text this reader does not understand, in one line: ``SOURCE:LINE: READER: what: text``."""

    def __init__(self, source: str, line: int, message: str, text: str = "") -> None:
        self.source = source
        self.line = line
        self.message = message
        self.text = text
        snippet = " ".join(text.split())
        if len(snippet) > 80:
            snippet = snippet[:77] + "..."
        what = f"{message}: {snippet}" if snippet else message
        super().__init__(f"{source}:{line}: {READER}: {what}")


# What every parse error says first: the tool, not the program, is what failed.
READER = "cannot read the compiler's output (a limit of the HLO reader, not a fault of the program)"
# The thread a computation runs on when its closing brace names none (XLA's kMainExecutionThread).
MAIN_THREAD = "main"
# XLA keeps sizes, element counts and trip counts in an int64: a larger one is no module XLA wrote.
INT64_MAX = 2**63 - 1
# No number XLA prints is longer (a u64 has 20 digits); a longer one would reach Python's int-string limit.
_LONG_NUMBER = re.compile(r"(?<!\w)\d{21,}")


# Bits per element. Sub-byte types pack: an s4[3] array takes 2 bytes.
_DTYPE_BITS: dict[str, int] = {
    "pred": 8,
    "s2": 2, "u2": 2, "s4": 4, "u4": 4,
    "s8": 8, "u8": 8,
    "s16": 16, "u16": 16, "f16": 16, "bf16": 16,
    "s32": 32, "u32": 32, "f32": 32,
    "s64": 64, "u64": 64, "f64": 64, "c64": 64,
    "c128": 128,
    "token": 0, "opaque": 0,
}  # fmt: skip
# The many fp8/fp4 variants (f8e4m3fn, f8e5m2fnuz, f4e2m1fn, ...) are named after their width.
_FLOAT_VARIANT = re.compile(r"f(\d+)e\d+m\d+[a-z]*")


def is_dtype(name: str) -> bool:
    """Whether ``name`` is an element type as HLO text writes it: ``f32``, ``bf16``, ``s32``, ``f8e4m3fn``."""
    if name in ("token", "opaque"):
        return False
    return name in _DTYPE_BITS or _FLOAT_VARIANT.fullmatch(name) is not None


def dtype_bits(dtype: str) -> int | None:
    """Bits per element of an HLO element type, or None when the type is unknown."""
    bits = _DTYPE_BITS.get(dtype)
    if bits is None:
        m = _FLOAT_VARIANT.fullmatch(dtype)
        if m:
            bits = int(m.group(1))
    return bits


@dataclass(frozen=True)
class Shape:
    """An array shape, or a tuple's (``dtype`` None); ``layout`` is the raw text between the braces."""

    dtype: str | None
    dims: tuple[int, ...] = ()
    layout: str | None = None
    tuple_shapes: tuple[Shape, ...] = ()

    @property
    def is_tuple(self) -> bool:
        return self.dtype is None

    def byte_size(self) -> int:
        """Bytes of the data, tiles not padded."""
        if self.dtype is None:
            return sum(s.byte_size() for s in self.tuple_shapes)
        bits = dtype_bits(self.dtype) or 0
        return (math.prod(self.dims) * bits + 7) // 8

    def __str__(self) -> str:
        if self.dtype is None:
            return "(" + ", ".join(str(s) for s in self.tuple_shapes) + ")"
        text = f"{self.dtype}[{','.join(str(d) for d in self.dims)}]"
        return text if self.layout is None else f"{text}{{{self.layout}}}"


@dataclass(frozen=True)
class Instruction:
    """One HLO instruction: operand names without ``%``, each attribute's raw text, the computations it
    calls, and the text in the parens of a ``constant`` or ``parameter`` (``literal``)."""

    name: str
    opcode: str
    shape: Shape
    operands: tuple[str, ...]
    attrs: dict[str, str] = field(hash=False)
    called: tuple[str, ...]
    is_root: bool
    line: int
    literal: str | None = None

    @property
    def fusion_kind(self) -> str | None:
        return self.attrs.get("kind") if self.opcode == "fusion" else None

    @property
    def custom_call_target(self) -> str | None:
        raw = self.attrs.get("custom_call_target")
        return None if raw is None else _unquote(raw)

    @property
    def backend_config(self) -> str | None:
        raw = self.attrs.get("backend_config")
        return None if raw is None else _unquote(raw)

    @property
    def backend_config_json(self) -> dict[str, Any] | None:
        raw = self.backend_config
        if raw is None or not raw.startswith("{"):
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class Computation:
    """A computation's instructions in text order, and where it runs (``}, execution_thread="..."``)."""

    name: str
    instructions: tuple[Instruction, ...]
    is_entry: bool
    execution_thread: str = MAIN_THREAD
    _by_name: dict[str, Instruction] = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {i.name: i for i in self.instructions})

    @property
    def root(self) -> Instruction:
        """The ROOT instruction; the last instruction when none is marked (as XLA's own parser does)."""
        for instr in self.instructions:
            if instr.is_root:
                return instr
        return self.instructions[-1]

    def __getitem__(self, name: str) -> Instruction:
        return self._by_name[name]

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def get(self, name: str) -> Instruction | None:
        return self._by_name.get(name)

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)


@dataclass(frozen=True)
class HloModule:
    """One HLO module. ``scheduled``: XLA wrote ``is_scheduled=true`` (the optimized module; a
    ``before_optimizations`` dump lacks it). ``source`` names it in later readers' messages, not equality.
    ``aliases``: the header's input_output_alias (outputs reusing a donated parameter's buffer)."""

    name: str
    computations: dict[str, Computation] = field(hash=False)
    entry: Computation
    scheduled: bool = False
    source: str = field(default="<string>", compare=False)
    aliases: tuple[Alias, ...] = ()


@dataclass(frozen=True)
class Alias:
    """One ``input_output_alias`` entry: output index <- parameter (at its index), may- or must-alias."""

    output: str
    parameter: int
    parameter_index: str
    kind: str


# --- lexical helpers ---------------------------------------------------------------------------------


def words(text: str) -> tuple[str, ...]:
    """Names written as one space-separated string, in order (a list literal would take a line each)."""
    return tuple(text.split())


_NAME = r"[A-Za-z_][\w.\-]*"
_MODULE_LINE = re.compile(rf"HloModule\s+({_NAME})\s*(?:,\s*(.*))?$")
_TABLE_HEADER = re.compile(r"[A-Z][A-Za-z]*$")
_TABLE_ROW = re.compile(r"\d+\s")
_COMP_HEADER = re.compile(rf"(ENTRY\s+)?%?({_NAME})\s*(\(.*\)\s*->\s*.+?)?\s*\{{$")
_COMP_CLOSE = re.compile(r"\}\s*(?:,(.*?))?\s*(?://.*)?$")
_THREAD = re.compile(r'execution_thread="([\w.\-]+)"$')
# A line that surely ends the computation (an instruction's continuation line may start with '}, key=').
_COMP_END = re.compile(r'\}\s*(?:,\s*execution_thread="[\w.\-]+")?\s*(?://.*)?$')
_INSTR_HEAD = re.compile(rf"(ROOT\s+)?%?({_NAME})\s*=\s*")
_OPCODE = re.compile(r"\s*([a-z][a-z0-9\-_]*)\(")
_ARRAY_SHAPE = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\](?:\{([^{}]*)\})?")
_DIM = re.compile(r"(?:<=)?(\d+)")
_OPERAND = re.compile(rf"%?({_NAME})$")
_ATTR = re.compile(r"([A-Za-z_][\w.\-]*)\s*=\s*(.*)$", re.DOTALL)
_SPECIAL = re.compile(r'[",()\[\]{}]')
_STRING_REST = re.compile(r'(?:[^"\\]|\\.)*"', re.DOTALL)
_COMMENT_OR_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|/\*.*?\*/')
_CLOSERS = {"(": ")", "[": "]", "{": "}"}
# Attributes whose value names computations (a single name, or a {a, b} list).
_CALL_ATTRS = words(
    "calls to_apply condition body branch_computations true_computation false_computation "
    "called_computations async_wrapped_computation"
)
# Opcodes whose parenthesised text is a value, not operands.
_LITERAL_OPCODES = frozenset({"constant", "parameter"})


class _Error(Exception):
    def __init__(self, message: str, text: str) -> None:
        super().__init__(message)
        self.message = message
        self.text = text


class _NeedMore(_Error):
    """The text ended inside a bracket or string: it may go on on the next line."""


def _unquote(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"':
        try:
            value = json.loads(raw)
        except ValueError:
            return raw[1:-1]
        return value if isinstance(value, str) else raw[1:-1]
    return raw


def _strip_comments(text: str) -> str:
    # /* */ comments (TPU prints /*index=5*/ in long tuples); strings are kept intact.
    if "/*" not in text:
        return text
    return _COMMENT_OR_STRING.sub(lambda m: m.group() if m.group()[0] == '"' else "", text)


_ALIAS = re.compile(r"\{([\d,\s]*)\}:\s*\((\d+),\s*\{([\d,\s]*)\}(?:,\s*([a-z][a-z-]*))?\)")


def _aliases(header: str, line: str) -> tuple[Alias, ...]:
    """The ``input_output_alias={ {0}: (0, {}, may-alias), ... }`` of a module header; never guessed."""
    pieces, _ = _split(header, 0, None)
    found = [p for p in pieces if p.startswith("input_output_alias=")]
    if not found:
        return ()
    body = found[0].removeprefix("input_output_alias=").strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise _Error("input_output_alias not understood", line)
    entries, _ = _split(body[1:-1], 0, None)
    return tuple(_alias(entry, line) for entry in entries if entry)


def _alias(entry: str, line: str) -> Alias:
    m = _ALIAS.fullmatch(entry)
    if m is None:
        raise _Error(f"input_output_alias entry {entry!r} not understood", line)
    return Alias(_index_text(m.group(1)), int(m.group(2)), _index_text(m.group(3)), m.group(4) or "may-alias")


def _index_text(raw: str) -> str:
    """A shape index as ``{0,1}``, whatever spaces it was written with."""
    return "{" + ",".join(x.strip() for x in raw.split(",") if x.strip()) + "}"


def _split(text: str, pos: int, closer: str | None) -> tuple[list[str], int]:
    """``text[pos:]`` split at top-level commas (brackets and strings respected), up to the unmatched
    ``closer`` or the end, and the position after that."""
    stack: list[str] = []
    pieces: list[str] = []
    start = i = pos
    while True:
        m = _SPECIAL.search(text, i)
        if m is None:
            missing = stack[-1] if stack else closer
            if missing is not None:
                raise _NeedMore(f"unbalanced brackets (missing {missing!r})", text[pos:])
            pieces.append(text[start:].strip())
            return pieces, len(text)
        c, j = m.group(), m.start()
        if c == '"':
            i = _string_end(text, j)
            continue
        if c == "," and not stack:
            pieces.append(text[start:j].strip())
            start = j + 1
        elif c == closer and not stack:
            pieces.append(text[start:j].strip())
            return pieces, j + 1
        else:
            _nest(stack, c, text, j)
        i = j + 1


def _string_end(text: str, j: int) -> int:
    end = _STRING_REST.match(text, j + 1)
    if end is None:
        raise _NeedMore("unterminated string", text[j:])
    return end.end()


def _nest(stack: list[str], c: str, text: str, j: int) -> None:
    """Follow bracket ``c`` at ``text[j]`` (or a comma inside brackets): ``stack`` holds the closers due."""
    if c in _CLOSERS:
        stack.append(_CLOSERS[c])
    elif c == ",":
        return
    elif not stack:
        raise _Error(f"unexpected {c!r}", text[j:])
    elif stack.pop() != c:
        raise _Error(f"mismatched {c!r}", text[j:])


def _parse_shape(text: str, pos: int) -> tuple[Shape, int]:
    if text.startswith("(", pos):
        return _parse_tuple_shape(text, pos + 1)
    m = _ARRAY_SHAPE.match(text, pos)
    if m is None:
        raise _Error("expected a shape", text[pos:])
    dtype, dims_text, layout = m.groups()
    if dtype_bits(dtype) is None:
        raise _Error(f"unknown element type {dtype!r}", text[pos:])
    dims = [_dim(d, text[pos:]) for d in dims_text.split(",")] if dims_text.strip() else []
    if math.prod(dims) > INT64_MAX:
        raise _Error(f"{math.prod(dims)} elements, more than XLA counts in an int64", text[pos : m.end()])
    return Shape(dtype, tuple(dims), layout), m.end()


def _dim(raw: str, shape_text: str) -> int:
    dm = _DIM.fullmatch(raw.strip())
    if dm is None:
        raise _Error("unsupported dimension", shape_text)
    value = int(dm.group(1))
    if value > INT64_MAX:
        raise _Error(f"dimension {value} is larger than XLA's int64 sizes", shape_text)
    return value


def _skip_spaces(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] == " ":
        pos += 1
    return pos


def _parse_tuple_shape(text: str, pos: int) -> tuple[Shape, int]:
    elements: list[Shape] = []
    while True:
        pos = _skip_spaces(text, pos)
        if text.startswith(")", pos):
            return Shape(None, tuple_shapes=tuple(elements)), pos + 1
        if elements:
            if not text.startswith(",", pos):
                raise _Error("expected ',' or ')' in a tuple shape", text[pos:])
            pos = _skip_spaces(text, pos + 1)
        element, pos = _parse_shape(text, pos)
        elements.append(element)


def _parse_operand(piece: str) -> str:
    # Old format prints the operand's shape first: "f32[8,4]{1,0} %a" or "(s32[], f32[2]) %t".
    if piece[:1] == "(" or _ARRAY_SHAPE.match(piece):
        _, end = _parse_shape(piece, 0)
        if end < len(piece) and piece[end] != " ":
            raise _Error("expected an operand name after its shape", piece)
        piece = piece[end:].strip()
    m = _OPERAND.match(piece)
    if m is None:
        raise _Error("expected an operand name", piece)
    return m.group(1)


def _called_names(raw: str) -> list[str]:
    inner = raw[1:-1] if raw.startswith("{") and raw.endswith("}") else raw
    return [n.strip().lstrip("%") for n in inner.split(",") if n.strip()]


def _parse_instruction(text: str, line: int) -> Instruction:
    head = _INSTR_HEAD.match(text)
    if head is None:
        raise _Error("expected an instruction 'name = shape opcode(...)'", text)
    shape, pos = _parse_shape(text, head.end())
    op = _OPCODE.match(text, pos)
    if op is None:
        raise _Error("expected an opcode and '(' after the shape", text[pos:])
    opcode = op.group(1)
    pieces, pos = _split(text, op.end(), ")")
    literal: str | None = None
    operands: tuple[str, ...] = ()
    if opcode in _LITERAL_OPCODES:
        literal = ", ".join(pieces)
        if opcode == "parameter" and not literal.isdecimal():
            raise _Error("a parameter's number is not a number", text)
    elif pieces != [""]:
        operands = tuple(_parse_operand(p) for p in pieces)
    attrs = _attributes(text[pos:].strip())
    called = tuple(n for key in _CALL_ATTRS if key in attrs for n in _called_names(attrs[key]))
    return Instruction(
        head.group(2), opcode, shape, operands, attrs, called, head.group(1) is not None, line, literal
    )


def _attributes(rest: str) -> dict[str, str]:
    if not rest:
        return {}
    if not rest.startswith(","):
        raise _Error("expected ',' before the attributes", rest)
    attrs: dict[str, str] = {}
    for piece in _split(rest, 1, None)[0]:
        am = _ATTR.match(piece)
        if am is None:
            raise _Error("expected an attribute 'key=value'", piece)
        attrs[am.group(1)] = am.group(2).strip()
    return attrs


# --- the module parser -------------------------------------------------------------------------------


@dataclass
class _OpenComputation:
    name: str
    is_entry: bool
    line: int
    instructions: list[Instruction] = field(default_factory=list)
    execution_thread: str = MAIN_THREAD


def parse_module(text: str, source: str = "<string>") -> HloModule:
    """Parse the text of exactly one HLO module; ``HloParseError`` for anything not understood (an unknown
    line, an operand or computation that does not exist, a second module, no ENTRY or two)."""
    reader = _ModuleReader(text.splitlines(), source)
    i = 0
    while i < len(reader.lines):
        lineno = i + 1
        stripped = reader.lines[i].strip()
        i += 1
        if not stripped or stripped.startswith("//"):
            continue
        try:
            if long := _LONG_NUMBER.search(stripped):
                raise _Error(f"a number of {len(long[0])} digits, longer than any XLA prints", long[0])
            i = reader.read(stripped, lineno, i)
        except _Error as err:
            raise HloParseError(source, lineno, err.message, err.text) from None
    return reader.module(text)


@dataclass
class _ModuleReader:
    lines: list[str]
    source: str
    name: str | None = None
    scheduled: bool = False
    aliases: tuple[Alias, ...] = ()
    computations: dict[str, Computation] = field(default_factory=dict)
    current: _OpenComputation | None = None
    in_table: bool = False

    def read(self, stripped: str, lineno: int, i: int) -> int:
        """Read line ``lineno``; return the index of the next line to read."""
        if self.current is not None:
            return self.in_computation(self.current, stripped, lineno, i)
        if stripped.startswith("HloModule"):
            if self.name is not None:
                raise _Error("a second HloModule (one module per file)", stripped)
            self.name, self.scheduled, self.aliases = _module_line(stripped)
            self.in_table = False
        elif self.name is None:
            raise _Error("expected 'HloModule NAME' first", stripped)
        else:
            self.between_computations(stripped, lineno)
        return i

    def in_computation(self, current: _OpenComputation, stripped: str, lineno: int, i: int) -> int:
        closer = _COMP_CLOSE.match(stripped)
        if closer is None:
            instruction, i = _instruction_at(self.lines, i, stripped, lineno)
            current.instructions.append(instruction)
            return i
        current.execution_thread = _closer_thread(closer.group(1) or "", stripped)
        self.computations[current.name] = _close(current, self.source)
        self.current = None
        return i

    def between_computations(self, stripped: str, lineno: int) -> None:
        header = _COMP_HEADER.match(_strip_comments(stripped))
        if header is not None:
            if header.group(2) in self.computations:
                raise _Error(f"duplicate computation {header.group(2)!r}", stripped)
            self.current = _OpenComputation(header.group(2), header.group(1) is not None, lineno)
            self.in_table = False
        elif _TABLE_HEADER.match(stripped):
            self.in_table = True
        elif not (self.in_table and _TABLE_ROW.match(stripped)):
            raise _Error("unexpected line outside a computation", stripped)

    def module(self, text: str) -> HloModule:
        if self.current is not None:
            raise HloParseError(
                self.source, self.current.line, "computation not closed with '}'", self.current.name
            )
        if self.name is None:
            raise HloParseError(self.source, 1, "no HloModule line", text[:80])
        entry = _link(self.computations, self.source)
        return HloModule(self.name, self.computations, entry, self.scheduled, self.source, self.aliases)


def _closer_thread(attributes: str, line: str) -> str:
    """The execution thread a computation's closing brace names; any other attribute is an error."""
    thread = MAIN_THREAD
    for piece in (p for p in _split(attributes, 0, None)[0] if p) if attributes.strip() else ():
        m = _THREAD.fullmatch(piece)
        if m is None:
            raise _Error(f"unknown computation attribute {piece.split('=', 1)[0].strip()!r}", line)
        thread = m.group(1)
    return thread


def _instruction_at(lines: list[str], i: int, stripped: str, lineno: int) -> tuple[Instruction, int]:
    """The instruction that starts on line ``lineno``, joined with the lines below while a bracket is open,
    and the index of the line after it."""
    body = _strip_comments(stripped)
    while True:
        try:
            return _parse_instruction(body, lineno), i
        except _NeedMore:
            if i >= len(lines) or _COMP_END.match(lines[i].strip()):
                raise
            body = body + " " + _strip_comments(lines[i].strip())
            i += 1


def _module_line(stripped: str) -> tuple[str, bool, tuple[Alias, ...]]:
    m = _MODULE_LINE.match(stripped)
    if m is None:
        raise _Error("malformed HloModule line", stripped)
    attributes = m.group(2) or ""
    if attributes:
        _split(attributes, 0, None)  # balanced
    scheduled = bool(re.search(r"(?:^|,)\s*is_scheduled=true\b", attributes))
    return m.group(1), scheduled, _aliases(attributes, stripped)


def _close(comp: _OpenComputation, source: str) -> Computation:
    if not comp.instructions:
        raise HloParseError(source, comp.line, "empty computation", comp.name)
    seen: set[str] = set()
    roots = 0
    for instr in comp.instructions:
        if instr.name in seen:
            raise HloParseError(source, instr.line, "duplicate instruction name", instr.name)
        seen.add(instr.name)
        roots += instr.is_root
    if roots > 1:
        raise HloParseError(source, comp.line, "more than one ROOT in computation", comp.name)
    for instr in comp.instructions:
        for operand in instr.operands:
            if operand not in seen:
                raise HloParseError(source, instr.line, f"unknown operand {operand!r}", instr.name)
    return Computation(comp.name, tuple(comp.instructions), comp.is_entry, comp.execution_thread)


def _link(computations: dict[str, Computation], source: str) -> Computation:
    """The ENTRY computation, once every call is checked to name a computation."""
    entries = [c for c in computations.values() if c.is_entry]
    if len(entries) != 1:
        found = ", ".join(c.name for c in entries) or "none"
        raise HloParseError(source, 1, "expected exactly one ENTRY computation", f"found {found}")
    for comp in computations.values():
        for instr in comp.instructions:
            for callee in instr.called:
                if callee not in computations:
                    raise HloParseError(
                        source, instr.line, f"calls unknown computation {callee!r}", instr.name
                    )
    _check_nesting(computations, source)
    return entries[0]


# Computations nested in one another, at most: XLA's own are a few deep; every reader below walks them
# recursively, a few frames a level, well inside Python's recursion limit at this depth.
MAX_NESTING = 100


def _check_nesting(computations: dict[str, Computation], source: str) -> None:
    """Refuse a computation that calls itself (through others or not; XLA has no recursion) and calls
    nested deeper than :data:`MAX_NESTING`, walking the call graph without recursion."""
    depth: dict[str, int] = {}  # finished: the longest chain of computations from it down
    inside: set[str] = set()  # the chain being walked

    def calls(name: str) -> Iterator[tuple[Instruction, str]]:
        return ((i, c) for i in computations[name] for c in i.called)

    for root in computations:
        if root in depth:
            continue
        stack = [(root, calls(root))]
        inside.add(root)
        while stack:
            name, rest = stack[-1]
            step = next(rest, None)
            if step is None:
                depth[name] = 1 + max((depth[c] for _, c in calls(name)), default=0)
                if depth[name] > MAX_NESTING:
                    raise HloParseError(source, 1, f"computations nested deeper than {MAX_NESTING}", name)
                inside.discard(name)
                stack.pop()
            elif step[1] in inside:
                instr, callee = step
                raise HloParseError(source, instr.line, f"calls {callee!r}, which it is inside", instr.name)
            elif step[1] not in depth:
                inside.add(step[1])
                stack.append((step[1], calls(step[1])))
