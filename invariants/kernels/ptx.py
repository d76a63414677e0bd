"""PTX (what XLA:GPU emits, one ``.ptx`` file per LLVM module) read into per-kernel facts.

One :class:`~invariants.kernels.KernelFacts` per function with a body (each ``.entry``, and each ``.func``
an inline library may bring); declarations without a body are read and not counted. The reader knows the
module directives, declarations in every state space, function headers and their performance directives,
comments, labels, nested ``{ }`` blocks (inline assembly), predicates and statements over several lines;
an opcode must be one of the PTX ISA's. Anything else is a :class:`~invariants.kernels.KernelCodeError`.

In PTX terms: ``atomics`` are ``atom`` and ``red`` (``red.async`` too) spelled ``base.op[.noftz][.vN].type``
without ordering, scope, state-space and cache-hint qualifiers, whatever their order in the source
(``atom.relaxed.sys.global.cas.b32`` is ``atom.cas.b32``); a qualifier not known is an error. A CAS retry
loop is an ``atom.cas`` between a label and a later branch back to it; ``loops`` are branches (``bra``, a
``brx.idx``'s targets) to a label defined earlier, labels scoped by ``{ }`` blocks. ``local_bytes`` are
the ``.local`` declarations' bytes. ``vector_width`` is the widest ``.v2``/``.v4``/``.v8`` memory or atomic
operation (``ld.global.nc.v4.b32`` is 128); a scalar ``.b128`` access is not a vector.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from ._tally import Reader, Tally, opcodes, split_top, words
from .facts import KernelFacts

# The PTX ISA 9.0's instruction names (the first part of an opcode).
_OPCODES = opcodes("ptx_opcodes.txt")

# Families whose first part says little: their second part must be one of these.
_SECOND = {
    "cp": words("async reduce"),
    "mbarrier": words("init inval arrive arrive_drop expect_tx complete_tx test_wait try_wait pending_count"),
    "wgmma": words("mma_async fence commit_group wait_group"),
    "griddepcontrol": words("launch_dependents wait"),
    "tensormap": words("replace cp_fenceproxy"),
    "multimem": words("ld_reduce st red cp"),
    "tcgen05": words("alloc dealloc relinquish_alloc_permit ld st wait cp shift mma commit fence"),
    "clusterlaunchcontrol": words("try_cancel query_cancel"),
    "brx": words("idx"),
}

# Bits of each fundamental type (and of the opaque and packed ones a declaration may name).
_TYPE_BITS = {
    "b8": 8, "u8": 8, "s8": 8, "e4m3": 8, "e5m2": 8, "e2m1x2": 8, "ue8m0": 8,
    "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16,
    "e4m3x2": 16, "e5m2x2": 16, "e2m3x2": 16, "e3m2x2": 16, "ue8m0x2": 16,
    "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32, "tf32": 32,
    "e4m3x4": 32, "e5m2x4": 32, "e2m3x4": 32, "e3m2x4": 32, "e2m1x4": 16,
    "b64": 64, "u64": 64, "s64": 64, "f64": 64, "f32x2": 64,
    "b128": 128,
    "pred": 1, "texref": 64, "samplerref": 64, "surfref": 64,
}  # fmt: skip
_FLOAT_TYPES = words("f16 f16x2 bf16 bf16x2 f32 f64")
_ATOM_OPS = words("add inc dec min max and or xor exch cas")
_ATOM_TYPES = words("b16 b32 b64 b128 u16 u32 u64 s32 s64 f16 f16x2 bf16 bf16x2 f32 f64")
# Qualifiers of atom/red that do not change what the operation is: memory ordering, scope, state space,
# cache hints, the mbarrier completion of red.async.
_ATOM_DROP = words(
    "relaxed acquire release acq_rel cta cluster gpu sys global shared shared::cta shared::cluster mmio "
    "L2::cache_hint L2::64B L2::128B L2::256B mbarrier::complete_tx::bytes"
)
_VECTORS = {"v2": 2, "v4": 4, "v8": 8}
# What each qualifier of atom/red that is kept says: its operation, vector width or type.
_ATOM_PARTS = {
    **dict.fromkeys(_ATOM_OPS, "op"),
    **dict.fromkeys(_VECTORS, "vector"),
    **dict.fromkeys(_ATOM_TYPES, "type"),
}
_VECTOR_OPS = words("ld ldu st atom red multimem")

_IDENT = r"(?:[A-Za-z][\w$]*|[_$%][\w$]+)"
_LABEL = re.compile(rf"\s*({_IDENT})\s*:(?!:)")
_INSTR = re.compile(r"(@!?%?[\w$]+\s+)?([a-z][a-z0-9_]*)((?:\.[\w:]+)*)(?:\s+(.*))?", re.S)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[;{}]|[^;{}"]+')
_COMMENT = re.compile(r'"(?:[^"\\]|\\.)*"?|//.*|/\*.*?(?:\*/|$)')
_INT = r"(?:0[xX][0-9a-fA-F]+|\d+)"
_INTS = rf"{_INT}(?:\s*,\s*{_INT})*"
_STRING = r'"(?:[^"\\]|\\.)*"'

_MODULE_DIRECTIVES = [
    re.compile(r"\.version\s+\d+\.\d+"),
    re.compile(
        r"\.target\s+(?:sm|compute)_\d+[af]?"
        r"(?:\s*,\s*(?:sm_\d+[af]?|texmode_unified|texmode_independent|debug|map_f64_to_f32))*"
    ),
    re.compile(r"\.address_size\s+(?:32|64)"),
    re.compile(rf"\.file\s+\d+\s+{_STRING}(?:\s*,\s*\d+\s*,\s*\d+)?"),
    re.compile(rf"\.pragma\s+{_STRING}(?:\s*,\s*{_STRING})*"),
    re.compile(rf"\.alias\s+{_IDENT}\s*,\s*{_IDENT}"),
]
_LOC = re.compile(r"\.loc\s+\d+\s+\d+\s+\d+(?:\s*,\s*\w+\s+[^,]+)*")
_BODY_DIRECTIVES = [_LOC, re.compile(rf"\.pragma\s+{_STRING}(?:\s*,\s*{_STRING})*")]
_PERF = re.compile(
    rf"\.(?:reqntid|maxntid|reqnctapercluster)\s+{_INTS}|\.(?:maxnreg|minnctapersm|maxnctapersm|maxclusterrank"
    rf"|abi_preserve|abi_preserve_control)\s+{_INT}|\.(?:explicitcluster|noreturn|blocksareclusters)"
    rf"|\.pragma\s+{_STRING}(?:\s*,\s*{_STRING})*\s*;?"
)
_HEADER = re.compile(
    rf"((?:\.(?:visible|weak|extern)\s+)*)\.(entry|func)\s*(?:\((?P<ret>[^()]*)\)\s*)?(?P<name>{_IDENT})"
    rf"\s*(?:\((?P<params>[^()]*)\))?(?P<rest>.*)",
    re.S,
)
_TYPES = "|".join(sorted(_TYPE_BITS, key=len, reverse=True))
_PARAM = re.compile(
    rf"\.(?:param|reg)(?:\s+\.(?:ptr|global|const|shared|local|v[248]|{_TYPES})\b|\s+\.align\s+{_INT})*"
    rf"\s+{_IDENT}(?:\s*\[\s*{_INT}?\s*\])*"
)
_PROTO_PARAM = re.compile(
    rf"\.param(?:\s+\.(?:ptr|v[248]|{_TYPES})\b|\s+\.align\s+{_INT})*\s+_(?:\s*\[\s*{_INT}?\s*\])*"
)
_PROTOTYPE = re.compile(r"\.callprototype\s*(?:\(([^()]*)\)\s*)?_\s*\(([^()]*)\)(?:\s*\.noreturn)?", re.S)
_LINE_DIRECTIVE = re.compile(r"\s*\.(?:version|target|address_size|file|loc)\b")
_T = TypeVar("_T")
_SPACES = words("reg local shared global const param tex sreg")
_DECLARATOR = re.compile(
    rf"({_IDENT})(?:\s*<\s*({_INT})\s*>)?((?:\s*\[\s*(?:{_INT})?\s*\])*)\s*(?:=\s*(.*))?", re.S
)
_DIM = re.compile(rf"\[\s*({_INT})?\s*\]")


@dataclass
class _Function(Tally):
    scopes: list[int] = field(default_factory=lambda: [0])
    next_scope: int = 1
    # (scope, name) -> instruction index at the label; branches: (line, text, scope chain, target, index)
    labels: dict[tuple[int, str], int] = field(default_factory=dict)
    branches: list[tuple[int, str, tuple[int, ...], str, int]] = field(default_factory=list)
    branch_targets: dict[tuple[int, str], list[str]] = field(default_factory=dict)


class _Reader(Reader):
    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.fn: _Function | None = None
        self.depth = 0  # block depth inside the current function (1: its body)
        self.header_seen = False
        self.pending_header: tuple[int, str] | None = None
        self.pending: list[str] = []  # the statement being read, from line pending_line
        self.pending_line = 0
        self.brace = 0  # braces inside the pending statement (vector operands, initializers)
        self.section = 0  # > 0 inside a .section block: its braces

    def read(self, text: str) -> list[KernelFacts]:
        in_comment = False
        comment_line = 0
        lineno = 0
        for lineno, raw in enumerate(text.splitlines(), 1):
            was_in_comment = in_comment
            code, in_comment = _strip_comments(raw, in_comment)
            if in_comment and not was_in_comment:
                comment_line = lineno
            if code and not code.isspace():
                self.code_line(lineno, code)
        if in_comment:
            raise self.error(comment_line, "unterminated comment '/*'", "")
        self.check_ended(lineno)
        return self.out

    def code_line(self, lineno: int, code: str) -> None:
        self.check_continued(code)
        if not self.pending and _LINE_DIRECTIVE.match(code):
            # .version, .target, .address_size, .file and .loc end with their line, not with ';'.
            self.statement(lineno, code.strip())
            return
        for tok in _TOKEN.findall(code):
            self.token(lineno, tok)
        if self.pending:
            self.pending.append("\n")

    def check_continued(self, code: str) -> None:
        # In a body a statement goes on to the next line only inside an operand list (a call's).
        if self.pending and self.fn is not None and not self.brace:
            stmt = "".join(self.pending).rstrip()
            if not (stmt.endswith((",", "(", "[")) or code.lstrip().startswith((")", "]", ","))):
                raise self.error(self.pending_line, "statement not ended with ';'", stmt)

    def check_ended(self, lineno: int) -> None:
        stmt = "".join(self.pending).strip()
        if stmt:
            raise self.error(self.pending_line, "statement not ended with ';' at the end of the file", stmt)
        if self.section:
            raise self.error(lineno, "unterminated .section block", "")
        if self.pending_header is not None:
            raise self.error(*self.pending_header, "function header without a body")
        if self.fn is not None:
            raise self.unclosed(self.fn, lineno, f".entry {self.fn.name}")

    def token(self, lineno: int, tok: str) -> None:
        if self.section:
            self.section += {"{": 1, "}": -1}.get(tok, 0)
        elif tok == ";":
            self.semicolon()
        elif tok == "{":
            self.open_brace(lineno)
        elif tok == "}":
            self.close_brace(lineno)
        else:
            if not self.pending:
                tok = self.labels(lineno, tok).lstrip()
                if not tok:
                    return
                self.pending_line = lineno
            self.pending.append(tok)

    def semicolon(self) -> None:
        if self.brace:
            raise self.error(self.pending_line, "unbalanced '{' in a statement", "".join(self.pending))
        self.statement(self.pending_line, "".join(self.pending).strip())
        self.pending = []

    def open_brace(self, lineno: int) -> None:
        """A ``{`` in a statement (an initializer, vector operands), a .section's, or a block's."""
        stmt = "".join(self.pending).strip()
        if self.brace or (stmt and (self.fn is not None or "=" in stmt)):
            self.brace += 1
            self.pending.append("{")
            return
        if stmt.startswith(".section"):
            if not re.fullmatch(r"\.section\s+\.?[\w.]+", stmt):
                raise self.error(self.pending_line, "unknown section", stmt)
            self.section = 1
        else:
            self.open(self.pending_line if stmt else lineno, stmt)
        self.pending = []

    def close_brace(self, lineno: int) -> None:
        if self.brace:
            self.brace -= 1
            self.pending.append("}")
            return
        stmt = "".join(self.pending).strip()
        if stmt:
            raise self.error(self.pending_line, "statement not ended with ';'", stmt)
        self.close(lineno)
        self.pending = []

    def labels(self, lineno: int, tok: str) -> str:
        """The statement ``tok`` starts, its labels defined."""
        while True:
            m = _LABEL.match(tok)
            if m is None:
                return tok
            rest = tok[m.end() :]
            if rest.lstrip().startswith((".callprototype", ".branchtargets")):
                return tok  # a named declaration, read as a statement
            if self.fn is None:
                raise self.error(lineno, "label outside a function", tok)
            key = (self.fn.scopes[-1], m.group(1))
            if key in self.fn.labels:
                raise self.error(lineno, f"label '{m.group(1)}' defined twice", m.group(1) + ":")
            self.fn.labels[key] = self.fn.instructions
            tok = rest

    def open(self, line: int, stmt: str) -> None:
        if self.fn is not None:
            self.depth += 1
            self.fn.scopes.append(self.fn.next_scope)
            self.fn.next_scope += 1
            return
        if self.pending_header is not None:
            if stmt:
                raise self.error(*self.pending_header, "function header without a body")
            line, stmt = self.pending_header
        self.pending_header = None
        name = self.header(line, stmt)
        self.fn = _Function(name, line)
        self.depth = 1

    def close(self, line: int) -> None:
        fn = self.fn
        if fn is None:
            raise self.error(line, "'}' outside a function", "}")
        self.depth -= 1
        fn.scopes.pop()
        if self.depth:
            return
        self.out.append(self.finish(fn))
        self.fn = None

    def header(self, line: int, stmt: str) -> str:
        """The name of a function header (or declaration), checked."""
        if not self.header_seen:
            raise self.error(line, "function before the .version/.target header", stmt)
        m = _HEADER.fullmatch(stmt)
        if m is None:
            what = "unknown directive" if stmt.startswith(".") else "not a function header"
            raise self.error(line, what if stmt else "block outside a function", stmt)
        for p in _header_params(m):
            if not _PARAM.fullmatch(p.strip()):
                raise self.error(line, "unknown parameter declaration", p)
        self.check_directives(line, m.group("rest").strip())
        return m.group("name")

    def check_directives(self, line: int, rest: str) -> None:
        pos = 0
        while pos < len(rest):
            d = _PERF.match(rest, pos)
            if d is None:
                raise self.error(line, "unknown function directive", rest[pos:])
            pos = d.end()
            while pos < len(rest) and rest[pos].isspace():
                pos += 1

    def statement(self, line: int, stmt: str) -> None:
        if not stmt:
            return
        if self.fn is None:
            self.module_statement(line, stmt)
        elif stmt.startswith("."):
            self.body_directive(line, stmt)
        elif _LABEL.match(stmt):
            self.named_declaration(line, stmt)
        else:
            self.instruction(line, stmt)

    def module_statement(self, line: int, stmt: str) -> None:
        if self.pending_header is not None:
            self.header_pragma(self.pending_header, stmt)
        elif stmt.startswith(".version"):
            self.version(line, stmt)
        elif not self.header_seen:
            raise self.error(line, "expected .version first", stmt)
        elif any(d.fullmatch(stmt) for d in (*_MODULE_DIRECTIVES[1:], _LOC)):
            return
        elif _HEADER.fullmatch(stmt):
            self.declared_function(line, stmt)
        elif stmt.startswith(
            (".visible", ".extern", ".weak", ".common", ".global", ".const", ".shared", ".local", ".tex")
        ):
            self.declaration(line, stmt)
        else:
            raise self.error(line, "unknown directive" if stmt.startswith(".") else "unknown statement", stmt)

    def declared_function(self, line: int, stmt: str) -> None:
        """A declaration at module level, or an .entry header a .pragma ended with ';' before its body."""
        m = _HEADER.fullmatch(stmt)
        assert m is not None
        self.header(line, stmt)
        if m.group(2) == "entry" and re.search(r"\.pragma\s+\"[^\"]*\"\s*$", stmt):
            self.pending_header = (line, stmt + ";")

    def header_pragma(self, pending: tuple[int, str], stmt: str) -> None:
        if not stmt.startswith(".pragma"):
            raise self.error(*pending, "function header without a body")
        self.pending_header = (pending[0], f"{pending[1]} {stmt};")

    def version(self, line: int, stmt: str) -> None:
        if self.header_seen:
            raise self.error(line, "second .version", stmt)
        if not _MODULE_DIRECTIVES[0].fullmatch(stmt):
            raise self.error(line, "unknown .version", stmt)
        self.header_seen = True

    def body_directive(self, line: int, stmt: str) -> None:
        for d in _BODY_DIRECTIVES:
            if d.fullmatch(stmt):
                return
        if stmt.startswith((".reg", ".local", ".shared", ".global", ".const", ".param", ".extern", ".sreg")):
            size = self.declaration(line, stmt)
            if stmt.startswith(".local"):
                assert self.fn is not None
                self.fn.local_bytes += size
            return
        raise self.error(line, "unknown directive", stmt)

    def named_declaration(self, line: int, stmt: str) -> None:
        m = _LABEL.match(stmt)
        assert m is not None and self.fn is not None
        rest = stmt[m.end() :].strip()
        if rest.startswith(".callprototype") and _prototype(rest):
            return
        if rest.startswith(".callprototype"):
            raise self.error(line, "unknown .callprototype", stmt)
        if not rest.startswith(".branchtargets"):
            raise self.error(line, "unknown statement", stmt)
        targets = [n.strip() for n in rest[len(".branchtargets") :].split(",")]
        if not all(re.fullmatch(_IDENT, t) for t in targets):
            raise self.error(line, "unknown .branchtargets", stmt)
        self.fn.branch_targets[(self.fn.scopes[-1], m.group(1))] = targets

    def declaration(self, line: int, stmt: str) -> int:
        """The bytes of a variable declaration, checked."""
        head, sep, init = stmt.partition("=")
        tokens = head.split()
        space, bits, lanes, i = self.qualifiers(line, stmt, tokens)
        rest = " ".join(tokens[i:]) + (sep + init if sep else "")
        total = 0
        for d in split_top(rest, "{", "}"):
            m = _DECLARATOR.fullmatch(d.strip())
            if m is None:
                raise self.error(line, "unknown declarator", stmt)
            count = 1
            if m.group(2) is not None:
                if space != "reg":
                    raise self.error(line, "a register range '<N>' outside .reg", stmt)
                count = int(m.group(2), 0)
            for dim in _DIM.finditer(m.group(3) or ""):
                count *= int(dim.group(1), 0) if dim.group(1) else 0
            total += count * lanes * max(bits, 8) // 8
        return total

    def qualifiers(self, line: int, stmt: str, tokens: list[str]) -> tuple[str, int, int, int]:
        """A declaration's state space, type bits and vector lanes, and the index of its declarators."""
        i = 0
        space = None
        bits = 0
        lanes = 1
        while i < len(tokens) and tokens[i].startswith("."):
            t = tokens[i][1:]
            i += 1
            if t == "align":
                i = self.after_align(line, stmt, tokens, i)
            elif t in _SPACES:
                if space is not None:
                    raise self.error(line, "two state spaces in a declaration", stmt)
                space = t
            elif t in _VECTORS:
                lanes = _VECTORS[t]
            elif t in _TYPE_BITS:
                bits = _TYPE_BITS[t]
            else:
                self.check_qualifier(line, stmt, t)
        if space is None or not bits:
            raise self.error(line, "unknown declaration (no state space or type)", stmt)
        return space, bits, lanes, i

    def after_align(self, line: int, stmt: str, tokens: list[str], i: int) -> int:
        if i >= len(tokens) or not re.fullmatch(_INT, tokens[i]):
            raise self.error(line, "'.align' without a number", stmt)
        return i + 1

    def check_qualifier(self, line: int, stmt: str, t: str) -> None:
        if t in ("visible", "extern", "weak", "common", "ptr"):
            return
        if not t.startswith("attribute("):
            raise self.error(line, f"unknown declaration qualifier '.{t}'", stmt)
        if not re.fullmatch(r"attribute\(\.(managed|unified\([^)]*\))\)", t):
            raise self.error(line, "unknown attribute", stmt)

    def instruction(self, line: int, stmt: str) -> None:
        fn = self.fn
        assert fn is not None
        m = _INSTR.fullmatch(stmt)
        if m is None:
            raise self.error(line, "unknown statement", stmt)
        base = m.group(2)
        quals = m.group(3).split(".")[1:] if m.group(3) else []
        self.check_opcode(line, stmt, base, quals)
        index = fn.instructions
        fn.instructions += 1
        if base in ("atom", "red"):
            self.atomic(fn, line, stmt, base, quals, index)
        if base in _VECTOR_OPS:
            fn.vector_width = max(fn.vector_width, self.vector_bits(line, stmt, quals))
        if base in ("bra", "brx"):
            target = (m.group(4) or "").strip().rsplit(",", 1)[-1].strip()
            if not re.fullmatch(_IDENT, target):
                raise self.error(line, "unknown branch target", stmt)
            target = target if base == "bra" else "\0" + target  # brx.idx: a .branchtargets list
            fn.branches.append((line, stmt, tuple(fn.scopes), target, index))

    def check_opcode(self, line: int, stmt: str, base: str, quals: list[str]) -> None:
        if base not in _OPCODES:
            raise self.error(line, f"unknown opcode '{base}'", stmt)
        second = _SECOND.get(base)
        if second is not None and (not quals or quals[0] not in second):
            raise self.error(line, f"unknown opcode '{base}.{quals[0] if quals else ''}'", stmt)

    def vector_bits(self, line: int, stmt: str, quals: list[str]) -> int:
        lanes = next((_VECTORS[q] for q in reversed(quals) if q in _VECTORS), 0)
        bits = max((_TYPE_BITS[q] for q in quals if q in _TYPE_BITS), default=0)
        if lanes and not bits:
            raise self.error(line, "vector operation without a type", stmt)
        return lanes * bits

    def atomic(self, fn: _Function, line: int, stmt: str, base: str, quals: list[str], index: int) -> None:
        if quals and quals[0] == "async" and base == "red":
            base, quals = "red.async", quals[1:]
        parts, mods = self.atomic_parts(line, stmt, base, quals)
        op, typ = parts.get("op"), parts.get("type")
        if op is None or typ is None:
            raise self.error(line, f"{base} without an operation or a type", stmt)
        fn.atomics[".".join([base, op, *mods, *([parts["vector"]] if "vector" in parts else []), typ])] += 1
        if op == "cas":
            fn.cas.append(index)
        if op == "add" and typ in _FLOAT_TYPES:
            fn.float_atomics += 1

    def atomic_parts(
        self, line: int, stmt: str, base: str, quals: list[str]
    ) -> tuple[dict[str, str], list[str]]:
        """An atomic's operation, vector and type (one of each at most), and its ``noftz``."""
        parts: dict[str, str] = {}
        mods: list[str] = []
        for q in (q for q in quals if q not in _ATOM_DROP):
            slot = _ATOM_PARTS.get(q)
            if q == "noftz":
                mods.append(q)
            elif slot is None or slot in parts:
                raise self.error(line, f"unknown {base} qualifier '.{q}'", stmt)
            else:
                parts[slot] = q
        return parts, mods

    def finish(self, fn: _Function) -> KernelFacts:
        loops: list[tuple[int, int]] = []
        for line, stmt, scopes, target, index in fn.branches:
            if target.startswith("\0"):  # brx.idx: its .branchtargets list
                targets = self.resolve(fn.branch_targets, scopes, target[1:], line, stmt, "target list")
            else:
                targets = [target]
            back = [t for t in targets if self.resolve(fn.labels, scopes, t, line, stmt, "label") <= index]
            if back:
                start = min(self.resolve(fn.labels, scopes, t, line, stmt, "label") for t in back)
                loops.append((start, index))
        return fn.facts("ptx", self.where, len(loops), loops)

    def resolve(
        self,
        table: Mapping[tuple[int, str], _T],
        scopes: tuple[int, ...],
        name: str,
        line: int,
        stmt: str,
        what: str,
    ) -> _T:
        for scope in reversed(scopes):
            if (scope, name) in table:
                return table[(scope, name)]
        raise self.error(line, f"branch to an undefined {what} '{name}'", stmt)


def _header_params(m: re.Match[str]) -> list[str]:
    lists = (m.group("ret") or "", m.group("params") or "")
    return [p for params in lists if params.strip() for p in params.split(",")]


def _prototype(rest: str) -> bool:
    """Whether ``rest`` is a ``.callprototype`` this reader knows."""
    p = _PROTOTYPE.fullmatch(rest)
    if p is None:
        return False
    params = (x for g in p.groups() if g and g.strip() for x in g.split(","))
    return all(_PROTO_PARAM.fullmatch(x.strip()) for x in params)


def _strip_comments(line: str, in_comment: bool) -> tuple[str, bool]:
    """``line`` without its comments (strings kept), and whether a ``/*`` is still open after it."""
    if in_comment:
        end = line.find("*/")
        if end < 0:
            return "", True
        line = " " + line[end + 2 :]
    opened = False

    def cut(m: re.Match[str]) -> str:
        nonlocal opened
        text = m.group()
        if text.startswith('"'):
            return text
        opened = text.startswith("/*") and (len(text) < 4 or not text.endswith("*/"))
        return " " if text.startswith("/*") and not opened else ""

    return _COMMENT.sub(cut, line), opened


def parse_ptx(text: str, where: str) -> list[KernelFacts]:
    """The facts of every function with a body in the PTX ``text``, in order; ``where`` names the text in
    errors and is each fact's ``source``."""
    return _Reader(where).read(text)
