"""Spec files as an attacker writes them: every one either loads, or stops with one line naming the file.

Hypothesis generates spec files, valid and broken: wrong types, unknown keys and names (typos, a Cyrillic
look-alike letter), selectors that select nothing, asserts that are not expressions or divide by zero,
``when`` with markers, truncated TOML, random bytes, UTF-16 and Latin-1 text. For each one the gate's path
is taken as a run takes it (``load_specs`` of a folder, then the target checks of :func:`expand` and a few
verdicts): it loads and decides, or raises :class:`InvariantsError` whose message is one line that starts
with the file's path. Any other exception is a bug. Deterministic (``derandomize``), a few seconds.

The last tests run the gate itself on one broken spec, as a user would: one line, the last of the output.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from gatekit import InProcess
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from invariants._errors import InvariantsError
from invariants.measure.measurement import measure_text
from invariants.scope.targets import all_targets
from invariants.specfile.reader import load_specs
from invariants.verdict.checks import check_specs, evaluate, expand
from invariants.verdict.correctness import expand_correctness

ROOT = Path(__file__).parents[3]
# The example counts are the Hypothesis profile's (tests/conftest.py: a few dozen by default, 500 with
# HYPOTHESIS_PROFILE=full); the valid-file property runs 3/10 of them.
FUZZ = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TAKE = measure_text((ROOT / "tests/data/hlo/cpu_fwd_take.txt").read_text(), "take.hlo")

# -- the vocabulary, right and wrong ----------------------------------------------------------------------

GOOD_PROGRAMS = ["take", "naive", "vmap_naive", "grad_take", "kind:forward", "tag:core", "grad_*"]
PROGRAMS = [*GOOD_PROGRAMS, "take_clip", "vocab_parallel_take", "t\u0430ke", "tkae", "", "kind:nope", "x\ny"]
GOOD_TARGETS = ["cpu", "*"]
TARGETS = [
    *GOOD_TARGETS,
    "cpu-*",
    "tpu-*",
    "gpu-*",
    "tpu-v6e",
    "gpu-a100",
    "cpuu",
    "\u0441pu",
    "gpu-h200",
    "",
]
GOOD_CONFIGS = ["f32", "*", "f32*"]
CONFIGS = [*GOOD_CONFIGS, "bf16", "f33", "bf16-llm", "f32-2d", "", "F32"]
METRICS = ["kernels", "while_loops", "gathers", "scatters", "fusions", "copies", "dynamic_slices"]
WHENS = ["jax >= 0.5", "jaxlib < 99", "jax >= 0.5, jaxlib >= 0.4"]
BAD_WHENS = [
    'jax >= 0.5; python_version > "3"',
    "jaxx >= 1",
    "jax",
    "",
    "jax >= 0.5 x",
    "jax[tpu] >= 1",
    " , ",
]
KEYS = {
    "invariant": ["id", "programs", "configs", "targets", "assert", "why", "when", "ratchet"],
    "correctness": ["id", "check", "programs", "reference", "configs", "distributions", "expect", "why"],
    "program": ["name", "function", "kind", "configs", "tags", "doc"],
}
UNKNOWN_KEYS = ["programz", "assertt", "program", "target", "foo", "a\nb", ""]

ops = st.sampled_from(["<=", "==", "<", ">=", ">", "!="])
numbers = st.one_of(st.integers(0, 100), st.sampled_from(["0", "0.0", "1.5", "-1", "1e9"]))
good_asserts = st.one_of(
    st.builds("{} {} {}".format, st.sampled_from(METRICS), ops, st.integers(0, 100)),
    st.builds("{} / {} {} 2".format, st.sampled_from(METRICS), st.sampled_from(METRICS), ops),  # 0 at run
    st.builds("{} + {} <= {} * 2".format, *[st.sampled_from(METRICS)] * 3),
    st.builds("'{}' not in opcodes".format, st.sampled_from(["sort", "while", "x"])),
)
relational_asserts = st.builds(
    "{m}({a}) {op} {n} * {m}({b})".format_map,
    st.fixed_dictionaries(
        {
            "m": st.sampled_from(METRICS),
            "a": st.sampled_from(["naive", "take", "vmap_naive"]),
            "b": st.sampled_from(["take", "naive"]),
            "op": ops,
            "n": st.sampled_from(["1", "1.5", "2"]),
        }
    ),
)
bad_asserts = st.one_of(
    st.builds("{} {} {}".format, st.sampled_from([*METRICS, "fusoins", "opcodes", "time", "structure"]), ops,
              numbers),
    st.sampled_from([
        "kernels / 0 <= 1", "kernels <= kernels / (2 - 2)", "kernels / -0.0 <= 1", "kernels", "1 < 2 < 3",
        "kernels < = 1", "custom_call_targets != 0", "time(take) / time(take) <= 1.1", "time(take) <= 1",
        "time(take[zipff]) / time(naive) <= 1.1", "time(take[zipf]) / time(naive) <= 1.1", "__import__('os')",
        "kernels(tkae) <= kernels(take)", "kernels(take) <= kernels",
        "kernels <= " + "(" * 300 + "1" + ")" * 300,
        "kernels <= " + "1 + " * 400 + "1", "kernels <= 1\x00", "kernels <= 1" + "0" * 5000, "'x' in kernels",
        "kernels <= 1e999 / 1e-999", "kernels(take[zipf]) <= 1", "gathers == True",
    ]),
    st.text(max_size=30),
)  # fmt: skip
wrong_types = st.one_of(
    st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["a", "reason", "issue"]), st.integers(0, 3), max_size=2),
    st.just([]),
)


def listed(names: list[str]) -> st.SearchStrategy[Any]:
    """A name or a short list of names."""
    return st.one_of(st.sampled_from(names), st.lists(st.sampled_from(names), min_size=1, max_size=3))


def maybe_wrong(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(strategy, strategy, strategy, wrong_types)


@st.composite
def invariant(draw: st.DrawFn, good: bool) -> dict[str, Any]:
    table: dict[str, Any] = {
        "id": draw(st.sampled_from(["a", "b", "no_while", "x1"]) if not good else st.just(""))
    }
    if draw(st.booleans()):
        table["assert"] = draw(good_asserts if good else st.one_of(good_asserts, bad_asserts))
        table["programs"] = draw(listed(GOOD_PROGRAMS) if good else maybe_wrong(listed(PROGRAMS)))
    else:
        table["assert"] = draw(relational_asserts if good else st.one_of(relational_asserts, bad_asserts))
    if draw(st.booleans()):
        table["configs"] = draw(listed(GOOD_CONFIGS) if good else maybe_wrong(listed(CONFIGS)))
    if not good and draw(st.booleans()):
        table["targets"] = draw(maybe_wrong(listed(TARGETS)))
    if draw(st.booleans()):
        table["when"] = draw(
            st.sampled_from(WHENS) if good else maybe_wrong(st.sampled_from(WHENS + BAD_WHENS))
        )
    if draw(st.booleans()):
        table["why"] = draw(st.text(max_size=20) if good else maybe_wrong(st.text(max_size=20)))
    if draw(st.booleans()):
        ratchet = {"reason": "known bad", "issue": "https://example.org/1"}
        table["ratchet"] = ratchet if good else draw(maybe_wrong(st.just(ratchet)))
    if not good:
        mutate(draw, table, "invariant")
    return table


@st.composite
def correctness(draw: st.DrawFn, good: bool) -> dict[str, Any]:
    check = draw(st.sampled_from(["agree", "out_of_bounds", "narrow_index"]))
    table: dict[str, Any] = {"id": "c", "check": check}
    if check == "agree":
        table |= {"programs": draw(listed(["naive", "take", "kind:forward"])), "reference": "take"}
        if draw(st.booleans()):
            table["distributions"] = draw(listed(["uniform", "zipf", "equal"]))
        if draw(st.booleans()):
            table["configs"] = draw(listed(["f32", "bf16", "*"]))
    elif check == "out_of_bounds":
        table |= {
            "programs": draw(listed(["take", "take_clip"])),
            "expect": draw(st.sampled_from(["clamp", "wrap"])),
        }
    else:
        table |= {
            "programs": ["naive"],
            "expect": draw(st.sampled_from(["ok", "overflow_error", "wrong_rows"])),
        }
    if not good:
        for key, values in {
            "check": ["agre", "Agree", 3, ["agree"]],
            "reference": ["tkae", "grad_take", 3, ""],
            "distributions": ["zipff", [], 3],
            "expect": ["clampp", 3, None],
            "configs": ["f33", "bf16-llm", []],
            "programs": ["grad_take", "tkae", []],
        }.items():
            if draw(st.integers(0, 3)) == 0:
                value = draw(st.sampled_from(values))
                if value is None:
                    table.pop(key, None)
                else:
                    table[key] = value
        mutate(draw, table, "correctness")
    return table


def mutate(draw: st.DrawFn, table: dict[str, Any], array: str) -> None:
    """Drop a key, add an unknown one, or give a known one a value of the wrong type."""
    choice = draw(st.integers(0, 5))
    if choice == 0 and table:
        table.pop(draw(st.sampled_from(sorted(table))))
    elif choice == 1:
        table[draw(st.sampled_from(UNKNOWN_KEYS))] = draw(wrong_types)
    elif choice == 2:
        table[draw(st.sampled_from(KEYS[array]))] = draw(wrong_types)


@st.composite
def document(draw: st.DrawFn, good: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {"spec": {"targets": draw(listed(GOOD_TARGETS))}}
    invariants = draw(st.lists(invariant(good), min_size=1, max_size=3))
    for n, table in enumerate(invariants):
        if good or not table.get("id"):
            table["id"] = f"inv_{n}"
    doc["invariant"] = invariants
    if draw(st.booleans()):
        doc["correctness"] = [draw(correctness(good))]
    if not good:
        choice = draw(st.integers(0, 11))
        if choice == 0:
            doc["spec"]["targets"] = draw(maybe_wrong(listed(TARGETS)))
        elif choice == 1:
            doc["spec"] = draw(st.sampled_from([[{"targets": ["cpu"]}], 3, "cpu"]))
        elif choice == 2:
            doc[draw(st.sampled_from(["invariant", "correctness", "program"]))] = draw(wrong_types)
        elif choice == 3:
            doc.pop("spec")
        elif choice == 4:
            doc[draw(st.sampled_from(["specs", "invariants", "x"]))] = {"a": 1}
        elif choice == 5:
            doc["spec"]["efficiency_max_loss"] = draw(st.sampled_from([0.5, 0, 2.0, "0.5", True]))
        elif choice == 7:
            doc.pop("invariant")  # with no correctness either: a file that declares nothing
        elif choice == 6:
            doc["program"] = [{"name": draw(st.sampled_from(["my_lookup", "take", "1x", "my\u0430"])),
                               "function": draw(st.sampled_from(["mylib.emb:lookup", "nocolon", 3])),
                               "kind": draw(st.sampled_from(["forward", "forwards", 3]))}]  # fmt: skip
    return doc


def toml(doc: dict[str, Any]) -> str:
    """TOML text of ``doc``: tables as ``[name]``, arrays of tables as ``[[name]]``, values inline."""
    lines: list[str] = []
    for name, value in doc.items():
        if isinstance(value, dict):
            lines += [f"[{name}]", *(f"{_key(k)} = {_value(v)}" for k, v in value.items()), ""]
        elif isinstance(value, list) and value and all(isinstance(t, dict) for t in value):
            for table in value:
                lines += [f"[[{name}]]", *(f"{_key(k)} = {_value(v)}" for k, v in table.items()), ""]
        else:
            lines.insert(0, f"{_key(name)} = {_value(value)}")
    return "\n".join(lines)


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _string(key)


def _string(text: str) -> str:
    """A TOML basic string: JSON's escapes, and DEL, which TOML wants escaped too."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)  # TOML reads inf, -inf and nan as Python writes them
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"


@st.composite
def spec_bytes(draw: st.DrawFn) -> bytes:
    """A spec file's bytes: a generated spec, or one broken below the TOML (truncated, spliced, random,
    another encoding)."""
    text = toml(draw(document(good=draw(st.booleans()))))
    damage = draw(st.integers(0, 19))
    if damage == 0:
        return text[: draw(st.integers(1, max(1, len(text) - 1)))].encode()
    if damage == 1:
        at = draw(st.integers(0, len(text)))
        return (text[:at] + draw(st.text(min_size=1, max_size=5)) + text[at:]).encode(
            "utf-8", "surrogatepass"
        )
    if damage == 2:
        return draw(st.binary(min_size=1, max_size=200))
    if damage == 3:
        return text.encode(draw(st.sampled_from(["utf-16", "utf-16-le", "utf-32"])))
    if damage == 4:
        return (text + "\n# caf\u00e9\n").encode("latin-1", "replace")
    return text.encode()


# -- the property ----------------------------------------------------------------------------------------


def run_gate_path(folder: Path) -> str:
    """What a run does with a --spec-dir before compiling anything, and a few verdicts: 'loaded' or
    'refused' (after checking that the refusal is one line naming the file)."""
    targets = all_targets()
    cpu = targets["cpu"]
    try:
        specs = load_specs(folder)
        check_specs(specs)
        cases = expand(specs, targets.values())
        expand(specs, [cpu], kinds=("throughput",))
        expand_correctness(specs, cpu)
    except InvariantsError as err:
        message = str(err)
        path = str(folder / "spec.toml")
        assert message.splitlines() == [message], repr(message)
        assert message.startswith(path + ":"), message
        return "refused"
    for case in [c for c in cases if c.target == "cpu"][:3]:
        decision = evaluate(case, lambda key: TAKE)
        line = decision.describe(case.invariant)
        assert line.splitlines() == [line], repr(line)
    return "loaded"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@FUZZ
@given(raw=spec_bytes())
@example(
    raw=b'[spec]\ntargets = ["cpu"]\n[[invariant]]\nid = "g"\nprograms = ["take"]\nassert = "gathers == 1"\n'
)
@example(raw=b"")
@example(raw="[spec]\ntargets = ['\u0441pu']\n".encode())
def test_every_spec_file_loads_or_is_one_line(folder: Path, raw: bytes) -> None:
    (folder / "spec.toml").write_bytes(raw)
    run_gate_path(folder)


@settings(FUZZ, max_examples=max(1, settings.default.max_examples * 3 // 10))
@given(doc=document(good=True))
def test_every_valid_spec_file_loads(folder: Path, doc: dict[str, Any]) -> None:
    """The other half of the property: what is right is never refused."""
    (folder / "spec.toml").write_text(toml(doc))
    assert run_gate_path(folder) == "loaded", toml(doc)


# -- the gate itself, as a user runs it -------------------------------------------------------------------

# README.md ("Gating your own programs") and `python -m invariants gate`: bad input is one line, exit 2.
DOCUMENTED_EXIT = 2
_TAKE = '[[invariant]]\nid = "g"\nprograms = ["take"]\nassert = "gathers == 1"\n'
BAD_SPECS = {
    "load": '[spec]\ntargets = ["cpu"]\n' + _TAKE + "when = 3\n",
    "targets": '[spec]\ntargets = ["cpuu"]\n' + _TAKE,
}
_RUNS: dict[str, tuple[subprocess.CompletedProcess[str], Path]] = {}


def gate_on(
    kind: str, gate_pytester: InProcess, tmp_path_factory: pytest.TempPathFactory
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``pytest invariants/gate --spec-dir BAD --collect-only``, once per kind of mistake (in this process,
    in the folder of the first test that asks)."""
    if kind not in _RUNS:
        bad = tmp_path_factory.mktemp(f"bad_{kind}")
        (bad / "mine.toml").write_text(BAD_SPECS[kind])
        gate_pytester.project(targets=())
        proc = gate_pytester.pytest("tests/gate", "--spec-dir", str(bad), "--collect-only")
        _RUNS[kind] = (proc, bad / "mine.toml")
    return _RUNS[kind]


def _assert_one_line_last(proc: subprocess.CompletedProcess[str], path: Path, expected: str) -> None:
    out = proc.stdout + proc.stderr
    mentions = [line for line in out.splitlines() if str(path) in line]
    assert len(mentions) == 1, out[-3000:]
    assert "Traceback" not in out and "INTERNALERROR" not in out, out[-3000:]
    last = out.strip().splitlines()[-1]
    # pytest prefixes the line it stops with ("ERROR: " for a usage error, "error: " for the gate's).
    assert re.fullmatch(rf"(ERROR|error): {re.escape(str(path))}:\d+: .*", last), last
    assert expected in last, last


def test_a_bad_spec_stops_the_gate_with_one_line_the_last(gate_pytester, tmp_path_factory):
    proc, path = gate_on("load", gate_pytester, tmp_path_factory)
    assert proc.returncode != 0
    _assert_one_line_last(proc, path, ":7: 'when' must be a string of version conditions")


@pytest.mark.parametrize("kind", ["load", "targets"])
def test_a_bad_spec_exits_as_documented(gate_pytester, tmp_path_factory, kind):
    proc, path = gate_on(kind, gate_pytester, tmp_path_factory)
    expected = {"load": ":7: 'when' must be", "targets": ":2: targets: 'cpuu' matches no target"}[kind]
    _assert_one_line_last(proc, path, expected)
    assert proc.returncode == DOCUMENTED_EXIT, (proc.returncode, (proc.stdout + proc.stderr)[-2000:])
