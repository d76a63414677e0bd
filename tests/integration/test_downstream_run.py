"""``python -m invariants gate`` in a downstream project, as its users run it: a scratch project with one
program of its own, related to the catalog's ``take`` by structure and by time, on the CPU target (fast:
two programs compile). The command runs in this process (``gatekit.command``), which imports the project's
module from its folder as the command's own process would.

What these hold: ``--no-catalog`` compiles the catalog programs the project's relations name and evaluates
those relations; a first ``--snapshot-update`` records the missing efficiency baselines and never rewrites
one; a structure failure is syrupy's diff, then the command that accepts it, which does; the FAILED line
and the results file carry the reason; HLO and jaxpr are dumped for the failing key; the report shows the
project's own programs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest
from gatekit import command, made_once

from invariants._paths import PACKAGE_DIR
from invariants.records.results import read

ROOT = Path(__file__).parents[2]

SPEC = """\
[spec]
targets = ["*"]

[[program]]
name = "mine_take"
function = "minelib:take_lookup"
kind = "forward"
configs = ["f32"]

[[invariant]]
id = "mine_is_take"
assert = "structure(mine_take) == structure(take)"

[[invariant]]
id = "mine_as_fast"
assert = "time(mine_take) / time(take) <= 4.0"
"""

MODULE = """\
import jax.numpy as jnp


def take_lookup(table, indices):
    return jnp.take(table, indices, axis=0)
"""


def make(folder: Path) -> Path:
    (folder / "specs").mkdir(parents=True)
    (folder / "specs" / "mine.toml").write_text(SPEC)
    (folder / "minelib.py").write_text(MODULE)
    return folder


def gate(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m invariants gate --spec-dir specs --snapshot-dir snapshots ARGS`` in ``project``."""
    return run_words(project, ["python", "-m", "invariants", "gate", "--spec-dir", "specs",
                               "--snapshot-dir", "snapshots", *args])  # fmt: skip


def run_words(project: Path, words: list[str]) -> subprocess.CompletedProcess[str]:
    """A command as a user types it (``python -m invariants ...``), run in this process
    (:func:`gatekit.command`): the project's modules import from its folder, none of the suite's own
    variables but the session's compile cache, and a wide terminal so that pytest's short lines are not
    cut."""
    assert words[:3] == ["python", "-m", "invariants"], words
    with pytest.MonkeyPatch.context() as mp:
        for name in os.environ:
            if name.startswith(("INVARIANTS_", "PYTEST_")) and name != "INVARIANTS_CACHE_DIR":
                mp.delenv(name)
        return command(*words[3:], "-p", "no:cacheprovider", "-rA", cwd=project, env={"COLUMNS": "400"})


def _record(folder: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    project = make(folder / "project")
    return project, gate(project, "--no-catalog", "--targets", "cpu", "--snapshot-update")


@pytest.fixture
def recorded(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A project whose first run is ``--no-catalog --snapshot-update`` on the CPU: run once for the
    session (``gatekit.made_once``), and each test gets a copy of the project as it left it, its own to
    change."""
    made, first = made_once(tmp_path_factory, "downstream_recorded", _record)
    project = tmp_path / "project"
    shutil.copytree(made, project)
    return project, first


def test_no_catalog_compiles_and_evaluates_what_the_relations_name(recorded):
    _, first = recorded
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-3000:]
    # The relations are evaluated under --no-catalog, not dropped, against take ...
    assert re.search(r"^PASSED \S+::cpu::mine\.toml::mine_is_take::mine_take~take-f32$", out, re.M), out
    assert re.search(r"^PASSED \S+::cpu::mine\.toml::mine_as_fast::mine_take~take-f32$", out, re.M), out
    # ... which compiles for them alone: no item of its own, and nothing else of the catalog compiles.
    assert "invariants: 2 programs: " in out, out[-2000:]
    assert not re.search(r"::cpu::take-", out), out  # neither take's structure item nor its efficiency


def test_the_header_names_no_null_device_as_the_configuration(recorded):
    """The command gives pytest the null device as its configuration, so that the project's own cannot
    change the gate: the header says that no configuration file is read, not ``configfile: ../dev/null``."""
    _, first = recorded
    header = first.stdout.split("\ncollected ", 1)[0]
    assert "dev/null" not in header, header
    assert re.search(r"^configfile: none \(the gate runs on its own options", header, re.M), header


def test_the_short_summary_names_the_gates_modules_by_their_node_ids(recorded):
    """Installed, the gate's modules lie in site-packages, out of the project's folder: every line of the
    short summary names an item from its node id (``test_correctness.py``), none by a path out of it."""
    _, first = recorded
    summary = first.stdout.split(" short test summary info ", 1)[1].splitlines()[1:-1]
    assert "SKIPPED [1] test_correctness.py: no correctness check applies" in summary, summary
    assert not [line for line in summary if "../" in line or str(PACKAGE_DIR) in line], summary


WRONG = """
[[invariant]]
id = "mine_is_two_kernels"
programs = ["mine_take"]
assert = "kernels == 2"
"""


def test_a_failing_invariant_is_reported_at_its_spec_files_line(recorded, tmp_path: Path):
    """pytest itself names the invariant's TOML file and line, as it names a test function's: in the
    failure's header and in the location it hands every reporter (junit's file and line here). -k selects
    the item by its name in the tree: the one invariant of the spec file, not its relations."""
    project, _ = recorded
    spec = project / "specs" / "mine.toml"
    line = spec.read_text().count("\n") + 2  # the [[invariant]] table's line
    spec.write_text(spec.read_text() + WRONG)
    junit = tmp_path / "junit.xml"
    ran = gate(project, "--no-catalog", "--targets", "cpu", "-k", "mine.toml and mine_is_two_kernels",
               "-o", "junit_family=xunit1", "--junitxml", str(junit))  # fmt: skip
    out = ran.stdout
    assert ran.returncode == 1, out[-3000:]
    assert re.search(r" 1 failed, \d+ deselected in ", out.splitlines()[-1]), out[-3000:]
    header = rf"^_+ cpu::mine\.toml::mine_is_two_kernels::mine_take-f32 at specs/mine\.toml:{line} _+$"
    assert re.search(header, out, re.M), out[-3000:]
    (case,) = [c for c in ElementTree.parse(junit).iter("testcase") if c.find("failure") is not None]
    assert (case.get("file"), case.get("line")) == ("specs/mine.toml", str(line - 1)), case.attrib  # 0-based


def test_the_first_update_records_the_missing_baselines_and_says_so(recorded):
    project, first = recorded
    baseline = project / "snapshots" / "cpu" / "efficiency" / "mine_take.f32.json"
    assert baseline.is_file(), first.stdout[-3000:]
    assert (
        "invariants: recorded efficiency baseline snapshots/cpu/efficiency/mine_take.f32.json" in first.stdout
    )
    assert not (project / "snapshots" / "cpu" / "efficiency" / "take.f32.json").exists()  # not the catalog's


def test_a_later_update_never_rewrites_a_baseline(recorded):
    project, _ = recorded
    baseline = project / "snapshots" / "cpu" / "efficiency" / "mine_take.f32.json"
    before = baseline.read_bytes()
    again = gate(project, "--no-catalog", "--targets", "cpu", "--snapshot-update")
    assert again.returncode == 0, again.stdout[-3000:]
    assert baseline.read_bytes() == before
    assert "recorded efficiency baseline" not in again.stdout


def test_a_structure_failure_reads_well_and_its_command_accepts_it(recorded, tmp_path: Path):
    """The structure tier's failure. The failing run and the passing one leave the timed items out: timing is
    not what they show (the printed command, run as printed, runs them)."""
    project, _ = recorded
    snapshot = project / "snapshots" / "cpu" / "mine_take.f32.txt"
    good = snapshot.read_text()
    snapshot.write_text(re.sub(r"summary: kernels \d+", "summary: kernels 99", good))
    results = tmp_path / "results.json"
    dumps = tmp_path / "hlo"
    failed = gate(project, "--no-catalog", "--targets", "cpu", "-m", "not throughput",
                  "--results-json", str(results), "--hlo-dump-dir", str(dumps))  # fmt: skip
    out = failed.stdout
    assert failed.returncode == 1, out[-3000:]
    # The failure's section: from its title line to the next separator line.
    block = re.split(
        r"^[-=_]{5,}",
        out.split("_ cpu::mine_take-f32 at snapshots/cpu/mine_take.f32.txt _", 1)[1],
        flags=re.M,
    )[1]
    lines = block.strip("\n").splitlines()
    reason = "mine_take[f32] on cpu: compiled structure differs from snapshots/cpu/mine_take.f32.txt"
    assert lines[0].startswith(reason), block
    # syrupy's diff, both sides, with no traceback of the gate's source and no "use -vv".
    assert "- summary: kernels 99;" in block and re.search(r"^\+ summary: kernels \d+;", block, re.M), block
    assert "def check" not in out and "-vv" not in out and "AssertionError" not in out, block
    # The dumps of the failing key, and the FAILED line and the results file carrying the reason.
    assert (dumps / "cpu" / "mine_take.f32.hlo.txt").is_file() and (
        dumps / "cpu" / "mine_take.f32.jaxpr.txt"
    ).is_file()
    assert re.search(rf"^FAILED \S+::cpu::mine_take-f32 - {re.escape(reason)}", out, re.M), out
    items = json.loads(results.read_text())["items"]
    entry = next(
        i for i in items if i["kind"] == "structure" and i["nodeid"].endswith("::cpu::mine_take-f32")
    )
    assert entry["outcome"] == "failed" and entry["reason"].startswith(reason)
    # The command it prints last, run as printed, accepts the change and nothing else; the next run passes.
    accept = lines[-1].split("accept it (re-records this snapshot alone): ", 1)
    assert len(accept) == 2, block
    words = shlex.split(accept[1])
    assert words[:4] == ["python", "-m", "invariants", "gate"] and "--snapshot-update" in words
    others = {p: p.read_bytes() for p in (project / "snapshots").rglob("*") if p.is_file() and p != snapshot}
    accepted = run_words(project, words)
    assert accepted.returncode == 0, accepted.stdout[-3000:]
    assert snapshot.read_text() == good
    assert {p: p.read_bytes() for p in others} == others
    passing = gate(project, "--no-catalog", "--targets", "cpu", "-m", "not throughput")
    assert passing.returncode == 0, passing.stdout[-3000:]


def test_the_report_of_a_downstream_run_shows_its_own_programs(recorded, tmp_path: Path):
    project, _ = recorded
    results = tmp_path / "results.json"
    ran = gate(project, "--targets", "cpu", "--programs", "mine_take,take,naive",
               "--results-json", str(results), "-k", "not throughput")  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:]

    def report(*args: str) -> subprocess.CompletedProcess[str]:
        return command("report", str(results), *args, cwd=project)

    own = report()
    assert own.returncode == 0, own.stderr
    assert "`mine_take` (the project's own" in own.stdout
    assert "`mine_take / take`" not in own.stdout  # -k left the timing out
    assert "`naive`" not in own.stdout and "| `naive` |" not in own.stdout
    everything = report("--programs", "*")
    assert everything.returncode == 0 and "naive" in everything.stdout
    wrong = report("--programs", "mine_tak")
    assert wrong.returncode == 2
    assert wrong.stderr.strip().splitlines() == [
        "report: --programs: unknown program 'mine_tak' (did you mean 'mine_take' or 'tied_take'?)"
    ]


def test_gate_help_lists_the_update_flags(tmp_path: Path):
    proc = command("gate", "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for flag in ("--delete-obsolete-snapshots", "--snapshot-update", "--record-baselines", "--no-catalog"):
        assert flag in proc.stdout


def test_a_failing_correctness_item_dumps_what_it_compared(tmp_path: Path):
    """Every failing key's HLO and jaxpr are dumped, not only an invariant's: here a program whose values
    are wrong, and the catalog reference it is checked against (named by --no-catalog's relation)."""
    project = make(tmp_path / "wrong")
    (project / "minelib.py").write_text(
        MODULE + "\n\ndef doubled(table, indices):\n    return 2 * jnp.take(table, indices, axis=0)\n"
    )
    (project / "specs" / "mine.toml").write_text(
        '[spec]\ntargets = ["*"]\n\n[[program]]\nname = "mine_doubled"\nfunction = "minelib:doubled"\n'
        'kind = "forward"\nconfigs = ["f32"]\n\n[[correctness]]\nid = "mine_values"\ncheck = "agree"\n'
        'programs = ["mine_doubled"]\nreference = "take"\n'
    )
    dumps = tmp_path / "hlo"
    failed = gate(
        project, "--no-catalog", "--targets", "cpu", "-m", "correctness", "--hlo-dump-dir", str(dumps)
    )
    assert failed.returncode == 1, failed.stdout[-3000:]
    assert "mine_values failed for mine_doubled-f32-uniform" in failed.stdout
    for stem in ("mine_doubled.f32", "take.f32"):
        assert (dumps / "cpu" / f"{stem}.hlo.txt").is_file() and (
            dumps / "cpu" / f"{stem}.jaxpr.txt"
        ).is_file()
    assert f"optimized HLO and jaxpr: {dumps}/cpu/mine_doubled.f32.hlo.txt" in failed.stdout


def test_a_missing_baselines_hint_selects_the_partner_and_records_it(recorded):
    """A plain run without a baseline skips its item with a command (nothing to compare with is not a
    regression); that command, run as printed, names the relation's partner (without which nothing is
    timed) and records the baseline."""
    project, _ = recorded
    baseline = project / "snapshots" / "cpu" / "efficiency" / "mine_take.f32.json"
    baseline.unlink()
    skipped = gate(project, "--no-catalog", "--targets", "cpu", "-rs")
    assert skipped.returncode == 0, skipped.stdout[-3000:]
    hint = re.search(
        r"no efficiency baseline for mine_take\[f32\] on cpu; record it with: (.*)$", skipped.stdout, re.M
    )
    assert hint, skipped.stdout[-3000:]
    words = shlex.split(hint[1])
    assert words[words.index("--programs") + 1] == "mine_take,take", hint[1]
    recorded_now = run_words(project, words)
    assert recorded_now.returncode == 0 and "1 passed" in recorded_now.stdout, recorded_now.stdout[-3000:]
    assert baseline.is_file()
    assert gate(project, "--no-catalog", "--targets", "cpu").returncode == 0


def test_the_gate_passes_delete_obsolete_snapshots_on(recorded):
    """`--help` lists --delete-obsolete-snapshots: given to the gate, it deletes what an update only lists."""
    project, _ = recorded
    gone = project / "snapshots" / "cpu" / "mine_gone.f32.txt"
    gone.write_text("# mine_gone [f32] on cpu\nno spec declares it\n")
    listed = gate(project, "--no-catalog", "--targets", "cpu", "--snapshot-update", "-k", "test_structure")
    assert listed.returncode == 0 and gone.exists(), listed.stdout[-3000:]
    assert "invariants:   snapshots/cpu/mine_gone.f32.txt" in listed.stdout
    deleted = gate(project, "--no-catalog", "--targets", "cpu", "--snapshot-update", "-k", "test_structure",
                   "--delete-obsolete-snapshots")  # fmt: skip
    assert deleted.returncode == 0, deleted.stdout[-3000:]
    assert not gone.exists()
    assert "invariants: deleted snapshots/cpu/mine_gone.f32.txt" in deleted.stdout


def test_a_failed_relation_says_what_differs_between_its_programs(tmp_path: Path):
    """structure(mine_take) == structure(take) failing: the report diffs the two programs' snapshot texts
    (the headline names a line only each side has) and dumps both programs."""
    project = make(tmp_path / "project")
    # numpy-style indexing: the same single gather fusion, in another gather mode than jnp.take's default.
    (project / "minelib.py").write_text(MODULE.replace("jnp.take(table, indices, axis=0)", "table[indices]"))
    dumps = tmp_path / "hlo"
    failed = gate(project, "--no-catalog", "--targets", "cpu", "-m", "not throughput", "-k", "mine_is_take",
                  "--hlo-dump-dir", str(dumps))  # fmt: skip
    out = failed.stdout
    assert failed.returncode == 1, out[-3000:]
    assert "mine_take[f32] on cpu against take[f32] on cpu (- mine_take, + take):" in out, out[-3000:]
    assert "structure(mine_take) = '<1 kernels; only here: fusion kLoop {" in out, out[-3000:]
    # The jaxpr is a primitive per line: the gather mode is the one line that differs there.
    assert re.search(r"^-\s+gather\[PROMISE_IN_BOUNDS\]$", out, re.M), out
    assert re.search(r"^\+\s+gather\[FILL_OR_DROP\]$", out, re.M), out
    for name in ("mine_take", "take"):
        assert (dumps / "cpu" / f"{name}.f32.hlo.txt").is_file(), name


KEEPS = """\
import jax.numpy as jnp


def keeps(table, indices):
    rows = jnp.take(table, indices, axis=0)
    wide = jnp.tile(rows, (1, 8))  # 16 MiB of f32, and its sine and cosine live for their product
    a, b = jnp.sin(wide), jnp.cos(wide)
    return rows + (a.T @ b)[:32, :32].sum()
"""
KEEPS_SPEC = """\
[spec]
targets = ["tpu-v5e"]

[[program]]
name = "keeps"
function = "keepslib:keeps"
kind = "forward"
configs = ["f32"]

[[invariant]]
id = "hbm_temporaries"
programs = ["keeps"]
assert = "temp_bytes <= 16 * 2 ** 20"

[[invariant]]
id = "peak"
programs = ["keeps"]
assert = "peak_bytes <= 16 * 2 ** 20"
"""


def test_a_tpu_memory_bound_on_the_peak_sees_what_the_program_keeps_live(tmp_path: Path):
    """On tpu-v5e XLA keeps the intermediates in on-chip memory, which temp_bytes leaves out: the bound on it
    holds whatever the program keeps. The bound on peak_bytes fails, naming the peak."""
    from invariants.scope.targets import all_targets

    if (why := all_targets()["tpu-v5e"].unavailable_reason()) is not None:
        pytest.skip(why)
    project = tmp_path / "project"
    (project / "specs").mkdir(parents=True)
    (project / "specs" / "keeps.toml").write_text(KEEPS_SPEC)
    (project / "keepslib.py").write_text(KEEPS)
    proc = gate(project, "--no-catalog", "--targets", "tpu-v5e", "--snapshot-update")
    assert proc.returncode == 1, proc.stdout[-3000:]
    failed = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED")]
    assert len(failed) == 1 and "peak failed on tpu-v5e keeps [f32]" in failed[0], failed
    peak = re.search(r"measured peak_bytes = (\d+)", failed[0])
    assert peak and int(peak[1]) > 16 * 2**20, failed[0]
    held = r"PASSED .*::tpu-v5e::keeps\.toml::hbm_temporaries::keeps-f32"
    assert re.search(held, proc.stdout), proc.stdout


ACROSS = """\
[spec]
targets = ["cpu", "tpu-v5e", "gpu-h100"]

[[program]]
name = "mine_bf16"
function = "minelib:take_lookup"
kind = "forward"
configs = ["bf16"]

[[program]]
name = "mine_f32"
function = "minelib:take_lookup"
kind = "forward"
configs = ["f32"]

[[program]]
name = "mine_loop"
function = "minelib:row_loop"
kind = "forward"
configs = ["f32"]

[[invariant]]
id = "bf16_compiles_like_f32"
assert = "structure(mine_bf16[bf16]) == structure(mine_f32[f32])"

[[invariant]]
id = "paired_and_joined"
assert = "structure(mine_bf16) == structure(mine_f32) and kernels(mine_bf16) <= kernels(mine_f32)"

[[invariant]]
id = "bf16_compiles_like_a_loop"
assert = "structure(mine_bf16) == structure(mine_loop)"
"""

LOOP = """\
import jax


def row_loop(table, indices):
    return jax.lax.map(lambda i: table[i], indices)
"""


def test_a_relation_compares_programs_across_configurations(tmp_path: Path):
    """Each side compiles in the configuration it names, or, where each program has one, in that one: one
    item per target. Across element types the structures compare modulo the element type and the tiling
    that follows from it, so a bf16 lookup compiles like the f32 one on the CPU, a TPU and a GPU; a loop
    still differs, and the failure says how the structures were compared."""
    project = make(tmp_path / "project")
    (project / "specs" / "mine.toml").write_text(ACROSS)
    (project / "minelib.py").write_text(MODULE + "\n\n" + LOOP)
    ran = gate(project, "--no-catalog", "-m", "not throughput")
    out = ran.stdout + ran.stderr
    assert ran.returncode == 1, out[-3000:]
    for target in ("cpu", "tpu-v5e", "gpu-h100"):
        for inv in ("bf16_compiles_like_f32", "paired_and_joined"):
            passed = rf"^PASSED \S+::{target}::mine\.toml::{inv}::mine_bf16~mine_f32-bf16~f32$"
            assert re.search(passed, out, re.M), out[-3000:]
        failed = (
            rf"^FAILED \S+::{target}::mine\.toml::bf16_compiles_like_a_loop::mine_bf16~mine_loop-bf16~f32 - "
        )
        assert re.search(failed + r".*modulo element type and the tiling that follows from it", out, re.M), (
            out
        )


FEW_IDS = """\
[spec]
targets = ["cpu"]

[[program]]
name = "tiny_model"
function = "minelib:model"
params = "minelib:init"
kind = "forward"
index_shape = [1]

[[program]]
name = "tiny_too"
function = "minelib:model"
params = "minelib:init"
kind = "forward"
index_shape = [1]
efficiency = false

[[program]]
name = "tiny_asks"
function = "minelib:model"
params = "minelib:init"
kind = "forward"
index_shape = [1]
efficiency = true

[[invariant]]
id = "as_fast"
assert = "time(tiny_model) / time(tiny_too) <= 4.0"

[[invariant]]
id = "asks_as_fast"
assert = "time(tiny_asks) / time(tiny_model) <= 4.0"
"""

FEW_IDS_MODULE = """\
import jax
import jax.numpy as jnp


def init(config):
    return {"embed": jnp.ones((config.vocab, 1), jnp.float32), "out": jnp.ones((1, 1), jnp.float32)}


def model(params, indices):
    return jnp.tanh(jnp.take(params["embed"], indices, axis=0) @ params["out"])
"""


def test_efficiency_is_for_lookups_and_a_declaration_turns_it_off(tmp_path: Path):
    """A model of few ids is timed in its relation; its efficiency item skips, saying why and what would
    compare it, the program whose declaration says efficiency = false has none, and one that asks for it
    but moves too few bytes skips saying so."""
    project = make(tmp_path / "project")
    (project / "specs" / "mine.toml").write_text(FEW_IDS)
    (project / "minelib.py").write_text(FEW_IDS_MODULE)
    ran = gate(project, "--no-catalog", "--targets", "cpu", "-m", "throughput")
    out = ran.stdout + ran.stderr
    assert ran.returncode == 0, out[-3000:]
    assert "nbytes" not in out, out[-3000:]
    ratio = r"^PASSED \S+::cpu::mine\.toml::as_fast::tiny_model~tiny_too-f32$"
    assert re.search(ratio, out, re.M), out[-3000:]
    skipped = (
        r"SKIPPED \[1\] .*: tiny_model is a program with params, not a lookup \(table, indices\): "
        r"efficiency compares .*; set efficiency = true in its \[\[program\]\] \(specs/mine.toml:4\)"
    )
    assert re.search(skipped, out), out[-3000:]
    assert "tiny_too-f32" not in re.sub(r"tiny_model~tiny_too", "", out), out[-3000:]
    assert re.search(r"SKIPPED \[1\] .*: tiny_asks\[f32\] moves 4 bytes of rows: too few", out), out[-3000:]


WIDENED = """\
[spec]
targets = ["cpu"]

[[program]]
name = "mine_grad"
function = "minelib:take_lookup"
kind = "backward"
configs = ["bf16"]

[[invariant]]
id = "no_bf16_scatter"
programs = ["mine_grad"]
assert = 'scatters(dtype="bf16") == 0'
"""


def test_a_dtype_filter_the_cpu_widens_warns_in_the_items_result(tmp_path: Path):
    """XLA:CPU computes the bf16 gradient's scatter-add in f32: the bound holds there for the very program it
    guards, and the run's warnings say so under the item's id, in one line."""
    project = make(tmp_path / "project")
    (project / "specs" / "mine.toml").write_text(WIDENED)
    ran = gate(project, "--no-catalog", "--targets", "cpu", "-k", "test_invariant")
    out = ran.stdout + ran.stderr
    assert ran.returncode == 0, out[-3000:]
    assert re.search(r"^PASSED \S+::cpu::mine\.toml::no_bf16_scatter::mine_grad-bf16$", out, re.M), out
    assert re.search(r"^\S+::cpu::mine\.toml::no_bf16_scatter::mine_grad-bf16$", out, re.M), out
    assert re.search(r"^  specs/mine.toml:10: WidenedDtype: no_bf16_scatter on cpu mine_grad \[bf16\]: "
                     r"scatters\(dtype='bf16'\) reads the compiled dtype, and cpu computes bf16 in f32", out,
                     re.M), out[-3000:]  # fmt: skip
    # The item's result keeps the line: the results file's record, and the report read from it.
    warned = "scatters(dtype='bf16') reads the compiled dtype, and cpu computes bf16 in f32: the count"
    (item,) = [i for i in read(project / "artifacts" / "results.json").items if i.kind == "invariant"]
    assert item.get("warning", "").startswith(warned), item
    reported = command("report", "artifacts/results.json", cwd=project)
    assert reported.returncode == 0, reported.stderr
    report = reported.stdout
    assert "- warning: `no_bf16_scatter` on " in report and "reads the compiled dtype" in report, report


COMBINED = """\
[spec]
targets = ["cpu", "cpu-8dev"]

[[program]]
name = "mine_sharded"
function = "minelib:sharded_lookup"
kind = "forward"
mesh = { data = 2, tensor = 4 }
axis_types = "explicit"
table_sharding = ["tensor", ""]
index_sharding = ["data"]

[[program]]
name = "mine_take"
function = "minelib:take_lookup"
kind = "forward"

[[invariant]]
id = "no_all_gather"
programs = ["tag:user"]
assert = "all_gathers == 0"
"""

COMBINED_MODULE = (
    MODULE
    + """
from jax.sharding import PartitionSpec as P


def sharded_lookup(table, indices):
    return table.at[indices].get(out_sharding=P("data", None))
"""
)


@pytest.mark.e2e
def test_one_run_of_sharded_and_single_chip_programs_picks_each_ones_targets(tmp_path: Path):
    """One spec file names a one-chip and an 8-device target: each program gets its items where its chips
    fit, and none is skipped. With the 8-device target left out, the sharded program's item says where it
    compiles."""
    project = make(tmp_path / "project")
    (project / "specs" / "mine.toml").write_text(COMBINED)
    (project / "minelib.py").write_text(COMBINED_MODULE)
    ran = gate(project, "--no-catalog", "-m", "not throughput", "--snapshot-update")  # the one-job form
    out = ran.stdout + ran.stderr
    assert ran.returncode == 0, out[-3000:]
    passed = sorted(re.findall(r"^PASSED \S+?\.py::(\S+)$", out, re.M))
    assert passed == [
        "cpu-8dev::mine.toml::no_all_gather::mine_sharded-f32",
        "cpu-8dev::mine_sharded-f32",
        "cpu::mine.toml::no_all_gather::mine_take-f32",
        "cpu::mine_take-f32",
    ], out[-3000:]
    assert "chip" not in "".join(ln for ln in out.splitlines() if ln.startswith("SKIPPED")), out[-3000:]
    narrowed = gate(project, "--no-catalog", "--targets", "cpu", "-m", "not throughput")
    assert narrowed.returncode == 0, narrowed.stdout[-3000:]
    advice = (
        r"^SKIPPED \[1\] .*: cpu has 1 chip; the mesh of mine_sharded \(data = 2, tensor = 4\) has 8; "
        r"it compiles on cpu-8dev, which the run's targets leave out$"
    )
    assert re.search(advice, narrowed.stdout, re.M), narrowed.stdout[-3000:]


NESTED_MODULE = """\
import jax
import jax.numpy as jnp


def init(config):
    return {"embed": {"embedding": jax.ShapeDtypeStruct((config.vocab, 8), jnp.float32)},
            "head": {"kernel": jax.ShapeDtypeStruct((8, 8), jnp.float32)}}


def model(params, indices):
    return jnp.take(params["embed"]["embedding"], indices, axis=0) @ params["head"]["kernel"]
"""


def test_tables_names_a_nested_leaf_by_the_dotted_path_the_guide_gives(tmp_path: Path):
    """The guide's own `tables = [...]` line for a flax-shaped model: the input facts are the nested
    embedding's alone (8192 rows of 8 f32), not the head's beside it."""
    guide = (ROOT / "docs" / "downstream.md").read_text()
    (line,) = re.findall(r'`(tables = \["embed\.embedding"\])`', guide)
    project = make(tmp_path / "project")
    (project / "minelib.py").write_text(NESTED_MODULE)
    (project / "specs" / "mine.toml").write_text(
        '[spec]\ntargets = ["cpu"]\n\n[[program]]\nname = "mine_model"\nfunction = "minelib:model"\n'
        f'params = "minelib:init"\nkind = "forward"\n{line}\n\n'
        '[[invariant]]\nid = "facts"\nprograms = ["mine_model"]\n'
        'assert = "table_bytes + row_bytes == 8192 * 8 * 4 + 8 * 4"\n'
    )
    ran = gate(project, "--no-catalog", "--targets", "cpu", "-k", "test_invariant")
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-3000:]
    assert re.search(r"^PASSED \S+::cpu::mine\.toml::facts::mine_model-f32$", ran.stdout, re.M), ran.stdout


def test_the_project_only_f16_configuration_compiles_a_projects_program_as_the_guide_says(tmp_path: Path):
    """The guide's `configs = ["f16"]`: the project's lookup compiles and is snapshotted in f16, and a
    relation to the catalog's take in f16 is one line (the catalog compiles nothing there)."""
    guide = (ROOT / "docs" / "downstream.md").read_text()
    (line,) = re.findall(
        r'`(configs = \["f16"\])`, an `f16\[8192,32\]` table, is there for your programs', guide
    )
    project = make(tmp_path / "project")
    (project / "specs" / "mine.toml").write_text(
        f'[spec]\ntargets = ["cpu"]\n\n[[program]]\nname = "mine_take"\nfunction = "minelib:take_lookup"\n'
        f'kind = "forward"\n{line}\n'
    )
    ran = gate(project, "--no-catalog", "--targets", "cpu", "-k", "test_structure", "--snapshot-update")
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-3000:]
    snapshot = (project / "snapshots" / "cpu" / "mine_take.f16.txt").read_text()
    assert "root: f16[16384,32]" in snapshot, snapshot
    with (project / "specs" / "mine.toml").open("a") as spec:
        spec.write('\n[[invariant]]\nid = "is_take"\nassert = "structure(mine_take) == structure(take)"\n')
    refused = gate(project, "--no-catalog", "--targets", "cpu")
    last = (refused.stdout + refused.stderr).strip().splitlines()[-1]
    assert refused.returncode == 2 and "select no configuration its programs share on cpu" in last, last
