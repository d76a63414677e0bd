"""The snapshot tier: each program's compiled structure on each target, against its snapshot file.

A snapshot lives in ``<snapshot dir>/<target>/<program>.<config>.txt``. In a downstream run the catalog's
programs are compared with the snapshots the installed package ships, which no update rewrites.
"""

from __future__ import annotations

import pytest

from invariants._paths import shown
from invariants.plugin import results as _results
from invariants.plugin.outcomes import dumped_line, snapshot_comparison, structure_failure
from invariants.snapshot.diff import older_format
from invariants.snapshot.render import render_summary

pytestmark = [pytest.mark.gate, pytest.mark.snapshot]


def test_structure(structure_key, gate, structure_snapshot, request, record_property):
    program, config, target = structure_key
    measured = gate.measured(structure_key)
    # Every numeric metric goes to the results file; the compiler's, the kernels' and the compile time
    # never into the snapshot text: they move with every compiler patch release, or with the machine. A
    # value the target does not provide is null there.
    record_property(
        *_results.record("structure", program=program, config=config, target=target,
                         compile_cache=gate.cache.outcome(structure_key), **measured.numbers())
    )  # fmt: skip
    summary = render_summary(measured, gate.all_programs[program].doc)
    path = gate.snapshots.path(structure_key)
    if not gate.snapshots.writable(program):
        if not path.exists():
            pytest.fail(f"{path}: no snapshot of {program}[{config}] on {target} to compare", pytrace=False)
        if summary != path.read_text():
            pytest.fail(
                f"{program}[{config}] on {target} no longer compiles to the package's snapshot (read-only; "
                "--no-catalog leaves the catalog out):\n"
                + "\n".join(snapshot_comparison(gate, structure_key, summary))
                + "\n"
                + dumped_line(gate, structure_key),
                pytrace=False,
            )
        return
    if not path.exists() and not gate.updating:
        # The command records the program on every target present (a new program needs them all), and
        # its gradient with it when there is one.
        programs = ",".join(p for p in (program, f"grad_{program}") if p in gate.all_programs)
        pytest.fail(
            f"{path}: no snapshot for {program}[{config}] on {target}; record it with: "
            + gate.update_command(request.path, "--snapshot-update", programs),
            pytrace=False,
        )
    if path.exists() and not gate.updating and older_format(path.read_text()):
        accept = gate.update_command(request.path, "--snapshot-update", program, target, config)
        pytest.fail(
            f"{shown(path)}: written in the snapshot format before kernels were named by what they are; "
            f"re-record it: {accept}",
            pytrace=False,
        )
    # syrupy compares (and, on --snapshot-update, writes); the failure is ours: what changed, to fit a screen
    # (the whole diff goes to the dump folder), with no traceback of this function.
    if structure_snapshot != summary:
        accept = gate.update_command(request.path, "--snapshot-update", program, target, config)
        pytest.fail(structure_failure(gate, structure_key, summary, accept), pytrace=False)
