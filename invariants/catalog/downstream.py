"""A downstream project's own programs: the ``[[program]]`` entries of its spec files, as catalog programs.

``function`` (``"module:attribute"``, imported with the working directory first on ``sys.path``) is a lookup,
``(table, indices) -> rows``, and ``kind`` says which program the catalog's own wrappers build around it:
the lookup, its gradient with respect to the table, or a training step. With ``params = "module:factory"``
it is a model instead, ``function(factory(config), indices)``; a backward or train step then differentiates
the sum of its floating-point outputs. docs/downstream.md states the whole contract.

Validation is strict, before anything compiles: importing, the signature, and a trace (``jax.eval_shape``)
in every configuration listed, each failure one line at the spec file and line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding

from .._errors import InvariantsError
from .._supported import ReleaseLacks
from .._usercode import guarded
from ..compile import compat
from ..compile.placed import place
from ..scope.select import PROGRAMS_OTHERWISE, match_programs, selectors
from ..specfile.reader import ProgramDecl, Spec, load_specs
from .arguments import make_indices
from .programs import (
    CONFIGS,
    Config,
    Distribution,
    Inputs,
    Layout,
    Program,
    ProgramKind,
    _backward,
    _train_step,
)
from .project import Project, module_folder
from .registry import Programs

if TYPE_CHECKING:
    from jax.sharding import AbstractMesh  # old jax releases (bisect, matrix) lack it: annotations only

SGD_RATE = 0.01  # of a params program's train step: any constant compiles alike
_DRAW_SCALE = 0.02  # an initializer's, so that a layer's outputs stay finite


def _past_path_max(folder: Path) -> str | None:
    """Why no module in ``folder`` can be imported, when its path is past the system's PATH_MAX."""
    length = len(os.fsencode(folder))
    try:
        limit = os.pathconf("/", "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):  # no pathconf (Windows), or no such limit
        return None
    if length < limit:
        return None
    name = str(folder)
    short = name if len(name) <= 80 else f"{name[:40]}...{name[-30:]}"
    return (
        f"the folder modules are imported from ({short}) has a path of {length:,} bytes, past this "
        f"system's PATH_MAX of {limit:,}: no file in it can be opened by its path; run the gate from a "
        "shorter path"
    )


def _import(decl: ProgramDecl, path: str | None = None, where: str | None = None) -> Callable[..., Any]:
    path = decl.function if path is None else path
    module_name, _, attribute = path.partition(":")
    where = f"{decl.where if where is None else where}: {decl.name}"
    folder = module_folder()
    _on_path(folder)
    with guarded(f"{where}: importing {module_name}"):
        try:
            module = importlib.import_module(module_name)
        except Exception as err:  # ImportError, or whatever the module raises while importing
            too_long = _past_path_max(folder) if isinstance(err, ImportError) else None
            if too_long:
                raise InvariantsError(f"{where}: cannot import {module_name}: {too_long}") from None
            raise InvariantsError(
                f"{where}: cannot import {module_name} ({type(err).__name__}: {_first(err)}); modules are "
                f"imported from the folder the gate runs in ({folder}) and sys.path"
            ) from None
    obj = _attribute(module, attribute, f"{where}: {module_name}")
    if not callable(obj):
        kind = type(obj).__name__
        article = "an" if kind[:1].lower() in "aeiou" else "a"
        raise InvariantsError(f"{where}: {path} is {article} {kind}, not a function")
    return obj  # type: ignore[no-any-return,unused-ignore]


def _on_path(folder: Path) -> None:
    """Put ``folder`` on the user's path, as python -m puts the working directory; pytest may not."""
    if str(folder) not in sys.path and not (folder == Path.cwd() and "" in sys.path):
        sys.path.insert(0, str(folder))


def _attribute(module: object, attribute: str, where: str) -> object:
    obj = module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise InvariantsError(f"{where} has no attribute {attribute!r}")
        obj = getattr(obj, part)
    return obj


@contextlib.contextmanager
def _said_as(fails: str, error_type: bool = True) -> Iterator[None]:
    """An error the user's code raises in the block, as one line: ``fails: [type: ]what``."""
    try:
        yield
    except InvariantsError:
        raise
    except Exception as err:
        kind = f"{type(err).__name__}: " if error_type else ""
        raise InvariantsError(f"{fails}: {kind}{_first(err)}") from None


def _check_signature(
    decl: ProgramDecl, fn: Callable[..., Any], takes: str = "(table, indices)", arity: int = 2
) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin or a C callable: tracing below decides
    try:
        sig.bind(*(object() for _ in range(arity)))
    except TypeError as err:
        count = {2: "two", 3: "three"}[arity]
        raise InvariantsError(
            f"{decl.where}: {decl.name}: {decl.function}{sig} is called as {takes}, {count} positional "
            f"arguments, and cannot be ({err})"
        ) from None


def _shape(spec: jax.ShapeDtypeStruct | jax.Array) -> str:
    short = {"float32": "f32", "bfloat16": "bf16", "int32": "s32", "int8": "s8"}
    dtype = short.get(np.dtype(spec.dtype).name, np.dtype(spec.dtype).name)
    return f"{dtype}[{','.join(map(str, spec.shape))}]"


def _check_trace(decl: ProgramDecl, fn: Callable[..., Any], program: Program, config: Config) -> None:
    indices = program.argument_specs(config)[2 if decl.kind == "train" else 1]
    mesh = abstract_mesh(decl)
    parts = _parts(program, config)
    lookup = place((config.table, indices), mesh=mesh, parts=parts and parts[:2])
    lookup_args = lookup.args
    shown = f"{_shape(lookup_args[0])} table and {_shape(lookup_args[1])} indices"
    where = f"{decl.where}: {decl.name} [{config.id}]"
    with (
        _said_as(f"{where}: {decl.function} fails on {shown}"),
        guarded(f"{where}: tracing {decl.function}"),
        lookup.tracing(),
    ):
        out = jax.eval_shape(fn, *lookup_args)
    want = jax.ShapeDtypeStruct((*lookup_args[1].shape, config.width), config.table.dtype)
    if not (hasattr(out, "shape") and hasattr(out, "dtype")):
        raise InvariantsError(
            f"{where}: {decl.function} must return one array of rows, got {type(out).__name__}"
        )
    if tuple(out.shape) != tuple(want.shape) or out.dtype != want.dtype:
        raise InvariantsError(
            f"{where}: {decl.function} on {shown} must return {_shape(want)} rows, got {_shape(out)}"
        )
    if decl.kind == "forward":
        return
    grads = _trace_grad(decl, program, config, mesh, where)
    table_grad = grads if decl.kind == "backward" else grads[0]
    if tuple(table_grad.shape) != tuple(config.table.shape):
        raise InvariantsError(
            f"{where}: the gradient of {decl.function} is not table-shaped: {_shape(table_grad)}"
        )


def _trace_grad(
    decl: ProgramDecl, program: Program, config: Config, mesh: AbstractMesh | None, where: str
) -> Any:
    with _said_as(f"{where}: the {decl.kind} of {decl.function} fails", error_type=False):
        placed = place(program.argument_specs(config), mesh=mesh, parts=_parts(program, config))
        with guarded(f"{where}: tracing the {decl.kind} of {decl.function}"), placed.tracing():
            return jax.eval_shape(program.fn, *placed.args)


def _program(decl: ProgramDecl, fn: Callable[..., Any], inputs: Inputs | None = None) -> Program:
    return Program(
        decl.name,
        cast(ProgramKind, decl.kind),  # the spec stage checked it
        fn,
        decl.doc,
        decl.configs,
        decl.tags,
        inputs=inputs,
        layout=layout_of(decl),
        declaration=decl,
    )


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def lookup(table: Any, indices: Any) -> Any:
        return fn(table, indices)

    lookup.__name__ = name
    return lookup


def layout_of(decl: ProgramDecl) -> Layout | None:
    """A sharded declaration's pod layout over its own mesh; a lookup's cotangent is sharded like its
    indices. None for a one-device program."""
    if decl.mesh is None:
        return None
    axes, shape = zip(*decl.mesh, strict=True)
    index = decl.index_sharding or ()
    axis_types = cast(Literal["auto", "explicit"], decl.axis_types)
    return Layout(
        tuple(shape),
        tuple(axes),
        decl.table_sharding or (),
        index,
        cotangent=index,
        pod=True,
        axis_types=axis_types,
    )


def abstract_mesh(decl: ProgramDecl) -> AbstractMesh | None:
    """The declaration's mesh without devices: what its contract is checked on before any target is
    chosen, and what a factory finds in ``config.mesh``; None when unsharded."""
    if decl.mesh is None:
        return None
    axes, shape = zip(*decl.mesh, strict=True)
    return compat.abstract_mesh(tuple(shape), tuple(axes), decl.axis_types)


def _parts(program: Program, config: Config) -> tuple[tuple[str | None, ...], ...] | None:
    return program.argument_specs_sharded(config) if program.layout is not None else None


def build(decl: ProgramDecl, traced: bool = True) -> Program:
    """The program ``decl`` declares, imported and checked; each call builds it afresh. ``traced`` False:
    a program the run's ``--programs`` leaves out, its code neither imported nor traced (so that a broken
    one stops no run that does not select it); compiling it is one line. A program this JAX release cannot
    build or check for the tool's want of an API (:class:`ReleaseLacks`) is built to raise that line when it
    compiles: the tool's limit there stops that program alone, never the project's load."""
    if not traced:
        left_out = InvariantsError(f"{decl.where}: {decl.name}: left out of this run by --programs")
        return _program(decl, _raising(left_out))
    try:
        return _built(decl)
    except ReleaseLacks as lacks:
        return _program(decl, _raising(lacks))


def _raising(err: InvariantsError) -> Callable[..., Any]:
    def unbuilt(*_: object) -> Any:
        raise err

    return unbuilt


def _built(decl: ProgramDecl) -> Program:
    if decl.arguments is not None:
        return _build_with_arguments(decl)
    if decl.params is not None:
        return _build_with_params(decl)
    lookup = _import(decl)
    _check_signature(decl, lookup)
    if not hasattr(lookup, "__name__"):  # a functools.partial or a callable object
        lookup = _named(lookup, decl.name)
    fn = {"forward": lambda f: f, "backward": _backward, "train": _train_step}[decl.kind](lookup)
    program = _program(decl, fn)
    for config_id in decl.configs:
        _check_trace(decl, lookup, program, CONFIGS[config_id])
    return program


def build_all(decls: Iterable[ProgramDecl], selection: str | None = None) -> list[Program]:
    """The declared programs, those ``--programs selection`` leaves out unbuilt (:func:`build`)."""
    decls = list(decls)
    chosen = set(_selected(decls, selection))
    return [build(d, traced=d.name in chosen) for d in decls]


def _selected(decls: list[ProgramDecl], selection: str | None) -> list[str]:
    """The declarations ``--programs`` selects (every one without it); a word that names no declaration
    (a catalog program's, or a mistake the run reports itself) selects none here."""
    if selection is None:
        return [d.name for d in decls]
    return match_programs(selectors(selection, "--programs", PROGRAMS_OTHERWISE), {d.name: d for d in decls})


def load_project(project: Project) -> tuple[list[Spec], Programs]:
    """``project``'s specs and the run's :class:`Programs`, as a process started for it makes them."""
    specs = load_specs(*project.spec_folders()) if project.own else load_specs()
    return specs, Programs(build_all((d for spec in specs for d in spec.programs), project.selection))


@dataclasses.dataclass(frozen=True)
class ProgramConfig:
    """What a params factory is given: one configuration of the catalog, with the program's
    ``index_shape``, and a sharded program's abstract ``mesh`` to give each leaf its sharding on."""

    id: str
    vocab: int
    width: int
    index_shape: tuple[int, ...]
    table: jax.ShapeDtypeStruct
    indices: jax.ShapeDtypeStruct
    mesh: AbstractMesh | None = None

    @property
    def dtype(self) -> np.dtype[np.generic]:
        return self.table.dtype


def _first(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


class ParamsInputs:
    """The arguments of a params program: the flat leaves of ``(params, indices[, inputs])``."""

    def __init__(
        self, decl: ProgramDecl, factory: Callable[..., Any], extra: Callable[..., Any] | None = None
    ) -> None:
        self.decl = decl
        self.factory = factory
        self.extra = extra
        self.mesh = abstract_mesh(decl)
        self.signature = decl.signature
        self._made: dict[tuple[str, str], Any] = {}
        self._draws: dict[tuple[str, str, int], tuple[Any, ...]] = {}

    def config(self, config: Config) -> ProgramConfig:
        shape = self.decl.index_shape or config.index_shape
        indices = jax.ShapeDtypeStruct(shape, self.decl.index_dtype or config.indices.dtype)
        vocab = self.decl.vocab or config.vocab
        return ProgramConfig(config.id, vocab, config.width, shape, config.table, indices, self.mesh)

    def _made_by(self, which: str, config: Config) -> Any:
        if (which, config.id) not in self._made:
            decl = self.decl
            name, factory, at = (
                (decl.params, self.factory, decl.params_where)
                if which == "params"
                else (decl.inputs, self.extra, decl.inputs_where)
            )
            where = f"{at}: {decl.name} [{config.id}]"
            with _said_as(f"{where}: {name}(config) fails"), guarded(f"{where}: {name}(config)"):
                tree = factory(self.config(config))  # type: ignore[misc]
            self._made[(which, config.id)] = _check_leaves(tree, where, name or "", which)
        return self._made[(which, config.id)]

    def params(self, config: Config) -> Any:
        return self._made_by("params", config)

    def extras(self, config: Config) -> Any:
        return self._made_by("inputs", config) if self.extra is not None else None

    def arguments(self, config: Config) -> tuple[Any, ...]:
        head = (self.params(config), self.config(config).indices)
        return head if self.extra is None else (*head, self.extras(config))

    def treedef(self, config: Config) -> Any:
        return jax.tree_util.tree_structure(self.arguments(config))

    def param_leaves(self, config: Config) -> int:
        return len(jax.tree_util.tree_leaves(self.params(config)))

    def specs(self, config: Config) -> tuple[Any, ...]:
        leaves = jax.tree_util.tree_leaves(self.arguments(config))
        return tuple(jax.ShapeDtypeStruct(tuple(x.shape), x.dtype) for x in leaves)

    def partition_specs(self, config: Config) -> tuple[tuple[str | None, ...], ...]:
        def parts(tree: object) -> list[tuple[str | None, ...]]:
            leaves = jax.tree_util.tree_leaves(tree)
            named = [getattr(x, "sharding", None) for x in leaves]
            return [tuple(s.spec) if isinstance(s, NamedSharding) else () for s in named]

        extra = parts(self.extras(config)) if self.extra is not None else []
        return (*parts(self.params(config)), self.decl.index_sharding or (), *extra)

    def facts(self, config: Config) -> dict[str, int]:
        """The model's own tables (``tables``; default every floating-point leaf): ``row_bytes`` is the
        widest row, since an index reads one row."""
        leaves = jax.tree_util.tree_flatten_with_path(self.params(config))[0]
        tables = self._tables({leaf_name(path): leaf for path, leaf in leaves})
        rows = [
            (x.shape[0] if x.shape else 1, math.prod(x.shape[1:]) * np.dtype(x.dtype).itemsize)
            for x in tables
        ]
        return {
            "table_bytes": sum(n * row for n, row in rows),
            "row_bytes": max((row for _, row in rows), default=0),
            "vocab": max((n for n, _ in rows), default=0),
            "lookups": math.prod(self.config(config).index_shape),
        }

    def _tables(self, named: dict[str, jax.Array]) -> list[jax.Array]:
        if not self.decl.tables:
            return [x for x in named.values() if jnp.issubdtype(x.dtype, jnp.inexact)]
        missing = [t for t in self.decl.tables if t not in named]
        if missing:
            said = ", ".join(map(repr, missing))
            raise InvariantsError(
                f"{self.decl.tables_where}: {self.decl.name}: tables {said}: no such leaf of "
                f"{self.decl.params}(config); its leaves: {', '.join(named)}"
            )
        return [named[t] for t in self.decl.tables]

    def draw(self, config: Config, distribution: Distribution, seed: int) -> tuple[Any, ...]:
        """Concrete leaves, read-only, made once: the factories' arrays where they gave some, else drawn."""
        key = (config.id, distribution, seed)
        if key not in self._draws:
            rng = np.random.default_rng(seed + 1)
            vocab = self.config(config).vocab
            out = [_drawn(leaf, rng, vocab) for leaf in jax.tree_util.tree_leaves(self.params(config))]
            shape, dtype = self.config(config).index_shape, self.config(config).indices.dtype
            out.append(make_indices(config, distribution, seed, shape=shape, dtype=dtype, vocab=vocab))
            out += [_drawn(leaf, rng, vocab) for leaf in jax.tree_util.tree_leaves(self.extras(config))]
            for a in out:
                a.flags.writeable = False
            self._draws[key] = tuple(out)
        return self._draws[key]


def leaf_name(path: Iterable[object]) -> str:
    """A leaf of a pytree by its keys joined with dots, as ``tables`` names it."""
    parts = []
    for key in path:
        for attr in ("key", "name", "idx"):
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
    return ".".join(parts)


def _drawn(leaf: Any, rng: np.random.Generator, vocab: int) -> np.ndarray:
    """A leaf's value: the factory's array (a copy), else integers in [0, vocab), else a normal draw; always
    an array (numpy draws a scalar for shape ``()``, which cannot be made read-only)."""
    dtype = np.dtype(leaf.dtype)
    if not isinstance(leaf, jax.ShapeDtypeStruct):
        return np.array(leaf)
    if np.issubdtype(dtype, np.integer):
        return np.asarray(rng.integers(0, vocab, size=leaf.shape)).astype(dtype)
    return np.asarray(rng.standard_normal(leaf.shape, dtype=np.float32) * _DRAW_SCALE).astype(dtype)


def _check_leaves(tree: Any, where: str, factory: str, which: str = "params") -> Any:
    try:
        leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    except Exception as err:  # JAX's C++ flatten raises SystemError, the RecursionError behind it
        cause = err.__cause__ or err.__context__ or err
        if isinstance(cause, RecursionError):
            raise InvariantsError(
                f"{where}: {factory}(config) returned a pytree nested deeper than JAX can flatten (Python's "
                f"recursion limit, {sys.getrecursionlimit()}), or one that contains itself"
            ) from None
        raise InvariantsError(
            f"{where}: {factory}(config) returned a pytree JAX cannot flatten: {type(cause).__name__}: "
            f"{_first(cause)}"
        ) from None
    if not leaves:
        raise InvariantsError(f"{where}: {factory}(config) returned no arrays (got {type(tree).__name__})")
    for path, leaf in leaves:
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            raise InvariantsError(
                f"{where}: {factory}(config): leaf {which}{jax.tree_util.keystr(path)} is "
                f"{type(leaf).__name__} {leaf!r:.40}, not an array or a jax.ShapeDtypeStruct"
            )
    return tree


def _total(outputs: Any) -> Any:
    floats = [x for x in jax.tree_util.tree_leaves(outputs) if jnp.issubdtype(x.dtype, jnp.inexact)]
    return sum((jnp.sum(x.astype(jnp.float32)) for x in floats), jnp.float32(0))


def _params_program(
    decl: ProgramDecl, function: Callable[..., Any], inputs: ParamsInputs
) -> Callable[..., Any]:
    first = CONFIGS[decl.configs[0]]

    def split(leaves: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
        # One pytree in every configuration (_check_same_tree): the first's unflattens them all.
        params, *rest = jax.tree_util.tree_unflatten(inputs.treedef(first), leaves)
        return params, tuple(rest)

    def forward(*leaves: Any) -> Any:
        params, rest = split(leaves)
        return function(params, *rest)

    def backward(*leaves: Any) -> Any:
        params, rest = split(leaves)
        return jax.grad(lambda p: _total(function(p, *rest)))(params)

    def train(*leaves: Any) -> Any:
        params, rest = split(leaves)
        loss, grads = jax.value_and_grad(lambda p: _total(function(p, *rest)))(params)
        return jax.tree_util.tree_map(lambda p, g: p - (SGD_RATE * g).astype(p.dtype), params, grads), loss

    fn = {"forward": forward, "step": forward, "backward": backward, "train": train}[decl.kind]
    fn.__name__ = decl.name
    return fn


def _build_with_params(decl: ProgramDecl) -> Program:
    function = _import(decl)
    takes = "(params, indices, inputs)" if decl.inputs else "(params, indices)"
    _check_signature(decl, function, takes, arity=3 if decl.inputs else 2)
    factory = _import(decl, decl.params, decl.params_where)
    extra = _import(decl, decl.inputs, decl.inputs_where) if decl.inputs else None
    inputs = ParamsInputs(decl, factory, extra)
    fn = _params_program(decl, function, inputs)
    program = _program(decl, fn, inputs)
    for config_id in decl.configs:
        _check_params(decl, function, inputs, program, CONFIGS[config_id])
    return program


def _check_params(
    decl: ProgramDecl, function: Callable[..., Any], inputs: ParamsInputs, program: Program, config: Config
) -> None:
    params = inputs.params(config)
    at_params = f"{decl.params_where}: {decl.name} [{config.id}]"
    where = f"{decl.where}: {decl.name} [{config.id}]"
    _check_same_tree(decl, inputs, config, at_params)
    _check_params_dtype(decl, params, config, at_params)
    mesh = inputs.mesh
    placed = place([inputs.config(config).indices], mesh=mesh, parts=[decl.index_sharding or ()])
    indices = placed.args[0]
    extras = () if inputs.extra is None else (inputs.extras(config),)
    shown = f"its params and {_shape(indices)} indices" + (" and inputs" if extras else "")
    inputs.facts(config)  # one line now if ``tables`` names no leaf
    with (
        _said_as(f"{where}: {decl.function} fails on {shown}"),
        guarded(f"{where}: tracing {decl.function}"),
        placed.tracing(),
    ):
        outputs = jax.eval_shape(function, params, indices, *extras)
    if decl.kind in ("forward", "step"):
        return
    _check_differentiable(decl, params, at_params)
    _check_float_outputs(decl, outputs, f"{where}: {decl.function} on {shown}")
    # jax.grad gives the gradient the parameters' pytree, shapes and dtypes: what is left is to trace it.
    _trace_grad(decl, program, config, mesh, where)


def _check_same_tree(decl: ProgramDecl, inputs: ParamsInputs, config: Config, at_params: str) -> None:
    first = CONFIGS[decl.configs[0]]
    if inputs.treedef(config) != inputs.treedef(first):
        theirs = jax.tree_util.tree_structure(inputs.params(first))
        raise InvariantsError(
            f"{at_params}: {decl.params}(config) returns another pytree in {config.id} than in {first.id}: "
            f"{jax.tree_util.tree_structure(inputs.params(config))} against {theirs}"
        )


def _check_params_dtype(decl: ProgramDecl, params: object, config: Config, at_params: str) -> None:
    floats = {
        np.dtype(x.dtype) for x in jax.tree_util.tree_leaves(params) if jnp.issubdtype(x.dtype, jnp.inexact)
    }
    if not floats or np.dtype(config.table.dtype) in floats:
        return
    # The configurations that differ from this one in their dtype alone.
    fit = [
        cid
        for cid, c in CONFIGS.items()
        if np.dtype(c.table.dtype) in floats
        and dataclasses.replace(c, table_dtype=config.table_dtype) == config
    ]
    raise InvariantsError(
        f"{at_params}: {decl.params}(config) returns {', '.join(sorted(map(str, floats)))} parameters "
        f"where the configuration {config.id} is {np.dtype(config.table.dtype)}: a configuration names "
        "the parameters' dtype in snapshots and items"
        + (f"; list configs = [{', '.join(repr(c) for c in fit)}]" if fit else "")
    )


def _check_float_outputs(decl: ProgramDecl, outputs: object, where: str) -> None:
    out_leaves = [x for x in jax.tree_util.tree_leaves(outputs) if hasattr(x, "dtype")]
    if not any(jnp.issubdtype(x.dtype, jnp.inexact) for x in out_leaves):
        got = ", ".join(_shape(x) for x in out_leaves) or "no arrays"
        raise InvariantsError(
            f"{where} returns {got}: a {decl.kind} differentiates the sum of its floating-point outputs, "
            "and it has none"
        )


def _check_differentiable(decl: ProgramDecl, params: object, at_params: str) -> None:
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        if not jnp.issubdtype(leaf.dtype, jnp.inexact):
            raise InvariantsError(
                f"{at_params}: leaf params{jax.tree_util.keystr(path)} is {_shape(leaf)}: a {decl.kind} "
                "differentiates every parameter, and only floating-point ones have a gradient"
            )


class ArgumentsInputs:
    """The arguments of a program with ``arguments``: ``factory(config)`` (or ``factory()``) gives a tuple of
    them, each a pytree of arrays or ``jax.ShapeDtypeStruct``s, and the function is called on them as
    written. The first is the parameters: what a backward differentiates and a step donates."""

    def __init__(self, decl: ProgramDecl, factory: Callable[..., Any]) -> None:
        self.decl = decl
        self.factory = factory
        self.mesh = abstract_mesh(decl)
        self.signature = decl.signature
        self._made: dict[str, tuple[Any, ...]] = {}
        self._draws: dict[tuple[str, int], tuple[Any, ...]] = {}

    def arguments(self, config: Config) -> tuple[Any, ...]:
        if config.id not in self._made:
            decl = self.decl
            where = f"{decl.arguments_where}: {decl.name}"
            given = ParamsInputs(decl, self.factory).config(config)
            takes_config = _takes_an_argument(self.factory)
            with _said_as(f"{where}: {decl.arguments}() fails"), guarded(f"{where}: {decl.arguments}()"):
                made = self.factory(given) if takes_config else self.factory()
            if not isinstance(made, (tuple, list)) or not made:
                raise InvariantsError(
                    f"{where}: {decl.arguments}() must return a tuple of the function's arguments, got "
                    f"{type(made).__name__}"
                )
            self._made[config.id] = tuple(
                _check_leaves(tuple(made), where, decl.arguments or "", "arguments")
            )
        return self._made[config.id]

    def treedef(self, config: Config) -> Any:
        return jax.tree_util.tree_structure(self.arguments(config))

    def param_leaves(self, config: Config) -> int:
        return len(jax.tree_util.tree_leaves(self.arguments(config)[0]))

    def specs(self, config: Config) -> tuple[Any, ...]:
        leaves = jax.tree_util.tree_leaves(self.arguments(config))
        return tuple(jax.ShapeDtypeStruct(tuple(x.shape), x.dtype) for x in leaves)

    def partition_specs(self, config: Config) -> tuple[tuple[str | None, ...], ...]:
        named = [getattr(x, "sharding", None) for x in jax.tree_util.tree_leaves(self.arguments(config))]
        return tuple(tuple(s.spec) if isinstance(s, NamedSharding) else () for s in named)

    def facts(self, config: Config) -> dict[str, int]:
        """``table_bytes``: the parameters' (the first argument's floating-point leaves); no lookup facts."""
        params = jax.tree_util.tree_leaves(self.arguments(config)[0])
        floats = [x for x in params if jnp.issubdtype(x.dtype, jnp.inexact)]
        size = sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in floats)
        return {"table_bytes": size, "row_bytes": 0, "vocab": 0, "lookups": 0}

    def draw(self, config: Config, distribution: Distribution, seed: int) -> tuple[Any, ...]:
        """Concrete leaves, read-only: the factory's arrays where it gave some (indices among them), else a
        normal draw, and zeros for an integer leaf given as a shape (an index in range of any array)."""
        key = (config.id, seed)
        if key not in self._draws:
            rng = np.random.default_rng(seed + 1)
            out = [_drawn(leaf, rng, 1) for leaf in jax.tree_util.tree_leaves(self.arguments(config))]
            for a in out:
                a.flags.writeable = False
            self._draws[key] = tuple(out)
        return self._draws[key]


def _takes_an_argument(factory: Callable[..., Any]) -> bool:
    try:
        return bool(inspect.signature(factory).parameters)
    except (TypeError, ValueError):  # a builtin: called with the configuration, as params factories are
        return True


def _build_with_arguments(decl: ProgramDecl) -> Program:
    function = _import(decl)
    factory = _import(decl, decl.arguments, decl.arguments_where)
    inputs = ArgumentsInputs(decl, factory)
    first = CONFIGS[decl.configs[0]]

    def split(leaves: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(jax.tree_util.tree_unflatten(inputs.treedef(first), leaves))

    def run(*leaves: Any) -> Any:
        return function(*split(leaves))

    def backward(*leaves: Any) -> Any:
        params, *rest = split(leaves)
        return jax.grad(lambda p: _total(function(p, *rest)))(params)

    fn = backward if decl.kind == "backward" else run
    fn.__name__ = decl.name
    program = _program(decl, fn, inputs)
    for config_id in decl.configs:
        config = CONFIGS[config_id]
        arguments = inputs.arguments(config)
        where = f"{decl.where}: {decl.name} [{config_id}]"
        placed = place(inputs.specs(config), mesh=inputs.mesh, parts=_parts(program, config))
        with (
            _said_as(f"{where}: {decl.function} fails on the arguments {decl.arguments} gives"),
            guarded(f"{where}: tracing {decl.function}"),
            placed.tracing(),
        ):
            outputs = jax.eval_shape(function, *split(tuple(placed.args)))
        if decl.kind == "backward":
            _check_differentiable(decl, arguments[0], f"{decl.arguments_where}: {decl.name} [{config_id}]")
            _check_float_outputs(decl, outputs, f"{where}: {decl.function}")
            _trace_grad(decl, program, config, inputs.mesh, where)
    return program
