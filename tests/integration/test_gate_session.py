"""The gate as users run it, on scratch copies of the project.

Covers: what a plain run and an update do to the snapshots (never another target's, never a deselected
program's or configuration's, never the efficiency baselines; obsolete files deleted only where their
target ran), docs/specs.md's "adding a program" command, a missing snapshot's message, bad input as one line,
identical verdicts under pytest-xdist, and --raw-invariants. The big runs are shared (see conftest.py);
the gate runs in this process (``gate_pytester``) but under xdist and for the backend that is missing,
which a fresh process must find: those tests are ``e2e`` ones (tests/conftest.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from gatekit import FOREIGN, OBSOLETE, ROOT, InProcess, Run, make_project, run, snapshot_bytes

# ------------------------------------------------------------------------------------------ plain run


def test_plain_run_passes_and_writes_nothing(plain_run: Run):
    """`pytest invariants/gate`: green, no snapshot "unused" (the efficiency baselines sit beside the
    snapshots; files of programs not selected are not even discovered), every file byte-identical."""
    assert plain_run.proc.returncode == 0, plain_run.proc.stdout[-1500:]
    assert "unused" not in plain_run.proc.stdout
    assert plain_run.after == plain_run.before


def test_configs_select_in_every_tier(plain_run: Run):
    """`--configs f32`: every tier ran, in that configuration only (the other configurations' snapshots sit
    in the copy, neither compared nor reported unused: see the test above)."""
    recorded = json.loads(plain_run.results.read_text())["items"]
    items = [i for i in recorded if i["kind"] != "skipped"]  # a skip records no configuration, only why
    assert {i["kind"] for i in items} == {"structure", "invariant", "correctness", "ratio", "efficiency"}
    assert {i["config"] for i in items} == {"f32"}, sorted({(i["kind"], i["config"]) for i in items})
    assert (plain_run.project / "snapshots" / "cpu" / "naive.bf16.txt").exists()


def test_plain_run_names_obsolete_snapshots_of_targets_that_ran(plain_run: Run):
    for rel in OBSOLETE[:2]:
        assert f"invariants: {rel} is obsolete" in plain_run.proc.stdout, rel
    assert OBSOLETE[2] not in plain_run.proc.stdout  # tpu-v4 did not run: nothing is known about it


@pytest.mark.e2e
def test_xdist_gives_the_same_verdicts_and_snapshots(plain_run: Run, parallel_run: Run):
    assert parallel_run.proc.returncode == 0, parallel_run.proc.stdout[-2000:]

    kinds = {"structure", "invariant", "correctness"}

    def outcomes(path: Path) -> dict[str, tuple[str, str]]:
        items = json.loads(path.read_text())["items"]
        return {i["nodeid"]: (i["kind"], i["outcome"]) for i in items if i["kind"] in kinds}

    serial, parallel = outcomes(plain_run.results), outcomes(parallel_run.results)
    assert serial == parallel
    # Not a vacuous comparison: every kind, on both targets, passes and known-bad xfails alike.
    assert {kind for kind, _ in serial.values()} == kinds
    assert {outcome for _, outcome in serial.values()} == {"passed", "xfailed"}
    assert all(any(f"::{t}::" in nodeid for nodeid in serial) for t in ("cpu", "tpu-v5e")), sorted(serial)
    assert parallel_run.after == parallel_run.before


@pytest.mark.e2e
def test_xdist_runs_each_targets_items_on_one_worker(parallel_run: Run):
    """Every compiled item of a target runs on one worker, so each program compiles once in the session
    (xdist's own groups fall apart on pytest 9.2: pytest-xdist#1386)."""
    ran = re.findall(r"^\[(gw\d+)\] .*?(?:PASSED|FAILED|XFAIL|XPASS|SKIPPED|ERROR) \S+?\.py::([^:\s]+)::",
                     parallel_run.proc.stdout, flags=re.M)  # fmt: skip
    workers: dict[str, set[str]] = {}
    for worker, target in ran:  # the target's collector, below the anchor module
        workers.setdefault(target, set()).add(worker)
    # Every item's line was read: as many as the run's summary counts.
    counted = re.search(r"(\d+) passed, (\d+) skipped, (\d+) xfailed in", parallel_run.proc.stdout)
    assert counted and len(ran) == sum(map(int, counted.groups())), parallel_run.proc.stdout[-1500:]
    assert set(workers) >= {"cpu", "tpu-v5e"}, workers
    assert all(len(w) == 1 for w in workers.values()), workers


# ---------------------------------------------------------------------------------------------- update


def test_update_rewrites_only_what_changed_and_keeps_every_baseline(update_run: Run):
    """`pytest --snapshot-update` leaves the tree as `git status` would want it: the stale snapshot
    rewritten, obsolete files of targets that ran deleted, and everything else byte-identical (the
    efficiency baselines above all: an update must not commit fresh timing noise)."""
    assert update_run.proc.returncode == 0, update_run.proc.stdout[-2000:]
    before, after = dict(update_run.before), dict(update_run.after)
    assert after.pop("snapshots/cpu/naive.f32.txt") != before.pop("snapshots/cpu/naive.f32.txt")
    for rel in OBSOLETE[:2]:
        assert rel not in after and before.pop(rel)
        assert f"invariants: deleted {rel}" in update_run.proc.stdout
    assert OBSOLETE[2] in after and FOREIGN in after  # a target that did not run, one never heard of
    baselines = [k for k in before if "/efficiency/" in k]
    assert baselines and all(after[k] == before[k] for k in baselines)
    assert after == before
    efficiency = [i for i in json.loads(update_run.results.read_text())["items"] if i["kind"] == "efficiency"]
    assert efficiency  # the baselines were measured against, not rewritten


def test_update_prints_no_syrupy_naming_warnings(update_run: Run):
    assert "Can not relate snapshot" not in update_run.out
    out = update_run.proc.stdout
    assert "warnings" not in out.splitlines()[-1], out[out.find("warnings summary") :][:3000]


def test_record_baselines_rewrites_the_selected_baseline(gate_pytester: InProcess):
    project = gate_pytester.project(targets=("cpu",))
    before = snapshot_bytes(project)
    proc = gate_pytester.pytest(
        "tests/gate/test_throughput.py", "--targets", "cpu", "--programs", "naive,take",
        "-k", "efficiency and take-f32", "--record-baselines",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:]
    after = snapshot_bytes(project)
    changed = {k for k in after if after[k] != before.get(k)}
    assert changed == {"snapshots/cpu/efficiency/take.f32.json"}
    assert len(json.loads(after["snapshots/cpu/efficiency/take.f32.json"])["runs"]) == 3


def _doc_command(page: str, marker: str) -> list[str]:
    """The shell command of the page's fenced block that follows ``marker``, split into words."""
    text = (ROOT / page).read_text()
    block = text[text.index(marker) :].split("```bash\n", 1)[1].split("```", 1)[0]
    line = next(ln for ln in block.splitlines() if ln.startswith("pytest "))
    return line.split("#")[0].split()


def test_adding_a_program_records_the_program_and_its_gradient(gate_pytester: InProcess):
    """docs/specs.md's command, word for word with `my_lookup` -> `take` (on the CPU only, through the
    INVARIANTS_TARGETS default, to keep this fast): both snapshots are recorded."""
    words = _doc_command("docs/specs.md", "## Adding a program")
    assert words[0] == "pytest" and "my_lookup,grad_my_lookup" in words
    # The scratch project holds the gate modules at tests/gate (make_project); the checkout, invariants/gate.
    args = [w.replace("my_lookup", "take").replace("invariants/gate/", "tests/gate/") for w in words[1:]]
    project = gate_pytester.project(targets=("cpu",))
    for name in ("take.f32.txt", "grad_take.f32.txt"):
        (project / "snapshots" / "cpu" / name).unlink()
    proc = gate_pytester.pytest(*args, env={"INVARIANTS_TARGETS": "cpu"})
    assert proc.returncode == 0, proc.stdout[-2000:]
    after = snapshot_bytes(project)
    assert {"snapshots/cpu/take.f32.txt", "snapshots/cpu/grad_take.f32.txt"} <= set(after)
    assert "Can not relate snapshot" not in proc.stdout + proc.stderr


def test_missing_snapshot_names_the_update_command_for_every_target(gate_pytester: InProcess):
    project = gate_pytester.project(targets=("cpu",))
    (project / "snapshots" / "cpu" / "take.f32.txt").unlink()
    proc = gate_pytester.pytest("tests/gate/test_structure.py", "--targets", "cpu", "--programs", "take")
    assert proc.returncode == 1
    command = re.search(r"no snapshot for take\[f32\] on cpu; record it with: (pytest [^\n]*)", proc.stdout)
    assert command, proc.stdout[-1500:]
    assert command[1] == "pytest tests/gate/test_structure.py --programs take,grad_take --snapshot-update"


# ------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--programs", "nave"], "error: --programs: unknown program 'nave' (did you mean 'naive'"),
        (["--programs", ""], "error: --programs: empty selection"),
        (
            ["--configs", "f64"],
            "error: --configs: unknown configuration 'f64' (did you mean 'f16'?); known: f32,",
        ),
        (
            ["--targets", "cpu", "--configs", "bf16-llm"],
            "error: --targets cpu --configs bf16-llm: selects nothing",
        ),
    ],
)
def test_bad_input_is_one_line_and_the_last(gate_pytester: InProcess, args, line):
    gate_pytester.project(targets=())
    proc = gate_pytester.pytest("tests/gate", "--collect-only", *args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2  # the README's one exit status for bad input
    assert "Traceback" not in out
    assert out.strip().splitlines()[-1].startswith(line), out[-2000:]


@pytest.mark.e2e
def test_a_backend_that_is_not_there_is_one_line_and_the_last(tmp_path: Path):
    """In a child: JAX starts there, asked for a backend this host lacks. The one line is the last word,
    after anything libtpu or JAX printed while starting, and none of libtpu's start-up noise shows."""
    project = make_project(tmp_path, targets=())
    proc = run(project, "tests/gate", "--collect-only", env={"JAX_PLATFORMS": "tpu"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2
    assert "Traceback" not in out
    assert (
        out.strip()
        .splitlines()[-1]
        .startswith("error: JAX_PLATFORMS=tpu: backend not available on this host")
    ), out[-2000:]
    assert "TPU_WORKER_HOSTNAMES" not in out and "libtpu" not in out


def test_raw_invariants_drop_scopes_and_ratchets(gate_pytester: InProcess):
    """What bisect relies on: with --raw-invariants a ratchet is a plain invariant, so known-bad fails."""
    gate_pytester.project(targets=())
    args = ("tests/gate/test_invariants.py", "--targets", "tpu-v5e", "--programs", "grad_vmap_naive",
            "--configs", "f32", "-k", "grad_no_while_vmap")  # fmt: skip
    scoped = gate_pytester.pytest(*args)
    assert scoped.returncode == 0 and "1 xfailed" in scoped.stdout, scoped.stdout[-1500:]
    raw = gate_pytester.pytest(*args, "--raw-invariants")
    assert raw.returncode == 1 and "grad_no_while_vmap failed on tpu-v5e grad_vmap_naive [f32]" in raw.stdout


def test_a_metric_the_target_does_not_provide_fails_in_one_line(gate_pytester: InProcess):
    """Run as a user would: an invariant on flops for the H100 (no cost_analysis() ahead of time) and on
    estimated_cycles for the CPU (no cycle estimates) fails, each with one line saying why; the same
    invariant on tpu-v5e, which provides both, passes."""
    project = gate_pytester.project(targets=())
    specs = project / "specs"
    specs.mkdir()
    (specs / "s.toml").write_text(
        '[spec]\ntargets = ["gpu-h100", "tpu-v5e", "cpu"]\n\n'
        '[[invariant]]\nid = "predicted"\nprograms = ["naive"]\nconfigs = ["f32"]\n'
        'assert = "flops + estimated_cycles >= 0"\n'
    )
    proc = gate_pytester.pytest(
        "tests/gate/test_invariants.py", "--spec-dir", str(specs), "-k", "predicted",
        "--targets", "cpu,tpu-v5e,gpu-h100", "--programs", "naive", "-rA",
    )  # fmt: skip
    out = proc.stdout
    assert "1 passed" in out and "2 failed" in out, out[-3000:]
    gpu = next(line for line in out.splitlines() if "failed on gpu-h100" in line)
    assert gpu.endswith("flops of naive on gpu-h100: this target's compiler gives no cost_analysis() 'flops'")
    cpu = next(line for line in out.splitlines() if "failed on cpu" in line)
    assert cpu.endswith(
        "estimated_cycles of naive on cpu: "
        "no kernel carries estimated_cycles (only the TPU compiler writes them)"
    )


def test_a_structure_failure_prints_the_command_that_accepts_it_alone(gate_pytester: InProcess):
    """In a checkout: syrupy's diff with no gate source, then `pytest FILE ... --snapshot-update`, which
    (run as printed) re-records that one snapshot; the next run passes."""
    import shlex

    project = gate_pytester.project(targets=("cpu",))
    snapshot = project / "snapshots" / "cpu" / "naive.f32.txt"
    good = snapshot.read_text()
    snapshot.write_text(re.sub(r"summary: kernels \d+", "summary: kernels 99", good))
    before = snapshot_bytes(project)
    failed = gate_pytester.pytest(
        "tests/gate/test_structure.py", "--targets", "cpu", "--programs", "naive,take"
    )
    assert failed.returncode == 1, failed.stdout[-3000:]
    assert "- summary: kernels 99;" in failed.stdout and "def test_structure" not in failed.stdout
    accept = re.search(r"^accept it \(re-records this snapshot alone\): (pytest .*)$", failed.stdout, re.M)
    assert accept, failed.stdout[-3000:]
    assert accept[1] == (
        "pytest tests/gate/test_structure.py --targets cpu --programs naive --configs f32 --snapshot-update"
    )
    accepted = gate_pytester.pytest(*shlex.split(accept[1])[1:])
    assert accepted.returncode == 0, accepted.stdout[-3000:]
    after = snapshot_bytes(project)
    assert {k for k in after if after[k] != before[k]} == {"snapshots/cpu/naive.f32.txt"}
    assert snapshot.read_text() == good
    again = gate_pytester.pytest(
        "tests/gate/test_structure.py", "--targets", "cpu", "--programs", "naive,take"
    )
    assert again.returncode == 0, again.stdout[-3000:]


def test_an_in_process_gate_imports_the_projects_own_module_afresh(tmp_path, monkeypatch):
    """A module of the same name that another test of this process imported (a scratch project's model.py)
    does not stand in for the project's own."""
    import sys
    import types

    from gatekit import command

    stale = types.ModuleType("model")  # has no 'embed'
    monkeypatch.setitem(sys.modules, "model", stale)
    (tmp_path / "model.py").write_text(
        "import jax.numpy as jnp\n\ndef embed(W, x):\n    return jnp.take(W, x, axis=0)\n"
    )
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "s.toml").write_text(
        '[spec]\ntargets = ["cpu"]\n\n[[program]]\nname = "mine"\nfunction = "model:embed"\n'
        'kind = "forward"\n\n[[invariant]]\nid = "one"\nprograms = ["mine"]\nassert = "gathers == 1"\n'
    )
    run = command("gate", "--spec-dir", "specs", "--no-catalog", "--co", "-q", "-p", "no:cacheprovider",
                  cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "mine" in run.stdout and sys.modules["model"] is stale  # the process is as it was
