"""Targets: the runtime first, selection by family, name or 'runtime', and which configurations compile."""

from __future__ import annotations

import pytest

from invariants._errors import InvariantsError
from invariants._programs import CATALOG
from invariants._targets import all_targets, select_targets


def test_the_runtime_comes_first_and_names_are_unique():
    targets = all_targets()
    first = next(iter(targets.values()))
    assert first.mode == "runtime" and first.name == "cpu"
    assert len({t.name for t in targets.values()}) == len(targets)


def test_selection_by_family_name_and_runtime():
    assert [t.name for t in select_targets("runtime")] == ["cpu"]
    tpus = select_targets("tpu")
    assert tpus and all(t.family == "tpu" for t in tpus)
    assert [t.name for t in select_targets("cpu,tpu-v5e")] == ["cpu", "tpu-v5e"]
    with pytest.raises(InvariantsError, match=r"^--targets: unknown target 'tpu-v5x' \(did you mean"):
        select_targets("tpu-v5x")


def test_configs_for_are_the_programs_own():
    for target in all_targets().values():
        for program in CATALOG.values():
            configs = target.configs_for(program)
            assert len(set(configs)) == len(configs), (target.name, program.name)
    cpu = all_targets()["cpu"]
    assert cpu.configs_for(CATALOG["naive"])[0] == "f32"
