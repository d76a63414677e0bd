"""Reading snapshot text back (invariants.snapshot.diff): what changed between two renderings, told apart
into kernel-code lines and the rest, on renderings as invariants.snapshot.render writes them."""

from __future__ import annotations

from pathlib import Path

from invariants.snapshot import diff as d

# What the A100's grad_take f32 renders to in jaxlib 0.10.1 (tests/data/snapshots) and 0.10.2: the HLO
# lines equal, the code not.
A100_0_10_1 = (
    Path(__file__).parents[2] / "data" / "snapshots" / "a100-grad-take" / "gpu-a100.0.10.1.txt"
).read_text()
A100_0_10_2 = A100_0_10_1.replace(
    "atomics atom.add.f32×4; loops 0", "atomics atom.cas.b32×4 (CAS retry loops 4); loops 4"
)
SCATTER = "fusion kInput {add, scatter, select} -> f32[8192,32]{1,0}"
BROADCAST = "fusion kLoop {broadcast, constant} -> f32[8192,32]{1,0}"


def test_line_changes_tell_code_lines_from_hlo_lines() -> None:
    code_only = d.line_changes(A100_0_10_1, A100_0_10_2)
    assert code_only.code_only and not code_only.hlo
    assert code_only.code == ((SCATTER, "      code ptx: atomics atom.add.f32×4; loops 0; vector 128 bits",
                               "      code ptx: atomics atom.cas.b32×4 (CAS retry loops 4); loops 4; vector "
                               "128 bits"),)  # fmt: skip
    assert d.what_changed(A100_0_10_1, A100_0_10_2) == (
        f"code lines only (1 changed: {SCATTER}); the HLO lines are equal (summary: kernels 2; entry "
        "fusions 2 (kInput 1, kLoop 1); while loops 0; dynamic launches 2)"
    )
    # An HLO change is named as one, with its first line, and the code lines beside it when they change too.
    looped = A100_0_10_2.replace("while loops 0", "while loops 1 (×16384)")
    assert d.what_changed(A100_0_10_1, looped) == (
        "HLO lines (2 changed, first: -summary: kernels 2; entry fusions 2 (kInput 1, kLoop 1); while loops "
        f"0; dynamic launches 2) and code lines (1 changed: {SCATTER})"
    )
    assert not d.line_changes(A100_0_10_1, looped).code_only
    assert d.what_changed(A100_0_10_1, A100_0_10_1) == "no line changed"
    # Code that no listed kernel names is a block of code lines of its own; a kernel losing its code line
    # is a code change; a line like "custom calls" never is.
    block = "code of no listed kernel:\n  ptx: no atomics; loops 1; scalar\ncustom calls: none"
    stray = A100_0_10_1.replace("custom calls: none", block)
    assert d.line_changes(A100_0_10_1, stray).code_only
    assert [k for k, _, _ in d.line_changes(A100_0_10_1, stray).code] == ["code of no listed kernel"] * 2
    lost = A100_0_10_1.replace("      code ptx: no atomics; loops 0; vector 128 bits\n", "")
    assert d.line_changes(A100_0_10_1, lost).code == (
        (BROADCAST, "      code ptx: no atomics; loops 0; vector 128 bits", None),)  # fmt: skip
    assert d.line_changes(A100_0_10_1, A100_0_10_1.replace("none", "cub")).hlo == (
        "-custom calls: none", "+custom calls: cub")  # fmt: skip


def test_the_parts_a_failure_shows_fit_a_screen() -> None:
    """The summary's changed fields, the kernels that changed alone, the other sections that changed, and
    the structure part a dump can be compared by (no jaxpr)."""
    looped = A100_0_10_1.replace(
        "while loops 0; dynamic launches 2", "while loops 1 (×16384); dynamic launches 49154"
    ).replace("custom calls: none", "  while ×16384 {\n      body: copy -> s32[]\n  }\ncustom calls: none")
    assert d.summary_change(A100_0_10_1, looped) == "while loops 0 → 1 (×16384), dynamic launches 2 → 49154"
    assert d.summary_change(A100_0_10_1, A100_0_10_1) == "summary unchanged"
    other_body = A100_0_10_1.replace("custom calls: none", "custom calls: cub")
    other_body = other_body.replace(BROADCAST, BROADCAST + "x")
    assert d.summary_change(A100_0_10_1, other_body) == "summary unchanged; changed: kernels, custom calls"
    kernels = d.changed_kernels(A100_0_10_1, looped, context=0)
    assert [ln for ln in kernels if ln[:1] in "+-"] == [
        "+  while ×16384 {",
        "+      body: copy -> s32[]",
        "+  }",
    ]
    assert d.changed_sections(
        A100_0_10_1, A100_0_10_1.replace("custom calls: none", "custom calls: cub")
    ) == [("custom calls", ["-custom calls: none", "+custom calls: cub"])]
    part = d.structure_part(A100_0_10_1)
    assert (
        part.startswith("summary: ") and "jaxpr:" not in part and part.endswith("root: f32[8192,32]{1,0}\n")
    )


def test_a_snapshot_of_the_older_format_is_told_apart() -> None:
    older = (
        "# take [f32] on cpu\n\njaxpr:\n  gather[FILL_OR_DROP]\n\nsummary: kernels 1; entry fusions 1 "
        "(kLoop 1); while loops 0; dynamic launches 1\nkernels:\n"
        "  kernel 1: fusion kLoop {gather} -> f32[16384,32]{1,0}\n"
    )
    assert d.older_format(older) and not d.older_format(A100_0_10_1)


def test_a_removed_kernel_takes_its_own_code_line_with_it() -> None:
    """Most code lines equal their neighbours': a kernel removed between two others is shown with the code
    line under it, never with the code line of the kernel above it."""
    code = "      code ptx: no atomics; loops 0; scalar"
    kernels = [
        "  fusion kLoop {add} -> f32[8]{0}",
        "  fusion kLoop {exp} -> f32[8]{0}",
        "  fusion kLoop {tanh} -> f32[8]{0}",
    ]
    before = (
        "summary: kernels 3\n\nkernels:\n" + "".join(f"{k}\n{code}\n" for k in kernels) + "root: f32[8]{0}\n"
    )
    after = before.replace(f"{kernels[1]}\n{code}\n", "")
    assert d.changed_kernels(before, after, context=0) == ["@@ -3,2 +2,0 @@", f"-{kernels[1]}", f"-{code}"]
    assert d.changed_kernels(before, after) == [
        "@@ -1,6 +1,4 @@",
        f" {kernels[0]}",
        f" {code}",
        f"-{kernels[1]}",
        f"-{code}",
        f" {kernels[2]}",
        f" {code}",
    ]
