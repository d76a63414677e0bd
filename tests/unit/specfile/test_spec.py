"""Spec files: every mistake is one line naming FILE:LINE and what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from invariants._errors import InvariantsError
from invariants.specfile.reader import SPEC_DIR, load_spec, load_specs

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


def test_malformed_spec_stops_pytest_with_one_line(gate_pytester, tmp_path):
    """Through pytest (in this process): non-zero exit and one line, no traceback."""
    for spec in SPEC_DIR.glob("*.toml"):
        (tmp_path / spec.name).write_text(spec.read_text())
    cpu = tmp_path / "cpu.toml"
    cpu.write_text(cpu.read_text().replace('assert = "kernels <= 1"', 'assert = "fusoins <= 1"', 1))
    gate_pytester.project(targets=())
    proc = gate_pytester.pytest(
        "tests/gate/test_invariants.py", "--spec-dir", str(tmp_path), "--collect-only"
    )
    assert proc.returncode != 0
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "cpu.toml:" in line]
    assert len(errors) == 1 and "unknown metric 'fusoins' (did you mean 'fusions'?)" in errors[0], errors
    assert "Traceback" not in proc.stdout + proc.stderr


def _assert(text: str) -> str:
    return f'[[invariant]]\nid = "d"\nassert = "{text}"\n'


def test_throughput_sides_name_an_index_distribution(tmp_path):
    from invariants.specfile.asserts import TimedSide

    path = tmp_path / "cpu.toml"
    path.write_text(HEADER + _assert("time(grad_take[equal]) / time(grad_take) <= 1.25"))
    (inv,) = load_spec(path).invariants
    assert inv.kind == "throughput" and inv.programs == ("grad_take",)
    assert inv.assertion.timed is not None
    a, b, c = inv.assertion.timed
    assert (a, b, c) == (TimedSide("grad_take", "equal"), TimedSide("grad_take", "uniform"), 1.25)
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
    from invariants.scope.targets import all_targets
    from invariants.verdict.checks import expand

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


def test_a_correctness_check_narrows_the_files_targets(tmp_path):
    """A correctness check runs on the runtime target its targets name: one file holds a check for a CPU
    host and another for an H100 host; on this CPU host only the first makes items."""
    from invariants.scope.targets import all_targets
    from invariants.verdict.correctness import expand_correctness

    path = tmp_path / "runtime.toml"
    path.write_text(
        '[spec]\ntargets = ["cpu", "gpu-h100"]\n\n'
        + _AGREE.replace('id = "c"', 'id = "on_cpu"')
        + 'targets = ["cpu"]\n\n'
        + _AGREE.replace('id = "c"', 'id = "on_h100"')
        + 'targets = ["gpu-h100"]\n'
    )
    spec = load_spec(path)
    assert [c.targets for c in spec.correctness] == [("cpu",), ("gpu-h100",)]
    assert spec.correctness[1].targets_where == f"{path}:16"
    cases = expand_correctness([spec], all_targets()["cpu"])
    assert {c.check.id for c in cases} == {"on_cpu"}


def test_a_correctness_checks_targets_outside_the_files_are_one_line(tmp_path):
    message = _error(tmp_path, _AGREE + 'targets = ["tpu-v5e"]\n')
    assert message.endswith(
        "cpu.toml:9: 'c': targets 'tpu-v5e' lies outside this file's targets (cpu): it would never apply"
    )


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


# -- "A gate you can trust": what passed in silence or stopped on a traceback is one line ----------------

_INV = '[[invariant]]\nid = "g"\nprograms = ["take"]\nassert = "gathers == 1"\n'
_AGREE = '[[correctness]]\nid = "c"\ncheck = "agree"\nprograms = ["naive"]\nreference = "take"\n'
_OOB = '[[correctness]]\nid = "c"\ncheck = "out_of_bounds"\nprograms = ["take"]\n'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Silent passes before: each of these loaded and checked nothing.
        ('[spec]\ntargets = ["\u0441pu"]\n' + _INV,  # a Cyrillic 'с'
         ":2: targets: 'сpu' can match no target; it has a non-ASCII 'с' (U+0441 CYRILLIC SMALL LETTER ES)"),
        ('[spec]\ntargets = []\n' + _INV, ":2: 'targets' = [] names nothing"),
        (HEADER + _INV + 'configs = ["f33"]\n',
         ":8: configs: 'f33' matches no configuration (did you mean 'f32'?); known: f32, bf16,"),
        (HEADER + '[[invariant]]\nid = "g"\nprograms = []\nassert = "gathers == 1"\n',
         ":6: 'programs' = [] names nothing"),
        (HEADER + _INV + 'targets = ["gpu-\u04bb100"]\n', ":8: 'g': targets 'gpu-һ100' can match no target"),
        (HEADER + _AGREE + 'configs = ["f33"]\n', ":9: configs: 'f33' matches no configuration"),
        ("", ":1: declares nothing: no [[invariant]], [[correctness]] or [[program]]"),
        ("# only a comment\n\n# and another\n", ":1: declares nothing"),
        ('[spec]\ntargets = ["cpu"]\n', ":1: declares nothing"),
        (HEADER + _INV + 'when = \'jax >= 0.5; python_version > "3"\'\n',
         ":8: when: 'jax >= 0.5; python_version > \"3\"' has an environment marker "
         "('; python_version > \"3\"'): 'when' takes version conditions only"),
        (HEADER + _INV + 'when = "jax[tpu] >= 0.5"\n', ":8: when: 'jax[tpu] >= 0.5': 'when' takes a package"),
        (HEADER + _INV + 'when = " , "\n', ":8: when: ' , ' holds no version condition"),
        # Tracebacks before.
        (HEADER + _INV + "when = 3\n",
         ":8: 'when' must be a string of version conditions such as 'jax >= 0.5', not an integer"),
        (HEADER + _INV + 'when = "jax >= 0.5 x"\n',  # packaging's message has three lines: the first one
         ":8: when: cannot read 'jax >= 0.5 x': Expected comma (within version specifier), semicolon"),
        ('[[spec]]\ntargets = ["cpu"]\n' + _INV, ":1: [spec] is one table: write [spec], not [[spec]]"),
        ('spec = 3\n' + _INV, ":1: 'spec' must be the table [spec], not an integer"),
        ("invariant = 5\n" + HEADER,
         ":1: 'invariant' must be an array of tables [[invariant]], not an integer"),
        (HEADER + '[invariant]\nid = "g"\n',
         ":4: [invariant] must be an array of tables: write [[invariant]]"),
        ("correctness = [1, 2]\n" + HEADER, ":1: 'correctness' must be an array of tables [[correctness]]; "
         "item 1 is an integer"),
        (HEADER + '[[invariant]]\nid = "g"\nprograms = ["take"]\nassert = 5\n',
         ":7: 'assert' must be a string, not an integer"),
        (HEADER + '[[invariant]]\nid = "g"\nprograms = ["take", 3]\nassert = "gathers == 1"\n',
         ":6: 'programs' must be a string or a list of strings; item 2 is an integer"),
        (HEADER + _INV + 'why = ["a"]\n', ":8: 'why' must be a string, not an array"),
        (HEADER + _INV + 'ratchet = { reason = 3, issue = "x" }\n', ":8: a ratchet's 'reason' and 'issue'"),
        (HEADER + '[[correctness]]\nid = "c"\ncheck = 3\nprograms = ["naive"]\n',
         ":6: 'check' must be a string, one of agree, out_of_bounds, narrow_index, not an integer"),
        (HEADER + '[[correctness]]\nid = "c"\ncheck = ["agree"]\nprograms = ["naive"]\n',
         ":6: 'check' must be"),
        (HEADER + '[[correctness]]\nid = 7\ncheck = "agree"\nprograms = ["naive"]\n',
         ":5: id 7 must be letters, digits and '_'"),
        (HEADER + _AGREE.replace('"take"', '"tkae"'),
         ":8: unknown reference program 'tkae' (did you mean 'take'?)"),
        (HEADER + _AGREE.replace('"take"', "3"), ":8: 'reference' must be a program name, not an integer"),
        (HEADER + _INV + '"a\\nb" = 1\n', ":4: unknown key 'a\\nb' in [[invariant]]"),  # one line: repr
        # Found only when the item ran, before: now at load.
        (HEADER + _AGREE + 'distributions = ["zipff"]\n',
         ":9: unknown index distribution 'zipff' (did you mean 'zipf'?); known: uniform, zipf, equal"),
        (HEADER + _OOB + 'expect = "clampp"\n',
         ":8: 'c': expect 'clampp' is not one of clamp, fill_nan, fill_zero, wrap, wrap_negative_clamp "
         "(did you mean 'clamp'?)"),
        (HEADER + '[[correctness]]\nid = "c"\ncheck = "narrow_index"\nprograms = ["take"]\n',
         ":4: 'c': check 'narrow_index' needs 'expect', one of ok, overflow_error, wrong_rows"),
        (HEADER + _AGREE + 'expect = "ok"\n', ":9: 'c': check 'agree' takes no 'expect'; drop it"),
        (HEADER + '[[correctness]]\nid = "c"\ncheck = "agree"\nprograms = ["naive"]\n',
         ":4: 'c': check 'agree' needs a 'reference' program to agree with"),
        (HEADER + _OOB + 'expect = "clamp"\nreference = "take"\n',
         ":9: 'c': check 'out_of_bounds' compares with no reference; drop 'reference'"),
        (HEADER + _OOB + 'expect = "clamp"\ndistributions = ["zipf"]\n',
         ":9: 'c': check 'out_of_bounds' uses fixed indices; drop 'distributions'"),
        (HEADER + _AGREE + _AGREE, ":9: duplicate id 'c' (first at line 4)"),
        (HEADER + '[[invariant]]\nid = "g"\nassert = "kernels(naive[bf16]) <= kernels(take[f32])"\n'
         'configs = ["f32"]\n',
         ":7: 'g' names its configurations in the assert; drop 'configs'"),
        # A constant zero divisor can never be computed: refused at load.
        (HEADER + '[[invariant]]\nid = "g"\nprograms = ["take"]\nassert = "gathers / 0 <= 1"\n',
         ":7: assert 'gathers / 0 <= 1' divides by zero ('gathers / 0'): it can never be computed"),
        (HEADER + '[[invariant]]\nid = "g"\nassert = "kernels(naive) <= kernels(take) / (2 - 2)"\n',
         ":6: assert 'kernels(naive) <= kernels(take) / (2 - 2)' divides by zero"),
        (HEADER + '[[invariant]]\nid = "g"\nprograms = ["take"]\nassert = "gathers / -0.0 <= 1"\n',
         "divides by zero ('gathers / -0.0')"),
        (HEADER + '[[invariant]]\nid = "g"\nprograms = ["take"]\nassert = "gathers <= ' + "(" * 400 + "1"
         + ")" * 400 + '"\n', ":7: assert"),
    ],
)  # fmt: skip
def test_a_spec_that_checks_nothing_or_crashed_is_one_line(tmp_path, text, expected):
    message = _error(tmp_path, text, header="")
    assert message.startswith(str(tmp_path / "cpu.toml") + ":"), message
    assert expected in message, message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (
            (HEADER + _INV + "# caf\xe9\n").encode("latin-1"),
            ":8: not UTF-8 (byte 0xe9 at column 6); spec files",
        ),
        ((HEADER + _INV).encode("utf-16"), ":1: the file is UTF-16 (it starts with a byte-order mark)"),
        ((HEADER + _INV).encode("utf-16-le"), ":1: a NUL byte (column 2): spec files are UTF-8 text"),
        ((HEADER + _INV).encode("utf-32"), ":1: the file is UTF-32"),
        (b"x = " + b"[" * 5000, ":1: not valid TOML: nested too deeply"),
        (b"x = " + b"1" * 5000, ":1: not valid TOML: Exceeds the limit (4300 digits)"),
        (b'[spec]\ntargets = ["cpu"\n', ":3: not valid TOML"),
    ],
)
def test_a_file_that_is_not_utf8_toml_is_one_line(tmp_path, raw, expected):
    path = tmp_path / "cpu.toml"
    path.write_bytes(raw)
    with pytest.raises(InvariantsError) as err:
        load_spec(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path) + ":"), message
    assert expected in message, message


def test_a_utf8_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "cpu.toml"
    path.write_bytes(b"\xef\xbb\xbf" + (HEADER + _INV).encode())
    assert [i.id for i in load_spec(path).invariants] == ["g"]


def test_an_empty_file_in_a_spec_dir_is_one_line(tmp_path):
    """An empty --spec-dir file replaced the package's specs with zero invariants: a green run."""
    (tmp_path / "empty.toml").write_text("# to be written\n")
    with pytest.raises(InvariantsError, match=r"empty\.toml:1: declares nothing"):
        load_specs(tmp_path)


def test_lines_are_found_where_the_header_is_not_first(tmp_path):
    """[spec] below comments: its keys' lines are found in its table, not on line 1."""
    path = tmp_path / "cpu.toml"
    path.write_text('# a comment\n\n[spec]\nefficiency_max_loss = 0.1\ntargets = ["cpu"]\n' + _INV)
    assert load_spec(path).targets_where == f"{path}:5"
    path.write_text('# a comment\n\n[spec]\nefficiency_max_loss = 2.0\ntargets = ["cpu"]\n' + _INV)
    with pytest.raises(InvariantsError, match=r"cpu\.toml:4: efficiency_max_loss must be a fraction"):
        load_spec(path)


def test_each_table_of_a_large_file_gets_its_own_line(tmp_path):
    """The locator reads the text once: the 2000th table's key is on its own line, as before."""
    path = tmp_path / "cpu.toml"
    body = "".join(
        f'[[invariant]]\nid = "i{n}"\nprograms = ["take"]\nassert = "gathers == 1"\n' for n in range(2000)
    )
    path.write_text(
        HEADER + body + '[[invariant]]\nid = "last"\nprograms = ["tkae"]\nassert = "gathers == 1"\n'
    )
    with pytest.raises(InvariantsError) as err:
        load_spec(path)
    assert str(err.value).endswith(
        f"cpu.toml:{3 + 4 * 2000 + 3}: program selector 'tkae' matches no program (did you mean 'take'?)"
    )


def test_the_shipped_specs_are_read_once_each(monkeypatch):
    """load_specs parses each file once (it parsed each three times: programs, then the spec, which read its
    programs again)."""
    import tomllib

    from invariants.specfile import reader as _spec

    calls: list[int] = []
    real = tomllib.loads
    monkeypatch.setattr(_spec.tomllib, "loads", lambda text: calls.append(1) or real(text))
    specs = load_specs()
    assert len(calls) == len(specs) == len(list(SPEC_DIR.glob("*.toml")))


@pytest.mark.parametrize("text", ["1 <= 2", "2 * 3 == 6", "-1 > 0"])
def test_an_assert_that_reads_no_metric_is_refused(tmp_path, text):
    """It is true (or false) on every program and target alike: a spec that writes one checks nothing."""
    body = f'[[invariant]]\nid = "c"\nprograms = ["naive"]\nassert = "{text}"\n'
    message = _error(tmp_path, body)
    assert message.endswith(f":7: assert '{text}' reads no metric: it is the same on every program"), message


_KNOWN = '[[known_compile_failure]]\nid = "k"\nprograms = ["naive"]\n'


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (_KNOWN, ":4: [[known_compile_failure]] needs 'ratchet'"),
        (_KNOWN + 'ratchet = { reason = "r" }\n', ":7: a ratchet needs both a 'reason' and an 'issue' link"),
        (_KNOWN.replace("naive", "nave") + 'ratchet = { reason = "r", issue = "u" }\n',
         ":6: program selector 'nave' matches no program (did you mean 'naive'?)"),
        (_KNOWN + 'ratchet = { reason = "r", issue = "u" }\ntargets = ["tpu-v5e"]\n',
         ":8: 'k': targets 'tpu-v5e' lies outside this file's targets (cpu): it would never apply"),
        (_KNOWN + 'ratchet = { reason = "r", issue = "u" }\nwhy = "x"\n',
         ":8: unknown key 'why' in [[known_compile_failure]]"),
    ],
)  # fmt: skip
def test_a_bad_known_compile_failure_is_one_line(tmp_path, body, expected):
    assert expected in _error(tmp_path, body)


def test_a_known_compile_failure_reads_as_its_ratchet(tmp_path):
    path = tmp_path / "cpu.toml"
    path.write_text(HEADER + _KNOWN + 'configs = ["f32"]\nratchet = { reason = "r", issue = "u" }\n')
    (known,) = load_spec(path).known_compile_failures
    assert (known.id, known.programs, known.configs, known.targets) == ("k", ("naive",), ("f32",), ("*",))
    assert (known.ratchet.reason, known.ratchet.issue, known.where) == ("r", "u", f"{path}:4")
