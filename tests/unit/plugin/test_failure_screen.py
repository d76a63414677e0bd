"""What a failing structure item shows on the terminal (plugin.outcomes.snapshot_comparison), on real
renderings of a deliberate break in a library of 8 tables (tests/data/snapshots): the change fits a screen,
and the whole diff goes to the dump folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from gatekit import InProcess

from invariants.plugin import outcomes
from invariants.records.compiled import Key
from invariants.snapshot.diff import changed_kernels, fold_alike, structural_diff

DATA = Path(__file__).parents[2] / "data" / "snapshots" / "bag8-per-row-loop"


class _Snapshots:
    def __init__(self, path: Path) -> None:
        self._path = path

    def path(self, key: Key) -> Path:
        return self._path


class _Session:
    """What snapshot_comparison asks of a gate session: the committed snapshot's path, and a dump folder."""

    def __init__(self, committed: Path, dumps: Path) -> None:
        self.snapshots = _Snapshots(committed)
        self.dumps = dumps

    def write_diff(self, key: Key, diff: str) -> Path:
        path = self.dumps / f"{key.program}.{key.config}.snapshot.diff"
        path.write_text(diff + "\n")
        return path


@pytest.mark.parametrize("target", ["tpu-v5e", "gpu-a100", "cpu"])
def test_one_break_in_eight_tables_fits_a_screen(tmp_path: Path, target: str) -> None:
    """The break adds one loop per table on tpu-v5e (8 loops of 10 lines each, alike but for the table's
    shape): the screen shows one of them with the count of the others, so that a failing item is at most
    about 60 lines, where the plain kernel diff of the same change is more than twice that."""
    before, after = (DATA / f"{target}.{side}.txt" for side in ("before", "after"))
    key = Key("bag8_train", "f32", target)
    lines = outcomes.snapshot_comparison(_Session(before, tmp_path), key, after.read_text())  # type: ignore[arg-type]
    # The part of a failing item this makes, and the few lines around it (reason, why, versions, dumps,
    # the accept command).
    assert len(lines) + 6 <= 60, "\n".join(lines)
    summary, now = before.read_text().splitlines()[2], after.read_text().splitlines()[2]
    assert lines[:2] == [f"- {summary}", f"+ {now}"] if summary != now else lines[0] == f"  {now} (unchanged)"
    # Nothing is lost: the whole diff, every line of it, is in the dump folder.
    whole = (tmp_path / "bag8_train.f32.snapshot.diff").read_text()
    expected = structural_diff(before.read_text(), after.read_text(), "committed", "now")
    assert whole.splitlines()[1:] == expected.splitlines()[1:]  # the first line names the committed file
    if target == "tpu-v5e":
        plain = changed_kernels(before.read_text(), after.read_text())
        assert len(plain) > 120 and sum(ln == "+  while ×4096 {" for ln in plain) == 8
        assert sum(ln == "+  while ×4096 {" for ln in lines) == 1
        assert "+  }   (and 7 more blocks alike but for their dimensions)" in lines


def test_a_change_that_keeps_the_summary_shows_it_once(tmp_path: Path) -> None:
    """One more op fused into a kernel keeps every count of the summary: it shows as one line, not as a - and
    a + line that read the same, and the kernel that changed follows."""
    before = DATA / "cpu.before.txt"
    text = before.read_text()
    first = next(ln for ln in text.splitlines() if ln.startswith("  fusion ") and "{" in ln)
    after = text.replace(first, first.replace("{", "{tanh, ", 1), 1)
    key = Key("bag8_train", "f32", "cpu")
    lines = outcomes.snapshot_comparison(_Session(before, tmp_path), key, after)  # type: ignore[arg-type]
    assert lines[0] == f"  {text.splitlines()[2]} (unchanged)", lines
    assert lines[1].startswith("kernels that changed") and not any(ln.startswith("+ summary") for ln in lines)


def test_alike_lines_fold_by_sign_and_text_but_for_their_dimensions() -> None:
    diff = [
        "@@ -1,3 +1,5 @@",
        "   unchanged context -> f32[4]{0}",
        "+  broadcast -> f32[1000,32]{1,0}",
        "+  broadcast -> f32[2048,32]{1,0}",
        "-  broadcast -> f32[1000,32]{1,0}",  # the other side: never folded into the additions
        "+  broadcast -> f32[2048,32]{0,1}",  # another layout: not alike
        "+  while ×16 {",
        "+      body: while ×4 {",
        "+          body: add -> f32[8]{0}",
        "+      }",
        "+      body: copy -> f32[8]{0}",
        "+  }",
        "+  while ×16 {",
        "+      body: while ×4 {",
        "+          body: add -> f32[9]{0}",
        "+      }",
        "+      body: copy -> f32[9]{0}",
        "+  }",
        "+  while ×8 {",  # another trip count: not alike
        "+      body: copy -> f32[9]{0}",
        "+  }",
    ]
    assert fold_alike(diff) == [
        "+  broadcast -> f32[1000,32]{1,0}   (and 1 more alike but for their dimensions)",
        "-  broadcast -> f32[1000,32]{1,0}",
        "+  broadcast -> f32[2048,32]{0,1}",
        "+  while ×16 {",
        "+      body: while ×4 {",
        "+          body: add -> f32[8]{0}",
        "+      }",
        "+      body: copy -> f32[8]{0}",
        "+  }   (and 1 more blocks alike but for their dimensions)",
        "+  while ×8 {",
        "+      body: copy -> f32[9]{0}",
        "+  }",
    ]
    # Nothing alike: the lines as they were, in their order, context and hunk lines dropped.
    assert fold_alike(["@@ -1 +1 @@", "-  a -> f32[1]{0}", "+  b -> f32[1]{0}"]) == [
        "-  a -> f32[1]{0}",
        "+  b -> f32[1]{0}",
    ]


SNAPSHOT = Path(__file__).parents[3] / "snapshots" / "cpu" / "take.f32.txt"


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda text: "\ufeff" + text,
         "the committed file starts with a UTF-8 byte-order mark, which the gate never writes"),
        (lambda text: text.replace("# take [f32]", "# naive [f32]", 1),
         "the committed file's header names naive [f32] on cpu, not take [f32] on cpu"),
    ],
    ids=["bom", "another-program"],
)  # fmt: skip
def test_a_snapshot_that_differs_only_in_its_text_says_what_differs(
    gate_pytester: InProcess, tmp_path: Path, edit, said
) -> None:
    """A snapshot an editor saved with a byte-order mark, or one copied from another program's, holds the
    structure the program compiles to: its FAILED line says what of the file is wrong, not "differs:
    summary unchanged" above two identical summary lines."""
    folder = tmp_path / "s" / "cpu"
    folder.mkdir(parents=True)
    (folder / "take.f32.txt").write_text(edit(SNAPSHOT.read_text()), encoding="utf-8")
    gate_pytester.project(targets=())
    proc = gate_pytester.pytest(
        "tests/gate/test_structure.py", "--targets", "cpu", "--programs", "take", "--configs", "f32",
        f"--snapshot-dir={tmp_path / 's'}", f"--hlo-dump-dir={tmp_path / 'hlo'}", "-rf",
        f"--results-json={tmp_path / 'r.json'}",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-2000:]
    failed = next(ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED"))
    assert (
        failed.endswith(f" holds the structure it compiles to, but {said}")
        and "summary unchanged" not in failed
    ), failed
