"""The catalog: every program names configurations that exist, gradients come with their forwards, the
arguments match the declared shapes, and an unknown name is one line."""

from __future__ import annotations

import pytest

from invariants._errors import InvariantsError
from invariants.catalog.arguments import make_arguments
from invariants.catalog.programs import CATALOG, CONFIGS, SEED, get_config
from invariants.catalog.registry import get_program


def test_every_program_names_known_configs():
    for name, program in CATALOG.items():
        assert program.name == name and program.doc, name
        assert program.configs and set(program.configs) <= set(CONFIGS), name


def test_gradients_come_with_their_forward():
    for name, program in CATALOG.items():
        if name.startswith("grad_") and name[5:] in CATALOG:
            forward = CATALOG[name[5:]]
            assert program.kind != forward.kind and program.kind not in ("forward", "train"), name
            assert set(program.configs) <= set(forward.configs), name


@pytest.mark.parametrize("name", ["naive", "grad_take"])
def test_arguments_match_the_declared_specs(name: str):
    program = CATALOG[name]
    args = make_arguments(program, SEED)
    specs = program.argument_specs(SEED)
    assert [a.shape for a in args] == [s.shape for s in specs]
    assert args[1].max() < SEED.vocab and args[1].min() >= 0


@pytest.mark.parametrize("config", ["f32", "bf16"])
def test_arguments_are_drawn_once_and_shared_read_only(config: str):
    import numpy as np

    program = CATALOG["grad_take"]
    first = make_arguments(program, get_config(config), "zipf")
    again = make_arguments(program, get_config(config), "zipf")
    assert all(a is b for a, b in zip(first, again, strict=True))
    assert [a.dtype for a in first] == [np.dtype(s.dtype) for s in program.argument_specs(get_config(config))]
    with pytest.raises(ValueError, match="read-only"):
        first[0][0, 0] = 1
    # A different distribution or seed is a different draw.
    uniform = make_arguments(program, get_config(config), "uniform")
    assert not np.array_equal(uniform[1], first[1])
    assert not np.array_equal(make_arguments(program, get_config(config), "zipf", seed=1)[0], first[0])


def test_unknown_names_are_one_line():
    with pytest.raises(InvariantsError, match=r"^nave: unknown program \(did you mean 'naive'"):
        get_program("nave")
    with pytest.raises(InvariantsError) as err:
        get_config("f64")
    assert "\n" not in str(err.value) and "f64" in str(err.value)
