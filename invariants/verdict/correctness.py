"""The ``[[correctness]]`` checks of the spec files, which run programs (JAX) on the runtime target and
compare their values: ``agree`` with a reference program, out-of-bounds indices, and narrow index types."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence

import jax
import numpy as np

from ..catalog.arguments import make_arguments
from ..catalog.programs import Config, get_config
from ..catalog.registry import Programs
from ..compile.compat import full_precision_matmuls
from ..scope.placement import configs_for
from ..scope.targets import Target
from ..specfile.reader import CorrectnessCheck, Spec, scope_of, select_programs
from .checks import check_specs, config_matches, on_targets, unmet_condition

# Relative to the largest magnitude: gradients sum thousands of rows in orders that differ between forms.
_TOLERANCE = {"f32": 1e-5, "bf16": 2e-2}
_KEEP_BYTES = 16 << 20  # the largest output a run remembers (a tied program's logits are not kept)
# The lowered module's own name (``module @jit_take``): the one word of it that names the program.
_MODULE_NAME = re.compile(r"^module @\S+", re.MULTILINE)

# What each mode gives for row V (one past the end) and row -1, pinned so that a change in JAX's
# out-of-bounds semantics fails.
_OOB_EXPECT = {
    "clamp": ("row V-1", "row 0"),
    "fill_nan": ("nan", "row V-1"),
    "fill_zero": ("zero", "row V-1"),
    "wrap": ("row 0", "row V-1"),
    "wrap_negative_clamp": ("row V-1", "row V-1"),
}


class Correctness:
    """The correctness checks of one run, on its ``programs``.

    A program's output is remembered for the run by what runs, not by its name: its lowered module (its own
    name aside), its argument and result trees, and what drew its arguments. A reference such as ``take``
    is checked against a dozen programs on the same arguments, and half of the catalog's forms lower to a
    module another form already ran (flax's ``Embed`` is ``take``): the same executable on the same input
    would check nothing more.
    """

    def __init__(self, programs: Programs) -> None:
        self.programs = programs
        self._outputs: dict[tuple[object, ...], np.ndarray] = {}

    def run(self, case: CorrectnessCase) -> str | None:
        """None when the check holds, else one line saying what differs."""
        check: Callable[[CorrectnessCheck, str, Config, str], str | None] = getattr(self, case.check.check)
        return check(case.check, case.program, get_config(case.config), case.distribution)

    def _output(
        self, program: str, config: Config, args: Sequence[np.ndarray], drawn: tuple[str, str] | None = None
    ) -> np.ndarray:
        """The program's output on ``args`` as float32, remembered when ``drawn`` says who drew them on which
        distribution (``make_arguments`` gives the same arguments for the same drawer and configuration)."""
        # A TPU's default precision rounds a matmul's float32 operands to bfloat16 passes: a one-hot lookup
        # would be a few units in the third digit off the forms that gather.
        with full_precision_matmuls():
            lowered = jax.jit(self.programs[program].fn).lower(*args)
        key = None
        if drawn is not None:
            module = _MODULE_NAME.sub("module", lowered.as_text(), count=1)
            shapes = tuple((a.shape, str(a.dtype)) for a in args)
            key = (module, str(lowered.in_tree), str(lowered.out_tree), config.id, drawn, shapes)
            if key in self._outputs:
                return self._outputs[key]
        out = np.asarray(jax.device_get(lowered.compile()(*args)), dtype=np.float32)
        if key is not None and out.nbytes <= _KEEP_BYTES:
            out.flags.writeable = False
            self._outputs[key] = out
        return out

    def agree(self, check: CorrectnessCheck, program: str, config: Config, distribution: str) -> str | None:
        """``program`` returns the values of ``check.reference`` on valid indices (gradients too)."""
        assert check.reference is not None  # the spec reader requires one for 'agree'
        drawer = self.programs[program]
        args = make_arguments(drawer, config, distribution)  # type: ignore[arg-type]
        drawn = (drawer.name if drawer.inputs is not None else drawer.kind, distribution)
        got = self._output(program, config, args, drawn)
        want = self._output(check.reference, config, args, drawn)
        if got.shape != want.shape:  # numpy would broadcast or raise
            return f"shape {got.shape} differs from {check.reference}'s {want.shape}"
        tol = _TOLERANCE[config.table_dtype] * max(1.0, float(np.abs(want).max()))
        err = float(np.abs(got - want).max())
        if not err <= tol:
            return f"max |{program} - {check.reference}| = {err:.3g} > {tol:.3g}"
        return None

    def out_of_bounds(
        self, check: CorrectnessCheck, program: str, config: Config, distribution: str
    ) -> str | None:
        """Indices V and -1 give what ``check.expect`` names (a key of ``_OOB_EXPECT``)."""
        assert check.expect is not None  # the spec reader requires one of its words
        vocab = config.vocab
        table = np.arange(vocab * config.width, dtype=np.float32).reshape(vocab, config.width) + 1
        table = table.astype(np.dtype(config.table.dtype))
        x = np.array([vocab, -1], dtype=np.dtype(config.indices.dtype))
        out = self._output(program, config, (table, x))
        rows = {"row 0": table[0], "row V-1": table[-1]}

        def what(row: np.ndarray) -> str:
            if np.isnan(row).all():
                return "nan"
            if (row == 0).all():
                return "zero"
            for name, ref in rows.items():
                if np.array_equal(row, np.asarray(ref, dtype=np.float32)):
                    return name
            return "something else"

        got = (what(out[0]), what(out[1]))
        want = _OOB_EXPECT[check.expect]
        if got != want:
            return (
                f"index V gave {got[0]} and index -1 gave {got[1]}; "
                f"'{check.expect}' means {want[0]} and {want[1]}"
            )
        return None

    def narrow_index(
        self, check: CorrectnessCheck, program: str, config: Config, distribution: str
    ) -> str | None:
        """int8 indices -1..126 into an 8192-row table (past int8's range), pinned by ``expect``."""
        vocab = 8192
        table = np.arange(vocab * config.width, dtype=np.float32).reshape(vocab, config.width)
        x = np.arange(-1, 127, dtype=np.int8)
        try:
            out = np.asarray(jax.jit(self.programs[program].fn)(table, x))
            got = "ok" if np.array_equal(out, table[x.astype(np.int64)]) else "wrong_rows"
        except OverflowError:
            got = "overflow_error"
        if got != check.expect:
            return f"int8 indices into {vocab} rows: got {got}, expected {check.expect}"
        return None


# A spec's ``check`` values, each the name of the method of :class:`Correctness` that runs it.
CORRECTNESS = ("agree", "out_of_bounds", "narrow_index")


@dataclasses.dataclass(frozen=True)
class CorrectnessCase:
    check: CorrectnessCheck
    program: str
    config: str
    distribution: str
    skip: str | None = None

    @property
    def id(self) -> str:
        return f"{self.program}-{self.config}-{self.distribution}-{self.check.id}"


def expand_correctness(
    specs: Iterable[Spec], runtime: Target, programs: Programs | None = None
) -> list[CorrectnessCase]:
    """Every correctness item on ``runtime`` of the run's ``programs`` (default: the catalog's alone); the
    specs are checked first."""
    specs = list(specs)
    programs = programs if programs is not None else Programs()
    check_specs(specs, programs=programs)
    cases = []
    for spec in (s for s in specs if on_targets(runtime, s.targets)):
        for check in (c for c in spec.correctness if on_targets(runtime, c.targets)):
            cases += _cases(
                check, select_programs(check.programs, scope_of(spec, programs)), runtime, programs
            )
    return cases


def _cases(
    check: CorrectnessCheck, selected: list[str], runtime: Target, programs: Programs
) -> list[CorrectnessCase]:
    """Per program it selects, configuration it runs in, and distribution."""
    skip = unmet_condition(check)
    return [
        CorrectnessCase(check, name, config, dist, skip)
        for name in selected
        for config in configs_for(runtime, programs[name])
        if config_matches(config, check.configs) and not get_config(config).compile_only
        for dist in check.distributions
    ]
