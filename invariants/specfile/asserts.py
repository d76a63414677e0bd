"""The assert language's typed form: what an ``assert = "..."`` of a spec file means, parsed once.

An assert is written in Python's expression syntax, so :func:`parse` reads it with :mod:`ast` and lowers it
at once to the small tree below, which every later stage reads instead of Python's: the checks evaluate it,
the throughput tier reads its timed ratio, a verdict shows its scaled relation's ratio, and versus lists
the metrics it reads. A shape the language does not have cannot reach them, so none re-checks one.

Lowering checks what the language promises: every name is a metric of
:data:`invariants.measure.metrics.METRICS`, the two sides have the same type (a comparison that could never
fail is refused), ``in`` takes a quoted name and a set, a constant divisor is not zero, a throughput assert
is ``time(A) / time(B) <= NUMBER`` of two different sides, and called and bare metrics do not mix. Each
mistake is one line, raised through the caller's ``error(message)`` so that it names the file and line.
"""

from __future__ import annotations

import ast
import dataclasses
import operator
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, Literal, NamedTuple

from .._errors import InvariantsError, did_you_mean, first_line, non_ascii
from ..hlo.parse import is_dtype
from ..measure.metrics import COMPILED_SOURCES, METRICS, Metric
from ..scope.configs import CONFIGS, DISTRIBUTIONS
from ..scope.select import CATALOG_PREFIX, written

InvariantKind = Literal["absolute", "relational", "throughput"]
Comparison = Literal["==", "!=", "<", "<=", ">", ">=", "in", "not in"]
Operator = Literal["+", "-", "*", "/", "**"]


def _power(base: Any, exponent: Any) -> Any:
    """Exact for the integers a bound is written with (``2 ** 20``), in floating point beyond (an exponent
    in the thousands would be a number of a million digits, never a bound)."""
    if isinstance(base, int) and isinstance(exponent, int) and 0 <= exponent <= 1024:
        return base**exponent
    return float(base) ** exponent


# The one table of the comparisons and operators the language has, and what each computes.
_COMPARISONS: dict[type[ast.cmpop], tuple[Comparison, Callable[[Any, Any], bool]]] = {
    ast.Eq: ("==", operator.eq),
    ast.NotEq: ("!=", operator.ne),
    ast.Lt: ("<", operator.lt),
    ast.LtE: ("<=", operator.le),
    ast.Gt: (">", operator.gt),
    ast.GtE: (">=", operator.ge),
    ast.In: ("in", lambda a, b: a in b),
    ast.NotIn: ("not in", lambda a, b: a not in b),
}
# With how tightly each binds, to write a term back as ``ast.unparse`` does: ``**`` binds tighter than a
# unary minus on its left (``-2 ** 2`` is ``-(2 ** 2)``) and to its right.
_OPERATORS: dict[type[ast.operator], tuple[Operator, Callable[[Any, Any], Any], int]] = {
    ast.Add: ("+", operator.add, 1),
    ast.Sub: ("-", operator.sub, 1),
    ast.Mult: ("*", operator.mul, 2),
    ast.Div: ("/", operator.truediv, 2),
    ast.Pow: ("**", _power, 4),
}
COMPARE = dict(_COMPARISONS.values())
ARITHMETIC = {word: compute for word, compute, _ in _OPERATORS.values()}
_PRECEDENCE = {word: binding for word, _, binding in _OPERATORS.values()}
_UNARY = 3
# ``catalog:take`` is no Python name: it is read as one before Python parses the assert.
_CATALOG_WORD = re.compile(r"(?<![\w:])catalog:([A-Za-z_]\w*)")
_SPELLED = "__catalog__"


@dataclasses.dataclass(frozen=True)
class _Written:
    """Each term keeps the words it was written in (``text``, not compared): messages quote the spec."""

    text: str = dataclasses.field(default="", compare=False, kw_only=True)


@dataclasses.dataclass(frozen=True)
class Number(_Written):
    value: int | float


@dataclasses.dataclass(frozen=True)
class Quoted(_Written):
    value: str


@dataclasses.dataclass(frozen=True)
class Read(_Written):
    """A metric read: ``name`` alone (the item's program, or an input fact) or called on ``program``,
    optionally of one index ``distribution`` (``time``), one element ``dtype`` (``scatters(dtype="f32")``)
    or one ``config`` (``kernels(take[bf16])``)."""

    name: str
    program: str | None = None
    distribution: str | None = None
    dtype: str | None = None
    config: str | None = None

    @property
    def side(self) -> str | None:
        """The program a read is called on, as written: ``take``, or ``take[bf16]`` with a configuration."""
        if self.program is None:
            return None
        return self.program if self.config is None else f"{self.program}[{self.config}]"

    @property
    def label(self) -> str:
        """How a result names the read: ``kernels(take)``, ``table_bytes``, ``scatters(dtype='f32')``."""
        side = self.side
        args = [*([side] if side else []), *([f"dtype={self.dtype!r}"] if self.dtype else [])]
        return f"{self.name}({', '.join(args)})" if args else self.name


@dataclasses.dataclass(frozen=True)
class Negated(_Written):
    operand: Term


@dataclasses.dataclass(frozen=True)
class Arithmetic(_Written):
    op: Operator
    left: Term
    right: Term


Term = Number | Quoted | Read | Negated | Arithmetic


class TimedSide(NamedTuple):
    program: str
    distribution: str = "uniform"

    @property
    def label(self) -> str:
        return self.program if self.distribution == "uniform" else f"{self.program}[{self.distribution}]"


class TimedRatio(NamedTuple):
    """``time(a) / time(b) <= threshold``: both sides timed pair by pair, so the ratio is what a run can
    measure without absolute times."""

    a: TimedSide
    b: TimedSide
    threshold: float


class Scaled(NamedTuple):
    """``metric(a) OP factor * metric(b)`` (``factor`` 1 without one), ``a`` and ``b`` as written: its ratio
    ``metric(a) / metric(b)`` is what a reader wants beside the verdict."""

    metric: str
    a: str
    b: str
    factor: float


class Clause(NamedTuple):
    """One more comparison of an assert that joins several with ``and``."""

    op: Comparison
    left: Term
    right: Term


@dataclasses.dataclass(frozen=True)
class Assertion:
    """One parsed, validated assert. ``programs``: those it names, in order; ``pinned``: the
    ``(program, config)`` of each side of a relation across configurations, else empty; ``more``: the
    comparisons after the first where ``and`` joins several, each of which must hold."""

    text: str
    op: Comparison
    left: Term
    right: Term
    kind: InvariantKind
    programs: tuple[str, ...]
    timed: TimedRatio | None = None
    scaled: Scaled | None = None
    pinned: tuple[tuple[str, str], ...] = ()
    more: tuple[Clause, ...] = ()

    @property
    def clauses(self) -> tuple[Clause, ...]:
        return (Clause(self.op, self.left, self.right), *self.more)

    def holds(self, read: Callable[[Read], Any]) -> bool:
        """Whether every comparison holds where ``read`` gives each metric's value (all are read, so that a
        failure shows every value); raises :class:`NoValue`."""
        held = [bool(COMPARE[c.op](value(c.left, read), value(c.right, read))) for c in self.clauses]
        return all(held)

    def reads(self) -> Iterator[Read]:
        for clause in self.clauses:
            for side in (clause.left, clause.right):
                yield from (term for term in _terms(side) if isinstance(term, Read))


def paired(assertion: Assertion, configs: Mapping[str, str]) -> Assertion:
    """``assertion``, a relation, with each side in the configuration ``configs`` gives its program, as if
    written ``metric(a[CONFIG])``: what a relation between programs of one configuration each compares."""

    def pin(term: Term) -> Term:
        if isinstance(term, Read) and term.program is not None:
            return dataclasses.replace(term, config=configs[term.program])
        if isinstance(term, Negated):
            return dataclasses.replace(term, operand=pin(term.operand))
        if isinstance(term, Arithmetic):
            return dataclasses.replace(term, left=pin(term.left), right=pin(term.right))
        return term

    more = tuple(Clause(c.op, pin(c.left), pin(c.right)) for c in assertion.more)
    return dataclasses.replace(
        assertion,
        left=pin(assertion.left),
        right=pin(assertion.right),
        more=more,
        pinned=tuple((p, configs[p]) for p in assertion.programs),
    )


class NoValue(Exception):
    """A term has no value here (a metric not measured, a division by zero): the verdict fails with this
    line, since an invariant never passes on a number that is not there."""


def value(term: Term, read: Callable[[Read], Any]) -> Any:
    if isinstance(term, (Number, Quoted)):
        return term.value
    if isinstance(term, Read):
        return read(term)
    if isinstance(term, Negated):
        return -value(term.operand, read)
    left, right = value(term.left, read), value(term.right, read)
    try:
        return ARITHMETIC[term.op](left, right)
    except ZeroDivisionError:
        raise NoValue(f"'{term.text}' divides by zero: {term.right.text} is 0 here") from None
    except ArithmeticError as err:
        raise NoValue(f"'{term.text}' cannot be computed: {err}") from None


def _terms(term: Term) -> Iterator[Term]:
    yield term
    if isinstance(term, Negated):
        yield from _terms(term.operand)
    elif isinstance(term, Arithmetic):
        yield from _terms(term.left)
        yield from _terms(term.right)


def parse(text: str, error: Callable[[str], InvariantsError], programs: Collection[str]) -> Assertion:
    """Parse and validate ``text``; ``error(message)`` makes the one-line error to raise, and ``programs``
    are the names an assert may call a metric on."""
    try:
        tree = ast.parse(_CATALOG_WORD.sub(rf"{_SPELLED}\1", text), mode="eval")
    except SyntaxError as err:
        raise error(f"assert {text!r} is not an expression: {first_line(err.msg)}") from None
    except (ValueError, RecursionError, MemoryError):
        raise error(f"assert {text!r} is not an expression: nested too deeply") from None
    try:
        return _Lowering(text, error, programs).assertion(tree.body)
    except RecursionError:
        raise error(f"assert {text!r} is nested too deeply") from None


def constant(term: Term) -> float | None:
    """The value of a term of numbers only (``2 - 2``), None when it reads a metric; raises ArithmeticError
    where computing it does."""
    if isinstance(term, Number):
        return term.value
    if isinstance(term, Negated):
        value = constant(term.operand)
        return None if value is None else -value
    if isinstance(term, Arithmetic):
        left, right = constant(term.left), constant(term.right)
        if left is None or right is None:
            return None
        return float(ARITHMETIC[term.op](left, right))
    return None


class _Lowering:
    """Lowers one assert's Python tree to :class:`Assertion`, checking types on the way. A term's text is
    built from its parts' as ``ast.unparse`` writes it: unparsing every subtree again would make a long sum
    quadratic to read."""

    def __init__(self, text: str, error: Callable[[str], InvariantsError], programs: Collection[str]) -> None:
        self.text, self.error, self.programs = text, error, programs
        self.named: list[str] = []
        self.bare: list[str] = []  # compiled metrics read without a program: the item's own program
        self.sides: list[tuple[str, str | None]] = []  # each compiled call's program and named configuration
        self.kind: InvariantKind = "absolute"

    def fail(self, said: str) -> InvariantsError:
        return self.error(f"assert {self.text!r}{said}")

    def assertion(self, body: ast.expr) -> Assertion:
        joined = isinstance(body, ast.BoolOp) and isinstance(body.op, ast.And)
        clauses = [self.clause(node) for node in (body.values if joined else [body])]  # type: ignore[attr-defined]
        (op, left, right), more = clauses[0], tuple(clauses[1:])
        if self.kind == "throughput" and more:
            raise self.fail(": a time ratio stands alone; write each comparison as an invariant of its own")
        timed = self.timed(op, left, right) if self.kind == "throughput" else None
        pinned = self.pinned()
        named = tuple(dict.fromkeys(self.named))
        return Assertion(
            self.text,
            op,
            left,
            right,
            self.kind,
            named,
            timed,
            None if more else _scaled(left, right),
            tuple(dict.fromkeys(pinned)),
            more,
        )

    def clause(self, body: ast.expr) -> Clause:
        if isinstance(body, ast.BoolOp):
            raise self.fail(": 'and' joins comparisons; 'or' is not part of the language")
        if not isinstance(body, ast.Compare) or len(body.ops) != 1:
            raise self.fail(" must be one comparison such as 'kernels <= 2', or several joined by 'and'")
        (left, left_type), (right, right_type) = self.term(body.left), self.term(body.comparators[0])
        found = _COMPARISONS.get(type(body.ops[0]))
        if found is None:
            raise self.fail(f": compare with one of {', '.join(COMPARE)}")
        op = found[0]
        self.comparable(op, left_type, right_type)
        if not any(isinstance(term, Read) for side in (left, right) for term in _terms(side)):
            raise self.fail(" reads no metric: it is the same on every program")
        return Clause(op, left, right)

    def comparable(self, op: Comparison, left_type: str, right_type: str) -> None:
        """Refuses a comparison that could never fail or never be made: of two types, or of sets, names or
        structures by order."""
        if op in ("in", "not in"):
            if right_type != "set" or left_type != "string":
                sets = ", ".join(m.name for m in METRICS.values() if m.type == "set")
                raise self.fail(f": 'in' takes a quoted name on its left and one of {sets} on its right")
        elif left_type != right_type:
            raise self.fail(f" compares a {left_type} with a {right_type}: it could never fail")
        elif left_type in ("set", "string", "structure") and op not in ("==", "!="):
            raise self.fail(f": a {left_type} can only be compared with == or !=")

    def timed(self, op: Comparison, left: Term, right: Term) -> TimedRatio:
        timed = _timed_ratio(op, left, right)
        if timed is None:
            raise self.fail(": a throughput assert reads 'time(A) / time(B) <= NUMBER'")
        if timed.a == timed.b:
            raise self.fail(f" times {timed.a.label} against itself: it could never fail")
        return timed

    def pinned(self) -> list[tuple[str, str]]:
        """The sides whose configuration the assert names: every side's or none."""
        if self.kind != "absolute" and self.bare:
            first = self.bare[0]
            raise self.fail(f": mixes program calls with a bare metric '{first}' (write {first}(PROGRAM))")
        pinned = [(p, c) for p, c in self.sides if c is not None]
        if pinned and len(pinned) != len(self.sides):
            loose = next(p for p, c in self.sides if c is None)
            raise self.fail(
                f" names the configuration of some sides but not of {loose}: name every side's "
                f"({loose}[{pinned[0][1]}]) or none"
            )
        return pinned

    def term(self, node: ast.expr) -> tuple[Term, str]:
        """The term of an operand and its type (number, set, structure or string)."""
        if isinstance(node, ast.Constant) and (constant := _constant(node)) is not None:
            return constant
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return self.arithmetic(node), "number"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self.negated(node.operand), "number"
        if isinstance(node, ast.Name):
            return self.bare_read(node.id, node.id)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self.called_read(node)
        raise self.fail(f": '{ast.unparse(node)}' is not understood")

    def negated(self, node: ast.expr) -> Negated:
        operand, operand_type = self.term(node)
        written = "-" + _inside(operand, _UNARY)
        if operand_type != "number":
            raise self.fail(f": arithmetic on a {operand_type} ('{written}')")
        return Negated(operand, text=written)

    def arithmetic(self, node: ast.BinOp) -> Arithmetic:
        sides = []
        for side in (node.left, node.right):
            term, term_type = self.term(side)
            if term_type != "number":
                raise self.fail(f": arithmetic on a {term_type} ('{term.text}')")
            sides.append(term)
        op = _OPERATORS[type(node.op)][0]
        if op == "**":  # right to left: a left operand of the same precedence, or negated, keeps its own
            low, high = sides
            left = f"({low.text})" if isinstance(low, (Arithmetic, Negated)) else low.text
            right = f"({high.text})" if isinstance(high, Negated) else _inside(high, _PRECEDENCE[op])
            written = f"{left} ** {right}"
        else:
            # Python's left-to-right binding: a right operand of the same precedence keeps its parentheses.
            written = f"{_inside(sides[0], _PRECEDENCE[op])} {op} {_inside(sides[1], _PRECEDENCE[op] + 1)}"
        if op == "/":
            try:
                divisor = constant(sides[1])
            except ArithmeticError as err:
                raise self.fail(f": '{sides[1].text}' cannot be computed: {err}") from None
            if divisor == 0:
                raise self.fail(f" divides by zero ('{written}'): it can never be computed")
        return Arithmetic(op, sides[0], sides[1], text=written)

    def bare_read(self, name: str, written: str) -> tuple[Read, str]:
        metric = METRICS.get(name)
        if metric is None:
            bare_names = [m.name for m in METRICS.values() if not m.call_only]
            raise self.error(f"unknown metric '{name}'{did_you_mean(name, bare_names)}")
        if metric.call_only:
            raise self.error(f"{name}(...) takes one program name, as in {name}(take)")
        if metric.source in COMPILED_SOURCES:  # a bare one: the item's own program (never beside a call)
            self.bare.append(name)
        return Read(name, text=written), metric.type

    def called_read(self, node: ast.Call) -> tuple[Read, str]:
        fn = node.func.id  # type: ignore[attr-defined]  # the caller checked it is a Name
        metric = self.callable_metric(fn)
        dtype = self.scope(fn, node.keywords)
        if dtype is not None and not node.args:  # scatters(dtype="f32"): the item's own program, scoped
            self.bare.append(fn)
            read = Read(fn, dtype=dtype, text=f"{fn}(dtype={dtype!r})")
            return read, metric.type
        timed = metric.source == "throughput"
        arg = node.args[0] if len(node.args) == 1 else None
        distribution = config = None
        if isinstance(arg, ast.Subscript) and timed:
            distribution = self.known(ast.unparse(arg.slice), arg, "index distribution", DISTRIBUTIONS)
            arg = arg.value
        elif isinstance(arg, ast.Subscript):
            config, arg = self.configuration(fn, arg), arg.value
        program = self.program(fn, arg, timed)
        self.called(program, config, timed)
        read = Read(fn, program, distribution, dtype, config)
        written = read.label if distribution is None else f"{fn}({program}[{distribution}])"
        return dataclasses.replace(read, text=written), metric.type

    def callable_metric(self, fn: str) -> Metric:
        metric = METRICS.get(fn)
        if metric is None or metric.source == "input":
            call_names = [m.name for m in METRICS.values() if m.source != "input"]
            raise self.error(f"unknown metric '{fn}'{did_you_mean(fn, call_names)}")
        return metric

    def program(self, fn: str, arg: ast.expr | None, timed: bool) -> str:
        if not isinstance(arg, ast.Name):
            if timed:
                raise self.error(f"{fn}(...) takes one program, as in {fn}(take) or {fn}(take[zipf])")
            raise self.error(f"{fn}(...) takes one program name, as in {fn}(take)")
        name = arg.id.replace(_SPELLED, CATALOG_PREFIX, 1) if arg.id.startswith(_SPELLED) else arg.id
        name = written(name, self.programs, self.programs)
        if name not in self.programs:
            raise self.error(f"unknown program '{name}'{did_you_mean(name, self.programs)}")
        return name

    def called(self, program: str, config: str | None, timed: bool) -> None:
        """A metric called on ``program`` makes the assert a relation, or a throughput assert when timed."""
        self.named.append(program)
        if timed:
            self.kind = "throughput"
            return
        if self.kind == "absolute":
            self.kind = "relational"
        self.sides.append((program, config))

    def scope(self, fn: str, keywords: list[ast.keyword]) -> str | None:
        """The element type a call scopes its count to (``dtype="f32"``), None without one."""
        if not keywords:
            return None
        scoped = [m.name for m in METRICS.values() if m.by_dtype is not None]
        first = keywords[0]
        if len(keywords) > 1 or first.arg != "dtype":
            raise self.error(f'{fn}(...) takes dtype="..." alone as a keyword, as in scatters(dtype="f32")')
        if METRICS[fn].by_dtype is None:
            raise self.error(f"{fn}(...) takes no dtype; the counts that do: {', '.join(scoped)}")
        if not (isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)):
            raise self.error(f'{fn}(dtype=...) takes a quoted element type, as in dtype="f32"')
        dtype = first.value.value
        if not is_dtype(dtype):
            known = ("f32", "bf16", "f16", "f64", "s32", "u32", "s64", "s8", "u8", "pred")
            raise self.error(
                f"unknown dtype {dtype!r}{did_you_mean(dtype, known)}: an element type as HLO writes it"
            )
        return dtype

    def configuration(self, fn: str, node: ast.Subscript) -> str:
        """The configuration of ``program[config]``, quoted where Python cannot read it (``['f32-2d']``)."""
        key = node.slice
        name = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else ast.unparse(key)
        name = name.replace(" ", "")  # bf16-llm: Python reads a subtraction
        if name in DISTRIBUTIONS:
            raise self.error(
                f"{fn}({ast.unparse(node)}): only time() takes an index distribution; "
                "the compiled structure does not depend on it"
            )
        return self.known(name, node, "configuration", CONFIGS)

    def known(self, name: str, node: ast.Subscript, what: str, known: Collection[str]) -> str:
        if name not in known:
            raise self.error(
                f"unknown {what} {name!r} in '{ast.unparse(node)}'{non_ascii(name)}"
                f"{did_you_mean(name, known)}; known: {', '.join(known)}"
            )
        return name


def _constant(node: ast.Constant) -> tuple[Term, str] | None:
    """A number or a quoted name and its type; None for any other constant (``True``, bytes)."""
    if isinstance(node.value, bool):
        return None
    if isinstance(node.value, (int, float)):
        return Number(node.value, text=ast.unparse(node)), "number"
    if isinstance(node.value, str):
        return Quoted(node.value, text=ast.unparse(node)), "string"
    return None


def _inside(term: Term, binding: int) -> str:
    """``term``'s text as an operand of something that binds ``binding`` tightly."""
    loose = isinstance(term, Arithmetic) and _PRECEDENCE[term.op] < binding
    return f"({term.text})" if loose else term.text


def _timed_ratio(op: Comparison, left: Term, right: Term) -> TimedRatio | None:
    """The :class:`TimedRatio` of ``time(A) / time(B) <= NUMBER``, None for any other shape."""
    if op != "<=" or not isinstance(right, Number):
        return None
    if not (isinstance(left, Arithmetic) and left.op == "/"):
        return None
    sides = []
    for side in (left.left, left.right):
        if not (isinstance(side, Read) and side.name == "time" and side.program is not None):
            return None
        sides.append(TimedSide(side.program, side.distribution or "uniform"))
    return TimedRatio(sides[0], sides[1], float(right.value))


def _scaled(left: Term, right: Term) -> Scaled | None:
    """The :class:`Scaled` relation of ``metric(A) OP [c *] metric(B)``, None for any other shape."""
    factor = 1.0
    if isinstance(right, Arithmetic) and right.op == "*":
        scaled = _factor(right)
        if scaled is None:
            return None
        factor, right = scaled
    a, b = _compiled_number(left), _compiled_number(right)
    if a is None or b is None or a.name != b.name:
        return None
    return Scaled(a.name, a.side or "", b.side or "", factor)


def _factor(product: Arithmetic) -> tuple[float, Term] | None:
    """``c * term`` or ``term * c`` as ``(c, term)``; None without a number on either side."""
    for scale, term in ((product.left, product.right), (product.right, product.left)):
        if isinstance(scale, Number):
            return float(scale.value), term
    return None


def _compiled_number(side: Term) -> Read | None:
    """``side`` when it reads a compiled number of a named program, unscoped; else None."""
    if not isinstance(side, Read) or side.program is None or side.dtype is not None:
        return None
    metric = METRICS.get(side.name)
    if metric is None or metric.source not in COMPILED_SOURCES or metric.type != "number":
        return None
    return side
