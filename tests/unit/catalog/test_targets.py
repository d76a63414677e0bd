"""Targets: the runtime first, selection by family, name or 'runtime', and which configurations compile."""

from __future__ import annotations

import pytest

from invariants._errors import InvariantsError
from invariants.catalog.programs import CATALOG
from invariants.scope.placement import configs_for
from invariants.scope.targets import GROUPS, all_targets, group_of, select_targets


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


def test_a_reports_groups_of_targets_hold_every_target_a_few_each():
    """The report draws a column per group: every target in one, none with more than four; a name no target
    has (another host's chip) goes with its family."""
    grouped: dict[str, list[str]] = {}
    for name in all_targets():
        grouped.setdefault(group_of(name), []).append(name)
    assert sorted(grouped) == sorted(GROUPS) and max(map(len, grouped.values())) <= 4, grouped
    assert grouped["TPU slices and pods"] == ["tpu-v5e-2x4", "tpu-v5e-4x4", "tpu-v5p-2x2x2"]
    assert grouped["TPU, gathers on the SparseCore"] == ["tpu-v5p-gather-offload", "tpu-v6e-gather-offload"]
    assert [group_of(n) for n in ("tpu-v7x", "gpu-h200", "npu-x1")] == ["TPU chips", "GPUs", "npu"]


def test_configs_for_are_the_programs_own():
    for target in all_targets().values():
        for program in CATALOG.values():
            configs = configs_for(target, program)
            assert len(set(configs)) == len(configs), (target.name, program.name)
    cpu = all_targets()["cpu"]
    assert configs_for(cpu, CATALOG["naive"])[0] == "f32"


def test_gpu_generations_compile_the_core_programs_in_f32_and_bf16():
    """A100 (sm_80), L4 (sm_89) and B200 (sm_100) beside the H100: the core forms, their gradients and the
    training steps, in the seed's configuration and bf16 (the atomics differ by dtype); nothing else."""
    targets = all_targets()
    for name in ("gpu-a100", "gpu-l4", "gpu-b200"):
        target = targets[name]
        assert target.family == "gpu" and target.mode == "aot" and target.unavailable_reason() is None
        assert configs_for(target, CATALOG["grad_take"]) == ("f32", "bf16")
        assert configs_for(target, CATALOG["train_take"]) == ("f32", "bf16")
        assert configs_for(target, CATALOG["take_clip"]) == ()  # not a core form
        assert configs_for(target, CATALOG["onehot_matmul"]) == ()  # lists bf16, but is not core
    assert [t.name for t in select_targets("gpu")] == ["gpu-h100", "gpu-a100", "gpu-l4", "gpu-b200"]


def test_a_program_aimed_at_a_core_target_compiles_there_in_its_own_configurations():
    """A declared program whose spec files name tpu-v6e (a core target: the seed's configuration of the core
    programs only) compiles there in every configuration it lists; on the targets it is not aimed at,
    nothing, an 'all' target included; a catalog program's targets are unchanged."""
    import dataclasses

    from invariants.specfile.reader import ProgramDecl

    targets = all_targets()
    configs = ("bf16", "f32-2d")
    decl = ProgramDecl("mine", "m:f", "forward", configs, frozenset({"user"}), "", "", aimed=("tpu-v6e",))
    mine = dataclasses.replace(CATALOG["take_clip"], name="mine", configs=configs, declaration=decl)
    assert configs_for(targets["tpu-v6e"], mine) == ("bf16", "f32-2d")
    assert configs_for(targets["tpu-v5p"], mine) == () and configs_for(targets["gpu-l4"], mine) == ()
    assert configs_for(targets["tpu-v5e"], mine) == ()  # an 'all' target compiles the catalog's, not this
    assert configs_for(targets["tpu-v5e"], CATALOG["take_clip"])  # as before
    assert configs_for(targets["tpu-v5e-2x4"], mine) == ()  # sharded targets compile mesh layouts only
    assert configs_for(targets["tpu-v6e"], CATALOG["take_clip"]) == ()


@pytest.mark.parametrize(
    "kind,name",
    [("NVIDIA A100-SXM4-80GB", "gpu-a100"), ("NVIDIA L4", "gpu-l4"), ("NVIDIA H100 80GB HBM3", "gpu-h100"),
     ("NVIDIA B200", "gpu-b200"), ("NVIDIA H200", "gpu-h200")],
)  # fmt: skip
def test_a_gpu_host_names_its_runtime_target_like_the_ahead_of_time_one(monkeypatch, kind, name):
    import jax

    from invariants.scope import targets as _targets

    class Device:
        platform = "gpu"
        device_kind = kind

    monkeypatch.setattr(jax, "devices", lambda *a: [Device()])
    assert _targets.runtime_target().name == name


@pytest.mark.parametrize(
    "platform,kind,name",
    [("tpu", "TPU v5 lite", "tpu-v5e"), ("gpu", "NVIDIA H100 80GB HBM3", "gpu-h100"),
     ("tpu", "TPU v4", "tpu-v4"), ("gpu", "NVIDIA A100-SXM4-80GB", "gpu-a100")],
)  # fmt: skip
def test_a_chip_compiles_what_its_ahead_of_time_twin_compiles(monkeypatch, platform, kind, name):
    """On a TPU or GPU host the runtime target replaces the AOT target of its name and checks that one's
    snapshots, recorded on a CPU host: each program in the same configurations, neither more (tpu-v5e on
    a real v5e once compiled f32-large, which its twin skips: ten 'no snapshot' failures; a real v4 or A100
    would compile every program where its twin compiles the core ones) nor fewer."""
    import jax

    from invariants.scope import targets as _targets

    twin = all_targets(_targets.CPU_RUNTIME)[name]

    class Device:
        device_kind = kind

    Device.platform = platform
    monkeypatch.setattr(jax, "devices", lambda *a: [Device()])
    chip = _targets.runtime_target()
    assert chip.name == name and chip.mode == "runtime" and twin.mode == "aot"
    for program in CATALOG.values():
        assert configs_for(chip, program) == configs_for(twin, program), program.name


def test_a_gpu_the_plugin_cannot_describe_skips_with_the_plugins_line(monkeypatch, tmp_path):
    """A release's CUDA plugin that does not know a device (or a description it refuses) makes that
    target unavailable, in one line with the plugin's first words, instead of a compile error per item."""
    import dataclasses

    from invariants.scope import targets as _targets

    (tmp_path / "bogus.txtpb").write_text("gpu_device_info { no_such_field: 1 }\n")
    monkeypatch.setattr(_targets, "_GPU_CONFIG_DIR", tmp_path)
    bogus = dataclasses.replace(all_targets()["gpu-b200"], name="gpu-bogus", topology="bogus")
    reason = bogus.unavailable_reason()
    assert reason is not None and reason.startswith("gpu-bogus: the CUDA plugin cannot describe this device")
    assert "\n" not in reason
    assert all_targets()["gpu-b200"].unavailable_reason() is None


def test_only_the_chips_with_sparsecores_compile_the_offload_size():
    """The offload size compiles on v5p and v6e, with libtpu's default flags and with the gather-offload
    flags, and nowhere else: at 1M rows it is minutes of compile and no chip without SparseCores needs it."""
    targets = all_targets()
    offload = {
        name: [p for p in CATALOG.values() if "f32-offload" in configs_for(t, p)]
        for name, t in targets.items()
    }
    assert {n for n, programs in offload.items() if programs} == {
        "tpu-v5p", "tpu-v6e", "tpu-v5p-gather-offload", "tpu-v6e-gather-offload",
    }  # fmt: skip
    flagged = targets["tpu-v6e-gather-offload"]
    assert {p.name: configs_for(flagged, p) for p in CATALOG.values() if configs_for(flagged, p)} == {
        name: ("f32-offload",)
        for name in ("take", "grad_take", "scatter_min", "grad_embedding_bag", "moe_decode_step")
    }
    assert "--xla_tpu_offload_gather_to_sparsecore=true" in flagged.libtpu_init_args
    # libtpu reads its flags once per process: a flagged target compiles in a child, the plain one here.
    assert flagged.in_child and not targets["tpu-v6e"].in_child


def test_libtpu_flags_are_part_of_the_compile_key():
    from invariants.compile.keys import target_fields

    targets = all_targets()
    plain, flagged = targets["tpu-v6e"], targets["tpu-v6e-gather-offload"]
    assert target_fields(flagged)["libtpu_init_args"] == repr(flagged.libtpu_init_args)
    assert target_fields(plain)["libtpu_init_args"] == repr("")
