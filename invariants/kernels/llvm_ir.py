"""LLVM IR (what XLA:CPU emits, one ``.ir-with-opt.ll`` file per kernel) read into per-kernel facts.

One :class:`~invariants.kernels.KernelFacts` per ``define``; ``declare`` lines are read and not counted.
The text is what ``Module::print`` writes: an entity per line, but for an instruction whose ``[ ]`` or
``( )`` spill over lines or that ends with ``,`` (a ``phi``). The reader knows LLVM's top-level entities
and, in a function, labels, debug records and the language reference's instructions; anything else is a
:class:`~invariants.kernels.KernelCodeError`.

In LLVM terms: ``atomics`` are ``atomicrmw <op> <type>`` and ``cmpxchg <type>`` (a CAS retry loop: one
between a block and a later branch back to it, in printed order); ``local_bytes`` are the ``alloca``
bytes of a constant count (types naturally aligned, ``ptr`` 8 bytes); ``loops`` are branches to the own
block or one printed before; ``vector_width`` is the widest fixed ``<N x T>`` named. A scalable vector is
an error: its width is not known when the code is compiled.
"""

from __future__ import annotations

import dataclasses
import re

from ._tally import Reader, Tally, depths, opcodes, split_top, words
from .facts import KernelFacts

# The LLVM language reference's instructions.
_OPCODES = opcodes("llvm_opcodes.txt")
_TERMINATORS = words("br switch indirectbr invoke callbr catchswitch catchret cleanupret")
_RMW_OPS = words(
    "xchg add sub and nand or xor max min umax umin fadd fsub fmax fmin fmaximum fminimum uinc_wrap "
    "udec_wrap usub_cond usub_sat"
)
_FLOAT_BITS = dict(half=16, bfloat=16, float=32, double=64, fp128=128, x86_fp80=80, ppc_fp128=128)
_POINTER_BITS = 64
_OPEN, _CLOSE = "[<{(", "]>})"

_NAME = r'(?:[-\w$.]+|"[^"]*")'
_LABEL = re.compile(rf"({_NAME}):")
_RESULT = re.compile(rf"%{_NAME}\s*=\s*")
_OPCODE = re.compile(r"(?:(?:tail|musttail|notail)\s+)?([a-z_]+)\b")
_TARGET = re.compile(rf"\blabel\s+%({_NAME})")
_VECTOR = re.compile(
    r"<\s*(vscale\s+x\s+)?(\d+)\s+x\s+(i\d+|half|bfloat|float|double|fp128|x86_fp80|ppc_fp128|ptr)\b"
)
_STRING = re.compile(r'"[^"]*"')
_COMMENT_OR_STRING = re.compile(r'"[^"]*"|;')

_TOP_LEVEL = [
    re.compile(r'source_filename\s*=\s*"[^"]*"'),
    re.compile(r'target\s+(?:datalayout|triple)\s*=\s*"[^"]*"'),
    re.compile(r"attributes\s+#\d+\s*=\s*\{.*\}"),
    re.compile(rf"!{_NAME}\s*=\s*(?:distinct\s+)?!.*"),
    re.compile(rf"@{_NAME}\s*=\s*\S.*"),
    re.compile(rf"%{_NAME}\s*=\s*type\b.*"),
    re.compile(rf"\${_NAME}\s*=\s*comdat\s+(?:any|exactmatch|largest|nodeduplicate|noduplicates|samesize)"),
    re.compile(r'module\s+asm\s+"[^"]*"'),
]
_DECLARE = re.compile(rf"declare\b.*@{_NAME}\s*\(.*")
_DEFINE = re.compile(rf"define\b.*?@({_NAME})\s*\(.*\{{")
_DEBUG_RECORD = re.compile(r"#dbg_(?:value|declare|assign|label)\(.*\)")
_SCALAR_TYPE = re.compile(
    rf"(?:%{_NAME}|ptr(?:\s+addrspace\(\d+\))?|i\d+|half|bfloat|float|double|fp128|x86_fp80|ppc_fp128|void"
    r"|label|metadata|token|x86_amx|x86_mmx)\**"
)
_TYPE_DEF = re.compile(rf"%({_NAME})\s*=\s*type\s+(.*)")


@dataclasses.dataclass
class _Function(Tally):
    # label -> (block number, first instruction index)
    blocks: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    block: int = 0
    # terminators: (line, text, block number, instruction index, targets)
    branches: list[tuple[int, str, int, int, list[str]]] = dataclasses.field(default_factory=list)


class _Reader(Reader):
    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.fn: _Function | None = None
        self.types: dict[str, str] = {}  # named types: name -> body text
        self.layouts: dict[str, tuple[int | None, int]] = {}

    def read(self, text: str) -> list[KernelFacts]:
        pending: list[str] = []
        pending_line = 0
        depth = 0
        lineno = 0
        for lineno, raw in enumerate(text.splitlines(), 1):
            code = _strip_comment(raw).rstrip()
            if not code.strip():
                continue
            if pending:
                pending.append(" " + code.strip())
            else:
                pending = [code]
                pending_line = lineno
            depth += _balance(code)
            if depth > 0 or code.endswith(","):
                continue  # an open '[' or '(', or a trailing ',': the statement goes on (switch, phi)
            if depth < 0:
                raise self.error(pending_line, "unbalanced ']' or ')'", "".join(pending))
            stmt = "".join(pending)
            pending = []
            if self.fn is None:
                self.top_level(pending_line, stmt.strip())
            else:
                self.body(pending_line, stmt.strip())
        if pending:
            raise self.error(pending_line, "unbalanced '[' or '(' at the end of the file", "".join(pending))
        if self.fn is not None:
            raise self.unclosed(self.fn, lineno, f"define @{self.fn.name}")
        return self.out

    def top_level(self, line: int, stmt: str) -> None:
        if stmt.startswith("define"):
            m = _DEFINE.fullmatch(stmt)
            if m is None:
                raise self.error(
                    line, "unknown function definition (expected 'define ... @name(...) ... {')", stmt
                )
            self.fn = _Function(_unquote(m.group(1)), line)
            return
        if stmt.startswith("declare"):
            if not _DECLARE.fullmatch(stmt):
                raise self.error(line, "unknown declaration", stmt)
            return
        for form in _TOP_LEVEL:
            if form.fullmatch(stmt):
                t = _TYPE_DEF.fullmatch(stmt)
                if t is not None:
                    self.types[_unquote(t.group(1))] = t.group(2).strip()
                return
        raise self.error(line, "unknown top-level entity", stmt)

    def body(self, line: int, stmt: str) -> None:
        fn = self.fn
        assert fn is not None
        if stmt == "}":
            self.out.append(self.finish(fn))
            self.fn = None
            return
        m = _LABEL.fullmatch(stmt)
        if m is not None:
            name = _unquote(m.group(1))
            if name in fn.blocks:
                raise self.error(line, f"label '{name}' defined twice", stmt)
            if fn.instructions or fn.blocks:
                fn.block += 1
            fn.blocks[name] = (fn.block, fn.instructions)
            return
        if stmt.startswith("#dbg_"):
            if not _DEBUG_RECORD.fullmatch(stmt):
                raise self.error(line, "unknown debug record", stmt)
            return
        self.instruction(line, stmt)

    def instruction(self, line: int, stmt: str) -> None:
        fn = self.fn
        assert fn is not None
        op, operands = self.opcode(line, stmt)
        index = fn.instructions
        fn.instructions += 1
        fn.vector_width = max(fn.vector_width, self.vector_bits(line, stmt, operands))
        if op == "atomicrmw":
            self.atomicrmw(line, stmt, operands)
        elif op == "cmpxchg":
            fn.atomics[f"cmpxchg {self.value_type(line, stmt, op, operands)}"] += 1
            fn.cas.append(index)
        elif op == "alloca":
            fn.local_bytes += self.alloca_bytes(operands)
        elif op in _TERMINATORS:
            targets = [_unquote(t) for t in _TARGET.findall(operands)]
            if op in ("br", "switch", "indirectbr") and not targets:
                raise self.error(line, f"{op} without a label", stmt)
            fn.branches.append((line, stmt, fn.block, index, targets))

    def opcode(self, line: int, stmt: str) -> tuple[str, str]:
        r = _RESULT.match(stmt)
        rest = stmt[r.end() :] if r is not None else stmt
        m = _OPCODE.match(rest)
        if m is None:
            raise self.error(line, "unknown statement", stmt)
        op = m.group(1)
        if op not in _OPCODES:
            raise self.error(line, f"unknown instruction '{op}'", stmt)
        if m.group(0).startswith(("tail", "musttail", "notail")) and op != "call":
            raise self.error(line, f"'{m.group(0).split()[0]}' before '{op}', not 'call'", stmt)
        return op, rest[m.end() :]

    def value_type(self, line: int, stmt: str, op: str, operands: str) -> str:
        """The type of an atomic's value, its second operand."""
        typ = _value_type(operands, 1)
        if typ is None:
            raise self.error(line, f"{op} without a value type", stmt)
        return typ

    def vector_bits(self, line: int, stmt: str, operands: str) -> int:
        """The widest vector type an instruction names outside strings, in bits."""
        scan = _STRING.sub('""', operands) if '"' in operands else operands
        widest = 0
        if "<" in scan:
            for v in _VECTOR.finditer(scan):
                if v.group(1):
                    raise self.error(line, f"scalable vector type '{v.group(0)} ...>' is not supported", stmt)
                bits = _POINTER_BITS if v.group(3) == "ptr" else _scalar_bits(v.group(3))
                widest = max(widest, int(v.group(2)) * bits)
        return widest

    def atomicrmw(self, line: int, stmt: str, operands: str) -> None:
        fn = self.fn
        assert fn is not None
        words = [w for w in operands.split() if w != "volatile"]
        if not words or words[0] not in _RMW_OPS:
            raise self.error(line, "unknown atomicrmw operation", stmt)
        typ = self.value_type(line, stmt, "atomicrmw", operands)
        fn.atomics[f"atomicrmw {words[0]} {typ}"] += 1
        if words[0] == "fadd" and _is_float(typ):
            fn.float_atomics += 1

    def alloca_bytes(self, operands: str) -> int:
        text = operands.strip()
        if text.startswith("inalloca"):
            text = text[len("inalloca") :].strip()
        parsed = _type_prefix(text)
        if parsed is None:
            return 0
        typ, end = parsed
        size = _size_align(typ, self)[0]
        if size is None:
            return 0
        count = 1
        tail = text[end:].strip()
        if tail.startswith(","):
            m = re.match(r",\s*i\d+\s+(-?\d+)\b", tail)
            if m is not None:
                count = int(m.group(1))
            elif not re.match(r",\s*(align|addrspace)\b", tail):
                return 0  # a dynamic count: not static bytes
        return size * count

    def named_size_align(self, name: str) -> tuple[int | None, int]:
        """(bytes, alignment) of the named type ``%name``; (None, 1) when opaque or not defined."""
        if name not in self.layouts:
            self.layouts[name] = (None, 1)  # a recursive type has no size
            body = self.types.get(name)
            if body is not None and body != "opaque":
                self.layouts[name] = _size_align(body, self)
        return self.layouts[name]

    def finish(self, fn: _Function) -> KernelFacts:
        intervals: list[tuple[int, int]] = []
        loops = 0
        for line, stmt, block, index, targets in fn.branches:
            for t in dict.fromkeys(targets):
                if t not in fn.blocks:
                    raise self.error(line, f"branch to an undefined label '%{t}'", stmt)
                number, first = fn.blocks[t]
                if number <= block:
                    loops += 1
                    intervals.append((first, index))
        return fn.facts("llvm", self.where, loops, intervals)


def _unquote(name: str) -> str:
    return name[1:-1] if name.startswith('"') else name


def _strip_comment(line: str) -> str:
    if ";" not in line:
        return line
    if '"' not in line:
        return line[: line.index(";")]
    for m in _COMMENT_OR_STRING.finditer(line):
        if m.group() == ";":
            return line[: m.start()]
    return line


def _balance(code: str) -> int:
    if '"' in code:
        code = _STRING.sub("", code)
    return code.count("[") + code.count("(") - code.count("]") - code.count(")")


def _scalar_bits(name: str) -> int:
    if name in _FLOAT_BITS:
        return _FLOAT_BITS[name]
    return int(name[1:])  # iN


def _is_float(typ: str) -> bool:
    if typ in _FLOAT_BITS:
        return True
    m = re.fullmatch(r"<\s*\d+\s+x\s+(\w+)\s*>", typ)
    return m is not None and m.group(1) in _FLOAT_BITS


def _type_prefix(text: str) -> tuple[str, int] | None:
    """The type ``text`` starts with and where it ends."""
    if not text:
        return None
    if text[0] in "[<{":
        for i, ch, depth in depths(text, _OPEN, _CLOSE):
            if depth == 0 and ch in "]>})":
                return text[: i + 1], i + 1
        return None
    m = _SCALAR_TYPE.match(text)
    return (m.group(0), m.end()) if m else None


def _value_type(operands: str, item: int) -> str | None:
    parts = split_top(operands, _OPEN, _CLOSE)
    if len(parts) <= item:
        return None
    parsed = _type_prefix(parts[item].strip())
    return " ".join(parsed[0].split()) if parsed else None


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _size_align(typ: str, reader: _Reader) -> tuple[int | None, int]:
    """(bytes, alignment) of ``typ``, naturally aligned; (None, 1) when the size is not known."""
    typ = typ.strip()
    if typ.startswith("ptr") or typ.endswith("*"):
        return _POINTER_BITS // 8, _POINTER_BITS // 8
    if typ in _FLOAT_BITS or re.fullmatch(r"i\d+", typ):
        size = _pow2(-(-_scalar_bits(typ) // 8))
        return size, min(size, 16)
    m = _ARRAY_TYPE.fullmatch(typ)
    if m is not None:
        elem, align = _size_align(m.group(2), reader)
        return (None, 1) if elem is None else (int(m.group(1)) * elem, align)
    m = _VECTOR_TYPE.fullmatch(typ)
    if m is not None:
        return _vector_size_align(int(m.group(1)), m.group(2))
    struct = _struct_members(typ)
    if struct is not None:
        return _struct_size_align(*struct, reader)
    if typ.startswith("%"):
        return reader.named_size_align(_unquote(typ[1:]))
    return None, 1


_ARRAY_TYPE = re.compile(r"\[\s*(\d+)\s+x\s+(.+)\]", re.S)
_VECTOR_TYPE = re.compile(r"<\s*(\d+)\s+x\s+(i\d+|half|bfloat|float|double|fp128|x86_fp80|ppc_fp128|ptr)\s*>")


def _vector_size_align(lanes: int, element: str) -> tuple[int, int]:
    lane = _POINTER_BITS if element == "ptr" else _scalar_bits(element)
    size = _pow2(-(-lanes * lane // 8))
    return size, min(size, 64)


def _struct_members(typ: str) -> tuple[str, bool] | None:
    if typ.startswith("<{") and typ.endswith("}>"):
        return typ[2:-2], True
    if typ.startswith("{") and typ.endswith("}"):
        return typ[1:-1], False
    return None


def _struct_size_align(inner: str, packed: bool, reader: _Reader) -> tuple[int | None, int]:
    offset = 0
    struct_align = 1
    for member in split_top(inner, _OPEN, _CLOSE) if inner.strip() else []:
        size, align = _size_align(member, reader)
        if size is None:
            return None, 1
        if not packed:
            offset = -(-offset // align) * align
            struct_align = max(struct_align, align)
        offset += size
    return -(-offset // struct_align) * struct_align, struct_align


def parse_llvm_ir(text: str, where: str) -> list[KernelFacts]:
    """The facts of every function defined in the LLVM IR ``text``, in order; ``where`` names the text in
    errors and is each fact's ``source``."""
    return _Reader(where).read(text)
