"""`python -m invariants report`: tables, throughput, --compare, the plot, and one line for bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from invariants.__main__ import main as cli
from invariants._errors import InvariantsError
from invariants.records.results import FORMAT_VERSION, record
from invariants.report import markdown as _report

# Records are built by the results module, the same as the gate's items build theirs.


def _structure(target: str, program: str, config: str = "f32", **metrics: Any) -> dict[str, Any]:
    base = dict(kernels=1, entry_fusions=1, while_loops=0, max_trip_count=0, dynamic_kernel_launches=1)
    base |= dict(collectives=0, collective_bytes=0)
    _, value = record("structure", target=target, program=program, config=config, **{**base, **metrics})
    return {**value, "outcome": "passed", "nodeid": f"s::{target}-{program}-{config}"}


def _invariant(target: str, program: str, id_: str, outcome: str, config: str = "f32") -> dict[str, Any]:
    nodeid = f"i::{target}-{program}-{config}-{id_}"
    _, value = record("invariant", id=id_, target=target, programs=[program], config=config,
                      holds=outcome != "failed", measured={}, **{"assert": "kernels <= 1"})  # fmt: skip
    return {**value, "outcome": outcome, "nodeid": nodeid}


def _ratio(a: str, median: float, low: float, high: float, verdict: str = "pass") -> dict[str, Any]:
    _, value = record("ratio", id=f"{a}_vs_take", target="cpu", a=a, b="take", config="f32", median=median,
                      low=low, high=high, threshold=1.1, verdict=verdict)  # fmt: skip
    return value


def _results(items: list[dict[str, Any]], jax: str = "0.10.2", exitstatus: int = 0) -> dict[str, Any]:
    return {
        "format_version": FORMAT_VERSION,
        "versions": {"jax": jax, "jaxlib": jax},
        "runtime": {"platform": "cpu", "device_kind": "cpu", "count": 1},
        "targets": {
            "cpu": {"mode": "runtime", "scope": "all", "unavailable": None},
            "tpu-v5e": {"mode": "aot", "scope": "all", "unavailable": None},
        },
        "exitstatus": exitstatus,
        "items": items,
    }


def _write(tmp_path: Path, name: str, data: Any) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


RUN = [
    _structure("cpu", "naive"),
    _structure(
        "tpu-v5e",
        "grad_vmap_naive",
        kernels=22,
        entry_fusions=2,
        while_loops=1,
        max_trip_count=16384,
        dynamic_kernel_launches=147470,
    ),
    _structure("tpu-v5e", "sharded", collectives=1, collective_bytes=1048576),
    _invariant("cpu", "naive", "one_kernel", "passed"),
    _invariant("tpu-v5e", "grad_vmap_naive", "grad_no_while", "xfailed"),
    _invariant("tpu-v5e", "grad_vmap_naive", "grad_bounded_launches", "failed"),
    {
        **_ratio("naive", 1.05, 1.03, 1.07),
        "outcome": "passed",
        "nodeid": "t::cpu::cpu.toml::naive_as_fast::naive~take-f32",
    },
]


def test_report_tables_show_structure_and_invariant_status(tmp_path):
    run = _report.load_results(_write(tmp_path, "r.json", _results(RUN, exitstatus=1)))
    md = _report.render(run)
    assert "**failed** (pytest exit status 1)" in md
    assert "jax 0.10.2" in md and "`tpu-v5e` (aot, all)" in md
    row = next(line for line in md.splitlines() if line.startswith("| `grad_vmap_naive` |"))
    # kernels, entry fusions, while (max trip), dynamic launches, collectives, invariant status
    assert "| 22 | 2 | 1 (16,384) | 147,470 | 0 |" in row
    assert "1 **fail**, 1 xfail" in row and "`grad_bounded_launches`" in row
    assert "| 1 (1.0 MiB) |" in md
    assert "| `cpu` | `naive / take` | f32 | 1.050 [1.030, 1.070] | — | ≤ 1.1 | pass | passed |" in md
    assert "- `i::tpu-v5e-grad_vmap_naive-f32-grad_bounded_launches`" in md  # the failed-items list


def test_benchmark_json_adds_rows_once(tmp_path):
    results = _write(tmp_path, "r.json", _results(RUN))
    bench = {
        "machine_info": {},
        "benchmarks": [
            # Measured in the results file too (same node id): reported once.
            {
                "name": "naive~take-f32",
                "fullname": "t::cpu::cpu.toml::naive_as_fast::naive~take-f32",
                "extra_info": _ratio("naive", 1.05, 1.03, 1.07),
                "stats": {"median": 0.1},
            },
            {
                "name": "vmap~take-f32",
                "fullname": "t::cpu::cpu.toml::vmap_as_fast::vmap~take-f32",
                "extra_info": _ratio("vmap", 1.4, 1.3, 1.5, verdict="fail"),
                "stats": {"median": 0.1},
            },
            {
                "name": "take-f32",
                "fullname": "t::cpu::take-f32",
                "extra_info": record(
                    "efficiency",
                    id="efficiency",
                    target="cpu",
                    program="take",
                    config="f32",
                    median=0.25,
                    low=0.24,
                    high=0.26,
                    threshold=None,
                    verdict=None,
                )[1],
                "stats": {"median": 0.1},
            },
            {"name": "test_unrelated", "fullname": "u::test_unrelated", "extra_info": {}, "stats": {}},
        ],
    }
    out = tmp_path / "report.md"
    argv = ["report", results, "--benchmark-json", _write(tmp_path, "b.json", bench), "--out", str(out)]
    assert cli(argv) == 1  # a failed run
    md = out.read_text()
    assert md.count("`naive / take`") == 1
    assert "| `cpu` | `vmap / take` | f32 | 1.400 [1.300, 1.500] | — | ≤ 1.1 | fail | — |" in md
    # One table of paired ratios: the efficiency row beside the ratios, its bound a floor (none here).
    assert "| `cpu` | efficiency of `take` | f32 | 0.250 [0.240, 0.260] | — | — | — | — | — |" in md
    assert md.count("## Throughput: paired ratios") == 1


def test_a_tiny_efficiency_keeps_its_significant_figures(tmp_path):
    eff = record(
        "efficiency",
        id="efficiency",
        target="tpu-v5e",
        program="train_eqx_embedding",
        config="f32",
        median=2.385e-4,
        low=2.38e-4,
        high=2.39e-4,
        threshold=1.19e-4,
        verdict="pass",
    )[1]
    bench = {"machine_info": {}, "benchmarks": [{"name": "e", "fullname": "t::e", "extra_info": eff}]}
    out = tmp_path / "report.md"
    results = _write(tmp_path, "r.json", _results(RUN))
    cli(["report", results, "--benchmark-json", _write(tmp_path, "b.json", bench), "--out", str(out)])
    assert "| f32 | 0.0002385 [0.000238, 0.000239] |" in out.read_text()


def test_compare_lists_changed_metrics_and_outcomes(tmp_path):
    a = _write(tmp_path, "a.json", _results(RUN))
    changed = [dict(i) for i in RUN]
    changed[0] = _structure("cpu", "naive", kernels=6, dynamic_kernel_launches=6)  # an injected regression
    changed[3] = {**changed[3], "outcome": "failed"}
    changed[6] = {**changed[6], "median": 1.5, "low": 1.4, "high": 1.6, "verdict": "fail"}
    b = _write(tmp_path, "b.json", _results(changed, jax="0.11.0.dev20261130"))
    md = _report.compare_markdown(_report.load_results(a), _report.load_results(b))
    assert "| jax | 0.10.2 | 0.11.0.dev20261130 |" in md
    assert "## Structure: 2 metric(s) changed" in md
    assert "| `cpu` | `naive` | f32 | kernels | 1 | 6 |" in md
    assert "| `i::cpu-naive-f32-one_kernel` | passed | failed |" in md
    assert "## Throughput: 1 measurement(s) moved beyond their intervals" in md
    same = _report.compare_markdown(_report.load_results(a), _report.load_results(a))
    assert "Same versions." in same and "0 metric(s) changed" in same and "0 item(s) changed" in same


def test_plot_writes_a_png(tmp_path):
    run = _report.load_results(_write(tmp_path, "r.json", _results(RUN)))
    out = tmp_path / "plot.png"
    _report.plot(run, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _drawn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, items: list[dict[str, Any]]) -> Any:
    """The figure the plot of ``items`` draws, drawn, its renderer ready."""
    import matplotlib.pyplot as plt

    figures: list[Any] = []
    monkeypatch.setattr(plt, "close", figures.append)
    run = _report.load_results(_write(tmp_path, "r.json", _results(items)))
    _report.plot(run, tmp_path / "plot.png")
    monkeypatch.undo()
    (fig,) = figures
    fig.canvas.draw()
    return fig


def test_the_plot_s_legends_and_notes_cover_no_point(tmp_path, monkeypatch):
    """Each legend lies outside every panel, within the figure, and the note of the largest count is no text
    drawn over the points: a legend in the panel's lower right covered the point with the most launches
    where that was the last row."""
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    last_row_largest = [
        _structure("cpu", "a_first"),
        _structure("tpu-v5e", "a_first", dynamic_kernel_launches=4),
        _structure("cpu", "z_last", dynamic_kernel_launches=3),
        _structure("tpu-v5e", "z_last", while_loops=1, max_trip_count=16384, dynamic_kernel_launches=147470),
    ]
    fig = _drawn(tmp_path, monkeypatch, last_row_largest)
    renderer = fig.canvas.get_renderer()
    whole = fig.get_window_extent(renderer)
    panels = [ax.get_window_extent(renderer) for ax in fig.axes]
    assert len(panels) == 2  # a column per group of targets: the CPU, the TPU chips
    for ax in fig.axes:
        legend = ax.get_legend().get_window_extent(renderer)
        assert not [p for p in panels if legend.overlaps(p)], (legend, panels)
        assert whole.x0 <= legend.x0 and legend.x1 <= whole.x1 + 1 and legend.y1 <= whole.y1 + 1, legend
        assert not ax.texts, [t.get_text() for t in ax.texts]
    titles = [t.get_text() for t in fig.findobj(Text)]
    assert [t for t in titles if "most: 147,470 launches, z_last on tpu-v5e" in t], titles
    plt.close(fig)


def test_the_plot_draws_each_group_of_targets_in_a_column_of_its_own(tmp_path, monkeypatch):
    """Every target in one panel overlapped past reading: a column per group of targets (the CPU, TPU chips,
    slices and pods, the SparseCore's, GPUs), for launches and for the TPU's predicted cycles, each target
    in one column of each, no column with more than four."""
    import matplotlib.pyplot as plt

    from invariants.scope.targets import CPU_RUNTIME, GROUPS, all_targets

    names = list(all_targets(CPU_RUNTIME))
    assert len(names) >= 15
    items = [
        _structure(t, p, **({"estimated_cycles": 1000} if t.startswith("tpu") else {}))
        for t in names
        for p in ("take", "naive")
    ]
    fig = _drawn(tmp_path, monkeypatch, items)
    columns = [(ax.get_legend().get_title().get_text(), ax) for ax in fig.axes]
    tpu = [g for g in GROUPS if g.startswith("TPU")]
    assert [name for name, _ in columns] == [*GROUPS, *tpu]
    launches = [t.get_text() for _, ax in columns[: len(GROUPS)] for t in ax.get_legend().get_texts()]
    assert sorted(launches) == sorted(names)
    for name, ax in columns:
        assert len(ax.collections) == len(ax.get_legend().get_texts()) <= 4, name
    plt.close(fig)


def test_several_results_files_merge(tmp_path):
    gate = _write(tmp_path, "r.json", _results(RUN[:6]))
    timed = _write(tmp_path, "t.json", _results(RUN[6:]))
    run = _report.merge([_report.load_results(gate), _report.load_results(timed)])
    assert len(run.items) == len(RUN) and [t.label for t in run.throughput] == ["naive / take"]
    other = _write(tmp_path, "o.json", _results(RUN, jax="0.4.30"))
    with pytest.raises(InvariantsError, match=r"jax 0\.4\.30 differs from 0\.10\.2"):
        _report.merge([_report.load_results(gate), _report.load_results(other)])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such results file"),
        ("{not json", "not JSON"),
        ("[1, 2]", "not a results file"),
        (json.dumps({"items": []}), "a results file of no format version; this version reads format"),
        (json.dumps({"format_version": 1, "items": []}), "format version 1; this version reads format"),
        (json.dumps(_results([{"kind": "structure"}])), "items[0] is not an object with string 'kind'"),
        (json.dumps({**_results([]), "exitstatus": "0"}), "'exitstatus' must be an integer"),
        (
            json.dumps(
                _results(
                    [
                        {
                            **_ratio("naive", 1.0, 0.9, 1.1),
                            "median": "fast",
                            "nodeid": "t::x",
                            "outcome": "passed",
                        }
                    ]
                )
            ),
            "items[0] (ratio t::x): 'median' cannot be 'fast'",
        ),
    ],
)
def test_bad_results_is_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    assert cli(["report", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("bench", "message"),
    [
        ('{"benchmarks": 3}', "not a pytest-benchmark JSON file"),
        (
            json.dumps(
                {"benchmarks": [{"name": "x", "extra_info": {**_ratio("naive", 1.0, 0.9, 1.1), "low": None}}]}
            ),
            "benchmarks[0] (x)",
        ),
    ],
)
def test_bad_benchmark_json_is_one_line(tmp_path, capsys, bench, message):
    results = _write(tmp_path, "r.json", _results(RUN))
    assert cli(["report", results, "--benchmark-json", _write(tmp_path, "b.json", bench)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give a results file"),
        (["--compare", "a.json"], "expected 2 arguments"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_arguments_are_one_line(capsys, argv, message):
    assert cli(["report", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_plot_with_nothing_to_plot_still_writes_the_markdown(tmp_path, capsys):
    only_invariants = _write(tmp_path, "r.json", _results([i for i in RUN if i["kind"] == "invariant"]))
    out, png = tmp_path / "report.md", tmp_path / "report.png"
    assert cli(["report", only_invariants, "--plot", str(png), "--out", str(out)]) == 1  # a failed run
    assert "grad_bounded_launches" in out.read_text() and not png.exists()
    assert "nothing to plot" in capsys.readouterr().err


def test_the_docs_report_commands_write_only_ignored_files(tmp_path):
    """The docs' `python -m invariants report ... --plot FILE` put their files where git ignores them."""
    import re
    import subprocess

    root = Path(__file__).parents[3]
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    commands = [c for p in pages for c in re.findall(r"`(python -m invariants report [^`]*)`", p.read_text())]
    writing = [c.split() for c in commands if "--plot" in c or "--out" in c]
    assert writing, commands
    for words in writing:
        command = " ".join(words)
        for out in [words[n + 1] for n, w in enumerate(words) if w in ("--plot", "--out")]:
            ignored = subprocess.run(["git", "check-ignore", "-q", out], cwd=root, check=False)
            assert ignored.returncode == 0, f"{command!r} writes {out}, which git does not ignore"


def _unwritable(tmp_path: Path) -> Path:
    import os

    if os.geteuid() != 0:
        folder = tmp_path / "ro"
        folder.mkdir()
        folder.chmod(0o555)
        return folder
    return Path("/sys")  # root: permissions do not stop it; sysfs makes no files


@pytest.mark.e2e
@pytest.mark.parametrize("option", ["--out", "--plot"])
def test_an_output_path_that_cannot_be_written_is_one_line_before_any_work(tmp_path, option):
    """`report R --out DIR` (or an unwritable folder) crashed at the end with a traceback, the work lost:
    now one line and exit 2, before the results are even read (a missing results file is not reached)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).parents[3]
    results = _write(tmp_path, "r.json", _results(RUN))
    for bad, said in [(tmp_path, "a directory; give a file path"),
                      (_unwritable(tmp_path) / "r.out", "cannot write in its folder")]:  # fmt: skip
        for inputs in ([results], [str(tmp_path / "missing.json")]):
            proc = subprocess.run(
                [sys.executable, "-m", "invariants", "report", *inputs, option, str(bad)], cwd=tmp_path,
                capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": str(root)},
            )  # fmt: skip
            assert proc.returncode == 2, proc.stderr
            (line,) = proc.stderr.strip().splitlines()
            assert line.startswith(f"report: {option} {bad}: {said}"), line


def test_outputs_are_written_whole(tmp_path, monkeypatch):
    """The markdown goes to a temporary file first, then is renamed: a failed write keeps the old report."""
    results = _write(tmp_path, "r.json", _results(RUN))
    out = tmp_path / "report.md"
    out.write_text("the last good report\n")

    def no_rename(src, dst):
        assert Path(src).read_text().startswith("# "), "the whole report was written first"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("invariants._paths.os.replace", no_rename)
    assert cli(["report", results, "--out", str(out)]) == 2
    monkeypatch.undo()
    assert out.read_text() == "the last good report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "report.md"]  # no temporary file left
    # A failed run: the report exits 1, as its result line says.
    assert cli(["report", results, "--out", str(out), "--plot", str(tmp_path / "report.png")]) == 1
    assert "grad_vmap_naive" in out.read_text() and (tmp_path / "report.png").stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "report.md", "report.png"]


def _downstream_run() -> dict[str, Any]:
    """A downstream run: its own program `mine` related to the catalog's take, beside catalog items."""
    relation = _invariant("cpu", "mine", "mine_is_take", "passed")
    relation["programs"] = ["mine", "take"]
    failed = _structure("cpu", "mine")
    failed |= {
        "outcome": "failed",
        "reason": "mine[f32] on cpu: compiled structure differs from s/cpu/mine.f32.txt",
        "failure": {
            "kind": "snapshot",
            "what": "kernels 1 → 2",
            "key": {"program": "mine", "config": "f32", "target": "cpu"},
        },
    }
    items = [
        failed,
        relation,
        _structure("cpu", "naive"),
        _invariant("cpu", "grad_take", "grad_no_while", "passed"),
    ]
    data = _results(items, exitstatus=1)
    data["declared"] = ["mine"]
    data["programs"] = {
        "mine": {"kind": "forward", "tags": ["user"]},
        "take": {"kind": "forward", "tags": []},
        "naive": {"kind": "forward", "tags": []},
        "grad_take": {"kind": "backward", "tags": []},
    }
    return data


def test_a_downstream_runs_report_shows_its_own_programs_and_failed_reasons(tmp_path, capsys):
    path = _write(tmp_path, "r.json", _downstream_run())
    assert cli(["report", path]) == 1  # a failed run
    out = capsys.readouterr().out
    assert "- **programs**: `mine` (the project's own" in out
    assert "`naive`" not in out and "grad_no_while" not in out
    assert "| invariant | 1 | 0 |" in out  # the relation to take stays; the catalog's own invariant goes
    # The reason as written, its markup escaped (it is user text: a spec's path, a program's name).
    reason = r"mine\[f32\] on cpu: compiled structure differs from s/cpu/mine.f32.txt"
    # After what it failed on, from its failure: a verdict, a snapshot, a compile, or an error.
    assert f"- `s::cpu-mine-f32` (snapshot): {reason}" in out


@pytest.mark.parametrize(
    ("words", "shown", "hidden"),
    [("*", ["`naive`", "`mine`"], []), ("kind:backward", ["`grad_take`"], ["`naive`", "`mine`"]),
     ("nai*", ["`naive`"], ["`mine`", "`grad_take`"]), ("tag:user", ["`mine`"], ["`naive`"])],
)  # fmt: skip
def test_report_programs_selects_with_the_gates_grammar(tmp_path, capsys, words, shown, hidden):
    path = _write(tmp_path, "r.json", _downstream_run())
    assert cli(["report", path, "--programs", words]) == 1  # a failed run
    out = capsys.readouterr().out
    assert all(s in out for s in shown), out
    assert not any(h in out for h in hidden), out


def test_report_programs_unknown_word_is_one_line(tmp_path, capsys):
    path = _write(tmp_path, "r.json", _downstream_run())
    assert cli(["report", path, "--programs", "mine,mien"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == ["report: --programs: unknown program 'mien' (did you mean 'mine'?)"]


# ------------------------------------------------------------------------- --compare, section by section


def _compared(tmp_path: Path, capsys, a_items: list[dict[str, Any]], b_items: list[dict[str, Any]],
              b_jax: str = "0.10.2") -> tuple[str, str, str]:  # fmt: skip
    """``python -m invariants report --compare A B`` as a user runs it: (A's path, B's path, stdout)."""
    a = _write(tmp_path, "a.json", _results(a_items))
    b = _write(tmp_path, "b.json", _results(b_items, jax=b_jax))
    assert cli(["report", "--compare", a, b]) == 0
    return a, b, capsys.readouterr().out


def test_compare_writes_every_section_in_order(tmp_path, capsys):
    """The whole text of one comparison with something in every section: a metric, keys and items in one
    run only, an outcome, and a ratio whose verdict changed while its intervals still overlap."""
    b_items = [_structure("cpu", "naive", kernels=2), RUN[1], _structure("cpu", "take"),
               {**RUN[3], "outcome": "failed"}, RUN[4], _invariant("cpu", "take", "one_kernel", "passed"),
               _invariant("cpu", "take", "no_while", "passed"),
               {**RUN[6], "median": 1.09, "low": 1.07, "high": 1.12, "verdict": "inconclusive"}]  # fmt: skip
    a, b, md = _compared(tmp_path, capsys, RUN, b_items, b_jax="0.11.0")
    assert (
        md
        == f"""# Changes from `{a}` (A) to `{b}` (B)

| package | A | B |
|---|---|---|
| jax | 0.10.2 | 0.11.0 |
| jaxlib | 0.10.2 | 0.11.0 |

## Structure: 1 metric(s) changed

| target | program | config | metric | A | B |
|---|---|---|---|---:|---:|
| `cpu` | `naive` | f32 | kernels | 1 | 2 |

- `tpu-v5e/sharded/f32` only in A
- `cpu/take/f32` only in B

## Outcomes: 1 item(s) changed

| item | A | B |
|---|---|---|
| `i::cpu-naive-f32-one_kernel` | passed | failed |

2 item(s) only in B, 1 only in A.

## Throughput: 1 measurement(s) moved beyond their intervals

| kind | what | config | A | B | B verdict |
|---|---|---|---|---|---|
| ratio | `naive / take` | f32 | 1.050 [1.030, 1.070] | 1.090 [1.070, 1.120] | inconclusive |
"""
    )


def test_compare_counts_the_keys_of_one_run_past_ten(tmp_path, capsys):
    """A run of the invariant tier alone against a whole gate: the structure keys only one run has are
    counted, not listed (ten are still listed)."""
    extra = [_structure("cpu", f"p{n:02}") for n in range(11)]
    _, _, md = _compared(tmp_path, capsys, RUN, RUN + extra)
    assert "0 structure item(s) only in A, 11 only in B.\n" in md and "only in B`" not in md
    assert "- `cpu/p00/f32` only in B" not in md
    _, _, md = _compared(tmp_path, capsys, RUN, RUN + extra[:10])
    assert md.count(" only in B\n") == 10 and "- `cpu/p09/f32` only in B\n" in md


def test_compare_throughput_section_only_when_a_run_timed(tmp_path, capsys):
    untimed = [i for i in RUN if i["kind"] != "ratio"]
    _, _, md = _compared(tmp_path, capsys, untimed, untimed)
    assert "## Throughput" not in md and md.endswith("## Outcomes: 0 item(s) changed\n")
    # Timed in one run only: the section says nothing moved (there is nothing to pair).
    _, _, md = _compared(tmp_path, capsys, untimed, RUN)
    assert md.endswith("## Throughput: 0 measurement(s) moved beyond their intervals\n")
    # Same measurement in both: nothing moved, no table.
    _, _, md = _compared(tmp_path, capsys, RUN, RUN)
    assert "| kind | what |" not in md and "0 measurement(s) moved" in md


@pytest.mark.parametrize(
    ("a", "b", "moved"),
    [
        ((1.0, 0.9, 1.1, "pass"), (1.05, 0.95, 1.15, "pass"), False),  # overlapping: noise
        ((1.0, 0.9, 1.1, "pass"), (1.25, 1.2, 1.3, "pass"), True),  # B above A
        ((1.25, 1.2, 1.3, "pass"), (1.0, 0.9, 1.1, "pass"), True),  # B below A
        ((1.0, 0.9, 1.1, "pass"), (1.0, 0.9, 1.1, "fail"), True),  # same interval, another verdict
        ((1.0, 0.9, 1.1, "pass"), (1.1, 1.1, 1.2, "pass"), False),  # touching is overlapping
    ],
)
def test_a_measurement_moved_when_its_intervals_part_or_its_verdict_changes(a, b, moved):
    def throughput(median: float, low: float, high: float, verdict: str) -> _report.Throughput:
        return _report.Throughput(
            "ratio", "t::r", "cpu", "naive / take", "f32", median, low, high, 1.1, verdict, "passed"
        )

    assert _report._moved(throughput(*a), throughput(*b)) is moved


def test_an_efficiency_item_with_no_baseline_is_reported(tmp_path):
    """An efficiency item with no baseline (the first run on a new chip: the TPU runtime target has none
    committed) is measured against no floor, so its record has neither threshold nor verdict; the item
    fails with the command that records one. Its results file is the run's like any other: the report
    reads it and lists the failure (it once refused the whole file: 'verdict null')."""
    from invariants.timing.paired import measure_efficiency

    measured = measure_efficiency(lambda: None, lambda: None, min_efficiency=None, min_pairs=10,
                                  min_seconds=0.0, max_seconds=0.2)  # fmt: skip
    assert measured.threshold is None and measured.verdict is None  # as an efficiency item records it
    _, value = record("efficiency", id="efficiency", target="tpu-v5e", program="take", config="f32",
                      bytes=2097152, **measured.to_dict(), attempts=[None])  # fmt: skip
    reason = "snapshots/tpu-v5e/efficiency/take.f32.json: no efficiency baseline for take[f32] on tpu-v5e"
    item = {**value, "outcome": "failed", "nodeid": "t::tpu-v5e::take-f32", "reason": reason}
    out = tmp_path / "report.md"
    results = _write(tmp_path, "r.json", _results([*RUN, item], exitstatus=1))
    assert cli(["report", results, "--out", str(out)]) == 1  # a failed run
    md = out.read_text()
    assert "| `tpu-v5e` | efficiency of `take` | f32 |" in md
    assert "- `t::tpu-v5e::take-f32`" in md
    assert reason.replace("[", "\\[").replace("]", "\\]") in md


def test_a_device_clock_ratio_shows_its_clock_the_wall_beside_and_the_baselines_provenance(tmp_path):
    """As the throughput tier records them on a TPU host: the ratio on the chip's clock with the host's
    wall-time ratio beside it, and an efficiency with where its baseline was recorded."""
    from invariants.timing.baselines import provenance, write_baseline
    from invariants.timing.paired import RatioResult

    chip = RatioResult(1.97, 1.96, 1.98, 30, 1.0, 0.95, 1.1, "fail", 90e-6, 45.7e-6, 0.002, 1, 1, 1,
                       clock="device", wall_a_median=624e-6, wall_b_median=590e-6)  # fmt: skip
    _, ratio = record("ratio", id="eqx_forward_time_not_above_take", target="tpu-v5e", a="eqx_embedding",
                      b="take", config="f32", **chip.to_dict(), attempts=["fail", "fail"])  # fmt: skip
    runs = [RatioResult(e, e, e, 30, 1.0, 0.95, None, None, 1e-5, 1e-5, 0.0, 1, 1, 1, name="efficiency")
            for e in (0.9, 0.91, 0.92)]  # fmt: skip
    baseline = write_baseline(tmp_path / "b.json", runs, {"device": "TPU v5 lite", "clock": "device"},
                              {"jax": "0.10.2", "jaxlib": "0.10.2", "libtpu": "0.0.42.1"})  # fmt: skip
    _, eff = record("efficiency", id="efficiency", target="tpu-v5e", program="take", config="f32", bytes=1,
                    **runs[1].to_dict(), attempts=[None], baseline=0.91,
                    baseline_provenance=provenance(baseline))  # fmt: skip
    items = [
        {**ratio, "outcome": "xfailed", "nodeid": "t::ratio"},
        {**eff, "outcome": "passed", "nodeid": "t::e"},
    ]
    out = tmp_path / "report.md"
    cli(["report", _write(tmp_path, "r.json", _results(items)), "--out", str(out)])
    md = out.read_text()
    assert "| `tpu-v5e` | `eqx_embedding / take` | f32 | 1.970 [1.960, 1.980] | device (wall 1.06) |" in md
    assert (
        "- `take [f32]` on `tpu-v5e`: TPU v5 lite, device clock, jax 0.10.2, jaxlib 0.10.2, libtpu 0.0.42.1, "
        "recorded 20" in md
    )


def test_every_skipped_item_is_listed_by_its_reason(tmp_path):
    reason_a = "gpu-h100: the JAX CUDA plugin is not installed"
    skipped = [
        {**_structure("gpu-h100", p), "outcome": "skipped", "nodeid": f"s::gpu-h100-{p}", "reason": reason_a}
        for p in ("naive", "take", "grad_take", "onehot_matmul")
    ]
    other = {
        **_structure("cpu", "flax_nnx_embed"),
        "outcome": "skipped",
        "nodeid": "s::flax",
        "reason": "no <flax>",
    }
    out = tmp_path / "report.md"
    cli(["report", _write(tmp_path, "r.json", _results([*RUN, *skipped, other])), "--out", str(out)])
    md = out.read_text()
    assert "**Skipped items**, by reason" in md
    assert "- 4 × gpu-h100: the JAX CUDA plugin is not installed: `s::gpu-h100-grad_take`, " in md
    assert "and 1 more" in md
    assert "- 1 × no &lt;flax&gt;: `s::flax`" in md


def test_predicted_device_time_per_target_says_which_chips_are_uncalibrated(tmp_path):
    items = [
        _structure("tpu-v5e", "take", predicted_seconds=45.7e-6),
        _structure("tpu-v5e", "eqx_embedding", predicted_seconds=112e-6),
        _structure("tpu-v6e", "take", predicted_seconds=30.1e-6),
    ]
    md = _report.render(_report.load_results(_write(tmp_path, "r.json", _results(items))))
    assert "## Predicted TPU device time: predicted_seconds per call, in microseconds" in md
    assert "| `take` | f32 | 45.7 | 30.1 |" in md and "| `eqx_embedding` | f32 | 112 | ? |" in md
    assert "**Uncalibrated** (a chip nobody measured, scaled by published bandwidth): `tpu-v6e`." in md
    # Without a figure there is no table.
    plain = _report.render(_report.load_results(_write(tmp_path, "p.json", _results(RUN))))
    assert "predicted_seconds" not in plain
