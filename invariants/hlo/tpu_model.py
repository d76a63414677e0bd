"""``predicted_seconds``: a TPU program's device time, predicted from its optimized HLO alone.

A sum over the kernels that run (loops expanded), each priced per launch by its **kind** from the facts
its HLO states (:data:`FEATURES`; docs/specs.md says what each reads): ``gather`` and ``scatter`` (the
kCustom fusions), ``sort`` (by its sorting network's steps and its passes through HBM), ``copy`` (a layout
change), ``conv`` (a kernel holding a convolution or dot), the kernels libtpu writes itself for plain JAX
code (``softmax``, its Mosaic online softmax, and ``topk``), ``fusion`` (every other kernel), ``small`` (an
async start or a custom call: a launch only), plus a price per ``loop`` trip and per kernel launched in a
loop, and the part of each async transfer's ``wait`` (a ``-start`` and its ``-done``) that the kernels
scheduled between the two do not hide. A scalar instruction (at most 16 bytes, no estimate: the loop
counter's add) runs on the scalar unit and costs nothing; a cross-program prefetch is issued while the
previous call runs and costs nothing.

What no chip run ever timed has no price: a module with collectives, or with a custom call the chip never
ran (a hand-written Pallas kernel could cost anything), gets no figure, with the reason. The coefficients
per chip and their provenance are ``invariants/data/tpu_cost.toml`` (``benchmarks/fit_tpu_cost.py`` fits
them); a chip never measured is scaled from a measured one by published figures and marked
``uncalibrated``. No JAX.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._paths import PACKAGE_DIR
from .parse import INT64_MAX, Computation, HloModule, Instruction, Shape, dtype_bits, words
from .structure import Kernel, Structure, contiguous_window, fused_instructions, walk_kernels

# Kind -> its features, in the order of the coefficients file.
FEATURES: dict[str, tuple[str, ...]] = {
    "gather": words(
        "launch rows bitpacked_rows element_rows hbm_rows bytes bitpacked_bytes hbm_bytes tile_bytes "
        "tile_hbm_bytes"
    ),
    "scatter": words("launch rows bytes hbm_bytes table_bytes read_hbm_rows"),
    "copy": words("launch bytes hbm_bytes hbm_to_hbm_bytes cycles"),
    "conv": words("launch bytes hbm_bytes vector_ops cycles macs tile_macs"),
    "softmax": words("launch rows elements bytes"),
    "topk": words("launch elements selected"),
    "sort": words("launch elements steps"),
    "fusion": words(
        "launch bytes hbm_bytes hbm_arrays vector_ops cycles window_elements window_steps lane_window_steps "
        "lanes_to_rows"
    ),
    "small": ("launch",),
    "loop": words("trip launches bytes hbm_arrays"),
    "wait": ("bytes",),
}
COLUMNS: tuple[str, ...] = tuple(f"{kind}.{f}" for kind, fs in FEATURES.items() for f in fs)
# Each kind's features with their place in COLUMNS.
_COLUMN_AT = {kind: [(f, COLUMNS.index(f"{kind}.{f}")) for f in fs] for kind, fs in FEATURES.items()}

# The kinds whose kernels only move bytes (or launch): in a loop, the loop's price per byte is theirs.
_MOVES_BYTES = frozenset({"copy", "fusion", "small"})
# Per kind, its feature of bytes read and written in HBM that a copy's rate prices.
_COPIED = {"sort": "hbm_bytes", "scatter": "copied_bytes"}
_SMALL = frozenset({"copy-start", "slice-start", "async-start", "custom-call", "send", "recv"})
_ON_CHIP = "S(1)"
_BITPACKED = "GatherScatterIndicesBitpacked"
_COST_FILE = PACKAGE_DIR / "data" / "tpu_cost.toml"


@dataclasses.dataclass(frozen=True)
class Launch:
    """One kernel of the program: its name, kind, features (one launch), how many times it runs, whether in
    a loop, and where it is scheduled (its computation and place; a ``wait``'s are its start's, ``until``
    is the place of its ``-done``)."""

    name: str
    kind: str
    features: Mapping[str, float]
    count: int
    looped: bool = False
    position: tuple[str, int] = ("", -1)
    until: int = -1

    @property
    def priced(self) -> list[tuple[str, Mapping[str, float]]]:
        """The kinds whose coefficients price it, each with its features there. A sort's passes through
        HBM (``hbm_bytes``, read and written there) and a scatter's table in HBM (``copied_bytes``, read and
        written there) are priced as a copy from HBM to HBM of those bytes: the memory's rate, measured on
        copies, not a sort's or a scatter's. A kernel in a loop runs behind the scalar unit's
        stalls, trip after trip: it is priced as a ``loop`` launch, so that what a loop costs is fitted on
        loops alone; one that moves bytes and nothing else (a fusion, a copy) by the bytes it moves, one
        whose kind prices work of its own (a gather's rows, a sort's steps) by its kind as outside a loop,
        which a larger trip's work outgrows."""
        own: list[tuple[str, Mapping[str, float]]] = [(self.kind, self.features)]
        copied = self.features.get(_COPIED.get(self.kind, ""), 0.0)
        if copied:
            own.append(("copy", {"hbm_bytes": copied, "hbm_to_hbm_bytes": copied}))
        if not self.looped or self.kind in ("loop", "wait"):
            return own
        if self.kind not in _MOVES_BYTES:
            return [("loop", {"launches": 1.0}), *own]
        moved = self.features.get("bytes", 0.0) + self.features.get("hbm_bytes", 0.0)
        return [
            ("loop", {"launches": 1.0, "bytes": moved, "hbm_arrays": self.features.get("hbm_arrays", 0.0)})
        ]

    def row(self, launches: int | None = None) -> list[float]:
        """The features of all its launches (of ``launches`` of them where given) over :data:`COLUMNS` (a
        ``wait`` is no linear term: zeros)."""
        count = self.count if launches is None else launches
        out = [0.0] * len(COLUMNS)
        if self.kind != "wait":
            for kind, features in self.priced:
                for feature, at in _COLUMN_AT[kind]:
                    out[at] += count * features.get(feature, 0.0)
        return out


def is_tpu_module(module: HloModule) -> bool:
    """Whether ``module`` was compiled for a TPU: its entry's layouts are tiled (``T(8,128)``)."""
    return any(
        i.shape.layout is not None and ":T(" in i.shape.layout for i in module.entry if not i.shape.is_tuple
    )


def _ints(raw: str | None) -> tuple[int, ...]:
    if not raw:
        return ()
    return tuple(int(p) for p in raw.strip("{}").replace(" ", "").split(",") if p)


_TILE = re.compile(r"T\(([\d,]+)\)")


def _arrays(shape: Shape) -> list[Shape]:
    return [x for x in (shape.tuple_shapes if shape.is_tuple else (shape,)) if not x.is_tuple]


def _tiled_dims(shape: Shape) -> list[int] | None:
    layout = shape.layout or ""
    tile = _TILE.search(layout)
    order = layout.split(":", 1)[0]
    if tile is None or not shape.dims or not order:
        return None
    try:
        minor_to_major = [int(p) for p in order.split(",")]
    except ValueError:
        return None
    dims = list(shape.dims)
    for d, t in zip(minor_to_major, reversed(_ints(tile.group(1))), strict=False):
        if 0 <= d < len(dims):
            dims[d] = -(-dims[d] // t) * t
    return dims


def padded_bytes(shape: Shape) -> int:
    """Bytes of ``shape`` as the TPU lays it out, its minor-most dimensions padded to the tile
    (``{1,0:T(8,128)}`` pads a [16384, 2] array to [16384, 128])."""
    if shape.is_tuple:
        return sum(padded_bytes(s) for s in shape.tuple_shapes)
    dims = _tiled_dims(shape)
    if dims is None:
        return shape.byte_size()
    return (math.prod(dims) * (dtype_bits(shape.dtype or "") or 0) + 7) // 8


def _source(
    module: HloModule, comp: Computation, kernel: Instruction, fused_comp: Computation, name: str
) -> Instruction | None:
    """What ``name`` of ``fused_comp``, a computation ``kernel`` runs (nested fusions followed), stands
    for: a parameter is followed out, fusion by fusion, to the kernel's operand in ``comp``."""
    outer: dict[str, tuple[Computation, Instruction]] = {}
    todo = [(comp, kernel)]
    while todo:
        at, fusion = todo.pop()
        for called in fusion.called:
            outer[called] = (at, fusion)
            inner = module.computations[called]
            todo.extend((inner, i) for i in inner if i.opcode == "fusion" and i.called)
    here, instr = fused_comp, fused_comp.get(name)
    while instr is not None and instr.opcode == "parameter" and here.name in outer:
        at, fusion = outer[here.name]
        index = int(instr.literal or -1)
        if not 0 <= index < len(fusion.operands):
            return None
        here, instr = at, at.get(fusion.operands[index])
    return instr


def _on_chip(shape: Shape) -> bool:
    return _ON_CHIP in (shape.layout or "")


def _placed(shape: Shape, size: int) -> tuple[int, int]:
    """``size`` bytes as (on-chip, HBM) bytes, by where ``shape``'s layout puts them."""
    return (size, 0) if _on_chip(shape) else (0, size)


def _split(shape: Shape) -> tuple[int, int]:
    if shape.is_tuple:
        return _total(_split(s) for s in shape.tuple_shapes)
    return _placed(shape, padded_bytes(shape))


def _total(parts: Iterable[tuple[int, int]]) -> tuple[int, int]:
    parts = list(parts)
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def _moved_bytes(module: HloModule, comp: Computation, instr: Instruction) -> tuple[int, int]:
    """(on-chip, HBM) bytes a kernel reads and writes, as laid out: each operand whole, except one a fusion
    only slices (the slice's bytes) and the buffer a dynamic-update-slice updates in place (the update's,
    read and written)."""
    if instr.opcode == "dynamic-update-slice" and len(instr.operands) > 1:
        chip, hbm = _split(comp[instr.operands[1]].shape)
        return 2 * chip, 2 * hbm
    if instr.opcode == "fusion" and instr.called:
        return _fusion_bytes(module, comp, instr)
    return _total([_split(instr.shape)] + [_split(comp[o].shape) for o in instr.operands if o in comp])


def _fusion_bytes(module: HloModule, comp: Computation, instr: Instruction) -> tuple[int, int]:
    moved = [_split(instr.shape)]
    fused = module.computations[instr.called[0]]
    for p in (i for i in fused if i.opcode == "parameter"):
        outer = _source(module, comp, instr, fused, p.name)
        _add_parameter(moved, fused, p.name, outer.shape if outer is not None else p.shape)
    return _total(moved)


def _only(users: list[Instruction], test: Callable[[Instruction], bool]) -> bool:
    return bool(users) and all(map(test, users))


def _add_parameter(moved: list[tuple[int, int]], fused: Computation, name: str, shape: Shape) -> None:
    """Add the bytes a fusion moves for its parameter ``name`` to ``moved``, whose first entry is the
    fusion's result: an updated-in-place buffer replaces the result by the update, written once (what
    makes the update is read through the parameters it reads)."""
    users = [i for i in fused if name in i.operands]
    if _only(users, lambda u: u.opcode in ("dynamic-slice", "slice")):
        moved.append(_placed(shape, min(padded_bytes(shape), sum(padded_bytes(u.shape) for u in users))))
    elif _updated_in_place(fused, name):
        update = fused.get(users[0].operands[1])
        if update is not None:
            moved[0] = _placed(shape, padded_bytes(update.shape))
    else:
        moved.append(_split(shape))


def _hbm_arrays(module: HloModule, comp: Computation, instr: Instruction) -> int:
    """The arrays a kernel reads or writes in HBM (not on chip): each costs the memory's latency. A buffer
    a fusion updates in place is its result alone: the kernel only writes the update into it."""
    fused = module.computations[instr.called[0]] if instr.opcode == "fusion" and instr.called else None
    params = {int(i.literal or -1): i.name for i in fused or () if i.opcode == "parameter"}
    shapes = [
        comp[o].shape
        for n, o in enumerate(instr.operands)
        if o in comp and not (fused is not None and n in params and _updated_in_place(fused, params[n]))
    ]
    return sum(1 for s in [*shapes, instr.shape] for a in _arrays(s) if a.dims and not _on_chip(a))


def _updated_in_place(fused: Computation, name: str) -> bool:
    """Whether parameter ``name`` of ``fused`` is only the buffer a dynamic-update-slice writes into."""
    users = [i for i in fused if name in i.operands]
    return _only(users, lambda u: u.opcode == "dynamic-update-slice" and u.operands[0] == name)


# Fused instructions that move or name data without computing on it.
_NO_OPS = frozenset(
    words(
        "parameter constant broadcast bitcast reshape tuple get-tuple-element iota slice dynamic-slice "
        "dynamic-update-slice transpose copy fusion pad concatenate"
    )
)


def _vector_ops(module: HloModule, instr: Instruction) -> int:
    """Elementwise work of a kernel: the 32-bit words of its result as laid out, times the computing
    instructions fused into it (a plain instruction: one)."""
    shapes = instr.shape.tuple_shapes if instr.shape.is_tuple else (instr.shape,)
    result = sum(padded_bytes(s) * 32 // max(32, dtype_bits(s.dtype or "") or 32) // 4 for s in shapes)
    if instr.opcode != "fusion":
        return 0 if instr.opcode in _NO_OPS else result
    return result * sum(1 for _, i in fused_instructions(module, instr) if i.opcode not in _NO_OPS)


def _words(shape: Shape) -> int:
    """32-bit words of ``shape`` as laid out (narrower dtypes pack)."""
    return padded_bytes(shape) * 32 // max(32, dtype_bits(shape.dtype or "") or 32) // 4


def _operand_ops(module: HloModule, comp: Computation, instr: Instruction) -> int:
    """Elementwise work a matmul kernel does to make its operands (a one-hot's compare over the whole
    ``[tokens, vocab]``), by each instruction's own shape; what it does to the product rides along free."""
    if instr.opcode != "fusion" or not instr.called:
        return 0
    fused = module.computations[instr.called[0]]
    todo = [o for i in fused if i.opcode in ("convolution", "dot") for o in i.operands]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen and name in fused:
            seen.add(name)
            todo.extend(fused[name].operands)
    return sum(
        _words(fused[n].shape) for n in seen if fused[n].opcode not in _NO_OPS and not fused[n].shape.is_tuple
    )


def _is_matrix(sizes: tuple[int, ...]) -> bool:
    """Whether a gathered row (a slice of ``sizes``) is a matrix, an expert's weights: moved as whole tiles
    at the memory's streaming rate, where a vector row costs a transfer of its own."""
    return sum(1 for d in sizes if d > 1) >= 2


def _window(raw: str) -> dict[str, list[list[int]]]:
    """A convolution's ``window={size=4x8 stride=3x7 pad=3_3x7_7 lhs_dilate=4x8}`` as lists per field."""
    fields: dict[str, list[list[int]]] = {}
    for part in raw.strip("{}").split():
        key, _, value = part.partition("=")
        fields[key] = [[int(x) for x in dim.split("_")] for dim in value.split("x")]
    return fields


# The side of the matrix unit's systolic array: a narrower contraction or output still takes its width.
_MXU = 128
# A longer window than this is no convolution a program writes (and would take that long to count).
_MAX_WINDOW = 1 << 20


def _taps(size: int, out: int, stride: int, lo: int, lhs_dilate: int, rhs_dilate: int, extent: int) -> int:
    """(output position, window position) pairs of one spatial dimension that meet an element of the
    input rather than its padding or the holes its dilation makes (``extent``: the input's length)."""
    if not (0 < size <= _MAX_WINDOW and min(stride, lhs_dilate, rhs_dilate) > 0):
        raise ValueError("window")
    last = (extent - 1) * lhs_dilate
    if lhs_dilate > 1 and size * out <= 1 << 16:
        return sum(
            0 <= (at := o * stride + k * rhs_dilate - lo) <= last and at % lhs_dilate == 0
            for k in range(size)
            for o in range(out)
        )
    pairs = 0
    for k in range(size):  # the output positions whose window position k meets the input's span
        first = max(0, -(-(lo - k * rhs_dilate) // stride))
        stop = min(out - 1, (last + lo - k * rhs_dilate) // stride)
        pairs += max(0, stop - first + 1)
    return pairs // lhs_dilate if lhs_dilate > 1 else pairs  # a long dilated window: holes evenly spread


def _macs(comp: Computation, instr: Instruction, width: int = 1) -> int:
    """Multiply-adds of a convolution or dot: the matrix unit's work. A convolution over spatial dimensions
    counts only the window positions that meet the input, so a batch dimension written as a dilated
    spatial one (how XLA hands a batched matmul to the TPU) counts once per element. ``width``: the
    contracted and the output features each rounded up to a multiple of it (the matrix unit's side)."""

    def up(n: int) -> int:
        return -(-n // width) * width

    shapes = [comp[o].shape for o in instr.operands if o in comp]
    if len(shapes) < 2:
        return 0
    lhs, rhs = shapes[0], shapes[1]
    if instr.opcode == "dot":
        contracting = _ints(instr.attrs.get("lhs_contracting_dims"))
        *outer, minor = instr.shape.dims or (1,)
        depth = math.prod(lhs.dims[d] for d in contracting if d < len(lhs.dims))
        return math.prod(outer) * up(minor) * up(depth)
    if instr.opcode != "convolution":
        return 0
    labels, raw = instr.attrs.get("dim_labels", ""), instr.attrs.get("window", "{}")
    try:
        lhs_labels, rest = labels.split("_", 1)
        rhs_labels, out_labels = rest.split("->", 1)
        of = dict(zip(lhs_labels, lhs.dims, strict=True))
        rf = dict(zip(rhs_labels, rhs.dims, strict=True))
        outf = dict(zip(out_labels, instr.shape.dims, strict=True))
        window = _window(raw)
        macs = of["b"] * up(rf["i"]) * up(rf["o"])
        for j, name in enumerate(sorted(c for c in lhs_labels if c.isdigit())):
            size, stride, pad, lhs_dilate, rhs_dilate = (
                window[key][j] if key in window else default
                for key, default in (("size", [1]), ("stride", [1]), ("pad", [0, 0]), ("lhs_dilate", [1]),
                                     ("rhs_dilate", [1]))
            )  # fmt: skip
            macs *= _taps(size[0], outf[name], stride[0], pad[0], lhs_dilate[0], rhs_dilate[0], of[name])
    except (ValueError, KeyError, IndexError):
        raise _NoFigure(
            f"convolution {instr.name}: dim_labels {labels!r} window {raw} not understood"
        ) from None
    return macs


def _row_words(shape: Shape, sizes: tuple[int, ...]) -> int:
    """Bytes one gathered or scattered row (a slice of ``sizes``) occupies. A vector: its elements padded to
    whole 128-lane words of 32 bits (a TPU vector register's row), whatever the narrower dtype. A slice of
    two or more dimensions (an expert's weight matrix): its tiles, the minor dimension padded to 128 lanes,
    the next to 8 sublanes of 32 bits (16 rows of bf16 packed in pairs)."""
    bits = dtype_bits(shape.dtype or "") or 32
    dims = [d for d in sizes if d > 1]
    if len(dims) < 2:
        return -(-math.prod(dims) // 128) * 128 * max(32, bits) // 8
    sublanes = 8 * max(1, 32 // bits)
    *major, rows, lanes = dims
    return math.prod(major) * -(-rows // sublanes) * sublanes * -(-lanes // 128) * 128 * bits // 8


def _runs(module: HloModule, comp: Computation, instr: Instruction) -> list[tuple[Computation, Instruction]]:
    """The instructions kernel ``instr`` runs (a fusion's fused ones), each with its computation."""
    return list(fused_instructions(module, instr)) if instr.opcode == "fusion" else [(comp, instr)]


def _inside(
    module: HloModule, comp: Computation, instr: Instruction, opcode: str
) -> list[tuple[Computation, Instruction]]:
    return [(c, i) for c, i in _runs(module, comp, instr) if i.opcode == opcode]


def _gathered(
    module: HloModule, comp: Computation, fcomp: Computation, gather: Instruction, kernel: Instruction
) -> tuple[int, tuple[int, ...], Shape | None]:
    """(rows, a row's slice sizes, the table's shape where it lies in HBM, else None) of one gather that
    ``kernel`` runs."""
    offset = set(_ints(gather.attrs.get("offset_dims")))
    rows = math.prod(d for k, d in enumerate(gather.shape.dims) if k not in offset)
    table = fcomp.get(gather.operands[0])
    if kernel.opcode == "fusion":  # the kernel's operand its parameter stands for
        table = _source(module, comp, kernel, fcomp, gather.operands[0]) or table
    in_hbm = table is not None and not _on_chip(table.shape)
    return rows, _ints(gather.attrs.get("slice_sizes")), table.shape if in_hbm and table else None


def _tiles_across(table: Shape, sizes: tuple[int, ...]) -> tuple[int, int] | None:
    """(tiles, bytes of each) that one row of ``sizes`` spans in ``table`` when it is not contiguous there
    (:func:`~invariants.hlo.structure.contiguous_window`: a table laid out column by column puts a row's
    elements a tile's row apart): each tile it touches is a transfer of its own, read whole. None for a
    contiguous row."""
    order = (table.layout or "").split(":", 1)[0]
    tile = _TILE.search(table.layout or "")
    try:
        minor_to_major = tuple(int(p) for p in order.split(","))
    except ValueError:
        return None
    if tile is None or len(sizes) != len(table.dims) or contiguous_window(table.dims, sizes, minor_to_major):
        return None
    extents = _tile_extents(table)
    tiles = math.prod(-(-size // extents.get(d, 1)) for d, size in enumerate(sizes) if size > 1)
    return tiles, math.prod(_ints(tile.group(1))) * (dtype_bits(table.dtype or "") or 32) // 8


def _gather_features(module: HloModule, comp: Computation, instr: Instruction) -> dict[str, float]:
    bitpacked = any(i.custom_call_target == _BITPACKED for _, i in _runs(module, comp, instr))
    rows = elements = hbm = hbm_bytes = 0.0
    out_bytes = tile_bytes = tile_hbm = 0
    for fcomp, g in _inside(module, comp, instr, "gather"):
        n, sizes, table = _gathered(module, comp, fcomp, g, instr)
        rows += n
        if _is_matrix(sizes):  # priced by where the kernel writes its tiles, wherever the table lies
            tile_bytes += n * _row_words(g.shape, sizes)
            tile_hbm += 0 if _on_chip(instr.shape) else n * _row_words(g.shape, sizes)
            continue
        out_bytes += n * _row_words(g.shape, sizes)
        elements += n if math.prod(sizes) == 1 else 0
        if table is not None:
            tiles, each = _tiles_across(table, sizes) or (1, _row_words(g.shape, sizes))
            hbm += n * tiles
            hbm_bytes += n * tiles * each
    return {
        "launch": 1.0,
        "rows": rows,
        "bitpacked_rows": rows if bitpacked else 0.0,
        "element_rows": elements,
        "hbm_rows": hbm,
        "bytes": float(out_bytes),
        "bitpacked_bytes": float(out_bytes) if bitpacked else 0.0,
        "hbm_bytes": hbm_bytes,
        "tile_bytes": float(tile_bytes),
        "tile_hbm_bytes": float(tile_hbm),
    }


def _scatter_features(module: HloModule, comp: Computation, instr: Instruction) -> dict[str, float]:
    """A scatter's rows and words, the rows a gather fused into it reads from HBM, and its table; a table
    in HBM is read and written there (``copied_bytes``), or only written where the kernel makes its first
    value itself (a broadcast fused into it)."""
    rows = moved = 0.0
    made = False
    for fcomp, s in _inside(module, comp, instr, "scatter"):
        first = _source(module, comp, instr, fcomp, s.operands[0]) if instr.opcode == "fusion" else None
        made |= first is not None and comp.get(first.name) is not first  # not an operand: made inside
        updates = fcomp.get(s.operands[-1])
        if updates is None:
            continue
        window = set(_ints(s.attrs.get("update_window_dims")))
        n = math.prod(d for k, d in enumerate(updates.shape.dims) if k not in window)
        sizes = tuple(d for k, d in enumerate(updates.shape.dims) if k in window)
        rows += n
        moved += (len(s.operands) - 1) // 2 * n * _row_words(updates.shape, sizes)
    # A gather fused into the scatter (a message's source rows) moves its rows through the same kernel,
    # each a transfer of its own where the table it reads lies in HBM.
    read_hbm = 0.0
    for fcomp, g in _inside(module, comp, instr, "gather"):
        n, sizes, far = _gathered(module, comp, fcomp, g, instr)
        moved += n * _row_words(g.shape, sizes)
        read_hbm += n if far is not None else 0
    in_hbm = not _on_chip(instr.shape) and not instr.shape.is_tuple
    table = padded_bytes(instr.shape)
    return {
        "launch": 1.0,
        "rows": rows,
        "bytes": moved,
        "hbm_bytes": moved if in_hbm else 0.0,
        "table_bytes": float(table),
        "copied_bytes": (1.0 if made else 2.0) * table if in_hbm else 0.0,
        "read_hbm_rows": read_hbm,
    }


# The kinds a kernel is by what it holds, first match wins.
_HOLDS = (
    ("scatter", {"scatter"}),
    ("gather", {"gather"}),
    ("sort", {"sort"}),
    ("conv", {"convolution", "dot"}),
)
_OP_NAME = re.compile(r'op_name="([^"]*)"')


def op_name(instr: Instruction) -> str:
    """The ``op_name`` of an instruction's metadata ("" without one)."""
    m = _OP_NAME.search(instr.attrs.get("metadata", ""))
    return m.group(1) if m else ""


def compiler_kernel(instr: Instruction) -> str | None:
    """The kind of a custom call libtpu writes itself for plain JAX code: its Mosaic online softmax (what
    ``softmax(q @ k.T) @ v`` becomes) and its ``TopK``; None for any other, a hand-written kernel included."""
    target = instr.custom_call_target
    if target == "TopK":
        return "topk"
    if target == "tpu_custom_call" and op_name(instr) == "online-softmax":
        return "softmax"
    return None


def _kind(module: HloModule, comp: Computation, instr: Instruction, cycles: float) -> str | None:
    """The kind of a kernel (module docstring); None for a scalar instruction, which costs nothing."""
    ops = {i.opcode for _, i in _runs(module, comp, instr)}
    for kind, holds in _HOLDS:
        if ops & holds:
            return kind
    compiled = compiler_kernel(instr) if instr.opcode == "custom-call" else None
    if compiled is not None:
        return compiled
    scalar = instr.shape.byte_size() <= 16 and not cycles
    if instr.opcode == "copy":
        return None if scalar else "copy"
    if instr.opcode in _SMALL:
        return "small"
    return None if scalar and instr.opcode != "fusion" else "fusion"


def _softmax_features(comp: Computation, instr: Instruction) -> dict[str, float]:
    """The online softmax reads the scores ``[..., q, k]`` and the values: a cost per row of scores (one
    query's running maximum and sum), per score, and per byte it moves."""
    scores = comp[instr.operands[0]].shape if instr.operands and instr.operands[0] in comp else instr.shape
    chip, hbm = _total([_split(instr.shape)] + [_split(comp[o].shape) for o in instr.operands if o in comp])
    elements = math.prod(scores.dims)
    rows = elements // scores.dims[-1] if scores.dims and scores.dims[-1] else 0
    return {"launch": 1.0, "rows": float(rows), "elements": float(elements), "bytes": float(chip + hbm)}


def _topk_features(comp: Computation, instr: Instruction) -> dict[str, float]:
    """TopK passes over every input element once per element it keeps (``k``: the result's minor
    dimension)."""
    operand = comp[instr.operands[0]].shape if instr.operands and instr.operands[0] in comp else instr.shape
    result = _arrays(instr.shape)[0] if instr.shape.is_tuple else instr.shape
    elements = math.prod(operand.dims)
    return {
        "launch": 1.0,
        "elements": float(elements),
        "selected": float(elements * (result.dims or (1,))[-1]),
    }


def _tile_extents(shape: Shape) -> dict[int, int]:
    """Each tiled dimension of ``shape`` with the tile's extent along it (``{0,1:T(8,128)}``: dimension 0,
    the minor-most, 128; dimension 1, 8)."""
    layout = shape.layout or ""
    tile = _TILE.search(layout)
    order = layout.split(":", 1)[0]
    if tile is None or not order:
        return {}
    minor_to_major = [int(p) for p in order.split(",")]
    return dict(zip(minor_to_major, reversed(_ints(tile.group(1))), strict=False))


def _scoped_bytes(instr: Instruction) -> int:
    """The fast memory a kernel holds for itself (``used_scoped_memory_configs`` of its backend_config)."""
    config = instr.backend_config_json or {}
    scoped = config.get("used_scoped_memory_configs")
    try:
        if not isinstance(scoped, list) or not scoped:
            raise ValueError
        return sum(int(entry["size"]) for entry in scoped)
    except (ValueError, KeyError, TypeError):
        raise _NoFigure(
            f"sort {instr.name}: used_scoped_memory_configs {scoped!r} not understood, so its passes through "
            "HBM cannot be counted"
        ) from None


def _sort_passes(bits: int, block_bits: int) -> int:
    """The passes a bitonic sort of ``2^bits`` positions makes over memory when ``2^block_bits`` of them
    fit in the fast memory: one for every stage that fits, then per stage past it one pass per
    compare-exchange whose stride spans blocks and one for the rest of the stage."""
    return 1 + sum(stage - block_bits + 1 for stage in range(block_bits + 1, bits + 1))


def _sort_features(module: HloModule, comp: Computation, instr: Instruction) -> dict[str, float]:
    """A sorting network's compare-exchange steps: ``L (L + 1) / 2`` passes over every element, ``L`` the
    bits of the sorted dimension's length. Arrays it sorts in HBM (no ``S(1)``) are read and written there
    once per pass (:func:`_sort_passes`): the sorted positions of one group of lanes, all its arrays
    together, that fit the kernel's scoped fast memory are a block."""
    elements = steps = hbm = 0.0
    for _, s in _inside(module, comp, instr, "sort"):
        arrays = _arrays(s.shape)
        shape = arrays[0]
        (dim,) = _ints(s.attrs.get("dimensions")) or (len(shape.dims) - 1,)
        n = shape.dims[dim] if 0 <= dim < len(shape.dims) else 1
        bits = max(1, math.ceil(math.log2(max(2, n))))
        elements += math.prod(shape.dims)
        steps += math.prod(shape.dims) * bits * (bits + 1) / 2
        in_hbm = sum(padded_bytes(a) for a in arrays if not _on_chip(a))
        if in_hbm:
            per_position = sum(
                math.prod(t for d, t in _tile_extents(a).items() if d != dim)
                * padded_bytes(a)
                // max(1, math.prod(_tiled_dims(a) or a.dims))
                for a in arrays
            )
            block = _scoped_bytes(s) // max(1, per_position)
            block_bits = min(bits, max(0, block.bit_length() - 1))
            hbm += 2 * _sort_passes(bits, block_bits) * in_hbm
    return {"launch": 1.0, "elements": elements, "steps": steps, "hbm_bytes": hbm}


def _launch(
    module: HloModule,
    kernel: Kernel,
    comp: Computation,
    instr: Instruction,
    count: int,
    looped: bool = False,
    position: tuple[str, int] = ("", -1),
) -> Launch | None:
    """``kernel`` (the instruction ``instr`` of ``comp``) as a :class:`Launch`; None for a scalar one."""
    cycles = float(kernel.estimated_cycles or 0)
    kind = _kind(module, comp, instr, cycles)
    if kind is None:
        return None
    if kind == "gather":
        features = _gather_features(module, comp, instr)
    elif kind == "scatter":
        features = _scatter_features(module, comp, instr)
    elif kind == "softmax":
        features = _softmax_features(comp, instr)
    elif kind == "topk":
        features = _topk_features(comp, instr)
    elif kind == "sort":
        features = _sort_features(module, comp, instr)
    elif kind == "small":
        features = {"launch": 1.0}
    else:
        chip, hbm = _moved_bytes(module, comp, instr)
        features = {"launch": 1.0, "bytes": float(chip), "hbm_bytes": float(hbm), "cycles": cycles}
        if kind == "copy":  # read and written in HBM: the memory turns between reads and writes
            features["hbm_to_hbm_bytes"] = float(hbm) if not chip else 0.0
        if kind == "conv":
            features["vector_ops"] = float(_operand_ops(module, comp, instr))
            features["macs"] = float(sum(_macs(c, i) for c, i in _runs(module, comp, instr)))
            features["tile_macs"] = float(sum(_macs(c, i, _MXU) for c, i in _runs(module, comp, instr)))
        if kind == "fusion":
            features["vector_ops"] = float(_vector_ops(module, instr))
            features["hbm_arrays"] = float(_hbm_arrays(module, comp, instr))
            features |= _window_features(module, comp, instr)
            features["lanes_to_rows"] = float(_lanes_to_rows(module, comp, instr))
    return Launch(instr.name, kind, features, count, looped, position)


# The emitter with which libtpu writes a window (a reduce-window, such as a cumulative sum) as a depthwise
# convolution.
_DEPTHWISE = "EmitDepthwise"
_WINDOW_BOUNDS = ("iteration_bounds", "output_window_bounds")


def _window_features(module: HloModule, comp: Computation, instr: Instruction) -> dict[str, float]:
    """What a window costs beyond a fusion's bytes, where the chip's times set it apart (none elsewhere):

    - A kernel of the depthwise emitter (its ``convolution_algorithm_config``) steps through its output in
      blocks (its ``window_config``: ``iteration_bounds`` steps, each an ``output_window_bounds`` block,
      the window's dimension first). In blocks as tall as the matrix unit is wide it costs as other fusions
      do; in shorter blocks, a price per output element and per step of each block's tiles
      (``window_elements``, ``window_steps``). Bounds that are not lists of integers: no figure, one line.
    - A reduce-window along the minor-most dimension (the lanes) costs per window position and row of
      tiles, however many tiles of the second-minor dimension a row holds (``lane_window_steps``: the
      window's size there times the extent of the dimensions major to those two)."""
    config = instr.backend_config_json or {}
    emitter = (config.get("convolution_algorithm_config") or {}).get("emitter", "")
    if isinstance(emitter, str) and emitter.startswith(_DEPTHWISE):
        return _depthwise_features(instr, emitter, config.get("window_config"))
    steps = 0
    for _, rw in _inside(module, comp, instr, "reduce-window"):
        shapes, raw = _arrays(rw.shape), rw.attrs.get("window", "{}")
        try:
            sizes = [dim[0] for dim in _window(raw).get("size", [])]
        except (ValueError, IndexError):
            sizes = []
        dims = shapes[0].dims if shapes else ()
        order = _layout_order(shapes[0]) if shapes else []
        if not shapes or len(order) != len(dims) or len(sizes) != len(dims):
            raise _NoFigure(
                f"reduce-window {rw.name}: {rw.shape} with window {raw} not understood, so its window "
                "positions cannot be counted"
            )
        if len(order) >= 2 and sizes[order[0]] > 1:
            steps += sizes[order[0]] * math.prod(dims[d] for d in order[2:])
    return {"lane_window_steps": float(steps)} if steps else {}


def _layout_order(shape: Shape) -> list[int]:
    """``shape``'s dimensions minor to major ([] where its layout does not name each once)."""
    order = [int(p) for p in re.findall(r"\d+", (shape.layout or "").split(":", 1)[0])]
    return order if sorted(order) == list(range(len(shape.dims))) else []


def _lanes_to_rows(module: HloModule, comp: Computation, instr: Instruction) -> int:
    """Elements of the broadcasts a kernel runs that carry their operand's lanes (its minor-most dimension)
    to another dimension than the result's lanes, a mask of one flag per row spread along its rows, say:
    each element crosses from the lanes to the rows of a tile."""
    moved = 0
    for c, b in _inside(module, comp, instr, "broadcast"):
        operand = c.get(b.operands[0]) if b.operands else None
        if operand is None or not operand.shape.dims or len(b.shape.dims) < 2:
            continue
        src, out, dims = (
            _layout_order(operand.shape),
            _layout_order(b.shape),
            _ints(b.attrs.get("dimensions")),
        )
        if src and out and len(dims) == len(operand.shape.dims) and dims[src[0]] != out[0]:
            moved += math.prod(operand.shape.dims)
    return moved


def _depthwise_features(instr: Instruction, emitter: str, window: object) -> dict[str, float]:
    try:
        if not isinstance(window, dict):
            raise ValueError
        steps, block = ([int(v) for v in window[key]] for key in _WINDOW_BOUNDS)
        if not steps or not block or min(steps + block) < 1:
            raise ValueError
    except (KeyError, TypeError, ValueError):
        seen = {k: window.get(k) for k in _WINDOW_BOUNDS} if isinstance(window, dict) else window
        raise _NoFigure(
            f"window kernel {instr.name} ({emitter}): window_config {seen} not understood, so its steps "
            "cannot be counted"
        ) from None
    if block[0] >= _MXU:
        return {}
    elements = sum(math.prod(a.dims) for a in _arrays(instr.shape))
    steps_of_tiles = math.prod(steps) * math.prod(block[1:])
    return {"window_elements": float(elements), "window_steps": float(steps_of_tiles)}


class _NoFigure(Exception):
    """Why the program's kernels cannot be summed (one line)."""


_DONE = frozenset({"copy-done", "slice-done", "async-done"})


def _waits(comp: Computation, times: int, looped: bool) -> list[Launch]:
    """The async transfers of ``comp`` as ``wait`` entries: bytes moved, where they start and are waited
    for."""
    at = {i.name: n for n, i in enumerate(comp.instructions)}
    out = []
    for n, done in enumerate(comp.instructions):
        if done.opcode not in _DONE or not done.operands or done.operands[0] not in at:
            continue
        start = comp[done.operands[0]]
        if "cross_program_prefetch_index" in start.attrs:
            continue
        moved = max((padded_bytes(x) for x in _arrays(start.shape)), default=0)
        out.append(
            Launch(done.name, "wait", {"bytes": float(moved)}, times, looped, (comp.name, at[start.name]), n)
        )
    return out


def launches(module: HloModule, structure: Structure) -> list[Launch]:
    """Every kernel that runs, with its launch count (loops expanded; a ``conditional`` by its branch of
    most launches), one ``loop`` entry per while loop with its trips, and one ``wait`` per async transfer."""
    where = {i.name: (c, i, n) for c in module.computations.values() for n, i in enumerate(c)}
    out: list[Launch] = []
    visited: dict[str, tuple[int, bool]] = {}

    def walk(kernels: Iterable[Kernel], times: int, looped: bool) -> None:
        for k in kernels:
            if k.opcode == "while":
                if k.trip_count is None:
                    raise _NoFigure("a while loop's trip count is unknown, so its kernels cannot be summed")
                if times * (k.trip_count + 1) > INT64_MAX:
                    raise _NoFigure(
                        "its nested loops run a kernel more than 2^63-1 times: no program a chip runs"
                    )
                out.append(Launch("while", "loop", {"trip": 1.0}, times * k.trip_count, looped))
                walk(k.body, times * k.trip_count, True)
                walk(k.condition, times * (k.trip_count + 1), True)
            elif k.opcode == "conditional":
                sizes = [(sum(1 for _ in b), n) for n, b in enumerate(k.branches)]
                if sizes:
                    walk(k.branches[max(sizes)[1]], times, looped)
            elif k.name in where:
                comp, instr, n = where[k.name]
                visited.setdefault(comp.name, (times, looped))
                launch = _launch(module, k, comp, instr, times, looped, (comp.name, n))
                if launch is not None:
                    out.append(launch)

    walk(structure.kernel_list, 1, False)
    for name, (times, looped) in visited.items():
        out.extend(_waits(module.computations[name], times, looped))
    return out


@dataclasses.dataclass(frozen=True)
class ChipModel:
    """One chip's coefficients (seconds per unit of each of :data:`COLUMNS`) and where they come from."""

    chip: str
    coefficients: Mapping[str, float]
    uncalibrated: bool
    provenance: str
    # The custom calls launched as kernels of their own that the chip timed (priced as a launch).
    timed_custom_calls: frozenset[str] = frozenset()

    def launch_seconds(self, launch: Launch) -> float:
        if launch.kind == "wait":
            return 0.0
        return sum(
            features.get(f, 0.0) * self.coefficients.get(f"{kind}.{f}", 0.0)
            for kind, features in launch.priced
            for f in FEATURES[kind]
        )

    def seconds(self, program: Iterable[Launch]) -> float:
        program = list(program)
        total = sum(launch.count * self.launch_seconds(launch) for launch in program)
        # Per computation, its launches in schedule order with running sums of their seconds: what a wait
        # hides is one difference, not a pass over the program per wait (thousands of copies each).
        placed: dict[str, list[tuple[int, float]]] = {}
        for k in program:
            placed.setdefault(k.position[0], []).append((k.position[1], self.launch_seconds(k)))
        running = {comp: _running_sums(sorted(entries)) for comp, entries in placed.items()}
        for wait in (w for w in program if w.kind == "wait"):
            positions, sums = running[wait.position[0]]
            after = bisect.bisect_right(positions, wait.position[1])
            hidden = sums[max(after, bisect.bisect_left(positions, wait.until))] - sums[after]
            moved = wait.features["bytes"] * self.coefficients.get("wait.bytes", 0.0)
            total += wait.count * max(0.0, moved - hidden)
        return total


def _running_sums(entries: list[tuple[int, float]]) -> tuple[list[int], list[float]]:
    """(positions, sums): ``sums[i]`` is the seconds of the first ``i`` entries."""
    sums = [0.0]
    for _, seconds in entries:
        sums.append(sums[-1] + seconds)
    return [position for position, _ in entries], sums


@functools.cache
def _cost_file() -> dict[str, Any]:
    return tomllib.loads(_COST_FILE.read_text(encoding="utf-8"))


def _chip_of(target: str) -> str:
    """``tpu-v5e-2x4`` -> ``v5e``."""
    parts = target.split("-")
    return parts[1] if len(parts) > 1 and parts[0] == "tpu" else ""


def chip_model(target: str) -> ChipModel | None:
    """The cost model of ``target``'s chip, None when the coefficients file has none for it."""
    chips: dict[str, Any] = _cost_file().get("chip", {})
    entry = chips.get(_chip_of(target))
    if not isinstance(entry, dict):
        return None
    base, ratio = entry, 1.0
    if "scaled_from" in entry:
        base, ratio = chips[entry["scaled_from"]], float(entry["bandwidth_ratio"])
    coefficients = {
        k: float(v) / (ratio if k.endswith("bytes") else 1.0) for k, v in base["coefficients"].items()
    }
    return ChipModel(
        _chip_of(target),
        coefficients,
        bool(entry.get("uncalibrated", False)),
        entry["source"],
        frozenset(base.get("timed_custom_calls", ())),
    )


def predicted_seconds(module: HloModule | None, structure: Structure, target: str) -> float | str:
    """The ``predicted_seconds`` of one compile for ``target``, or one line saying why there is none."""
    if module is None:
        return "no HLO module to read"
    model = chip_model(target)
    if model is None:
        return f"no TPU cost model for target '{target}' (invariants/data/tpu_cost.toml)"
    if not is_tpu_module(module):
        return "not a TPU module (no tiled layouts): the TPU cost model reads only TPU HLO"
    if structure.collectives:
        return "it has collectives, and the TPU cost model was never fitted on a chip's interconnect"
    if structure.thread_kernels:
        threads = ", ".join(sorted(structure.thread_kernels))
        return f"it runs kernels on another execution thread ({threads}), and no chip run ever timed one"
    priced = {i.name for c in module.computations.values() for i in c if compiler_kernel(i) is not None}
    untimed = sorted(
        k.custom_call_target
        for k in walk_kernels(structure.kernel_list)
        if k.custom_call_target is not None
        and k.custom_call_target not in model.timed_custom_calls
        and k.name not in priced
    )
    if untimed:
        return f"custom call {untimed[0]}: the TPU cost model has never timed it"
    try:
        return model.seconds(launches(module, structure))
    except _NoFigure as why:
        return str(why)


def heaviest(
    module: HloModule, structure: Structure, target: str, n: int = 3
) -> list[tuple[str, str, float]]:
    """The ``n`` kernels that carry most of ``predicted_seconds``: (instruction name, kind, seconds of all
    their launches, loops expanded); empty where there is no prediction."""
    model = chip_model(target)
    if model is None or not isinstance(predicted_seconds(module, structure, target), float):
        return []
    carried: dict[tuple[str, str], float] = {}
    for launch in launches(module, structure):
        if launch.kind not in ("wait", "loop"):
            key = (launch.name, launch.kind)
            carried[key] = carried.get(key, 0.0) + launch.count * model.launch_seconds(launch)
    ranked = sorted(carried.items(), key=lambda kv: -kv[1])[:n]
    return [(name, kind, seconds) for (name, kind), seconds in ranked]
