"""The one-file reproducer of a failed compile (no JAX here): a script that rebuilds the program's abstract
arguments as the gate makes them and writes out the call that fails, to be run again, bisected, or attached
to a report upstream.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..catalog.project import Project
from ..records.compiled import Key
from ..scope.targets import HOST_DEVICE_FLAG, Target


def reproducer(key: Key, target: Target, project: Project, first: str, versions: Mapping[str, str]) -> str:
    """The script that compiles ``key`` again, as the gate compiled it when it failed with ``first``."""
    stated = ", ".join(f"{k} {v}" for k, v in versions.items())
    setup = [f"os.environ.update({project.environment()!r})"] if project.own else []
    if target.mode == "subprocess":  # its devices exist only in a process started with the flag
        setup += [
            f"os.environ['XLA_FLAGS'] = (os.environ.get('XLA_FLAGS', '') + ' {HOST_DEVICE_FLAG}').strip()",
            "os.environ['JAX_PLATFORMS'] = 'cpu'",
        ]
    lines = [
        f'"""Compile {key.program} [{key.config}] for {key.target} as the gate did when it failed with:',
        "",
        f"    {first}".replace("\\", "\\\\").replace('"""', '\\"\\"\\"'),
        "",
        f"with {stated}. Run it with the same packages: python THIS_FILE.",
        '"""',
        "",
        "import os",
        "",
        *setup,
        "",
        "import jax  # noqa: E402",
        "",
        "from invariants.catalog.downstream import load_project  # noqa: E402",
        "from invariants.catalog.project import Project  # noqa: E402",
        "from invariants.scope.targets import all_targets  # noqa: E402",
        "from invariants.compile.artifacts import placement  # noqa: E402",
        "",
        "_, programs = load_project(Project.from_env())",
        f"program = programs.program({key.program!r})",
        f"target = all_targets()[{key.target!r}]  # {target.mode}: {_how(target)}",
        f"placed = placement(program, {key.config!r}, target)",
        'print("arguments:", *placed.args, sep="\\n  ")',
        'print("jit:", placed.jit_kwargs)',
        "with placed.tracing():",
        "    lowered = jax.jit(program.fn, **placed.jit_kwargs).lower(*placed.args)",
        "    lowered.compile()",
        'print("compiled: the failure does not reproduce with these packages")',
        "",
    ]
    return "\n".join(lines)


def _how(target: Target) -> str:
    if target.mode == "aot":
        return f"compiled ahead of time for the topology {target.topology}, on any host"
    if target.mode == "subprocess":
        return f"{target.device_count} host CPU devices"
    return "this host's runtime devices"
