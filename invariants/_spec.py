"""Spec files: what must hold on a target family, in TOML a reviewer reads without opening Python.

One file per target family (``invariants/cpu.toml``, ``tpu.toml``, ``gpu.toml``). Adding a family's
invariants touches that one file. The format::

    [spec]
    targets = ["tpu-*"]            # fnmatch patterns over target names this file applies to

    [[invariant]]
    id = "no_while"                # unique in the file; part of the pytest id
    programs = ["kind:forward"]    # names, fnmatch patterns, "kind:K" or "tag:T"; omit for relational
    configs = ["*"]                # config ids or patterns (default: every config compiled)
    targets = ["gpu-a100"]         # optional: narrows the file's targets for this invariant (patterns)
    assert = "while_loops == 0"    # one comparison; see below
    why = "a lookup is one gather; a loop is the seed's pathology"
    when = "jax >= 0.10"           # optional: comma-separated version conditions (packaging specifiers)
    ratchet = { reason = "...", issue = "https://..." }   # optional: known-bad today, expected to fail

    [[correctness]]                # runtime-target value checks: one of CORRECTNESS_CHECKS (run by _checks)
    id = "forward_values_agree"
    check = "agree"
    programs = ["kind:forward"]
    reference = "take"

    [[program]]                    # a downstream project's own program (see invariants._downstream)
    name = "my_lookup"
    function = "mylib.emb:lookup"  # module:attribute, imported from the user's path
    kind = "forward"               # forward, backward (its gradient) or train (one training step)
    configs = ["f32"]              # config ids (default: f32)

An ``assert`` is one comparison of two arithmetic sides, or a membership test. Its names come from the
metric registry (``invariants._metrics.METRICS``): structural metrics (``kernels``, ``while_loops``, ...)
of the program the item is about, or input facts (``table_bytes``, ``lookups``). Both sides of a
comparison must have the same type (a number with a number, a kernel list with a kernel list), and ``in``
takes a string on its left and a set metric on its right: a comparison that could never fail is refused.
A metric *called* on a program name is relational: ``kernels(naive) <= kernels(take)``, over each config
the named programs share on a target. ``structure(a) == structure(b)`` compares whole kernel lists.
``time(a) / time(b) <= 1.10`` belongs to the throughput tier (efficiency is not written in an assert: it
is compared with a recorded baseline). A timed program may name the distribution of its indices,
``time(grad_take[equal]) / time(grad_take[uniform]) <= 1.25`` (``uniform`` when omitted; see
``invariants._programs.DISTRIBUTIONS``): the structure does not depend on it, so only ``time`` takes one.
``'T' in custom_call_targets`` tests a custom-call target.

Every mistake is reported as one line ``FILE:LINE: what is wrong``, with the closest valid name.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

from packaging.requirements import InvalidRequirement, Requirement

from ._errors import InvariantsError, did_you_mean
from ._metrics import METRICS

SPEC_DIR = Path(__file__).parent
# The [[correctness]] checks a spec may name; invariants._checks.CORRECTNESS implements each (the spec
# stage owns the vocabulary, the checks stage reads it: data flows one way, spec -> checks).
CORRECTNESS_CHECKS = ("agree", "out_of_bounds", "narrow_index")
VERSIONED_PACKAGES = ("jax", "jaxlib", "libtpu", "equinox")

_INVARIANT_KEYS = ("id", "programs", "configs", "targets", "assert", "why", "when", "ratchet")
_CORRECTNESS_KEYS = (
    "id",
    "check",
    "programs",
    "reference",
    "configs",
    "distributions",
    "expect",
    "why",
    "when",
)
_RATCHET_KEYS = ("reason", "issue")
_PROGRAM_KEYS = ("name", "function", "kind", "configs", "tags", "doc")
PROGRAM_KINDS = ("forward", "backward", "train")
_TOP_KEYS = ("spec", "invariant", "correctness", "program")
_SPEC_KEYS = ("targets", "efficiency_max_loss")

InvariantKind = Literal["absolute", "relational", "throughput"]


@dataclasses.dataclass(frozen=True)
class Ratchet:
    reason: str
    issue: str


@dataclasses.dataclass(frozen=True)
class Invariant:
    """One parsed, validated ``[[invariant]]``. ``where`` is ``FILE:LINE`` of its table."""

    id: str
    where: str
    expr: ast.Expression
    text: str
    kind: InvariantKind
    programs: tuple[str, ...]  # selectors; for relational/throughput: the programs the assert names
    configs: tuple[str, ...]
    why: str
    when: tuple[Requirement, ...]
    ratchet: Ratchet | None
    # Patterns over target names: where in the file's targets this invariant applies (all by default), so
    # that one file states a fact on every GPU and its known-bad exception on two of them.
    targets: tuple[str, ...] = ("*",)


@dataclasses.dataclass(frozen=True)
class CorrectnessCheck:
    id: str
    where: str
    check: str
    programs: tuple[str, ...]
    reference: str | None
    configs: tuple[str, ...]
    distributions: tuple[str, ...]
    expect: str | None
    why: str
    when: tuple[Requirement, ...] = ()


@dataclasses.dataclass(frozen=True)
class ProgramDecl:
    """One parsed ``[[program]]``: what a downstream project asks the gate to compile.

    Only read here; :func:`invariants._downstream.build` imports ``function`` and checks its contract.
    ``tags`` always holds ``user``, so a selector ``tag:user`` names every declared program.
    """

    name: str
    function: str  # "module:attribute"
    kind: str
    configs: tuple[str, ...]
    tags: frozenset[str]
    doc: str
    where: str


@dataclasses.dataclass(frozen=True)
class Spec:
    path: Path
    targets: tuple[str, ...]
    invariants: tuple[Invariant, ...]
    correctness: tuple[CorrectnessCheck, ...]
    # How much efficiency (t_copy / t_program) a program may lose against its recorded baseline.
    efficiency_max_loss: float | None = None
    programs: tuple[ProgramDecl, ...] = ()
    # The package's own spec files speak of the catalog: their selectors ("kind:forward", "*") never match
    # a downstream project's programs, which only its own spec files hold to anything.
    catalog_scope: bool = False


class _Locator:
    """Maps tables and keys back to line numbers (tomllib keeps none)."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = _display(path)
        self.lines = text.splitlines()

    def table_line(self, array: str, index: int) -> int:
        pattern = re.compile(rf"^\s*\[\[\s*{re.escape(array)}\s*\]\]")
        seen = -1
        for n, line in enumerate(self.lines, 1):
            if pattern.match(line):
                seen += 1
                if seen == index:
                    return n
        return 1

    def key_line(self, start: int, key: str) -> int:
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=|[{{,]\s*{re.escape(key)}\s*=")
        for n in range(start, len(self.lines) + 1):
            line = self.lines[n - 1]
            if n > start and re.match(r"^\s*\[", line):
                break
            if pattern.search(line):
                return n
        return start

    def error(self, line: int, message: str) -> InvariantsError:
        return InvariantsError(f"{self.path}:{line}: {message}")


def _display(path: Path) -> str:
    """``path`` relative to the working directory when it is below it: what a reader can click."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _strings(value: Any, loc: _Locator, line: int, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise loc.error(line, f"'{key}' must be a string or a list of strings")


def _check_keys(
    table: dict[str, Any],
    known: Sequence[str],
    loc: _Locator,
    line: int,
    what: str,
    required: Sequence[str] = (),
) -> None:
    """One line for the first unknown key of ``table`` (with the closest known one), then for the first
    ``required`` key it lacks."""
    for key in table:
        if key not in known:
            raise loc.error(
                loc.key_line(line, key), f"unknown key '{key}' in {what}{did_you_mean(key, known)}"
            )
    for key in required:
        if key not in table:
            raise loc.error(line, f"{what} needs '{key}'")


def parse_assert(
    text: str, loc: _Locator, line: int, known: Mapping[str, Any] | None = None
) -> tuple[ast.Expression, InvariantKind, tuple[str, ...]]:
    """Parse and validate an assert; return it, its kind and the programs it names (relational).

    Every name must be in the metric registry, and the two sides of the comparison must have the same
    type (see :mod:`invariants._metrics`): ``custom_call_targets != 0`` would compare a set with a number
    and hold everywhere, so it is refused. ``known`` maps program names to programs (default: every
    program of this process).
    """
    programs_known = _known(known)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        raise loc.error(line, f"assert {text!r} is not an expression: {err.msg}") from None
    body = tree.body
    if not isinstance(body, ast.Compare) or len(body.ops) != 1:
        raise loc.error(line, f"assert {text!r} must be one comparison such as 'kernels <= 2'")
    named: list[str] = []
    bare: list[str] = []  # metrics used without a program: they mean the item's own program
    kind: InvariantKind = "absolute"
    bare_names = [m.name for m in METRICS.values() if not m.call_only]
    call_names = [m.name for m in METRICS.values() if m.source != "input"]

    def type_of(node: ast.AST) -> str:
        """The type of an operand: number, set, structure or string; raises on anything not understood."""
        nonlocal kind
        if isinstance(node, ast.Constant) and not isinstance(node.value, bool):
            if isinstance(node.value, (int, float)):
                return "number"
            if isinstance(node.value, str):
                return "string"
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            for side in (node.left, node.right):
                if (t := type_of(side)) != "number":
                    raise loc.error(line, f"assert {text!r}: arithmetic on a {t} ('{ast.unparse(side)}')")
            return "number"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            if (t := type_of(node.operand)) != "number":
                raise loc.error(line, f"assert {text!r}: arithmetic on a {t} ('{ast.unparse(node)}')")
            return "number"
        if isinstance(node, ast.Name):
            metric = METRICS.get(node.id)
            if metric is None or metric.call_only:
                if metric is not None:
                    raise loc.error(line, f"{node.id}(...) takes one program name, as in {node.id}(take)")
                raise loc.error(line, f"unknown metric '{node.id}'{did_you_mean(node.id, bare_names)}")
            if metric.source in ("structure", "compiler", "kernel"):
                bare.append(node.id)
            return metric.type
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            fn = node.func.id
            metric = METRICS.get(fn)
            if metric is None or metric.source == "input":
                raise loc.error(line, f"unknown metric '{fn}'{did_you_mean(fn, call_names)}")
            arg = node.args[0] if len(node.args) == 1 and not node.keywords else None
            if isinstance(arg, ast.Subscript) and metric.source == "throughput":
                _distribution_of(arg, loc, line)
                arg = arg.value
            elif isinstance(arg, ast.Subscript):
                raise loc.error(
                    line,
                    f"{fn}({ast.unparse(arg)}): only time() takes an index distribution; "
                    "the compiled structure does not depend on it",
                )
            if not isinstance(arg, ast.Name):
                if metric.source == "throughput":
                    example = f"as in {fn}(take) or {fn}(take[zipf])"
                    raise loc.error(line, f"{fn}(...) takes one program, {example}")
                raise loc.error(line, f"{fn}(...) takes one program name, as in {fn}(take)")
            program = arg.id
            if program not in programs_known:
                raise loc.error(line, f"unknown program '{program}'{did_you_mean(program, programs_known)}")
            named.append(program)
            if metric.source == "throughput":
                kind = "throughput"
            elif kind == "absolute":
                kind = "relational"
            return metric.type
        raise loc.error(line, f"assert {text!r}: '{ast.unparse(node)}' is not understood")

    left, right = type_of(body.left), type_of(body.comparators[0])
    op = body.ops[0]
    if isinstance(op, (ast.In, ast.NotIn)):
        if right != "set" or left != "string":
            sets = ", ".join(m.name for m in METRICS.values() if m.type == "set")
            raise loc.error(
                line, f"assert {text!r}: 'in' takes a quoted name on its left and one of {sets} on its right"
            )
    elif left != right:
        raise loc.error(line, f"assert {text!r} compares a {left} with a {right}: it could never fail")
    elif left in ("set", "string", "structure") and not isinstance(op, (ast.Eq, ast.NotEq)):
        raise loc.error(line, f"assert {text!r}: a {left} can only be compared with == or !=")
    if kind == "throughput":
        terms = throughput_terms(body)
        if terms is None:
            raise loc.error(line, f"assert {text!r}: a throughput assert reads 'time(A) / time(B) <= NUMBER'")
        if terms[0] == terms[1]:
            itself = f"times {terms[0].label} against itself: it could never fail"
            raise loc.error(line, f"assert {text!r} {itself}")
    if kind != "absolute" and bare:
        raise loc.error(
            line,
            f"assert {text!r}: mixes program calls with a bare metric '{bare[0]}' (write {bare[0]}(PROGRAM))",
        )
    return tree, kind, tuple(dict.fromkeys(named))


def _distribution_of(node: ast.Subscript, loc: _Locator, line: int) -> str:
    """The distribution named in ``program[distribution]``; one line naming the known ones otherwise."""
    from ._programs import DISTRIBUTIONS

    name = node.slice.id if isinstance(node.slice, ast.Name) else ast.unparse(node.slice)
    if name not in DISTRIBUTIONS:
        raise loc.error(
            line,
            f"unknown index distribution '{name}' in '{ast.unparse(node)}'"
            f"{did_you_mean(name, DISTRIBUTIONS)}; known: {', '.join(DISTRIBUTIONS)}",
        )
    return name


class Timed(NamedTuple):
    """One side of a throughput ratio: a program and the distribution of its indices."""

    program: str
    distribution: str = "uniform"

    @property
    def label(self) -> str:
        """``program``, or ``program[distribution]`` when it is not uniform: how results name the side."""
        return self.program if self.distribution == "uniform" else f"{self.program}[{self.distribution}]"


def throughput_terms(body: ast.expr) -> tuple[Timed, Timed, float] | None:
    """``(A, B, threshold)`` of ``time(A) / time(B) <= threshold``, or None for any other shape.

    Only this shape is measurable without absolute times: both programs are timed pair by pair, so the
    ratio is what the run measures (see invariants._timing). A side is ``time(program)`` or
    ``time(program[distribution])`` (validated by :func:`parse_assert`).
    """
    if not (isinstance(body, ast.Compare) and isinstance(body.ops[0], ast.LtE)):
        return None
    left, right = body.left, body.comparators[0]
    if not (isinstance(right, ast.Constant) and isinstance(right.value, (int, float))):
        return None
    if not (isinstance(left, ast.BinOp) and isinstance(left.op, ast.Div)):
        return None
    sides = []
    for side in (left.left, left.right):
        if not (isinstance(side, ast.Call) and isinstance(side.func, ast.Name) and side.func.id == "time"):
            return None
        arg = side.args[0]
        if (
            isinstance(arg, ast.Subscript)
            and isinstance(arg.value, ast.Name)
            and isinstance(arg.slice, ast.Name)
        ):
            sides.append(Timed(arg.value.id, arg.slice.id))
        elif isinstance(arg, ast.Name):
            sides.append(Timed(arg.id))
        else:
            return None
    return sides[0], sides[1], float(right.value)


def scaled_terms(body: ast.expr) -> tuple[str, str, str, float] | None:
    """``(metric, A, B, c)`` of a scaled relation ``metric(A) OP c * metric(B)`` (also ``metric(B) * c``, and
    ``metric(A) OP metric(B)`` with c = 1), or None for any other shape. Its ratio ``metric(A) / metric(B)``
    is what a reader wants next to the verdict: the checks report it, and a ratchet's xfail line shows it."""
    if not isinstance(body, ast.Compare) or len(body.ops) != 1:
        return None
    left, right = body.left, body.comparators[0]
    scale = 1.0
    if isinstance(right, ast.BinOp) and isinstance(right.op, ast.Mult):
        for factor, term in ((right.left, right.right), (right.right, right.left)):
            if isinstance(factor, ast.Constant) and isinstance(factor.value, (int, float)):
                scale, right = float(factor.value), term
                break
        else:
            return None
    calls = []
    for side in (left, right):
        if not (
            isinstance(side, ast.Call)
            and isinstance(side.func, ast.Name)
            and side.func.id in METRICS
            and METRICS[side.func.id].source in ("structure", "compiler", "kernel")
            and METRICS[side.func.id].type == "number"
            and len(side.args) == 1
            and isinstance(side.args[0], ast.Name)
        ):
            return None
        calls.append((side.func.id, side.args[0].id))
    if calls[0][0] != calls[1][0]:
        return None
    return calls[0][0], calls[0][1], calls[1][1], scale


def _parse_when(text: str, loc: _Locator, line: int) -> tuple[Requirement, ...]:
    reqs = []
    for clause in (c.strip() for c in text.split(",")):
        if not clause:
            continue
        try:
            req = Requirement(clause)
        except InvalidRequirement as err:
            raise loc.error(line, f"when: cannot read {clause!r}: {err}") from None
        if req.name not in VERSIONED_PACKAGES:
            raise loc.error(
                line, f"when: unknown package '{req.name}'{did_you_mean(req.name, VERSIONED_PACKAGES)}"
            )
        if not req.specifier:
            raise loc.error(line, f"when: {clause!r} has no version condition such as '>= 0.5'")
        reqs.append(req)
    return tuple(reqs)


def _read(path: Path) -> tuple[dict[str, Any], _Locator]:
    try:
        text = path.read_text()
    except OSError as err:
        raise InvariantsError(f"{_display(path)}: cannot read spec: {err.strerror}") from None
    loc = _Locator(path, text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        m = re.search(r"\(at line (\d+), column \d+\)", str(err))
        line = int(m.group(1)) if m else 1
        raise loc.error(line, f"not valid TOML: {str(err).split(' (at line')[0]}") from None
    _check_keys(data, _TOP_KEYS, loc, 1, "the spec file")
    return data, loc


def read_programs(path: Path) -> tuple[ProgramDecl, ...]:
    """The ``[[program]]`` tables of one spec file, validated as data (nothing is imported)."""
    from ._programs import CONFIGS

    data, loc = _read(path)
    out: list[ProgramDecl] = []
    for i, table in enumerate(data.get("program", [])):
        line = loc.table_line("program", i)
        _check_keys(table, _PROGRAM_KEYS, loc, line, "[[program]]", required=("name", "function", "kind"))
        name = table["name"]
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise loc.error(loc.key_line(line, "name"), f"name {name!r} must be a Python-style identifier")
        function = table["function"]
        if not isinstance(function, str) or not re.fullmatch(r"[\w.]+:[\w.]+", function):
            raise loc.error(
                loc.key_line(line, "function"), f"function {function!r} must read 'module:attribute'"
            )
        kind = table["kind"]
        if kind not in PROGRAM_KINDS:
            raise loc.error(
                loc.key_line(line, "kind"),
                f"kind {kind!r}: one of {', '.join(PROGRAM_KINDS)}{did_you_mean(str(kind), PROGRAM_KINDS)}",
            )
        configs = _strings(table.get("configs", "f32"), loc, loc.key_line(line, "configs"), "configs")
        for config in configs:
            if config not in CONFIGS:
                raise loc.error(
                    loc.key_line(line, "configs"),
                    f"unknown config '{config}'{did_you_mean(config, CONFIGS)}; known: {', '.join(CONFIGS)}",
                )
        tags = _strings(table.get("tags", []), loc, loc.key_line(line, "tags"), "tags")
        doc = table.get("doc", function)
        if not isinstance(doc, str):
            raise loc.error(loc.key_line(line, "doc"), "'doc' must be a string")
        out.append(
            ProgramDecl(
                name, function, kind, tuple(dict.fromkeys(configs)), frozenset({*tags, "user"}), doc,
                f"{loc.path}:{line}",
            )
        )  # fmt: skip
    return tuple(out)


def load_spec(path: Path, known: Mapping[str, Any] | None = None) -> Spec:
    """Read and validate one spec file. Raises :class:`InvariantsError` naming ``FILE:LINE``.

    Program names in it are checked against ``known`` (name -> an object with ``kind`` and ``tags``;
    default: every program of this process); :func:`load_specs` adds the declared programs.
    """
    data, loc = _read(path)
    header = data.get("spec", {})
    _check_keys(header, _SPEC_KEYS, loc, 1, "[spec]")
    max_loss = header.get("efficiency_max_loss")
    if max_loss is not None and not (isinstance(max_loss, float) and 0 < max_loss < 1):
        raise loc.error(
            loc.key_line(1, "efficiency_max_loss"), "efficiency_max_loss must be a fraction in (0, 1)"
        )
    if "targets" not in header and ("invariant" in data or "correctness" in data):
        raise loc.error(1, "missing [spec] targets = [...] (the target names this file applies to)")
    targets = _strings(header.get("targets", []), loc, loc.key_line(1, "targets"), "targets")

    invariants: list[Invariant] = []
    seen: dict[str, int] = {}
    for i, table in enumerate(data.get("invariant", [])):
        line = loc.table_line("invariant", i)
        _check_keys(table, _INVARIANT_KEYS, loc, line, "[[invariant]]", required=("id", "assert"))
        inv_id = table["id"]
        if not isinstance(inv_id, str) or not re.fullmatch(r"[A-Za-z0-9_]+", inv_id):
            raise loc.error(loc.key_line(line, "id"), f"id {inv_id!r} must be letters, digits and '_'")
        if inv_id in seen:
            raise loc.error(line, f"duplicate id '{inv_id}' (first at line {seen[inv_id]})")
        seen[inv_id] = line
        assert_line = loc.key_line(line, "assert")
        if not isinstance(table["assert"], str):
            raise loc.error(assert_line, "'assert' must be a string")
        expr, kind, named = parse_assert(table["assert"], loc, assert_line, known)
        if kind == "absolute":
            if "programs" not in table:
                raise loc.error(line, f"'{inv_id}' needs 'programs' (which programs the assert is about)")
            programs = _strings(table["programs"], loc, loc.key_line(line, "programs"), "programs")
            _check_selectors(programs, loc, loc.key_line(line, "programs"), known)
        else:
            if "programs" in table:
                raise loc.error(
                    loc.key_line(line, "programs"),
                    f"'{inv_id}' names its programs in the assert; drop 'programs'",
                )
            programs = named
        configs = _strings(table.get("configs", "*"), loc, loc.key_line(line, "configs"), "configs")
        inv_targets = _strings(table.get("targets", "*"), loc, loc.key_line(line, "targets"), "targets")
        for pattern in inv_targets:
            if not any(fnmatch.fnmatchcase(pattern, p) or fnmatch.fnmatchcase(p, pattern) for p in targets):
                raise loc.error(
                    loc.key_line(line, "targets"),
                    f"'{inv_id}': targets {pattern!r} lies outside this file's targets "
                    f"({', '.join(targets)}): it would never apply",
                )
        when = _parse_when(table["when"], loc, loc.key_line(line, "when")) if "when" in table else ()
        ratchet = None
        if "ratchet" in table:
            r_line = loc.key_line(line, "ratchet")
            raw = table["ratchet"]
            if not isinstance(raw, dict):
                raise loc.error(r_line, "ratchet must be a table { reason = ..., issue = ... }")
            _check_keys(raw, _RATCHET_KEYS, loc, r_line, "ratchet")
            if not raw.get("reason") or not raw.get("issue"):
                raise loc.error(r_line, "a ratchet needs both a 'reason' and an 'issue' link")
            ratchet = Ratchet(str(raw["reason"]), str(raw["issue"]))
        invariants.append(
            Invariant(
                id=inv_id,
                where=f"{loc.path}:{line}",
                expr=expr,
                text=table["assert"],
                kind=kind,
                programs=programs,
                configs=configs,
                why=str(table.get("why", "")),
                when=when,
                ratchet=ratchet,
                targets=inv_targets,
            )
        )

    checks: list[CorrectnessCheck] = []
    for i, table in enumerate(data.get("correctness", [])):
        line = loc.table_line("correctness", i)
        required = ("id", "check", "programs")
        _check_keys(table, _CORRECTNESS_KEYS, loc, line, "[[correctness]]", required=required)
        if table["check"] not in CORRECTNESS_CHECKS:
            raise loc.error(
                loc.key_line(line, "check"),
                f"unknown check '{table['check']}'{did_you_mean(table['check'], CORRECTNESS_CHECKS)}",
            )
        programs = _strings(table["programs"], loc, loc.key_line(line, "programs"), "programs")
        _check_selectors(programs, loc, loc.key_line(line, "programs"), known)
        checks.append(
            CorrectnessCheck(
                id=table["id"],
                where=f"{loc.path}:{line}",
                check=table["check"],
                programs=programs,
                reference=table.get("reference"),
                configs=_strings(table.get("configs", "f32"), loc, line, "configs"),
                distributions=_strings(table.get("distributions", "uniform"), loc, line, "distributions"),
                expect=table.get("expect"),
                why=str(table.get("why", "")),
                when=_parse_when(table["when"], loc, loc.key_line(line, "when")) if "when" in table else (),
            )
        )
    return Spec(path, targets, tuple(invariants), tuple(checks), max_loss, read_programs(path))


def scope_of(spec: Spec) -> Mapping[str, Any] | None:
    """The programs ``spec``'s selectors range over (None: every program of this process)."""
    if not spec.catalog_scope:
        return None
    from ._programs import CATALOG

    return CATALOG


def _known(known: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if known is not None:
        return known
    from ._registry import PROGRAMS

    return PROGRAMS


def _check_selectors(
    selectors: Sequence[str], loc: _Locator, line: int, known: Mapping[str, Any] | None = None
) -> None:
    for sel in selectors:
        if not select_programs([sel], known):
            names = _known(known)
            raise loc.error(line, f"program selector '{sel}' matches no program{did_you_mean(sel, names)}")


def select_programs(selectors: Sequence[str], known: Mapping[str, Any] | None = None) -> list[str]:
    """Program names matched by selectors: exact names, fnmatch patterns, ``kind:K``, ``tag:T``.

    ``known`` as in :func:`load_spec` (default: every program of this process, catalog first)."""
    import fnmatch

    out: dict[str, None] = {}
    for sel in selectors:
        for name, program in _known(known).items():
            if sel.startswith("kind:"):
                hit = program.kind == sel[5:]
            elif sel.startswith("tag:"):
                hit = sel[4:] in program.tags
            else:
                hit = fnmatch.fnmatchcase(name, sel)
            if hit:
                out[name] = None
    return list(out)


def load_specs(*directories: Path) -> list[Spec]:
    """Every ``*.toml`` of each directory (default: the package's own); a folder without any is an error,
    not an empty gate.

    The ``[[program]]`` tables of all files are read first, so that an invariant of one file may name a
    program declared in another. A declared name must be new: not the catalog's, not declared twice.
    """
    from ._programs import CATALOG

    paths: list[Path] = []
    for directory in directories or (SPEC_DIR,):
        if not directory.is_dir():
            raise InvariantsError(f"{_display(directory)}: spec folder not found")
        found = sorted(directory.glob("*.toml"))
        if not found:
            raise InvariantsError(f"{_display(directory)}: no *.toml spec files here")
        paths += found
    known: dict[str, Any] = dict(_known(None))
    first: dict[str, str] = {}
    for path in paths:
        for decl in read_programs(path):
            if decl.name in CATALOG:
                raise InvariantsError(
                    f"{decl.where}: program '{decl.name}' collides with the catalog's program of that name; "
                    "rename it"
                )
            if decl.name in first:
                raise InvariantsError(
                    f"{decl.where}: program '{decl.name}' is already declared at {first[decl.name]}"
                )
            first[decl.name] = decl.where
            known[decl.name] = decl
    own = SPEC_DIR.resolve()
    return [
        dataclasses.replace(load_spec(p, CATALOG), catalog_scope=True)
        if p.parent.resolve() == own
        else load_spec(p, known)
        for p in paths
    ]
