"""The README's promises, run as a reader runs them (the gate's plugin in this process, ``gate_pytester``)
on scratch copies: what the first run prints, what a failure reads like, and the command that accepts a
change.

The README shows the full gate's output; these runs take a small selection of it, so the first run's
lines are matched by their shape (numbers, spacing and the cache's folder free), the failure's verbatim."""

from __future__ import annotations

import re
from pathlib import Path

from gatekit import ROOT, InProcess, snapshot_bytes

README = ROOT / "README.md"


def _block(marker: str) -> list[str]:
    """The lines of the fenced block after the README's ``<!-- readme-test: MARKER -->``."""
    text = README.read_text()
    tag = f"<!-- readme-test: {marker} -->\n"
    assert tag in text, f"README.md: no {tag.strip()}"
    return text.split(tag, 1)[1].split("\n", 1)[1].split("\n```", 1)[0].splitlines()


def _in_order(expected: list[str], output: str, match) -> None:
    """Each expected line but ``...`` matches a line of ``output``, in the README's order."""
    lines = output.splitlines()
    at = 0
    for want in expected:
        if want == "...":
            continue
        found = next((i for i in range(at, len(lines)) if match(want, lines[i])), None)
        assert found is not None, f"README line {want!r} not found (in order) in:\n{output[-4000:]}"
        at = found + 1


def _shape(line: str) -> re.Pattern[str]:
    """The line with any number, any run of spaces and any compile cache folder standing for their kind."""
    folder = "~/.cache/jax-embedding-invariants/compiled"
    parts = re.split(r"(\d+(?:\.\d+)?|\s+|" + re.escape(folder) + ")", line.strip())
    kinds = {folder: ".+?"}
    pattern = "".join(
        kinds.get(p)
        or (r"\d+(?:\.\d+)?" if re.fullmatch(r"\d[\d.]*", p) else r"\s+" if p.isspace() else re.escape(p))
        for p in parts
        if p
    )
    return re.compile(pattern)


def test_the_first_run_prints_what_the_readme_shows(gate_pytester: InProcess, tmp_path: Path):
    gate_pytester.project(targets=("cpu", "tpu-v5e", "tpu-v4", "tpu-v5p", "tpu-v6e"))
    programs = "naive,take,grad_vmap_naive,grad_vmap_take"
    # -v against -q: pytest's header, as a plain run prints it. A cache of its own: a first run.
    proc = gate_pytester.pytest(
        "-q", "-v", "--targets", "cpu,tpu", "--programs", programs, "--configs", "f32",
        "-m", "not throughput", env={"INVARIANTS_CACHE_DIR": str(tmp_path / "cache")},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    _in_order(_block("first-run"), proc.stdout, lambda want, got: _shape(want).fullmatch(got.strip()))


def test_a_failure_reads_as_the_readme_shows(gate_pytester: InProcess):
    """The README's failure is the self-check's row-loop injection into grad_take, on the CPU."""
    gate_pytester.project(targets=("cpu",))
    inject = {"INVARIANTS_INJECT": "grad_take=invariants.selfcheck.inject:grad_take_through_map_loop"}
    proc = gate_pytester.pytest("-p", "invariants.selfcheck.inject", "tests/gate/test_invariants.py",
               "--targets", "cpu", "--programs", "grad_take", "--configs", "f32", "-k", "grad_no_while",
                                env=inject)  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:]
    output = proc.stdout.replace(f"{ROOT}/", "")  # the package's spec files, as a checkout names them
    _in_order(_block("failure"), output, lambda want, got: want == got)


def test_the_update_command_accepts_a_change(gate_pytester: InProcess):
    """The README's first update command, word for word (on one program of the CPU, to keep it short),
    rewrites a snapshot that differs and nothing else; `tox -e update` is an env of tox.ini."""
    words = _block("update")[0].split("#")[0].split()
    assert words == ["pytest", "invariants/gate/test_structure.py", "--snapshot-update"]
    assert "or: tox -e update" in _block("update")[0] and "[testenv:update]" in (ROOT / "tox.ini").read_text()
    project = gate_pytester.project(targets=("cpu",))
    before = snapshot_bytes(project)
    stale = project / "snapshots" / "cpu" / "take.f32.txt"
    stale.write_text(stale.read_text().replace("summary: kernels", "summary: kernels 99; was"))
    args = [w.replace("invariants/gate/", "tests/gate/") for w in words[1:]]
    proc = gate_pytester.pytest(*args, "--targets", "cpu", "--programs", "take", "--configs", "f32")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert snapshot_bytes(project) == before
