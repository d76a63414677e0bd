"""The snapshot tier: each program's compiled structure on each target, against its snapshot file.

A snapshot lives in ``<snapshot dir>/<target>/<program>.<config>.txt``. In a downstream run the catalog's
programs are compared with the snapshots the installed package ships, which no update rewrites.
"""

from __future__ import annotations

import pytest

from invariants._paths import shown
from invariants.compile.record import Key
from invariants.plugin import results as _results
from invariants.plugin.outcomes import dumped_line, fail, snapshot_comparison, structure_failure
from invariants.plugin.results import Failure
from invariants.snapshot.diff import older_format
from invariants.snapshot.render import render_summary

pytestmark = [pytest.mark.gate, pytest.mark.snapshot]


def test_structure(structure_key, gate, structure_snapshot, request, record_property):
    program, config, target = structure_key
    key = Key(*structure_key)
    measured = gate.measured(structure_key)
    # Every numeric metric goes to the results file; the compiler's, the kernels' and the compile time
    # never into the snapshot text: they move with every compiler patch release, or with the machine. A
    # value the target does not provide is null there.
    record_property(
        *_results.record(
            "structure",
            program=program,
            config=config,
            target=target,
            compile_cache=gate.cache.outcome(structure_key),
            **measured.numbers(),
        )
    )
    summary = render_summary(measured, gate.all_programs[program].doc)
    path = gate.snapshots.path(structure_key)
    if not gate.snapshots.writable(program):
        if not path.exists():
            what = f"no snapshot of {program}[{config}] on {target} to compare"
            fail(Failure("snapshot", what, key), f"{path}: {what}")
        if summary != path.read_text():
            what = "no longer compiles to the package's snapshot (read-only; "
            what += "--no-catalog leaves the catalog out)"
            fail(
                Failure("snapshot", what, key),
                f"{program}[{config}] on {target} {what}:\n"
                + "\n".join(snapshot_comparison(gate, structure_key, summary))
                + "\n"
                + dumped_line(gate, structure_key),
            )
        return
    if not path.exists() and not gate.updating:
        # The command records the program on every target present (a new program needs them all), and
        # its gradient with it when there is one.
        programs = ",".join(p for p in (program, f"grad_{program}") if p in gate.all_programs)
        what = f"no snapshot for {program}[{config}] on {target}; record it with: " + gate.update_command(
            request.path, "--snapshot-update", programs
        )
        fail(Failure("snapshot", what, key), f"{path}: {what}")
    if path.exists() and not gate.updating and older_format(path.read_text()):
        accept = gate.update_command(request.path, "--snapshot-update", program, target, config)
        what = (
            "written in the snapshot format before kernels were named by what they are; "
            f"re-record it: {accept}"
        )
        fail(Failure("snapshot", what, key), f"{shown(path)}: {what}")
    # syrupy compares (and, on --snapshot-update, writes); the failure is ours: what changed, to fit a screen
    # (the whole diff goes to the dump folder), with no traceback of this function.
    if structure_snapshot != summary:
        accept = gate.update_command(request.path, "--snapshot-update", program, target, config)
        fail(*structure_failure(gate, key, summary, accept))
