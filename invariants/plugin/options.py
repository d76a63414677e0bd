"""The gate's command-line options, one table: the pytest plugin registers every row, and ``python -m
invariants gate`` shows and forwards the rows marked ``forwarded``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from .. import _config

if TYPE_CHECKING:
    from ..catalog.programs import Program
    from ..specfile.reader import ProgramDecl


@dataclasses.dataclass(frozen=True)
class Option:
    flag: str
    help: str
    flags: dict[str, Any] = dataclasses.field(default_factory=dict)  # argparse keywords beyond help/default
    default: Any = None
    env: str | None = None  # the variable that gives the default
    forwarded: bool = False  # ``invariants gate`` lists it in its --help and passes it to pytest as given

    def keywords(self) -> dict[str, Any]:
        default = _config.get(self.env, self.default) if self.env else self.default
        if self.flags.get("action") == "store_true":
            default = False
        return {**self.flags, "default": default, "help": self.help}


def _switch(flag: str, help: str, forwarded: bool = False) -> Option:
    return Option(flag, help, {"action": "store_true"}, forwarded=forwarded)


OPTIONS: tuple[Option, ...] = (
    Option(
        "--targets",
        "comma-separated targets: all (default), runtime, cpu, tpu, gpu, or names such as tpu-v5e",
        env=_config.name("INVARIANTS_TARGETS"),
    ),
    Option(
        "--programs",
        "comma-separated programs: names (catalog:NAME is the catalog's, where a project's program "
        "has its name), patterns such as 'vmap_*', kind:backward or tag:core (default: all); a project's "
        "programs left out are neither imported nor traced",
    ),
    Option(
        "--configs",
        "comma-separated configurations: ids such as f32 or bf16-llm, or patterns such "
        "as 'bf16*' (default: all of each program's; the snapshots of configurations not selected are "
        "neither compared nor deleted)",
    ),
    _switch(
        "--raw-invariants",
        "evaluate every assert as written, ignoring 'when' scopes and ratchets (what bisect uses)",
    ),
    _switch(
        "--record-baselines",
        "re-record the efficiency baselines of the timed programs "
        "(snapshots/<target>/efficiency/); --snapshot-update alone never rewrites them",
        forwarded=True,
    ),
    Option(
        "--spec-dir",
        "folder of *.toml spec files to use instead of the package's invariants/*.toml; "
        "repeat it to use several (their [[program]] entries declare a project's own programs)",
        {"action": "append"},
    ),
    Option(
        "--snapshot-dir",
        "where snapshots are read and written (default: snapshots/ below the rootdir)",
        env=_config.name("INVARIANTS_SNAPSHOT_DIR"),
    ),
    Option(
        "--catalog-snapshot-dir",
        "where the catalog's snapshots are read (default: --snapshot-dir); "
        "read-only when it differs from --snapshot-dir",
    ),
    _switch(
        "--delete-obsolete-snapshots",
        "with --snapshot-update, also delete the obsolete snapshots "
        "it lists in a folder whose every owner it cannot know (a downstream --snapshot-dir, or any run "
        "given --spec-dir); the catalog's own folder needs no flag",
        forwarded=True,
    ),
    _switch("--no-catalog", "leave the catalog's programs out: only the programs the spec files declare"),
    Option(
        "--gate-command",
        "the command line that started this run, for the hints in messages (set by `invariants gate`)",
    ),
    Option(
        "--results-json",
        "where the run's structures, verdicts and ratios are written for `python -m invariants report`",
        default="artifacts/results.json",
        env=_config.name("INVARIANTS_RESULTS"),
    ),
    Option(
        "--shard",
        "run shard K of N (e.g. 1/4) of the selection: a compile's items stay in one shard, split by "
        "pytest-split's durations file (.test_durations) where there is one, else by a stable hash; "
        "`python -m invariants report` merges the shards' results files",
        {"metavar": "K/N"},
        forwarded=True,
    ),
    Option(
        "--compile-threads",
        "compile the selected programs ahead of their items on N threads (default: the CPU count; 0: each "
        "item compiles what it reads; under xdist always 0, each worker compiling its own items)",
        {"type": int, "metavar": "N"},
    ),
    _switch(
        "--pin-workers",
        "under xdist, run each worker on one core of its own (when there are as many cores as workers): "
        "each worker's compiler thread pools then fit its core instead of contending for all of them",
    ),
    Option(
        "--cache-dir",
        "the compile cache's folder: what a compile gave, kept between runs under a key "
        "of everything that can change it (default: ~/.cache/jax-embedding-invariants/compiled)",
        {"metavar": "DIR"},
        env=_config.name("INVARIANTS_CACHE_DIR"),
        forwarded=True,
    ),
    _switch("--no-cache", "compile everything again, reading and writing no compile cache", forwarded=True),
    Option(
        "--user-code-timeout",
        "seconds one import of a project's module, one call of its params or "
        "inputs factory, or one trace of its function may take before the run fails in one line "
        "(default: INVARIANTS_USER_CODE_TIMEOUT, else 300)",
        {"metavar": "SECONDS"},
    ),
    Option(
        "--hlo-dump-dir",
        "where failing items write their optimized HLO and jaxpr (default: artifacts/hlo)",
        default="artifacts/hlo",
        env=_config.name("INVARIANTS_DUMP_DIR"),
    ),
    _switch(
        "--keep-hlo",
        "write the optimized HLO, jaxpr and kernel code of every program an item reads to --hlo-dump-dir, "
        "passing and ratcheted ones too (default: a failing item's alone)",
        forwarded=True,
    ),
)

# What a run is given besides its options: the self-check's injected programs, by name.
PROGRAM_SWAPS = pytest.StashKey[dict[str, Callable[..., Any]]]()
# And the programs a project declares, built by the ``gate`` command to check them before pytest starts.
BUILT_PROGRAMS = pytest.StashKey[dict["ProgramDecl", "Program"]]()
