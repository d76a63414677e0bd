"""Structural metrics of an optimized HLO module: kernels, fusions, loops, gathers, collectives.

* **kernel**: an operation launched by the entry computation or by control flow from it; a ``fusion`` is
  one. ``while``, ``call`` and ``conditional`` are not: the kernels they run are (every branch). Of an
  async pair only the ``-start`` launches; partition-id and replica-id read a register (``FREE_OPCODES``).
* **trip count** of a while loop: ``known_trip_count`` in its backend_config, else the canonical counted
  form: the condition's root (or the root it fuses) compares tuple element k with a constant N (``<``,
  ``>``; ``<=``/``>=`` give N+1), the init's element k is a constant I, the body adds 1 to it: ``max(N -
  I, 0)``. Anything else is None: unknown, never guessed.
* **dynamic kernel launches**: ``trip x body + (trip + 1) x condition`` (the condition runs once more),
  nested loops multiplied, a ``conditional`` by its largest branch; None when a trip count is unknown.
* **contiguous window** of a gather or scatter: minor-to-major in the operand's layout, the window covers
  whole dimensions, then at most one partially, then only 1-wide ones. **Strided**: not contiguous, each
  index's slice has gaps (a vmapped segment sum that XLA:CPU scatters along its result's major dimension).
  The window is a gather's ``slice_sizes``, or a scatter's update window matched in order with the operand
  dimensions not inserted or batched; tiling and memory space aside. An operand of rank 2 or more without a
  layout is an error, not XLA's default: the layout assignment chose is the very fact asked (the TPU
  compiler lays a segment sum's scatter out ``{0,1}``).
* **transposes**: ``transpose`` instructions anywhere (XLA:CPU's relabelling ``transpose`` beside the
  ``copy`` that moves the data counts; a layout-changing ``copy`` alone, or a transposition folded into
  dimension numbers, does not).

Text not understood raises :class:`InvariantsError` as ``SOURCE:LINE: instruction: what``.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from invariants._errors import InvariantsError
from invariants.hlo.parse import (
    INT64_MAX,
    MAIN_THREAD,
    Alias,
    Computation,
    HloModule,
    Instruction,
    Shape,
    words,
)

FREE_OPCODES = frozenset(
    words(
        "parameter constant tuple get-tuple-element bitcast after-all add-dependency opt-barrier domain "
        "partition-id replica-id copy-done async-done async-update call-done all-gather-done all-reduce-done "
        "collective-permute-done send-done recv-done slice-done"
    )
)
_COLLECTIVES = frozenset(
    words(
        "all-gather all-reduce reduce-scatter all-to-all ragged-all-to-all collective-permute "
        "collective-broadcast all-gather-start all-reduce-start collective-permute-start"
    )
)
# Dimension-number attributes, in the order they are reported.
_GATHER_DIMS = words(
    "offset_dims collapsed_slice_dims start_index_map operand_batching_dims start_indices_batching_dims "
    "index_vector_dim slice_sizes indices_are_sorted"
)
_SCATTER_DIMS = words(
    "update_window_dims inserted_window_dims scatter_dims_to_operand_dims input_batching_dims "
    "scatter_indices_batching_dims index_vector_dim indices_are_sorted unique_indices"
)


@dataclass(frozen=True)
class Kernel:
    """One entry of a kernel list, named by what it does (a fusion by the opcodes fused into it), never by
    its instruction name; a ``while`` holds its body and condition kernels, a ``conditional`` its branches."""

    opcode: str
    shape: str
    fusion_kind: str | None = None
    inner_opcodes: tuple[tuple[str, int], ...] = ()
    custom_call_target: str | None = None
    trip_count: int | None = None
    body: tuple[Kernel, ...] = ()
    condition: tuple[Kernel, ...] = ()
    branches: tuple[tuple[Kernel, ...], ...] = ()
    # libtpu's cost estimate of one launch and the instruction's name (what its code is found by) stay out
    # of equality: the one moves with every libtpu release, the other when a pass renumbers instructions.
    estimated_cycles: int | None = field(default=None, compare=False)
    name: str = field(default="", compare=False)
    # The called computation a kernel was inlined from, when it is that computation's only kernel: where
    # XLA:CPU emits one function per computation (jax 0.4.30 wraps a large fusion in a call to a
    # ``parallel_fusion``), that function is the kernel's code.
    caller: str = field(default="", compare=False)
    # A move between execution threads (the TensorCore's ``main``, a ``sparsecore``) is a change.
    thread: str = MAIN_THREAD


@dataclass(frozen=True)
class WhileLoop:
    """A while loop: ``body_kernels`` of one iteration (condition included, nested loops once) and the
    ``body_opcodes`` of its body, fused ones included."""

    name: str
    trip_count: int | None
    body_kernels: int
    body_opcodes: tuple[tuple[str, int], ...]
    thread: str = MAIN_THREAD


@dataclass(frozen=True)
class Collective:
    """A collective, async ones as ``X-start``; ``bytes`` of its result (of a tuple's output, element 1)."""

    opcode: str
    shape: str
    bytes: int
    replica_groups: str | None


@dataclass(frozen=True)
class IndexedOp:
    """A gather or scatter: result shape, ``k=v, ...`` dimension numbers, whether its window is strided (in
    any operand), its thread, and the bytes it moves (a gather's result, a scatter's updates)."""

    opcode: str
    shape: str
    dimension_numbers: str
    strided: bool
    thread: str = MAIN_THREAD
    bytes: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Structure:
    """Structural metrics of one module. ``entry_fusions``: fusions the entry launches itself; the opcode,
    gather, scatter, transpose, collective and convert counts span all computations, fused ones included.
    ``aliases``: outputs reusing a donated parameter's buffer; losing one doubles a train step's memory."""

    entry_fusions: int
    fusion_kinds: dict[str, int] = field(hash=False)
    kernels: int
    kernel_list: tuple[Kernel, ...]
    while_loops: tuple[WhileLoop, ...]
    dynamic_kernel_launches: int | None
    opcodes: dict[str, int] = field(hash=False)
    gathers: int
    scatters: int
    dynamic_slices: int
    dynamic_update_slices: int
    strided_gathers: int
    strided_scatters: int
    transposes: int
    custom_call_targets: tuple[str, ...]
    collectives: tuple[Collective, ...]
    gather_shapes: tuple[IndexedOp, ...]
    scatter_shapes: tuple[IndexedOp, ...]
    root_shape: str
    converts: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    thread_kernels: dict[str, int] = field(default_factory=dict, hash=False)


# What libtpu writes as the estimate of a kernel it cannot cost (a SparseCore kernel): the largest int64.
_NO_ESTIMATE = INT64_MAX


def _estimated_cycles(instr: Instruction, source: str) -> int | None:
    """``estimated_cycles`` of a TPU kernel's backend_config, at its top level or one object down. Two
    values, or one not an integer, raise: a number not understood must never become a silent zero."""
    config = instr.backend_config_json
    if config is None:
        return None
    objects = [config, *(v for v in config.values() if isinstance(v, dict))]
    found = [o["estimated_cycles"] for o in objects if "estimated_cycles" in o]
    if not found:
        return None
    values = _int_set(found)
    if values == {_NO_ESTIMATE}:
        return None
    if len(values) != 1 or not 0 <= min(values) <= INT64_MAX:
        raise InvariantsError(
            f"{source}:{instr.line}: {instr.name}: estimated_cycles not understood: "
            + ", ".join(map(str, found))
        )
    return values.pop()


def _int_set(values: Iterable[str | int | float]) -> set[int]:
    """``values`` as integers, empty when one is not an integer (an infinite float included)."""
    try:
        return {int(v) for v in values}
    except (TypeError, ValueError, OverflowError):
        return set()


def _sorted_counts(counter: Counter[str]) -> tuple[tuple[str, int], ...]:
    return tuple(sorted(counter.items()))


class _Analyzer:
    def __init__(self, module: HloModule) -> None:
        self.module = module
        self.comps = module.computations

    def fusion_opcodes(self, fusion: Instruction) -> Counter[str]:
        """The opcodes fused into ``fusion``, nested fusions followed (their wrappers and parameters not)."""
        fused = fused_instructions(self.module, fusion)
        return Counter(i.opcode for _, i in fused if i.opcode not in ("fusion", "parameter"))

    def offloaded(self, instr: Instruction) -> bool:
        """Whether ``instr`` hands its computations to run elsewhere (libtpu's ``call-start`` to the
        SparseCore, an ``async-start`` of another thread): their kernels count, on their own thread."""
        if instr.opcode == "call-start":
            return True
        return instr.opcode == "async-start" and any(
            self.comps[c].execution_thread != MAIN_THREAD for c in instr.called
        )

    def loop_parts(self, loop: Instruction) -> tuple[Computation, Computation]:
        return self.comps[loop.attrs["condition"].lstrip("%")], self.comps[loop.attrs["body"].lstrip("%")]

    def kernels_of(self, comp: Computation) -> tuple[Kernel, ...]:
        out: list[Kernel] = []
        for instr in comp:
            if instr.opcode in FREE_OPCODES:
                continue
            if instr.opcode == "call" or self.offloaded(instr):
                for callee in instr.called:
                    inner = self.kernels_of(self.comps[callee])
                    if instr.opcode == "call" and len(inner) == 1:
                        inner = (dataclasses.replace(inner[0], caller=callee),)
                    out.extend(inner)
            else:
                out.append(self.kernel(comp, instr))
        return tuple(out)

    def kernel(self, comp: Computation, instr: Instruction) -> Kernel:
        op, shape, thread = instr.opcode, str(instr.shape), comp.execution_thread
        if op == "while":
            cond, body = self.loop_parts(instr)
            trips, inner = self.trip_count(comp, instr), self.kernels_of(body)
            return Kernel(
                op, shape, trip_count=trips, body=inner, condition=self.kernels_of(cond), thread=thread
            )
        if op == "conditional":
            branches = tuple(self.kernels_of(self.comps[c]) for c in instr.called)
            return Kernel(op, shape, branches=branches, thread=thread)
        fusion = op == "fusion"
        return Kernel(
            op,
            shape,
            fusion_kind=instr.fusion_kind,
            inner_opcodes=_sorted_counts(self.fusion_opcodes(instr)) if fusion else (),
            custom_call_target=None if fusion else instr.custom_call_target,
            estimated_cycles=_estimated_cycles(instr, self.module.source),
            name=instr.name,
            thread=thread,
        )

    def while_loop(self, comp: Computation, loop: Instruction) -> WhileLoop:
        cond, body = self.loop_parts(loop)
        body_ops = Counter(i.opcode for i in body if i.opcode != "parameter")
        for i in body:
            if i.opcode == "fusion":
                body_ops.update(self.fusion_opcodes(i))
        return WhileLoop(
            loop.name,
            self.trip_count(comp, loop),
            _static_count(self.kernels_of(body)) + _static_count(self.kernels_of(cond)),
            _sorted_counts(body_ops),
            comp.execution_thread,
        )

    def trip_count(self, comp: Computation, loop: Instruction) -> int | None:
        """The loop's trip count (module docstring); one that cannot be, negative or past an int64, is
        refused in one line: a negative count would make every cost below it negative, so every bound met."""
        config = loop.backend_config_json
        known = None if config is None else config.get("known_trip_count")
        if isinstance(known, dict) and "n" in known:
            n = known["n"]
            if isinstance(n, str) and not n.strip().lstrip("+-").isdecimal():
                return None  # not a number: unknown, as a loop without the field
            return self._checked_trips(loop, "known_trip_count", n)
        cond, body = self.loop_parts(loop)
        bound = self._loop_bound(cond)
        if bound is None or not loop.operands:
            return None
        index, limit = bound
        init = self._tuple_element(comp, comp[loop.operands[0]], index)
        start = _int_constant(init)
        if start is None or not self._increments_by_one(body, index):
            return None
        return self._checked_trips(loop, "trip count (bound minus start)", max(limit - start, 0))

    def _checked_trips(self, loop: Instruction, what: str, value: object) -> int:
        trips = value if isinstance(value, int) and not isinstance(value, bool) else None
        if isinstance(value, str):
            trips = int(value)  # at most 20 digits: the parser refuses longer numbers
        elif isinstance(value, float) and value.is_integer():
            trips = int(value)
        if trips is None or not 0 <= trips <= INT64_MAX:
            raise InvariantsError(
                f"{self.module.source}:{loop.line}: {loop.name}: {what} {value} is not a trip count "
                "(a whole number from 0 to 2^63-1)"
            )
        return trips

    def _loop_bound(self, cond: Computation) -> tuple[int, int] | None:
        """(tuple index of the counter, exclusive upper bound) when the condition is ``counter < N``."""
        scope = self._compared(cond)
        compare = scope.root
        direction = compare.attrs.get("direction")
        if compare.opcode != "compare" or len(compare.operands) != 2 or direction not in _BOUNDS:
            return None
        lhs, rhs = (self._outer(cond, scope, cond.root, scope[o]) for o in compare.operands)
        counter_left, inclusive = _BOUNDS[direction]
        counter, limit = (lhs, rhs) if counter_left else (rhs, lhs)
        n = _int_constant(_through_copies(*limit))
        index = None if n is None else _counter_index(*counter)
        if n is None or index is None:
            return None
        return index, n + 1 if inclusive else n

    def _compared(self, cond: Computation) -> Computation:
        """Where a loop condition's compare lies: the condition, or the one computation its root fuses."""
        root = cond.root
        return self.comps[root.called[0]] if root.opcode == "fusion" and len(root.called) == 1 else cond

    def _outer(
        self, cond: Computation, scope: Computation, fusion: Instruction, instr: Instruction
    ) -> tuple[Computation, Instruction]:
        # A parameter of the fused compare stands for the fusion's operand in the condition computation.
        if scope is not cond and instr.opcode == "parameter" and instr.literal is not None:
            index = int(instr.literal)
            if index < len(fusion.operands):
                return cond, cond[fusion.operands[index]]
        return scope, instr

    def _tuple_element(self, comp: Computation, instr: Instruction, index: int) -> Instruction | None:
        instr = _through_copies(comp, instr)
        if instr.opcode != "tuple" or index >= len(instr.operands):
            return None
        return _through_copies(comp, comp[instr.operands[index]])

    def _increments_by_one(self, body: Computation, index: int) -> bool:
        new = self._tuple_element(body, body.root, index)
        if new is None or new.opcode != "add" or len(new.operands) != 2:
            return False
        a, b = (_through_copies(body, body[o]) for o in new.operands)
        return any(
            _int_constant(step) == 1 and _counter_index(body, counter) == index
            for counter, step in ((a, b), (b, a))
        )


# A loop condition's compare direction -> (whether the counter is its left operand, whether N is included).
_BOUNDS = {"LT": (True, False), "LE": (True, True), "GT": (False, False), "GE": (False, True)}


def _counter_index(comp: Computation, instr: Instruction) -> int | None:
    """The tuple index ``instr`` reads from the loop's parameter, through copies; None for anything else."""
    gte = _through_copies(comp, instr)
    index = gte.attrs.get("index")
    if gte.opcode != "get-tuple-element" or not gte.operands or index is None or not index.isdecimal():
        return None
    return int(index) if comp[gte.operands[0]].opcode == "parameter" else None


def _through_copies(comp: Computation, instr: Instruction) -> Instruction:
    while instr.opcode in ("copy", "bitcast", "reshape") and len(instr.operands) == 1:
        instr = comp[instr.operands[0]]
    return instr


def _int_constant(instr: Instruction | None) -> int | None:
    if instr is None or instr.opcode != "constant" or instr.shape.dims or instr.literal is None:
        return None
    try:
        return int(instr.literal)
    except ValueError:
        return None


def fused_instructions(module: HloModule, fusion: Instruction) -> Iterator[tuple[Computation, Instruction]]:
    """Every instruction inside a fusion with its computation, nested fusions followed."""
    for name in fusion.called:
        comp = module.computations[name]
        for inner in comp:
            yield comp, inner
            if inner.opcode == "fusion":
                yield from fused_instructions(module, inner)


def walk_kernels(kernels: Iterable[Kernel]) -> Iterator[Kernel]:
    """Every kernel of a kernel list, loop conditions and bodies and conditional branches included."""
    for k in kernels:
        yield k
        yield from walk_kernels(k.condition)
        yield from walk_kernels(k.body)
        for branch in k.branches:
            yield from walk_kernels(branch)


def _launched(kernels: Iterable[Kernel]) -> Iterator[Kernel]:
    return (k for k in walk_kernels(kernels) if k.opcode not in ("while", "conditional"))


def _static_count(kernels: Iterable[Kernel]) -> int:
    return sum(1 for _ in _launched(kernels))


def expanded_sum(
    kernels: Iterable[Kernel], value: Callable[[Kernel], tuple[int, int]]
) -> tuple[int, int] | None:
    """The sum of ``value`` over every launch, loops expanded as dynamic kernel launches are (a
    ``conditional`` by its largest branch); None when a trip count is unknown."""
    total = (0, 0)
    for k in kernels:
        add = _expanded(k, value)
        if add is None:
            return None
        total = (total[0] + add[0], total[1] + add[1])
    return total


def _expanded(k: Kernel, value: Callable[[Kernel], tuple[int, int]]) -> tuple[int, int] | None:
    if k.opcode == "while":
        body, cond = expanded_sum(k.body, value), expanded_sum(k.condition, value)
        if k.trip_count is None or body is None or cond is None:
            return None
        trips = k.trip_count
        return trips * body[0] + (trips + 1) * cond[0], trips * body[1] + (trips + 1) * cond[1]
    if k.opcode == "conditional":
        branches = [expanded_sum(b, value) for b in k.branches]
        known = [b for b in branches if b is not None]
        return max(known, default=(0, 0)) if len(known) == len(branches) else None
    return value(k)


def _collective_of(instr: Instruction, module: HloModule) -> Collective | None:
    opcode = instr.opcode
    if opcode == "async-start":
        wrapped = [i for c in instr.called for i in module.computations[c] if i.opcode in _COLLECTIVES]
        if not wrapped:
            return None
        opcode = wrapped[0].opcode if wrapped[0].opcode.endswith("-start") else wrapped[0].opcode + "-start"
        groups = wrapped[0].attrs.get("replica_groups")
    elif opcode in _COLLECTIVES:
        groups = instr.attrs.get("replica_groups")
    else:
        return None
    shape = instr.shape
    if shape.is_tuple and len(shape.tuple_shapes) > 1:
        shape = shape.tuple_shapes[1]
    return Collective(opcode, str(shape), shape.byte_size(), groups)


def contiguous_window(
    dims: tuple[int, ...], window: tuple[int, ...], minor_to_major: tuple[int, ...]
) -> bool:
    """Whether ``window`` in an array of ``dims`` laid out ``minor_to_major`` is contiguous (module
    docstring); a dimension of size 1 needs no case: its 1-wide window covers it whole."""
    if 0 in window:
        return True
    partial = False
    for d in minor_to_major:
        if partial:
            if window[d] > 1:
                return False
        elif window[d] < dims[d]:
            partial = True
    return True


_INT_LIST = re.compile(r"\{\s*(?:\d+\s*(?:,\s*\d+\s*)*)?\}")


class _Unreadable(Exception):
    """What a gather or scatter did not let us read; the caller adds the source, line and instruction."""


def _int_list(instr: Instruction, key: str, required: bool = True) -> tuple[int, ...]:
    """``{1,2}`` or ``{}`` as integers; an optional key (XLA prints batching dimensions only when there
    are some) is empty when missing."""
    raw = instr.attrs.get(key)
    if raw is None:
        if required:
            raise _Unreadable(f"{key} missing")
        return ()
    if not _INT_LIST.fullmatch(raw):
        raise _Unreadable(f"{key} not understood: {raw}")
    return tuple(int(p) for p in re.findall(r"\d+", raw))


def _minor_to_major(shape: Shape, what: str) -> tuple[int, ...]:
    if shape.is_tuple:
        raise _Unreadable(f"{what} {shape} is a tuple")
    rank = len(shape.dims)
    if shape.layout is None:
        if rank <= 1:
            return tuple(range(rank))
        raise _Unreadable(f"{what} {shape} has no layout (text printed before layout assignment?)")
    order = shape.layout.split(":", 1)[0].strip()
    try:
        m2m = tuple(int(p) for p in order.split(",")) if order else ()
    except ValueError:
        m2m = ()
    if sorted(m2m) != list(range(rank)):
        raise _Unreadable(f"{what} {shape}: layout not understood")
    return m2m


def _window_strided(comp: Computation, operand_name: str, window: tuple[int, ...]) -> bool:
    shape = comp[operand_name].shape
    m2m = _minor_to_major(shape, f"operand {operand_name}")
    if len(window) != len(shape.dims) or any(w > d for w, d in zip(window, shape.dims, strict=True)):
        raise _Unreadable(f"window {list(window)} does not fit operand {operand_name} {shape}")
    return not contiguous_window(shape.dims, window, m2m)


def _gather_strided(comp: Computation, instr: Instruction) -> bool:
    if len(instr.operands) != 2:
        raise _Unreadable(f"expected 2 operands, found {len(instr.operands)}")
    sizes = _int_list(instr, "slice_sizes")
    # Collapsed and batching dimensions are 1 wide by XLA's rules; otherwise the text is not what we think.
    ones = _int_list(instr, "collapsed_slice_dims") + _int_list(instr, "operand_batching_dims", False)
    if any(d >= len(sizes) or sizes[d] != 1 for d in ones):
        raise _Unreadable(f"slice_sizes={instr.attrs['slice_sizes']} against collapsed and batching dims")
    return _window_strided(comp, instr.operands[0], sizes)


def _scatter_strided(comp: Computation, instr: Instruction) -> bool:
    # scatter(operand_1..n, indices, updates_1..n): several operands share one window.
    count, odd = divmod(len(instr.operands) - 1, 2)
    if count < 1 or odd:
        raise _Unreadable(f"expected operands, indices and as many updates, found {len(instr.operands)}")
    update_dims = _int_list(instr, "update_window_dims")
    skipped = set(_int_list(instr, "inserted_window_dims") + _int_list(instr, "input_batching_dims", False))
    strided = False
    for operand, updates in zip(instr.operands[:count], instr.operands[count + 1 :], strict=True):
        rank, upd = len(comp[operand].shape.dims), comp[updates].shape.dims
        window_dims = [d for d in range(rank) if d not in skipped]
        if len(window_dims) != len(update_dims) or any(k >= len(upd) for k in update_dims):
            raise _Unreadable(
                f"update_window_dims={instr.attrs['update_window_dims']} against operand rank {rank} and "
                f"updates {comp[updates].shape}"
            )
        window = [1] * rank
        for d, k in zip(window_dims, update_dims, strict=True):
            window[d] = upd[k]
        strided |= _window_strided(comp, operand, tuple(window))
    return strided


def _indexed_op(comp: Computation, instr: Instruction, source: str) -> IndexedOp:
    gather = instr.opcode == "gather"
    try:
        strided = _gather_strided(comp, instr) if gather else _scatter_strided(comp, instr)
    except _Unreadable as err:
        raise InvariantsError(f"{source}:{instr.line}: {instr.name}: {err}") from None
    keys = _GATHER_DIMS if gather else _SCATTER_DIMS
    updates = instr.operands[len(instr.operands) // 2 + 1 :]
    return IndexedOp(
        instr.opcode,
        str(instr.shape),
        ", ".join(f"{k}={instr.attrs[k]}" for k in keys if k in instr.attrs),
        strided,
        comp.execution_thread,
        instr.shape.byte_size() if gather else sum(comp[u].shape.byte_size() for u in updates),
    )


@dataclass
class _Found:
    """What one walk over every instruction of a module collects."""

    opcodes: Counter[str] = field(default_factory=Counter)
    loops: list[WhileLoop] = field(default_factory=list)
    collectives: list[Collective] = field(default_factory=list)
    gathers: list[IndexedOp] = field(default_factory=list)
    scatters: list[IndexedOp] = field(default_factory=list)
    converts: list[str] = field(default_factory=list)
    targets: set[str] = field(default_factory=set)

    def add(self, an: _Analyzer, comp: Computation, instr: Instruction) -> None:
        op = instr.opcode
        self.opcodes[op] += 1
        if op == "while":
            self.loops.append(an.while_loop(comp, instr))
        elif op == "gather":
            self.gathers.append(_indexed_op(comp, instr, an.module.source))
        elif op == "scatter":
            self.scatters.append(_indexed_op(comp, instr, an.module.source))
        elif op == "convert" and instr.operands:
            self.converts.append(f"{comp[instr.operands[0]].shape.dtype}->{instr.shape.dtype}")
        elif op == "custom-call" and instr.custom_call_target is not None:
            self.targets.add(instr.custom_call_target)


def _walk(an: _Analyzer) -> _Found:
    found = _Found()
    computations = an.module.computations.values()
    # Computations wrapped by async-start are reported through the async-start, not a second time.
    wrapped = {c for comp in computations for i in comp if i.opcode == "async-start" for c in i.called}
    for comp in computations:
        for instr in comp:
            found.add(an, comp, instr)
            collective = None if comp.name in wrapped else _collective_of(instr, an.module)
            if collective is not None:
                found.collectives.append(collective)
    return found


def _alias_line(a: Alias) -> str:
    index = f" {a.parameter_index}" if a.parameter_index != "{}" else ""
    kind = f" ({a.kind})" if a.kind != "may-alias" else ""
    return f"output {a.output} <- parameter {a.parameter}{index}{kind}"


def structure_of(module: HloModule) -> Structure:
    """Compute the structural metrics of ``module`` (definitions in the module docstring)."""
    an = _Analyzer(module)
    kernel_list = an.kernels_of(module.entry)
    # Call bodies are inlined in the kernel list already; loop bodies and branches are no entry fusions.
    fusion_kinds = Counter(
        k.fusion_kind or "?" for k in kernel_list if k.opcode == "fusion" and k.thread == MAIN_THREAD
    )
    launches = expanded_sum(kernel_list, _one_launch)
    found = _walk(an)
    opcodes, gathers, scatters = found.opcodes, found.gathers, found.scatters
    return Structure(
        entry_fusions=sum(fusion_kinds.values()),
        fusion_kinds=dict(sorted(fusion_kinds.items())),
        kernels=_static_count(kernel_list),
        kernel_list=kernel_list,
        while_loops=tuple(found.loops),
        dynamic_kernel_launches=None if launches is None else launches[0],
        opcodes=dict(sorted(opcodes.items())),
        gathers=opcodes["gather"],
        scatters=opcodes["scatter"],
        dynamic_slices=opcodes["dynamic-slice"],
        dynamic_update_slices=opcodes["dynamic-update-slice"],
        aliases=tuple(_alias_line(a) for a in module.aliases),
        strided_gathers=sum(g.strided for g in gathers),
        strided_scatters=sum(g.strided for g in scatters),
        transposes=opcodes["transpose"],
        custom_call_targets=tuple(sorted(found.targets)),
        collectives=tuple(found.collectives),
        gather_shapes=tuple(gathers),
        scatter_shapes=tuple(scatters),
        root_shape=str(module.entry.root.shape),
        converts=tuple(sorted(found.converts)),
        thread_kernels=_thread_counts(kernel_list),
    )


# An element type before a shape's dimensions, and the tiling (and memory space) after a layout's
# minor-to-major order: what a configuration of another element type changes and nothing else does.
_ELEMENT_TYPE = re.compile(r"\b(?:pred|bf16|f8e\w*|[fsuc]\d+)(?=\[)")
_TILING = re.compile(r"\{([\d,]*):[^{}]*\}")


def _untyped(shape: str) -> str:
    return _TILING.sub(r"{\1}", _ELEMENT_TYPE.sub("T", shape))


def _untyped_kernel(k: Kernel) -> Kernel:
    return dataclasses.replace(
        k,
        shape=_untyped(k.shape),
        inner_opcodes=tuple((op, n) for op, n in k.inner_opcodes if op != "convert"),
        body=tuple(map(_untyped_kernel, k.body)),
        condition=tuple(map(_untyped_kernel, k.condition)),
        branches=tuple(tuple(map(_untyped_kernel, b)) for b in k.branches),
    )


def modulo_element_type(s: Structure) -> Structure:
    """``s`` with its element types, the tiling that follows from them, the bytes they size and the
    converts between them left out: what ``structure(a[bf16]) == structure(b[f32])`` compares (the kernels,
    their fused opcodes, shapes and layouts, the gathers, scatters and collectives)."""
    return dataclasses.replace(
        s,
        kernel_list=tuple(map(_untyped_kernel, s.kernel_list)),
        gather_shapes=tuple(dataclasses.replace(g, shape=_untyped(g.shape)) for g in s.gather_shapes),
        scatter_shapes=tuple(dataclasses.replace(g, shape=_untyped(g.shape)) for g in s.scatter_shapes),
        collectives=tuple(dataclasses.replace(c, shape=_untyped(c.shape), bytes=0) for c in s.collectives),
        converts=(),
        aliases=tuple(map(_untyped, s.aliases)),
        root_shape=_untyped(s.root_shape),
    )


def _one_launch(k: Kernel) -> tuple[int, int]:
    return 1, 0


def _thread_counts(kernels: Iterable[Kernel]) -> dict[str, int]:
    """Static kernels per execution thread other than main."""
    counts = Counter(k.thread for k in _launched(kernels) if k.thread != MAIN_THREAD)
    return dict(sorted(counts.items()))


def _kernel_json(k: Kernel) -> dict[str, object]:
    out: dict[str, object] = {"opcode": k.opcode, "shape": k.shape}
    if k.fusion_kind is not None:
        out["fusion_kind"] = k.fusion_kind
        out["inner_opcodes"] = dict(k.inner_opcodes)
    given = {"custom_call_target": k.custom_call_target, "estimated_cycles": k.estimated_cycles}
    out.update((key, value) for key, value in given.items() if value is not None)
    out.update(_nested_json(k))
    if k.thread != MAIN_THREAD:
        out["thread"] = k.thread
    return out


def _nested_json(k: Kernel) -> dict[str, object]:
    """A loop's trip count and kernels, a conditional's branches."""
    if k.opcode == "while":
        return {
            "trip_count": k.trip_count,
            "condition": [_kernel_json(c) for c in k.condition],
            "body": [_kernel_json(b) for b in k.body],
        }
    if k.opcode == "conditional":
        return {"branches": [[_kernel_json(b) for b in branch] for branch in k.branches]}
    return {}


def _loop_json(w: WhileLoop) -> dict[str, object]:
    out = {**dataclasses.asdict(w), "body_opcodes": dict(w.body_opcodes)}
    if w.thread == MAIN_THREAD:
        del out["thread"]
    return out


def to_json(structure: Structure) -> dict[str, object]:
    """A JSON-ready dict of every field of ``structure`` (multisets become objects)."""
    s = structure
    return {
        "entry_fusions": s.entry_fusions,
        "fusion_kinds": dict(s.fusion_kinds),
        "kernels": s.kernels,
        "thread_kernels": dict(s.thread_kernels),
        "kernel_list": [_kernel_json(k) for k in s.kernel_list],
        "while_loops": [_loop_json(w) for w in s.while_loops],
        "dynamic_kernel_launches": s.dynamic_kernel_launches,
        "opcodes": dict(s.opcodes),
        "gathers": s.gathers,
        "scatters": s.scatters,
        "dynamic_slices": s.dynamic_slices,
        "dynamic_update_slices": s.dynamic_update_slices,
        "aliases": list(s.aliases),
        "strided_gathers": s.strided_gathers,
        "strided_scatters": s.strided_scatters,
        "transposes": s.transposes,
        "custom_call_targets": list(s.custom_call_targets),
        "collectives": [dataclasses.asdict(c) for c in s.collectives],
        "gather_shapes": [dataclasses.asdict(g) for g in s.gather_shapes],
        "scatter_shapes": [dataclasses.asdict(g) for g in s.scatter_shapes],
        "root_shape": s.root_shape,
        "converts": dict(Counter(s.converts)),
    }
