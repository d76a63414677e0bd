"""Spec files: every mistake is one line naming FILE:LINE and what is wrong."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from invariants._errors import InvariantsError
from invariants._spec import SPEC_DIR, load_spec, load_specs

HEADER = '[spec]\ntargets = ["cpu"]\n\n'


def _error(tmp_path: Path, body: str, header: str = HEADER) -> str:
    path = tmp_path / "cpu.toml"
    path.write_text(header + body)
    with pytest.raises(InvariantsError) as err:
        load_spec(path)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_shipped_specs_load():
    specs = load_specs()
    assert {s.path.name for s in specs} >= {"cpu.toml", "tpu.toml", "gpu.toml", "runtime.toml"}
    assert all(s.invariants or s.correctness for s in specs)


def test_unknown_metric_names_line_and_suggests(tmp_path):
    body = '[[invariant]]\nid = "x"\nprograms = ["naive"]\n\nassert = "fusoins <= 1"\n'
    assert _error(tmp_path, body).endswith("cpu.toml:8: unknown metric 'fusoins' (did you mean 'fusions'?)")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            '[[invariant]]\nid = "x"\nprogram = ["naive"]\nassert = "kernels <= 1"\n',
            ":6: unknown key 'program' in [[invariant]] (did you mean 'programs'?)",
        ),
        (
            '[[invariant]]\nid = "x"\nprograms = ["nave"]\nassert = "kernels <= 1"\n',
            ":6: program selector 'nave' matches no program (did you mean 'naive'?)",
        ),
        (
            '[[invariant]]\nid = "x"\nassert = "kernels(naive) <= kernels(tak)"\n',
            ":6: unknown program 'tak' (did you mean 'take'?)",
        ),
        (
            '[[invariant]]\nid = "x"\nprograms = ["naive"]\nassert = "kernels < = 1"\n',
            ":7: assert 'kernels < = 1' is not an expression: invalid syntax",
        ),
        (
            '[[invariant]]\nid = "x"\nprograms = ["naive"]\nassert = "kernels"\n',
            ":7: assert 'kernels' must be one comparison such as 'kernels <= 2'",
        ),
        (
            '[[invariant]]\nid = "x"\nprograms = ["naive"]\nassert = "kernels <= 1"\nwhen = "jaxx >= 0.5"\n',
            ":8: when: unknown package 'jaxx' (did you mean 'jax'?)",
        ),
        (
            '[[invariant]]\nid = "x"\nprograms = ["naive"]\nassert = "kernels <= 1"\n'
            'ratchet = { reason = "r" }\n',
            ":8: a ratchet needs both a 'reason' and an 'issue' link",
        ),
        (
            '[[invariant]]\nid = "x"\nassert = "kernels(naive) <= kernels"\n',
            ":6: assert 'kernels(naive) <= kernels': mixes program calls with a bare metric 'kernels'",
        ),
        (  # a set compared with a number held everywhere: the sides must have the same type
            '[[invariant]]\nid = "x"\nprograms = ["naive"]\nassert = "custom_call_targets != 0"\n',
            ":7: assert 'custom_call_targets != 0' compares a set with a number: it could never fail",
        ),
        (
            '[[invariant]]\nid = "x"\nprograms = ["naive"]\nassert = "kernels == \'x\'"\n',
            ":7: assert \"kernels == 'x'\" compares a number with a string: it could never fail",
        ),
        (
            '[[invariant]]\nid = "x"\nprograms = ["naive"]\nassert = "opcodes + 1 >= 0"\n',
            ":7: assert 'opcodes + 1 >= 0': arithmetic on a set ('opcodes')",
        ),
        (
            '[[invariant]]\nid = "x"\nassert = "structure(naive) <= structure(take)"\n',
            ":6: assert 'structure(naive) <= structure(take)': a structure can only be compared with ==",
        ),
        (
            '[[invariant]]\nid = "x"\nprograms = ["naive"]\nassert = "kernels in opcodes"\n',
            ":7: assert 'kernels in opcodes': 'in' takes a quoted name on its left and one of",
        ),
        (
            '[[invariant]]\nid = "x"\nassert = "time(naive) <= 1.1"\n',
            ":6: assert 'time(naive) <= 1.1': a throughput assert reads 'time(A) / time(B) <= NUMBER'",
        ),
        (
            '[[invariant]]\nid = "x"\nprograms = ["naive"]\nassert = "__import__(os) == 1"\n',
            ":7: unknown metric '__import__'",
        ),
        (
            '[[invariant]]\nid = "x"\nprograms = ["naive"]\nassert = "kernels <= 1"\n'
            '[[invariant]]\nid = "x"\nprograms = ["take"]\nassert = "kernels <= 1"\n',
            ":8: duplicate id 'x' (first at line 4)",
        ),
        (
            '[[correctness]]\nid = "c"\ncheck = "agre"\nprograms = ["naive"]\n',
            ":6: unknown check 'agre' (did you mean 'agree'?)",
        ),
        (
            '[[invariant]]\nid = "x"\nprograms = ["naive"]\nassert = "kernels <= 1"\n[[invariant]\n',
            ":8: not valid TOML",
        ),
    ],
)
def test_malformed_spec_is_one_line(tmp_path, body, expected):
    assert expected in _error(tmp_path, body)


def test_missing_targets_header(tmp_path):
    assert "missing [spec] targets" in _error(tmp_path, '[[invariant]]\nid = "x"\n', header="")


def test_empty_spec_dir_is_an_error(tmp_path):
    with pytest.raises(InvariantsError, match=r"no \*\.toml spec files"):
        load_specs(tmp_path)


def test_malformed_spec_stops_pytest_with_one_line(tmp_path):
    """Through pytest: non-zero exit and one line, no traceback."""
    for spec in SPEC_DIR.glob("*.toml"):
        (tmp_path / spec.name).write_text(spec.read_text())
    cpu = tmp_path / "cpu.toml"
    cpu.write_text(cpu.read_text().replace('assert = "kernels <= 1"', 'assert = "fusoins <= 1"', 1))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "invariants/gate/test_invariants.py", "--spec-dir", str(tmp_path),
         "--collect-only", "-q", "-p", "no:cacheprovider"],
        capture_output=True, text=True, check=False, cwd=Path(__file__).parents[2],
    )  # fmt: skip
    assert proc.returncode != 0
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "cpu.toml:" in line]
    assert len(errors) == 1 and "unknown metric 'fusoins' (did you mean 'fusions'?)" in errors[0], errors
    assert "Traceback" not in proc.stdout + proc.stderr


def _assert(text: str) -> str:
    return f'[[invariant]]\nid = "d"\nassert = "{text}"\n'


def test_throughput_sides_name_an_index_distribution(tmp_path):
    from invariants._spec import Timed, throughput_terms

    path = tmp_path / "cpu.toml"
    path.write_text(HEADER + _assert("time(grad_take[equal]) / time(grad_take) <= 1.25"))
    (inv,) = load_spec(path).invariants
    assert inv.kind == "throughput" and inv.programs == ("grad_take",)
    a, b, c = throughput_terms(inv.expr.body)
    assert (a, b, c) == (Timed("grad_take", "equal"), Timed("grad_take", "uniform"), 1.25)
    assert (a.label, b.label) == ("grad_take[equal]", "grad_take")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("time(grad_take[equall]) / time(grad_take) <= 1.2",
         "unknown index distribution 'equall' in 'grad_take[equall]' (did you mean 'equal'?); "
         "known: uniform, zipf, equal"),
        ("time(grad_take[0]) / time(grad_take) <= 1.2", "unknown index distribution '0'"),
        ("kernels(take[equal]) <= kernels(naive)",
         "kernels(take[equal]): only time() takes an index distribution; the compiled structure does not"),
        ("structure(take[zipf]) == structure(naive)", "structure(take[zipf]): only time() takes"),
        ("time(take[uniform]) / time(take) <= 1.2", "times take against itself: it could never fail"),
        ("time(grad_take[zipf][equal]) / time(take) <= 1.2",
         "time(...) takes one program, as in time(take) or time(take[zipf])"),
        ("time(grad_tkae[zipf]) / time(take) <= 1.2", "unknown program 'grad_tkae'"),
    ],
)  # fmt: skip
def test_bad_distribution_terms_are_one_line(tmp_path, text, expected):
    assert expected in _error(tmp_path, _assert(text))


_GPU_HEADER = '[spec]\ntargets = ["gpu-*"]\n\n'


def test_an_invariant_narrows_the_files_targets(tmp_path):
    """One file states a fact on every GPU and its known-bad exception on two of them."""
    from invariants._checks import expand
    from invariants._targets import all_targets

    path = tmp_path / "gpu.toml"
    path.write_text(
        _GPU_HEADER
        + '[[invariant]]\nid = "everywhere"\nprograms = ["grad_take"]\nconfigs = ["f32"]\n'
        + 'assert = "cas_atomics == 0"\n\n'
        + '[[invariant]]\nid = "sm8x"\nprograms = ["grad_take"]\nconfigs = ["f32"]\n'
        + 'targets = ["gpu-a100", "gpu-l4"]\nassert = "cas_atomics == 0"\n'
    )
    spec = load_spec(path)
    assert spec.invariants[0].targets == ("*",) and spec.invariants[1].targets == ("gpu-a100", "gpu-l4")
    cases = expand([spec], all_targets().values())
    where = {(c.invariant.id, c.target) for c in cases}
    assert {t for i, t in where if i == "sm8x"} == {"gpu-a100", "gpu-l4"}
    assert {t for i, t in where if i == "everywhere"} >= {"gpu-a100", "gpu-l4", "gpu-h100", "gpu-b200"}


def test_an_invariants_targets_outside_the_files_are_one_line(tmp_path):
    message = _error(
        tmp_path,
        '[[invariant]]\nid = "x"\nprograms = ["take"]\ntargets = ["tpu-v5e"]\nassert = "kernels == 1"\n',
        _GPU_HEADER,
    )
    assert message.endswith(
        "'x': targets 'tpu-v5e' lies outside this file's targets (gpu-*): it would never apply"
    )
    assert ":7:" in message


def test_kernel_metrics_are_asserted_on_per_program(tmp_path):
    path = tmp_path / "gpu.toml"
    path.write_text(
        _GPU_HEADER
        + '[[invariant]]\nid = "a"\nprograms = ["grad_take"]\n'
        + 'assert = "cas_atomics <= cas_atomics(grad_naive)"\n'
    )
    with pytest.raises(InvariantsError, match=r"mixes program calls with a bare metric 'cas_atomics'"):
        load_spec(path)
    path.write_text(
        _GPU_HEADER
        + '[[invariant]]\nid = "a"\nassert = "cas_atomics(grad_take) <= cas_atomics(grad_naive)"\n'
    )
    (inv,) = load_spec(path).invariants
    assert inv.kind == "relational" and inv.programs == ("grad_take", "grad_naive")
