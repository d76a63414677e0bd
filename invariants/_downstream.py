"""A downstream project's own programs: the ``[[program]]`` entries of its spec files, as catalog programs.

The contract of ``function`` (``"module:attribute"``, imported with the working directory first on
``sys.path``, then the rest of ``sys.path``): it is **a lookup**, whatever the ``kind``::

    def lookup(table, indices):        # table: [V, D] array; indices: an integer array of any shape
        return rows                    # [*indices.shape, D], the table's dtype

It is called under ``jax.jit`` with the abstract arguments of each configuration it lists (the catalog's
configurations: ``f32`` is an f32[8192,32] table and s32[16384] indices, see
``invariants._programs.CONFIGS``). ``kind`` says which program is built around it, exactly as the catalog
builds its own:

* ``forward``: the lookup itself, ``(table, indices) -> rows``;
* ``backward``: its gradient with respect to the table, ``(table, indices, cotangent) -> d table``,
  through ``jax.vjp`` (a ``custom_vjp`` of the user's is what gets compiled);
* ``train``: one training step around it: embed [64, 256] tokens, mean-pool, project to 16 classes,
  softmax cross-entropy, gradients of table and projection.

Validation is strict, before anything compiles: the module must import, the attribute must be a callable
that accepts two positional arguments, and tracing it (``jax.eval_shape``) on every configuration must
give the rows above, for the backward a table-shaped gradient. Each failure is one line naming the spec
file and line. Programs built here go to :func:`invariants._registry.declare`.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from ._errors import InvariantsError
from ._programs import CONFIGS, Config, Program, _backward, _train_step
from ._spec import ProgramDecl


def _import(decl: ProgramDecl) -> Callable[..., Any]:
    module_name, _, attribute = decl.function.partition(":")
    where = f"{decl.where}: {decl.name}"
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # "the user's path": python -m puts it there; pytest and xdist may not
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # ImportError, or whatever the module raises while importing
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise InvariantsError(
            f"{where}: cannot import {module_name} ({type(err).__name__}: {first})"
        ) from None
    obj: Any = module
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise InvariantsError(f"{where}: {module_name} has no attribute {attribute!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InvariantsError(f"{where}: {decl.function} is a {type(obj).__name__}, not a function")
    return obj  # type: ignore[no-any-return,unused-ignore]


def _check_signature(decl: ProgramDecl, fn: Callable[..., Any]) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin or a C callable: tracing below decides
    try:
        sig.bind(object(), object())
    except TypeError as err:
        raise InvariantsError(
            f"{decl.where}: {decl.name}: {decl.function}{sig} must take (table, indices) positionally ({err})"
        ) from None


def _shape(spec: Any) -> str:
    import numpy as np

    short = {"float32": "f32", "bfloat16": "bf16", "int32": "s32", "int8": "s8"}
    dtype = short.get(np.dtype(spec.dtype).name, np.dtype(spec.dtype).name)
    return f"{dtype}[{','.join(map(str, spec.shape))}]"


def _check_trace(decl: ProgramDecl, fn: Callable[..., Any], program: Program, config: Config) -> None:
    import jax

    # A training step embeds [B, S] tokens: its third argument.
    indices = program.argument_specs(config)[2] if decl.kind == "train" else config.indices
    lookup_args = (config.table, indices)
    shown = f"{_shape(lookup_args[0])} table and {_shape(lookup_args[1])} indices"
    where = f"{decl.where}: {decl.name} [{config.id}]"
    try:
        out = jax.eval_shape(fn, *lookup_args)
    except Exception as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise InvariantsError(
            f"{where}: {decl.function} fails on {shown}: {type(err).__name__}: {first}"
        ) from None
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
    try:
        grads = jax.eval_shape(program.fn, *program.argument_specs(config))
    except Exception as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise InvariantsError(f"{where}: the {decl.kind} of {decl.function} fails: {first}") from None
    table_grad = grads if decl.kind == "backward" else grads[0]
    if tuple(table_grad.shape) != tuple(config.table.shape):
        raise InvariantsError(
            f"{where}: the gradient of {decl.function} is not table-shaped: {_shape(table_grad)}"
        )


def _named(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def lookup(table: Any, indices: Any) -> Any:
        return fn(table, indices)

    lookup.__name__ = name
    return lookup


@functools.cache
def build(decl: ProgramDecl) -> Program:
    """The program ``decl`` declares, its function imported and its contract checked (see module doc).

    Cached per declaration, so that declaring it again (an xdist worker, the ``gate`` command's check
    before pytest starts) gives the very same :class:`Program`.
    """
    lookup = _import(decl)
    _check_signature(decl, lookup)
    if not hasattr(lookup, "__name__"):  # a functools.partial or a callable object: the wrappers name it
        lookup = _named(lookup, decl.name)
    # The catalog's own wrappers: a user's backward or training step is built exactly like grad_take's.
    fn = {"forward": lambda f: f, "backward": _backward, "train": _train_step}[decl.kind](lookup)
    program = Program(decl.name, decl.kind, fn, decl.doc, decl.configs, decl.tags)  # type: ignore[arg-type]
    for config_id in decl.configs:
        _check_trace(decl, lookup, program, CONFIGS[config_id])
    return program


def build_all(decls: Iterable[ProgramDecl]) -> list[Program]:
    return [build(d) for d in decls]
