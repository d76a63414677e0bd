"""The compatibility points of :mod:`invariants.compile.compat`, each on whichever JAX runs this file: the
pin in the project's own tests, the oldest supported release under ``tox -e jax0430``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec

from invariants._errors import InvariantsError
from invariants._supported import ReleaseLacks
from invariants.compile import compat
from invariants.compile.compat import (
    abstract_mesh,
    axis_types,
    full_precision_matmuls,
    module_text,
    tracing_on,
)

TABLE = jax.ShapeDtypeStruct((8, 4), jnp.float32)
INDICES = jax.ShapeDtypeStruct((3,), jnp.int32)


def _lowered_at(line: int) -> jax.stages.Lowered:
    """The same function, named alike, defined at ``line`` of its file."""
    namespace = {"jnp": jnp}
    source = "\n" * line + "def lookup(w, x):\n    return jnp.take(w, x, axis=0)\n"
    exec(compile(source, "<program>", "exec"), namespace)
    return jax.jit(namespace["lookup"]).lower(TABLE, INDICES)


def test_module_text_is_blind_to_where_the_program_was_written() -> None:
    here, there = _lowered_at(1), _lowered_at(40)
    located = [lo.compiler_ir("stablehlo").operation.get_asm(enable_debug_info=True) for lo in (here, there)]
    assert located[0] != located[1], "the two lowerings carry no locations: this test checks nothing"
    assert module_text(here) == module_text(there)
    assert "gather" in module_text(here)


def test_full_precision_matmuls_lower_float32_dots_at_the_highest_precision() -> None:
    def matmul(a, b):
        return a @ b

    square = jax.ShapeDtypeStruct((4, 4), jnp.float32)
    default = module_text(jax.jit(matmul).lower(square, square))
    with full_precision_matmuls():
        full = module_text(jax.jit(matmul).lower(square, square))
    assert "precision = [HIGHEST, HIGHEST]" not in default, "the default is the highest: this checks nothing"
    assert "precision = [HIGHEST, HIGHEST]" in full


def test_a_concrete_mesh_set_while_tracing_resolves_the_program_s_partition_specs() -> None:
    mesh = Mesh(np.array(jax.devices()[:1]), ("x",))

    def constrained(w):
        return jax.lax.with_sharding_constraint(w, PartitionSpec("x"))

    with pytest.raises(Exception, match="mesh"):  # what the mesh is there for: without it, no trace
        jax.jit(constrained).lower(TABLE)
    with tracing_on(mesh):
        text = module_text(jax.jit(constrained).lower(TABLE))
    assert "sharding" in text.lower()  # custom_call @Sharding (0.4.30), sdy.sharding_constraint (the pin)


def test_a_release_without_an_api_a_mesh_needs_is_the_tool_s_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(jax.sharding, "use_abstract_mesh", raising=False)
    monkeypatch.delattr(jax.sharding, "AxisType", raising=False)
    monkeypatch.delattr(jax.sharding, "AbstractMesh", raising=False)
    makers = (
        lambda: tracing_on(object()),
        lambda: axis_types("auto", 2),
        lambda: abstract_mesh((2,), ("x",), "auto"),
    )
    for make in makers:
        with pytest.raises(ReleaseLacks) as said:
            make()
        assert str(said.value).startswith(f"jax {jax.__version__} has no jax.sharding.")
        assert str(said.value).endswith(": a limit of the tool on this release, not of the program")


def test_axis_types_where_the_release_has_them() -> None:
    if not hasattr(jax.sharding, "AxisType"):
        pytest.skip(f"jax {jax.__version__} has no jax.sharding.AxisType (the test above covers it)")
    assert axis_types("explicit", 2) == (jax.sharding.AxisType.Explicit,) * 2
    assert axis_types("auto", 1) == (jax.sharding.AxisType.Auto,)


def _constrained(w: jax.Array) -> jax.Array:
    return jax.lax.with_sharding_constraint(w * 2, PartitionSpec("x"))


def test_with_sharding_constraint_on_an_abstract_mesh_traces_or_is_the_tool_s_limit() -> None:
    """On the pin a PartitionSpec resolves on the abstract mesh; on a release where it finds no mesh there
    (jax 0.7.2, ``.ci/run`` runs this file on it) the program's error is the tool's limit, in its line."""
    if not hasattr(jax.sharding, "AbstractMesh"):
        pytest.skip(f"jax {jax.__version__} has no jax.sharding.AbstractMesh (the test above covers it)")
    mesh = abstract_mesh((1,), ("x",), "auto")
    if compat._abstract_mesh_constrains():
        with tracing_on(mesh):
            assert jax.eval_shape(_constrained, TABLE).shape == TABLE.shape
        return
    with pytest.raises(ReleaseLacks) as said, tracing_on(mesh):
        jax.eval_shape(_constrained, TABLE)
    assert str(said.value) == (
        f"jax {jax.__version__} has no mesh for jax.lax.with_sharding_constraint in "
        "jax.sharding.use_abstract_mesh, which this tool needs to trace a program on a mesh without devices: "
        "a limit of the tool on this release, not of the program"
    )


def test_where_the_abstract_mesh_does_not_constrain_an_error_in_the_trace_is_the_tool_s_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Such a release, on whichever runs this: what the program raises is the limit; the tool's own line
    (an InvariantsError) passes as it is."""
    if not hasattr(jax.sharding, "use_abstract_mesh"):
        pytest.skip(f"jax {jax.__version__} has no jax.sharding.use_abstract_mesh (covered above)")
    monkeypatch.setattr(compat, "_abstract_mesh_constrains", lambda: False)
    mesh = abstract_mesh((1,), ("x",), "auto")
    limit = r"has no mesh for jax\.lax\.with_sharding_constraint"
    with pytest.raises(ReleaseLacks, match=limit), tracing_on(mesh):
        raise RuntimeError("with_sharding_constraint requires a non-empty mesh")
    own = InvariantsError("a line of the tool's own")
    with pytest.raises(InvariantsError) as passed, tracing_on(mesh):
        raise own
    assert passed.value is own


def test_a_device_trace_leaves_out_python_and_host_events_where_the_release_can_say_so(tmp_path) -> None:
    double = jax.jit(lambda x: x * 2)
    x = jnp.ones(8)
    double(x).block_until_ready()
    with compat.device_trace(str(tmp_path)):
        for _ in range(5):
            double(x).block_until_ready()
    (path,) = tmp_path.glob("plugins/profile/*/*.xplane.pb")
    if not hasattr(jax.profiler, "ProfileOptions"):  # the oldest releases: the defaults, a trace all the same
        return
    planes = jax.profiler.ProfileData.from_file(str(path)).planes
    host = [line.name for plane in planes if plane.name.startswith("/host") for line in plane.lines]
    assert host == [], f"the trace collected host lines {host}"
