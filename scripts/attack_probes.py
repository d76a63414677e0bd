#!/usr/bin/env python3
"""Issue 20's probe classes, re-run as an attacker runs them, against one checkout of the suite.

Each probe sets up a scratch folder (spec files, snapshot folders, a downstream project), runs one command
of the checkout in a subprocess with that checkout's virtual environment, and classifies the outcome
strictly:

- ``one-line``: the documented non-zero exit (2 for bad input unless the probe says otherwise), no
  traceback, and the last non-empty line names the problem (the probe's pattern);
- ``traceback``: a Python traceback or an INTERNALERROR anywhere in the output;
- ``silent-pass``: exit 0 where the input was wrong or nothing was checked;
- ``lost-data``: a file that existed before is gone, truncated or 0 bytes, or a foreign file was deleted;
- ``ok``: a probe of correct behaviour behaved correctly;
- ``wrong-exit``: one line, but not the documented exit code (pytest's 4 for a usage error, 1 for a
  failed item where the input was wrong);
- ``not-one-line``: a non-zero exit whose last line does not name the problem (a pytest summary, nothing);
- ``noisy`` / ``quadratic`` / ``refused``: the "others" probes' own failures (log lines before the error,
  spec loading superlinear, a correct input refused);
- ``n/a``: the option the probe needs does not exist in this checkout (its ``--help`` lacks it).

Usage (one checkout at a time; the probes are cheap: ``--targets cpu``, one program, one config)::

    python scripts/attack_probes.py --repo /tmp/probe-before --json before.json
    python scripts/attack_probes.py --repo /tmp/probe-after --json after.json
    python scripts/attack_probes.py --table before.json after.json > table.md

No probe installs a JAX release: the release commands get an empty ``--cache-dir`` and either the local
index (where they must fail before any install) or an index that does not exist.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCAL_INDEX_DIR = Path("/opt/pypi/simple")  # this host's package index, served on localhost (see local_index)
NO_INDEX = "file:///nonexistent-index"
_INDEX: list[Any] = []
CHEAP = ["--targets", "cpu", "--programs", "take", "--configs", "f32"]

BASE_SPEC = """\
[spec]
targets = ["cpu"]

[[invariant]]
id = "probe_no_while"
programs = ["take"]
assert = "while_loops == 0"
why = "probe"
"""


def spec_with(**fields: str | None) -> str:
    """BASE_SPEC with the invariant's fields replaced (values are TOML text)."""
    lines: dict[str, str | None] = {
        "id": '"probe_no_while"',
        "programs": '["take"]',
        "assert": '"while_loops == 0"',
        "why": '"probe"',
    }
    lines.update(fields)
    body = "\n".join(f"{k} = {v}" for k, v in lines.items() if v is not None)
    return f'[spec]\ntargets = ["cpu"]\n\n[[invariant]]\n{body}\n'


def correctness_spec(**fields: str | None) -> str:
    lines: dict[str, str | None] = {
        "id": '"probe_values"',
        "check": '"agree"',
        "programs": '["naive"]',
        "reference": '"take"',
        "configs": '["f32"]',
        "why": '"probe"',
    }
    lines.update(fields)
    body = "\n".join(f"{k} = {v}" for k, v in lines.items() if v is not None)
    return f'[spec]\ntargets = ["*"]\n\n[[correctness]]\n{body}\n'


# ---------------------------------------------------------------------------------------------------------
# Running and classifying.


def local_index() -> str:
    """This host's package index over HTTP on localhost: ``check_index`` reads ``URL/jax/``, which a
    ``file://`` URL of a folder cannot answer. The matrix probes use it only with releases that select none
    (``,``) or do not exist (``99.0``), so nothing is installed."""
    if not _INDEX:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "http.server",
                str(port),
                "--bind",
                "127.0.0.1",
                "-d",
                str(LOCAL_INDEX_DIR),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)
        _INDEX.extend([proc, f"http://127.0.0.1:{port}"])
    return str(_INDEX[1])


@dataclass
class Ctx:
    repo: Path
    python: str
    tmp: Path
    helps: dict[str, str]
    seconds: dict[str, float]

    def scratch(self, name: str) -> Path:
        d = self.tmp / name
        if d.exists():
            unimmutable(d)
            shutil.rmtree(d)
        d.mkdir(parents=True)
        return d

    def help(self, key: str) -> str:
        if key not in self.helps:
            if key == "pytest":
                cmd = [self.python, "-m", "pytest", "invariants/gate", "-p", "no:cacheprovider", "--help"]
            else:
                cmd = [self.python, "-m", "invariants", key, "--help"]
            self.helps[key] = run(cmd, self.repo, timeout=120)[1]
        return self.helps[key]


def env_for(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV", "JAX_", "XLA_"))
    }
    env.pop("INVARIANTS_RESULTS", None)
    env.update(extra or {})
    return env


def run(
    cmd: list[str], cwd: Path, timeout: float = 300, env: dict[str, str] | None = None
) -> tuple[int, str, float]:
    start = time.monotonic()
    try:
        p = subprocess.run(
            cmd, cwd=cwd, env=env_for(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout
        )
        out, rc = p.stdout.decode("utf-8", "replace"), p.returncode
    except subprocess.TimeoutExpired as err:
        out, rc = (err.stdout or b"").decode("utf-8", "replace") + "\n[probe: timed out]", 124
    return rc, out, time.monotonic() - start


def last_line(out: str) -> str:
    lines = [ln for ln in out.splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


# pytest's own rendering of an exception in a test (its "E   ZeroDivisionError: ..." lines) is a traceback
# too; a gate verdict is pytest.fail's "Failed:" and an invariant's AssertionError, which are not.
_PYTEST_EXC = re.compile(r"^E\s+(?:[\w.]+\.)?(?!AssertionError)\w*(?:Error|Exception)\b", re.MULTILINE)


def has_traceback(out: str) -> bool:
    return (
        "Traceback (most recent call last)" in out or "INTERNALERROR" in out or bool(_PYTEST_EXC.search(out))
    )


def classify(
    rc: int, out: str, words: str | None, wrong_input: bool = True, expect_rc: tuple[int, ...] = (2,)
) -> str:
    if has_traceback(out):
        return "traceback"
    if rc == 0:
        return "silent-pass" if wrong_input else "ok"
    if not wrong_input:
        return "refused"
    last = last_line(out)
    named = words is None or re.search(words, last, re.IGNORECASE) is not None
    if rc in expect_rc and named:
        return "one-line"
    if named and last:
        return "wrong-exit"
    return "not-one-line"


def failure_block_line(out: str, words: str) -> str | None:
    """The one line of every pytest failure block (``____ test_x[...] ____`` to the next section), when each
    block is one line naming the problem: a failing item that says in one line what is wrong."""
    blocks: list[list[str]] = []
    for line in out.splitlines():
        if re.match(r"^_{3,} .+ _{3,}$", line):
            blocks.append([])
        elif re.match(r"^(-{3,}|={3,})", line):
            if blocks and blocks[-1] is not None:
                blocks.append(None)  # type: ignore[arg-type]
        elif (
            blocks and blocks[-1] is not None and line.strip() and not line.startswith("invariants: compiled")
        ):
            blocks[-1].append(line.strip())
    real = [b for b in blocks if b is not None]
    if real and all(len(b) == 1 and re.search(words, b[0], re.IGNORECASE) for b in real):
        return real[0][0]
    return None


def pytest_gate(ctx: Ctx, tmp: Path, *args: str, tests: str = "invariants/gate") -> list[str]:
    return [
        ctx.python,
        "-m",
        "pytest",
        tests,
        "-p",
        "no:cacheprovider",
        "-q",
        "--results-json",
        str(tmp / "results.json"),
        "--hlo-dump-dir",
        str(tmp / "hlo"),
        *args,
    ]


def inv(ctx: Ctx, *args: str) -> list[str]:
    return [ctx.python, "-m", "invariants", *args]


def show(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    pre = " ".join(f"{k}={v}" for k, v in (env or {}).items())
    body = " ".join(a if re.fullmatch(r"[\w./:=,+@%-]+", a) else repr(a) for a in cmd)
    return f"(cd {cwd} && {pre + ' ' if pre else ''}{body})"


def unimmutable(path: Path) -> None:
    subprocess.run(["chattr", "-R", "-i", str(path)], capture_output=True)


def files_of(folder: Path) -> dict[str, bytes]:
    out = {}
    for p in folder.rglob("*"):
        if p.is_file():
            out[str(p.relative_to(folder))] = p.read_bytes()
    return out


# ---------------------------------------------------------------------------------------------------------
# The probes. Each returns a record: command, rc, last line, classification, note.


@dataclass
class Probe:
    cls: str
    name: str
    fn: Callable[[Ctx], dict[str, Any]]
    needs: tuple[str, str] | None = None  # (help key, flag) that must exist in this checkout


PROBES: list[Probe] = []


def probe(cls: str, name: str, needs: tuple[str, str] | None = None):
    def deco(fn: Callable[[Ctx], dict[str, Any]]) -> Callable[[Ctx], dict[str, Any]]:
        PROBES.append(Probe(cls, name, fn, needs))
        return fn

    return deco


def record(
    cmd: list[str], cwd: Path, rc: int, out: str, cls: str, note: str = "", env=None
) -> dict[str, Any]:
    return {
        "command": show(cmd, cwd, env),
        "rc": rc,
        "last_line": last_line(out)[:400],
        "tail": "\n".join(out.splitlines()[-30:])[-4000:],
        "lines": len([ln for ln in out.splitlines() if ln.strip()]),
        "classification": cls,
        "note": note,
    }


def spec_probe(
    cls: str,
    name: str,
    text: str | bytes | None,
    words: str | None,
    args: tuple[str, ...] = tuple(CHEAP),
    filename: str = "probe.toml",
    tests: str = "invariants/gate",
) -> None:
    """The package's specs replaced by one file (``--spec-dir``), the gate run from the checkout's root."""

    def fn(ctx: Ctx) -> dict[str, Any]:
        tmp = ctx.scratch(name)
        specs = tmp / "specs"
        specs.mkdir()
        if text is not None:
            data = text if isinstance(text, bytes) else text.encode()
            (specs / filename).write_bytes(data)
        cmd = pytest_gate(ctx, tmp, "--spec-dir", str(specs), *args, tests=tests)
        rc, out, _ = run(cmd, ctx.repo)
        return record(cmd, ctx.repo, rc, out, classify(rc, out, words))

    probe(cls, name)(fn)


# --- silent passes --------------------------------------------------------------------------------------

spec_probe("silent-pass", "spec targets ['cpuu']", BASE_SPEC.replace('["cpu"]', '["cpuu"]'), r"cpuu")
spec_probe(
    "silent-pass",
    "spec targets homoglyph ['срu'] (Cyrillic)",
    BASE_SPEC.replace('["cpu"]', '["\u0441\u0440u"]'),
    r"targets|look-?alike|ascii|match",
)
spec_probe("silent-pass", "spec targets []", BASE_SPEC.replace('["cpu"]', "[]"), r"targets|empty")
spec_probe("silent-pass", "invariant programs ['takee']", spec_with(programs='["takee"]'), r"takee")
spec_probe(
    "silent-pass",
    "invariant programs homoglyph ['tаke']",
    spec_with(programs='["t\u0430ke"]'),
    r"programs|look-?alike|ascii|t.ke",
)
spec_probe("silent-pass", "invariant programs []", spec_with(programs="[]"), r"programs|empty")
spec_probe(
    "silent-pass",
    "invariant programs pattern matching nothing ['zz*']",
    spec_with(programs='["zz*"]'),
    r"zz\*|programs",
)
spec_probe("silent-pass", "invariant configs ['f33']", spec_with(configs='["f33"]'), r"f33")
spec_probe("silent-pass", "invariant configs []", spec_with(configs="[]"), r"configs|empty")
spec_probe(
    "silent-pass",
    "invariant configs ['bf16'] on take_clip (f32 only)",
    spec_with(programs='["take_clip"]', configs='["bf16"]'),
    r"configs|bf16|no item|nothing",
    args=("--targets", "cpu", "--programs", "take_clip", "--configs", "f32"),
)
spec_probe(
    "silent-pass",
    "correctness configs ['f33']",
    correctness_spec(configs='["f33"]'),
    r"f33",
    args=("--targets", "cpu", "--programs", "naive,take", "--configs", "f32"),
)
spec_probe(
    "silent-pass",
    "correctness configs ['bf16'] on take_clip (f32 only)",
    correctness_spec(
        check='"out_of_bounds"',
        programs='["take_clip"]',
        reference=None,
        expect='"clamp"',
        configs='["bf16"]',
    ),
    r"configs|bf16|nothing|no ",
    args=("--targets", "cpu", "--programs", "take_clip", "--configs", "f32"),
)
spec_probe("silent-pass", "empty spec file as --spec-dir", "", r"declares nothing|empty|no \[\[|nothing")
spec_probe(
    "silent-pass",
    "comment-only spec file as --spec-dir",
    "# nothing here\n# at all\n",
    r"declares nothing|empty|no \[\[|nothing",
)
spec_probe("silent-pass", "empty folder as --spec-dir", None, r"spec|toml|nothing|no ")
spec_probe(
    "silent-pass",
    "when with an environment marker",
    spec_with(when="\"jax >= 0.4; python_version < '3'\""),
    r"marker|when",
)
spec_probe("silent-pass", "when with extras [cuda]", spec_with(when='"jax[cuda] >= 0.4"'), r"extra|when")
spec_probe(
    "silent-pass",
    "invariant on take_clip, spec targets ['tpu-v4'] (does not compile there)",
    BASE_SPEC.replace('["cpu"]', '["tpu-v4"]').replace('["take"]', '["take_clip"]'),
    r"compile|tpu-v4|no item",
    args=("--targets", "cpu", "--programs", "take,take_clip", "--configs", "f32"),
)
spec_probe(
    "silent-pass",
    "gate --programs 'zz*' (matches nothing)",
    BASE_SPEC,
    r"zz|programs|nothing",
    args=("--targets", "cpu", "--programs", "zz*"),
)
spec_probe(
    "silent-pass",
    "gate --programs take_clip --configs bf16 (compiles nothing)",
    BASE_SPEC,
    r"nothing|configs|compile",
    args=("--targets", "cpu", "--programs", "take_clip", "--configs", "bf16"),
)
spec_probe(
    "silent-pass",
    "gate -k matching nothing",
    BASE_SPEC,
    r"nothing|deselected|-k|select",
    args=(*CHEAP, "-k", "nosuchitem"),
)


def copy_downstream(ctx: Ctx, tmp: Path) -> Path:
    dst = tmp / "downstream"
    shutil.copytree(
        ctx.repo / "examples" / "downstream", dst, ignore=shutil.ignore_patterns("snapshots", "artifacts")
    )
    return dst


RELATION_SPEC = """\
[spec]
targets = ["*"]

[[program]]
name = "mylib_take"
function = "mylib.emb:take_lookup"
kind = "forward"
configs = ["f32"]

[[invariant]]
id = "mylib_take_is_the_catalogs"
assert = "structure(mylib_take) == structure(take)"
"""


@probe("silent-pass", "--no-catalog drops a relation to a catalog program")
def _no_catalog(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("no-catalog")
    d = copy_downstream(ctx, tmp)
    (d / "specs" / "mylib.toml").write_text(RELATION_SPEC)
    cmd = inv(
        ctx,
        "gate",
        "--spec-dir",
        "specs",
        "--snapshot-dir",
        "snaps",
        "--targets",
        "cpu",
        "--no-catalog",
        "--results-json",
        str(tmp / "r.json"),
        "--hlo-dump-dir",
        str(tmp / "hlo"),
        "-k",
        "test_invariant",
        "-p",
        "no:cacheprovider",
    )
    rc, out, _ = run(cmd, d)
    # Fixed when the relation is evaluated: its item is in the results, not dropped (then exit 0 is right).
    results = tmp / "r.json"
    items = json.loads(results.read_text()).get("items", []) if results.is_file() else []
    evaluated = any("mylib_take~take" in i.get("nodeid", "") and i.get("outcome") == "passed" for i in items)
    if rc == 0 and evaluated:
        return record(cmd, d, rc, out, "ok", "the relation to take is evaluated (passed)")
    return record(cmd, d, rc, out, classify(rc, out, r"catalog|take|relation"))


@probe("silent-pass", "selfcheck --targets nosuch")
def _selfcheck_nosuch(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("selfcheck")
    cmd = inv(ctx, "selfcheck", "--targets", "nosuch")
    rc, out, _ = run(cmd, tmp, timeout=300)
    return record(cmd, tmp, rc, out, classify(rc, out, r"nosuch|targets"))


@probe("silent-pass", "selfcheck --targets '' (empty)")
def _selfcheck_empty(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("selfcheck-empty")
    cmd = inv(ctx, "selfcheck", "--targets", ",")
    rc, out, _ = run(cmd, tmp, timeout=300)
    return record(cmd, tmp, rc, out, classify(rc, out, r"targets|empty|nothing"))


@probe("silent-pass", "versus --no-timing --no-structure (compares nothing)")
def _versus_nothing(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("versus-nothing")
    cmd = inv(
        ctx,
        "versus",
        "--baseline",
        "current",
        "--candidate",
        "current",
        "--no-timing",
        "--no-structure",
        "--targets",
        "cpu",
        "--programs",
        "take",
    )
    rc, out, _ = run(cmd, tmp, timeout=300)
    return record(cmd, tmp, rc, out, classify(rc, out, r"no-timing|no-structure|nothing"))


@probe("silent-pass", "versus --targets nosuch --no-timing")
def _versus_targets(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("versus-targets")
    cmd = inv(
        ctx,
        "versus",
        "--baseline",
        "current",
        "--candidate",
        "current",
        "--no-timing",
        "--targets",
        "nosuch",
        "--programs",
        "take",
    )
    rc, out, _ = run(cmd, tmp, timeout=300)
    return record(cmd, tmp, rc, out, classify(rc, out, r"nosuch|targets"))


@probe("silent-pass", "matrix --versions , (no release)")
def _matrix_comma(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("matrix-comma")
    cmd = inv(
        ctx,
        "matrix",
        "--versions",
        ",",
        "--no-tpu",
        "--index-url",
        local_index(),
        "--cache-dir",
        str(tmp / "cache"),
        "--out",
        str(tmp / "m"),
    )
    rc, out, _ = run(cmd, tmp, timeout=300)
    return record(cmd, tmp, rc, out, classify(rc, out, r"versions|release|empty|nothing"))


@probe("silent-pass", "matrix --targets nosuch (option ignored?)", needs=("matrix", "--targets"))
def _matrix_targets(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("matrix-targets")
    # 99.0 does not exist: a checkout that ignores --targets fails on the release instead, before installing.
    cmd = inv(
        ctx,
        "matrix",
        "--versions",
        "99.0",
        "--targets",
        "nosuch",
        "--no-tpu",
        "--index-url",
        local_index(),
        "--cache-dir",
        str(tmp / "cache"),
        "--out",
        str(tmp / "m"),
    )
    rc, out, _ = run(cmd, tmp, timeout=300)
    return record(cmd, tmp, rc, out, classify(rc, out, r"nosuch|targets"))


@probe("silent-pass", "bisect -k matching nothing (before any install)")
def _bisect_k(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("bisect-k")
    cmd = inv(
        ctx,
        "bisect",
        "--good",
        "0.10.1",
        "--bad",
        "0.10.2",
        "-k",
        "nosuchitem",
        "--index-url",
        NO_INDEX,
        "--cache-dir",
        str(tmp / "cache"),
    )
    rc, out, _ = run(cmd, tmp, timeout=300)
    return record(cmd, tmp, rc, out, classify(rc, out, r"nosuchitem|-k|select"))


@probe("silent-pass", "two runs writing one results.json at once")
def _results_race(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("results-race")
    shared = tmp / "results.json"
    cmds = []
    procs = []
    for i, prog in enumerate(("take", "naive")):
        cmd = [
            ctx.python,
            "-m",
            "pytest",
            "invariants/gate",
            "-p",
            "no:cacheprovider",
            "-q",
            "--results-json",
            str(shared),
            "--hlo-dump-dir",
            str(tmp / f"hlo{i}"),
            "--targets",
            "cpu",
            "--programs",
            prog,
            "--configs",
            "f32",
        ]
        cmds.append(cmd)
        procs.append(
            subprocess.Popen(
                cmd, cwd=ctx.repo, env=env_for(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        )
    outs = [p.communicate(timeout=300)[0].decode("utf-8", "replace") for p in procs]
    rcs = [p.returncode for p in procs]
    both = "\n".join(outs)
    programs: set[str] = set()
    files = sorted(tmp.glob("results*.json"))
    for f in files:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            programs |= {str(it.get("program")) for it in json.loads(f.read_text())["items"]}
    said = [ln.strip() for ln in both.splitlines() if "results" in ln and "another run" in ln]
    if has_traceback(both):
        cls = "traceback"
    elif rcs == [0, 0] and {"take", "naive"} <= programs:
        cls = "ok"
    elif rcs == [0, 0]:
        cls = "silent-pass"
    else:
        bad = outs[rcs.index(next(r for r in rcs if r != 0))]
        cls = "one-line" if re.search(r"results", last_line(bad), re.I) and 2 in rcs else "not-one-line"
    out = outs[0] if rcs[0] != 0 else outs[1]
    rec = record(
        cmds[1],
        ctx.repo,
        rcs[1] if rcs[1] else rcs[0],
        out,
        cls,
        note=f"exit codes {rcs} (run together); files {[f.name for f in files]}; "
        f"programs kept {sorted(programs)}; said: {said[:1]}",
    )
    rec["command"] = show(cmds[0], ctx.repo) + " & " + show(cmds[1], ctx.repo)
    return rec


def real_results(ctx: Ctx, tmp: Path) -> Path:
    cmd = pytest_gate(ctx, tmp, *CHEAP)
    run(cmd, ctx.repo)
    return tmp / "results.json"


def nulled(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {
            k: (
                nulled(v)
                if isinstance(v, (dict, list)) and k in ("items", "targets", "versions", "runtime")
                else None
            )
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [nulled(x) for x in obj]
    return None


@probe("silent-pass", "report of results whose item fields are null (kind, nodeid, outcome kept)")
def _report_null_kept(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("report-null-kept")
    path = real_results(ctx, tmp)
    data = json.loads(path.read_text())
    keep = ("kind", "nodeid", "outcome")
    data["items"] = [{k: (v if k in keep else None) for k, v in it.items()} for it in data.get("items", [])]
    bad = tmp / "null.json"
    bad.write_text(json.dumps(data))
    cmd = inv(ctx, "report", str(bad))
    rc, out, _ = run(cmd, tmp)
    return record(cmd, tmp, rc, out, classify(rc, out, r"null|null\.json|field|items"))


@probe("silent-pass", "report of results whose item fields are all null")
def _report_null(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("report-null")
    path = real_results(ctx, tmp)
    data = json.loads(path.read_text())
    data["items"] = [{k: None for k in it} for it in data.get("items", [])]
    bad = tmp / "null.json"
    bad.write_text(json.dumps(data))
    cmd = inv(ctx, "report", str(bad))
    rc, out, _ = run(cmd, tmp)
    return record(cmd, tmp, rc, out, classify(rc, out, r"null|null\.json|field|items"))


@probe("silent-pass", "report of an empty results object {}")
def _report_empty(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("report-empty")
    bad = tmp / "empty.json"
    bad.write_text("{}")
    cmd = inv(ctx, "report", str(bad))
    rc, out, _ = run(cmd, tmp)
    return record(cmd, tmp, rc, out, classify(rc, out, r"empty\.json|items|results"))


@probe("silent-pass", "report of results whose top-level fields are null")
def _report_top_null(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("report-top-null")
    path = real_results(ctx, tmp)
    data = {k: None for k in json.loads(path.read_text())}
    bad = tmp / "topnull.json"
    bad.write_text(json.dumps(data))
    cmd = inv(ctx, "report", str(bad))
    rc, out, _ = run(cmd, tmp)
    return record(cmd, tmp, rc, out, classify(rc, out, r"null|topnull\.json|items|field"))


# --- lost data ------------------------------------------------------------------------------------------


def downstream_update_cmd(ctx: Ctx, tmp: Path, *extra: str) -> list[str]:
    return inv(
        ctx,
        "gate",
        "--spec-dir",
        "specs",
        "--snapshot-dir",
        "snaps",
        "--targets",
        "cpu",
        "--no-catalog",
        "--snapshot-update",
        "--results-json",
        str(tmp / "r.json"),
        "--hlo-dump-dir",
        str(tmp / "hlo"),
        "-p",
        "no:cacheprovider",
        *extra,
    )


def prepared_downstream(ctx: Ctx, name: str) -> tuple[Path, Path, dict[str, bytes], dict[str, bytes]]:
    """A downstream copy with recorded snapshots ("new"), then each edited ("old") so that an update rewrites
    every one of them."""
    tmp = ctx.scratch(name)
    d = copy_downstream(ctx, tmp)
    run(downstream_update_cmd(ctx, tmp), d)
    snaps = d / "snaps"
    new = files_of(snaps)
    for rel, data in new.items():
        (snaps / rel).write_bytes(data.replace(b"summary:", b"summary: (old)", 1) + b"# old\n")
    old = files_of(snaps)
    return tmp, d, old, new


def check_old_or_new(snaps: Path, old: dict[str, bytes], new: dict[str, bytes]) -> list[str]:
    now = files_of(snaps) if snaps.exists() else {}
    bad = []
    for rel in old:
        got = now.get(rel)
        if got is None:
            bad.append(f"{rel}: gone")
        elif got not in (old[rel], new.get(rel)):
            bad.append(f"{rel}: {len(got)} bytes, neither old nor new")
    return bad


def kill_trial(ctx: Ctx, name: str, sig: int, moment: str, seed: int) -> tuple[list[str], str, list[str]]:
    tmp, d, old, new = prepared_downstream(ctx, name)
    snaps = d / "snaps"
    cmd = downstream_update_cmd(ctx, tmp)
    # How long a whole update takes, to draw the random moment in.
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=d,
        env=env_for(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    rng = random.Random(seed)
    if moment == "random":
        when = rng.uniform(0.4, 1.05) * ctx.seconds.get("update", 8.0)
        while proc.poll() is None and time.monotonic() - start < when:
            time.sleep(0.005)
    else:  # at the first change seen in the snapshot folder

        def state() -> set[tuple[str, int, int, int]]:
            out = set()
            for p in snaps.rglob("*"):
                try:
                    st = p.stat()
                    out.add((str(p), st.st_size, st.st_mtime_ns, st.st_ino))
                except OSError:
                    pass
            return out

        first = state()
        while proc.poll() is None and state() == first:
            pass
    killed_at = time.monotonic() - start
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    proc.wait()
    bad = check_old_or_new(snaps, old, new)
    return (
        bad,
        f"{'SIGKILL' if sig == signal.SIGKILL else 'SIGINT'} at {killed_at:.2f} s (exit {proc.returncode})",
        [show(cmd, d)],
    )


def kill_probe(name: str, sig: int, moment: str, trials: int) -> None:
    @probe("lost-data", name)
    def fn(ctx: Ctx) -> dict[str, Any]:
        if "update" not in ctx.seconds:
            tmp, d, _, _ = prepared_downstream(ctx, "kill-timing")
            _, _, secs = run(downstream_update_cmd(ctx, tmp), d)
            ctx.seconds["update"] = secs
        notes: list[str] = []
        lost: list[str] = []
        cmd: list[str] = []
        for i in range(trials):
            bad, note, cmd = kill_trial(ctx, f"kill-{moment}-{sig}-{i}", sig, moment, seed=i)
            notes.append(note + (f": {'; '.join(bad)}" if bad else ": all old or new"))
            lost += bad
        rec = {
            "command": cmd[0] + f"  # {trials} trial(s), killed {moment}",
            "rc": None,
            "last_line": "; ".join(notes)[:400],
            "tail": "\n".join(notes),
            "lines": 0,
            "classification": "lost-data" if lost else "ok",
            "note": "; ".join(notes),
        }
        return rec


kill_probe("SIGKILL during --snapshot-update, random moment, 3 trials", signal.SIGKILL, "random", 3)
kill_probe("SIGKILL during --snapshot-update at its first write, 5 trials", signal.SIGKILL, "first-write", 5)
kill_probe(
    "Ctrl-C (SIGINT) during --snapshot-update at its first write, 3 trials", signal.SIGINT, "first-write", 3
)


def lost_record(cmd, cwd, rc, out, lost: list[str], words=None) -> dict[str, Any]:
    if lost:
        cls = "lost-data"
    elif has_traceback(out):
        cls = "traceback"
    else:
        cls = "ok"
    return record(cmd, cwd, rc, out, cls, note="; ".join(lost) or "every file kept")


@probe("lost-data", "catalog update (--programs take) with snapshots/cpu/README.txt")
def _catalog_readme(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("catalog-readme")
    snaps = tmp / "snaps"
    shutil.copytree(ctx.repo / "snapshots", snaps)
    (snaps / "cpu" / "README.txt").write_text("what these files are\n")
    (snaps / "cpu" / "notes.f32.txt").write_text("my notes, not a snapshot\n")
    cmd = pytest_gate(
        ctx,
        tmp,
        "--snapshot-dir",
        str(snaps),
        *CHEAP,
        "--snapshot-update",
        tests="invariants/gate/test_structure.py",
    )
    rc, out, _ = run(cmd, ctx.repo)
    lost = [f"{n} deleted" for n in ("README.txt", "notes.f32.txt") if not (snaps / "cpu" / n).exists()]
    return lost_record(cmd, ctx.repo, rc, out, lost)


@probe("lost-data", "catalog update of all cpu programs with snapshots/cpu/README.txt")
def _catalog_readme_all(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("catalog-readme-all")
    snaps = tmp / "snaps"
    shutil.copytree(ctx.repo / "snapshots", snaps)
    (snaps / "cpu" / "README.txt").write_text("what these files are\n")
    cmd = pytest_gate(
        ctx,
        tmp,
        "--snapshot-dir",
        str(snaps),
        "--targets",
        "cpu",
        "--snapshot-update",
        "-k",
        "not llm",
        tests="invariants/gate/test_structure.py",
    )
    rc, out, _ = run(cmd, ctx.repo, timeout=600)
    lost = [f"{n} deleted" for n in ("README.txt",) if not (snaps / "cpu" / n).exists()]
    return lost_record(cmd, ctx.repo, rc, out, lost)


@probe("lost-data", "downstream update (a failing run) with snaps/cpu/README.txt and a foreign .txt")
def _downstream_readme(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("downstream-readme")
    d = copy_downstream(ctx, tmp)
    (d / "snaps" / "cpu").mkdir(parents=True)
    (d / "snaps" / "cpu" / "README.txt").write_text("what these files are\n")
    (d / "snaps" / "cpu" / "mylib_old.f32.txt").write_text("hand-written notes\n")
    cmd = downstream_update_cmd(ctx, tmp)
    rc, out, _ = run(cmd, d)
    lost = [
        f"{n} deleted" for n in ("README.txt", "mylib_old.f32.txt") if not (d / "snaps" / "cpu" / n).exists()
    ]
    return lost_record(cmd, d, rc, out, lost)


@probe("lost-data", "downstream plain run names an obsolete snapshot of ours before an update deletes it")
def _downstream_warning(ctx: Ctx) -> dict[str, Any]:
    tmp, d, _, _ = prepared_downstream(ctx, "downstream-obsolete")
    snaps = d / "snaps" / "cpu"
    src = (snaps / "mylib_take.f32.txt").read_text()
    src = src.replace("mylib_take", "mylib_gone")
    (snaps / "mylib_gone.f32.txt").write_text(src)
    cmd = inv(
        ctx,
        "gate",
        "--spec-dir",
        "specs",
        "--snapshot-dir",
        "snaps",
        "--targets",
        "cpu",
        "--no-catalog",
        "--results-json",
        str(tmp / "r.json"),
        "--hlo-dump-dir",
        str(tmp / "hlo"),
        "-p",
        "no:cacheprovider",
    )
    _, out, _ = run(cmd, d)
    warned = "mylib_gone" in out
    cmd2 = downstream_update_cmd(ctx, tmp)
    rc2, out2, _ = run(cmd2, d)
    gone = not (snaps / "mylib_gone.f32.txt").exists()
    listed = "mylib_gone" in out2
    if has_traceback(out + out2):
        cls = "traceback"
    elif gone and not warned:
        cls = "lost-data"
    else:
        cls = "ok"
    note = f"plain run names it: {warned}; update deleted it: {gone}; update names it: {listed}"
    return record(cmd2, d, rc2, out2, cls, note=note)


def program_spec(name: str, kind: str, inv_id: str) -> str:
    """One downstream spec folder's file: one [[program]] of mylib and its no-while invariant."""
    return (
        f'[spec]\ntargets = ["*"]\n\n[[program]]\nname = "{name}"\nfunction = "mylib.emb:take_lookup"\n'
        f'kind = "{kind}"\nconfigs = ["f32"]\n\n[[invariant]]\nid = "{inv_id}"\nprograms = ["{name}"]\n'
        'assert = "while_loops == 0"\n'
    )


@probe("lost-data", "downstream update given one of two spec folders keeps the other's snapshots")
def _downstream_subset(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("downstream-subset")
    d = copy_downstream(ctx, tmp)
    shutil.rmtree(d / "specs")
    (d / "a").mkdir()
    (d / "b").mkdir()
    (d / "a" / "a.toml").write_text(program_spec("mylib_take", "forward", "a_no_while"))
    (d / "b" / "b.toml").write_text(program_spec("mylib_take_grad", "backward", "b_no_while"))
    base = [
        "--snapshot-dir",
        "snaps",
        "--targets",
        "cpu",
        "--no-catalog",
        "--snapshot-update",
        "--results-json",
        str(tmp / "r.json"),
        "--hlo-dump-dir",
        str(tmp / "hlo"),
        "-p",
        "no:cacheprovider",
    ]
    run(inv(ctx, "gate", "--spec-dir", "a", "--spec-dir", "b", *base), d)
    before = files_of(d / "snaps")
    cmd = inv(ctx, "gate", "--spec-dir", "a", *base)
    rc, out, _ = run(cmd, d)
    after = files_of(d / "snaps")
    lost = [f"{k} deleted" for k in before if k not in after]
    if not before:
        lost_note = "setup recorded nothing"
        return record(cmd, d, rc, out, "traceback" if has_traceback(out) else "not-one-line", note=lost_note)
    return lost_record(cmd, d, rc, out, lost)


# --- tracebacks ------------------------------------------------------------------------------------------

spec_probe(
    "traceback",
    "spec file in Latin-1 (non-UTF-8)",
    b"# caf\xe9\n" + BASE_SPEC.encode(),
    r"utf-?8|decode|encoding|probe\.toml",
)
spec_probe(
    "traceback", "spec file in UTF-16", BASE_SPEC.encode("utf-16"), r"utf-?(8|16)|decode|encoding|probe\.toml"
)
spec_probe("traceback", "when = 5 (int)", spec_with(when="5"), r"when")
spec_probe("traceback", "when = ['jax >= 0.4'] (list)", spec_with(when='["jax >= 0.4"]'), r"when")
spec_probe(
    "traceback",
    "correctness check = 3 (int)",
    correctness_spec(check="3"),
    r"check",
    args=("--targets", "cpu", "--programs", "naive,take", "--configs", "f32"),
)
spec_probe(
    "traceback",
    "invariant = 'x' (string, not [[invariant]])",
    '[spec]\ntargets = ["cpu"]\ninvariant = "x"\n',
    r"invariant",
)
spec_probe(
    "traceback",
    "[invariant] (one table, not an array)",
    BASE_SPEC.replace("[[invariant]]", "[invariant]"),
    r"invariant",
)
spec_probe("traceback", "[[spec]] (array, not a table)", BASE_SPEC.replace("[spec]", "[[spec]]"), r"spec")
spec_probe("traceback", "spec = 'cpu' (string)", 'spec = "cpu"\n' + BASE_SPEC.split("\n", 2)[2], r"spec")


def applied_probe(name: str, text: str) -> None:
    """A spelling the spec format accepts (``spec.file``: "a string or a list of strings"): ``ok`` when the
    invariant then made its item, ``silent-pass`` when the run passed without it."""

    @probe("traceback", name)
    def fn(ctx: Ctx) -> dict[str, Any]:
        tmp = ctx.scratch(name.replace(" ", "-")[:40])
        (tmp / "specs").mkdir()
        (tmp / "specs" / "probe.toml").write_text(text)
        cmd = pytest_gate(ctx, tmp, "--spec-dir", str(tmp / "specs"), *CHEAP)
        rc, out, _ = run(cmd, ctx.repo)
        try:
            items = json.loads((tmp / "results.json").read_text())["items"]
        except (OSError, ValueError, KeyError):
            items = []
        ran = [it for it in items if it.get("id") == "probe_no_while" and it.get("outcome") == "passed"]
        cls = classify(rc, out, r"programs|targets")
        if cls == "silent-pass" and ran:
            cls = "ok"
        return record(cmd, ctx.repo, rc, out, cls, note=f"probe_no_while items that ran: {len(ran)}")


applied_probe("programs = 'take' (string, not list)", spec_with(programs='"take"'))
spec_probe("traceback", "programs = [1] (int element)", spec_with(programs="[1]"), r"programs")
spec_probe("traceback", "assert = 5 (int)", spec_with(**{"assert": "5"}), r"assert")
spec_probe("traceback", "id = 1 (int)", spec_with(id="1"), r"\bid\b")
spec_probe("traceback", "ratchet = 'x' (string)", spec_with(ratchet='"x"'), r"ratchet")
applied_probe("targets = 'cpu' (string)", BASE_SPEC.replace('["cpu"]', '"cpu"'))
spec_probe(
    "traceback",
    "correctness reference = 'nosuch'",
    correctness_spec(reference='"nosuch"'),
    r"nosuch|reference",
    args=("--targets", "cpu", "--programs", "naive,take", "--configs", "f32"),
)
spec_probe(
    "traceback",
    "correctness distributions = ['nosuch']",
    correctness_spec(distributions='["nosuch"]'),
    r"nosuch|distribution",
    args=("--targets", "cpu", "--programs", "naive,take", "--configs", "f32"),
)
spec_probe(
    "traceback",
    "correctness expect = 'nosuch'",
    correctness_spec(check='"out_of_bounds"', programs='["take_clip"]', reference=None, expect='"nosuch"'),
    r"nosuch|expect",
    args=("--targets", "cpu", "--programs", "take_clip", "--configs", "f32"),
)
spec_probe(
    "traceback",
    "correctness agree without reference",
    correctness_spec(reference=None),
    r"reference",
    args=("--targets", "cpu", "--programs", "naive,take", "--configs", "f32"),
)
spec_probe(
    "traceback", "assert 'kernels / 0 <= 1'", spec_with(**{"assert": '"kernels / 0 <= 1"'}), r"zero|/ 0|divid"
)
spec_probe("traceback", "control: TOML syntax error", BASE_SPEC + "oops = \n", r"probe\.toml")
spec_probe(
    "traceback", "control: unknown metric 'fusoins'", spec_with(**{"assert": '"fusoins == 1"'}), r"fusoins"
)


def snapshot_probe(name: str, breaker: Callable[[Path], None], update: bool) -> None:
    @probe("traceback", name)
    def fn(ctx: Ctx) -> dict[str, Any]:
        tmp = ctx.scratch(name.replace(" ", "-")[:40])
        snaps = tmp / "snaps"
        (snaps / "cpu").mkdir(parents=True)
        target = snaps / "cpu" / "take.f32.txt"
        shutil.copy(ctx.repo / "snapshots" / "cpu" / "take.f32.txt", target)
        good = target.read_bytes()
        breaker(target)
        args = ["--snapshot-dir", str(snaps), *CHEAP] + (["--snapshot-update"] if update else [])
        cmd = pytest_gate(ctx, tmp, *args, tests="invariants/gate/test_structure.py")
        rc, out, _ = run(cmd, ctx.repo)
        unimmutable(snaps)
        if update:
            repaired = target.is_file() and target.read_bytes() == good
            if has_traceback(out):
                cls = "traceback"
            elif rc == 0 and repaired:
                cls = "ok"
            elif rc == 0:
                cls = "silent-pass"
            else:
                cls = classify(rc, out, r"take\.f32\.txt|snapshot")
            if cls == "not-one-line" and rc == 1 and failure_block_line(out, r"take\.f32\.txt"):
                cls = "one-line"
            note = f"repaired: {repaired}; failing item says: {failure_block_line(out, r'take.f32.txt')}"
            return record(cmd, ctx.repo, rc, out, cls, note=note)
        cls = classify(rc, out, r"take\.f32\.txt|snapshot", expect_rc=(1, 2))
        if cls == "not-one-line" and rc == 1 and failure_block_line(out, r"take\.f32\.txt"):
            cls = "one-line"
        return record(
            cmd, ctx.repo, rc, out, cls, note=f"failing item says: {failure_block_line(out, r'take.f32.txt')}"
        )


def _non_utf8(p: Path) -> None:
    p.write_bytes(b"# take [f32] on cpu\n\xff\xfe broken\n")


def _dir_in_place(p: Path) -> None:
    p.unlink()
    p.mkdir()
    (p / "x").write_text("x")


def _read_only(p: Path) -> None:
    p.write_bytes(p.read_bytes().replace(b"summary:", b"summary: (old)", 1))
    subprocess.run(["chattr", "+i", str(p), str(p.parent)], check=True)


snapshot_probe("non-UTF-8 snapshot, plain run", _non_utf8, update=False)
snapshot_probe("non-UTF-8 snapshot, --snapshot-update (repairs?)", _non_utf8, update=True)
snapshot_probe("directory in place of a snapshot, plain run", _dir_in_place, update=False)
snapshot_probe("directory in place of a snapshot, --snapshot-update", _dir_in_place, update=True)
snapshot_probe("read-only (immutable) stale snapshot and folder, --snapshot-update", _read_only, update=True)


@probe("traceback", "--results-json is a directory")
def _results_dir(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("results-dir")
    (tmp / "out").mkdir()
    cmd = [
        ctx.python,
        "-m",
        "pytest",
        "invariants/gate",
        "-p",
        "no:cacheprovider",
        "-q",
        "--results-json",
        str(tmp / "out"),
        "--hlo-dump-dir",
        str(tmp / "hlo"),
        *CHEAP,
    ]
    rc, out, _ = run(cmd, ctx.repo)
    return record(cmd, ctx.repo, rc, out, classify(rc, out, r"results-json|directory"))


@probe("traceback", "gate (downstream) --results-json is a directory")
def _gate_results_dir(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("gate-results-dir")
    d = copy_downstream(ctx, tmp)
    (tmp / "out").mkdir()
    cmd = inv(
        ctx,
        "gate",
        "--spec-dir",
        "specs",
        "--snapshot-dir",
        "snaps",
        "--targets",
        "cpu",
        "--no-catalog",
        "--results-json",
        str(tmp / "out"),
        "-p",
        "no:cacheprovider",
    )
    rc, out, _ = run(cmd, d)
    return record(cmd, d, rc, out, classify(rc, out, r"results-json|directory"))


@probe("traceback", "report --out is a directory")
def _report_out_dir(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("report-out-dir")
    path = real_results(ctx, tmp)
    (tmp / "md").mkdir()
    cmd = inv(ctx, "report", str(path), "--out", str(tmp / "md"))
    rc, out, _ = run(cmd, tmp)
    return record(cmd, tmp, rc, out, classify(rc, out, r"--out|directory"))


@probe("traceback", "report --plot is a directory")
def _report_plot_dir(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("report-plot-dir")
    path = real_results(ctx, tmp)
    (tmp / "png").mkdir()
    cmd = inv(ctx, "report", str(path), "--plot", str(tmp / "png"))
    rc, out, _ = run(cmd, tmp)
    return record(cmd, tmp, rc, out, classify(rc, out, r"--plot|directory"))


@probe("traceback", "versus --json is a directory (--no-timing)")
def _versus_json_dir(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("versus-json-dir")
    (tmp / "j").mkdir()
    cmd = inv(
        ctx,
        "versus",
        "--baseline",
        "current",
        "--candidate",
        "current",
        "--no-timing",
        "--targets",
        "cpu",
        "--programs",
        "take",
        "--json",
        str(tmp / "j"),
    )
    rc, out, _ = run(cmd, tmp, timeout=400)
    return record(cmd, tmp, rc, out, classify(rc, out, r"--json|directory"))


@probe("traceback", "bisect --keep is a regular file (before any install)")
def _bisect_keep(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("bisect-keep")
    (tmp / "keep").write_text("a file\n")
    cmd = inv(
        ctx,
        "bisect",
        "--good",
        "0.10.1",
        "--bad",
        "0.10.2",
        "--keep",
        str(tmp / "keep"),
        "--index-url",
        NO_INDEX,
        "--cache-dir",
        str(tmp / "cache"),
    )
    rc, out, _ = run(cmd, tmp)
    return record(cmd, tmp, rc, out, classify(rc, out, r"--keep"))


FAILING_SPEC = spec_with(**{"assert": '"while_loops == 1"'})


def dump_probe(name: str, make: Callable[[Path], Path]) -> None:
    @probe("traceback", name)
    def fn(ctx: Ctx) -> dict[str, Any]:
        tmp = ctx.scratch(name.replace(" ", "-")[:40])
        (tmp / "specs").mkdir()
        (tmp / "specs" / "f.toml").write_text(FAILING_SPEC)
        dump = make(tmp)
        cmd = [
            ctx.python,
            "-m",
            "pytest",
            "invariants/gate",
            "-p",
            "no:cacheprovider",
            "-q",
            "--results-json",
            str(tmp / "r.json"),
            "--hlo-dump-dir",
            str(dump),
            "--spec-dir",
            str(tmp / "specs"),
            *CHEAP,
        ]
        rc, out, _ = run(cmd, ctx.repo)
        unimmutable(tmp)
        cls = classify(rc, out, r"hlo-dump-dir|directory|writ")
        note = (
            "the real failure (while_loops) is shown"
            if "while_loops" in out
            else "the real failure is not shown"
        )
        return record(cmd, ctx.repo, rc, out, cls, note=note)


def _dump_file(tmp: Path) -> Path:
    (tmp / "dumpfile").write_text("x")
    return tmp / "dumpfile"


def _dump_immutable(tmp: Path) -> Path:
    (tmp / "dumpdir").mkdir()
    subprocess.run(["chattr", "+i", str(tmp / "dumpdir")], check=True)
    return tmp / "dumpdir" / "hlo"


dump_probe("--hlo-dump-dir is a regular file, with a failing item", _dump_file)
dump_probe("--hlo-dump-dir under an unwritable folder, with a failing item", _dump_immutable)


def env_probe(name: str, env: dict[str, str], words: str, downstream: bool = False) -> None:
    @probe("traceback", name)
    def fn(ctx: Ctx) -> dict[str, Any]:
        tmp = ctx.scratch(name.replace(" ", "-")[:40])
        if downstream:
            d = copy_downstream(ctx, tmp)
            cmd = inv(
                ctx,
                "gate",
                "--spec-dir",
                "specs",
                "--snapshot-dir",
                "snaps",
                "--targets",
                "cpu",
                "--no-catalog",
                "--results-json",
                str(tmp / "r.json"),
                "--hlo-dump-dir",
                str(tmp / "hlo"),
                "-p",
                "no:cacheprovider",
            )
            cwd = d
        else:
            cmd, cwd = pytest_gate(ctx, tmp, *CHEAP), ctx.repo
        rc, out, _ = run(cmd, cwd, env=env)
        return record(cmd, cwd, rc, out, classify(rc, out, words), env=env)


env_probe("JAX_PLATFORMS=cuda on a CPU host", {"JAX_PLATFORMS": "cuda"}, r"JAX_PLATFORMS|cuda")
env_probe("JAX_PLATFORMS=tpu on a CPU host", {"JAX_PLATFORMS": "tpu"}, r"JAX_PLATFORMS|tpu")
env_probe("JAX_PLATFORMS=cpuu (typo)", {"JAX_PLATFORMS": "cpuu"}, r"JAX_PLATFORMS|cpuu")
env_probe(
    "XLA_FLAGS with an unknown flag", {"XLA_FLAGS": "--xla_no_such_flag=1"}, r"XLA_FLAGS|xla_no_such_flag"
)
env_probe(
    "XLA_FLAGS with a bad value",
    {"XLA_FLAGS": "--xla_cpu_enable_fast_math=maybe"},
    r"XLA_FLAGS|fast_math|maybe",
)
env_probe(
    "gate (downstream): XLA_FLAGS with an unknown flag",
    {"XLA_FLAGS": "--xla_no_such_flag=1"},
    r"XLA_FLAGS|xla_no_such_flag",
    downstream=True,
)
env_probe(
    "gate (downstream): JAX_PLATFORMS=cuda", {"JAX_PLATFORMS": "cuda"}, r"JAX_PLATFORMS|cuda", downstream=True
)


# --- further attacks on the same classes (not in the list) ------------------------------------

spec_probe(
    "silent-pass",
    "extra: duplicate invariant id in one file",
    BASE_SPEC + BASE_SPEC.split("\n", 3)[3],
    r"probe_no_while|duplicate|twice",
)
spec_probe(
    "silent-pass",
    "extra: gate --programs ',' (empty list)",
    BASE_SPEC,
    r"programs|empty|nothing",
    args=("--targets", "cpu", "--programs", ","),
)
spec_probe(
    "silent-pass",
    "extra: gate --configs '' (empty)",
    BASE_SPEC,
    r"configs|empty|nothing",
    args=("--targets", "cpu", "--programs", "take", "--configs", ""),
)


@probe("traceback", "extra: --spec-dir is a regular file")
def _spec_dir_file(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("spec-dir-file")
    (tmp / "spec.toml").write_text(BASE_SPEC)
    cmd = pytest_gate(ctx, tmp, "--spec-dir", str(tmp / "spec.toml"), *CHEAP)
    rc, out, _ = run(cmd, ctx.repo)
    return record(cmd, ctx.repo, rc, out, classify(rc, out, r"spec-dir|spec\.toml|director|folder"))


@probe("traceback", "extra: --snapshot-dir is a regular file")
def _snap_dir_file(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("snap-dir-file")
    (tmp / "snaps").write_text("x")
    cmd = pytest_gate(
        ctx, tmp, "--snapshot-dir", str(tmp / "snaps"), *CHEAP, tests="invariants/gate/test_structure.py"
    )
    rc, out, _ = run(cmd, ctx.repo)
    cls = classify(rc, out, r"snapshot-dir|snaps|director|folder")
    said = failure_block_line(out, r"not a directory|snapshot-dir")
    if cls == "not-one-line" and rc == 1 and said:
        cls = "wrong-exit"  # one line in a failing item, exit 1: not bad input's 2 at start
    return record(cmd, ctx.repo, rc, out, cls, note=f"failing item says: {failure_block_line(out, '.')}")


@probe("traceback", "extra: --snapshot-dir is a regular file, --snapshot-update")
def _snap_dir_file_update(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("snap-dir-file-update")
    (tmp / "snaps").write_text("x")
    cmd = pytest_gate(
        ctx,
        tmp,
        "--snapshot-dir",
        str(tmp / "snaps"),
        *CHEAP,
        "--snapshot-update",
        tests="invariants/gate/test_structure.py",
    )
    rc, out, _ = run(cmd, ctx.repo)
    kept = (tmp / "snaps").is_file() and (tmp / "snaps").read_text() == "x"
    cls = classify(rc, out, r"snapshot-dir|snaps|director|folder")
    if cls == "not-one-line" and rc == 1 and failure_block_line(out, r"not a directory|snapshot-dir"):
        cls = "wrong-exit"  # one line in a failing item, exit 1: not bad input's 2 at start
    note = f"the file kept: {kept}; failing item says: {failure_block_line(out, '.')}"
    return record(cmd, ctx.repo, rc, out, cls if kept else "lost-data", note=note)


@probe("others", "extra: the hint after a missing snapshot (pytest --snapshot-dir D) writes to D")
def _snapshot_hint(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("snapshot-hint")
    (tmp / "snaps").mkdir()
    cmd = pytest_gate(
        ctx, tmp, "--snapshot-dir", str(tmp / "snaps"), *CHEAP, tests="invariants/gate/test_structure.py"
    )
    rc, out, _ = run(cmd, ctx.repo)
    hints = re.findall(r"record it with: (.*--snapshot-update.*)$", out, re.MULTILINE)
    if has_traceback(out):
        cls = "traceback"
    elif not hints:
        cls = "not-one-line"
    else:
        cls = "ok" if str(tmp / "snaps") in hints[0] else "misdirected"
    return record(cmd, ctx.repo, rc, out, cls, note=f"hint: {hints[0] if hints else None!r}")


@probe("traceback", "extra: hlo-stats on a text file that is not HLO")
def _hlo_not_hlo(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("hlo-not-hlo")
    (tmp / "x.txt").write_text("hello world\n")
    cmd = inv(ctx, "hlo-stats", str(tmp / "x.txt"))
    rc, out, _ = run(cmd, tmp, timeout=60)
    return record(cmd, tmp, rc, out, classify(rc, out, r"x\.txt"))


@probe("traceback", "extra: hlo-stats on a non-UTF-8 file")
def _hlo_binary(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("hlo-binary")
    (tmp / "x.txt").write_bytes(b"HloModule m\n\xff\xfe\n")
    cmd = inv(ctx, "hlo-stats", str(tmp / "x.txt"))
    rc, out, _ = run(cmd, tmp, timeout=60)
    return record(cmd, tmp, rc, out, classify(rc, out, r"x\.txt"))


@probe("traceback", "extra: report --compare with a missing file")
def _report_compare_missing(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("report-compare")
    path = real_results(ctx, tmp)
    cmd = inv(ctx, "report", "--compare", str(path), str(tmp / "missing.json"))
    rc, out, _ = run(cmd, tmp)
    return record(cmd, tmp, rc, out, classify(rc, out, r"missing\.json"))


@probe("traceback", "extra: report of a results file that is not JSON")
def _report_not_json(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("report-not-json")
    (tmp / "r.json").write_text("{not json")
    cmd = inv(ctx, "report", str(tmp / "r.json"))
    rc, out, _ = run(cmd, tmp)
    return record(cmd, tmp, rc, out, classify(rc, out, r"r\.json"))


@probe("traceback", "extra: versus --baseline a path that is no interpreter")
def _versus_bad_path(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("versus-bad-path")
    (tmp / "notpython").write_text("x")
    cmd = inv(
        ctx,
        "versus",
        "--baseline",
        str(tmp / "notpython"),
        "--candidate",
        "current",
        "--no-timing",
        "--targets",
        "cpu",
        "--programs",
        "take",
    )
    rc, out, _ = run(cmd, tmp, timeout=300)
    return record(cmd, tmp, rc, out, classify(rc, out, r"notpython|baseline"))


@probe("traceback", "extra: versus --candidate-env XLA_FLAGS that XLA rejects (--no-timing)")
def _versus_bad_env(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("versus-bad-env")
    cmd = inv(
        ctx,
        "versus",
        "--baseline",
        "current",
        "--candidate",
        "current",
        "--candidate-env",
        "XLA_FLAGS=--xla_no_such_flag=1",
        "--no-timing",
        "--targets",
        "cpu",
        "--programs",
        "take",
    )
    rc, out, _ = run(cmd, tmp, timeout=300)
    return record(cmd, tmp, rc, out, classify(rc, out, r"XLA_FLAGS|xla_no_such_flag|candidate"))


# --- others ---------------------------------------------------------------------------------------------


@probe("others", "spec loading is linear (1000 vs 4000 invariants)")
def _linear(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("linear")
    for n in (1, 1000, 4000):
        d = tmp / str(n)
        d.mkdir()
        body = "".join(
            f'\n[[invariant]]\nid = "p{i}"\nprograms = ["take"]\nassert = "while_loops == 0"\n'
            for i in range(n)
        )
        (d / "big.toml").write_text('[spec]\ntargets = ["cpu"]\n' + body)
    # One process: a warm-up load first, so that the imports are not timed.
    code = (
        "import time; from pathlib import Path; from invariants.spec.file import load_specs\n"
        f"load_specs(Path({str(tmp / '1')!r}))\n"
        "for n in (1000, 4000):\n"
        f"    t = time.perf_counter(); load_specs(Path({str(tmp)!r}) / str(n))\n"
        "    print(n, time.perf_counter() - t)\n"
    )
    rc, out, _ = run([ctx.python, "-c", code], tmp, timeout=900)
    times = dict(line.split() for line in out.splitlines() if re.fullmatch(r"\d+ [\d.e-]+", line.strip()))
    if len(times) != 2:
        return record(
            [ctx.python, "-c", "load_specs(...)"],
            tmp,
            rc,
            out,
            "traceback" if has_traceback(out) else "not-one-line",
        )
    t1, t4 = float(times["1000"]), float(times["4000"])
    ratio = t4 / max(t1, 1e-6)
    cls = "ok" if ratio < 8 else "quadratic"
    cmd = [ctx.python, "-c", "load_specs(<4000 invariants>) vs load_specs(<1000 invariants>)"]
    return record(
        cmd, tmp, 0, f"1000: {t1:.2f} s, 4000: {t4:.2f} s, ratio {ratio:.1f} (linear 4, quadratic 16)", cls
    )


def noise_probe(name: str, cmd_of: Callable[[Ctx, Path], tuple[list[str], Path]], words: str) -> None:
    @probe("others", name)
    def fn(ctx: Ctx) -> dict[str, Any]:
        tmp = ctx.scratch(name.replace(" ", "-")[:40])
        cmd, cwd = cmd_of(ctx, tmp)
        rc, out, _ = run(cmd, cwd)
        lines = [ln for ln in out.splitlines() if ln.strip()]
        cls = classify(rc, out, words)
        if cls == "one-line" and len(lines) > 1:
            cls = "noisy"
        return record(cmd, cwd, rc, out, cls, note=f"{len(lines)} non-empty lines of output")


noise_probe(
    "pytest invariants/gate --targets nosuch: one line, exit 2",
    lambda ctx, tmp: (pytest_gate(ctx, tmp, "--targets", "nosuch"), ctx.repo),
    r"nosuch",
)
noise_probe(
    "pytest invariants/gate --programs nosuch: one line, exit 2",
    lambda ctx, tmp: (pytest_gate(ctx, tmp, "--targets", "cpu", "--programs", "nosuch"), ctx.repo),
    r"nosuch",
)
noise_probe(
    "pytest invariants/gate --configs f33: one line, exit 2",
    lambda ctx, tmp: (
        pytest_gate(ctx, tmp, "--targets", "cpu", "--programs", "take", "--configs", "f33"),
        ctx.repo,
    ),
    r"f33",
)
noise_probe(
    "python -m invariants gate --spec-dir missing: one line, exit 2",
    lambda ctx, tmp: (inv(ctx, "gate", "--spec-dir", str(tmp / "missing"), "--targets", "cpu"), tmp),
    r"missing|spec",
)
noise_probe(
    "python -m invariants gate --targets nosuch: one line, exit 2",
    lambda ctx, tmp: (inv(ctx, "gate", "--targets", "nosuch"), tmp),
    r"nosuch",
)


def _unknown_metric_run(ctx: Ctx, tmp: Path) -> tuple[list[str], Path]:
    (tmp / "s").mkdir()
    (tmp / "s" / "x.toml").write_text(spec_with(**{"assert": '"fusoins == 1"'}))
    return pytest_gate(ctx, tmp, "--spec-dir", str(tmp / "s"), *CHEAP), ctx.repo


noise_probe("pytest gate, spec with unknown metric: one line, exit 2", _unknown_metric_run, r"fusoins")


def xla_dump(ctx: Ctx, tmp: Path) -> Path:
    dump = tmp / "dump"
    code = (
        "import jax, jax.numpy as jnp; f = jax.jit(lambda w, x: jnp.take(w, x, axis=0)); "
        "f(jnp.ones((64, 8)), jnp.arange(16)).block_until_ready()"
    )
    run([ctx.python, "-c", code], tmp, env={"JAX_PLATFORMS": "cpu", "XLA_FLAGS": f"--xla_dump_to={dump}"})
    return dump


@probe("others", "hlo-stats --json DIR/* on an XLA dump (the --help form)")
def _hlo_glob(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("hlo-glob")
    dump = xla_dump(ctx, tmp)
    entries = sorted(glob.glob(str(dump / "*")))
    cmd = inv(ctx, "hlo-stats", "--json", *entries)
    rc, out, _ = run(cmd, tmp)
    kinds = sorted({("dir" if Path(e).is_dir() else Path(e).suffix) for e in entries})
    rec = record(
        inv(ctx, "hlo-stats", "--json", f"{dump}/*"),
        tmp,
        rc,
        out,
        classify(rc, out, None, wrong_input=False),
        note=f"{len(entries)} entries ({', '.join(kinds)})",
    )
    return rec


@probe("others", "hlo-stats --json DIR on an XLA dump")
def _hlo_dir(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("hlo-dir")
    dump = xla_dump(ctx, tmp)
    cmd = inv(ctx, "hlo-stats", "--json", str(dump))
    rc, out, _ = run(cmd, tmp)
    return record(cmd, tmp, rc, out, classify(rc, out, None, wrong_input=False))


@probe("others", "hlo-stats on the gate's own dump folder artifacts/hlo/cpu/")
def _hlo_gate_dump(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("hlo-gate-dump")
    (tmp / "specs").mkdir()
    (tmp / "specs" / "f.toml").write_text(FAILING_SPEC)
    run(pytest_gate(ctx, tmp, "--spec-dir", str(tmp / "specs"), *CHEAP), ctx.repo)
    cmd = inv(ctx, "hlo-stats", str(tmp / "hlo" / "cpu") + "/")
    rc, out, _ = run(cmd, tmp)
    note = (
        "dump folder: " + ", ".join(sorted(p.name for p in (tmp / "hlo" / "cpu").glob("*"))[:6])
        if (tmp / "hlo" / "cpu").exists()
        else "no dump written"
    )
    return record(cmd, tmp, rc, out, classify(rc, out, None, wrong_input=False), note=note)


@probe("others", "hlo-stats on a fifo (not 'no such file')")
def _hlo_fifo(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("hlo-fifo")
    os.mkfifo(tmp / "pipe.txt")
    cmd = inv(ctx, "hlo-stats", str(tmp / "pipe.txt"))
    rc, out, _ = run(cmd, tmp, timeout=60)
    cls = classify(rc, out, r"fifo|pipe|not a regular|not a file|special")
    if cls == "one-line" and re.search(r"no such file", last_line(out), re.I):
        cls = "wrong-line"
    return record(cmd, tmp, rc, out, cls)


@probe("others", "hlo-stats /dev/null (not 'no such file')")
def _hlo_devnull(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("hlo-devnull")
    cmd = inv(ctx, "hlo-stats", "/dev/null")
    rc, out, _ = run(cmd, tmp, timeout=60)
    cls = classify(rc, out, r"/dev/null")
    if cls == "one-line" and re.search(r"no such file", last_line(out), re.I):
        cls = "wrong-line"
    return record(cmd, tmp, rc, out, cls)


@probe("others", "hlo-stats on an empty folder")
def _hlo_empty(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("hlo-empty")
    (tmp / "e").mkdir()
    cmd = inv(ctx, "hlo-stats", str(tmp / "e"))
    rc, out, _ = run(cmd, tmp, timeout=60)
    return record(cmd, tmp, rc, out, classify(rc, out, r"e\b|empty|no .*hlo|nothing"))


@probe("others", "the hint after a missing efficiency baseline records it")
def _eff_hint(ctx: Ctx) -> dict[str, Any]:
    tmp = ctx.scratch("eff-hint")
    empty = tmp / "snaps"
    empty.mkdir()
    cmd0 = pytest_gate(
        ctx,
        tmp,
        "--snapshot-dir",
        str(empty),
        "--targets",
        "cpu",
        "--programs",
        "naive,take",
        "--configs",
        "f32",
        tests="invariants/gate/test_throughput.py",
    )
    rc0, out0, _ = run(cmd0, ctx.repo, timeout=400)
    hints = re.findall(r"record it with: (pytest .*--record-baselines.*)$", out0, re.MULTILINE)
    m = re.search(r"(pytest .*)", hints[-1]) if hints else None
    if not m:
        return record(
            cmd0,
            ctx.repo,
            rc0,
            out0,
            "traceback" if has_traceback(out0) else "not-one-line",
            note="no hint found",
        )
    hint = m.group(1).strip().rstrip(").;")
    import shlex

    args = shlex.split(hint)[1:]
    extra = [] if "--snapshot-dir" in args else ["--snapshot-dir", str(empty)]
    cmd = [
        ctx.python,
        "-m",
        "pytest",
        *args,
        *extra,
        "-p",
        "no:cacheprovider",
        "-q",
        "--results-json",
        str(tmp / "r2.json"),
        "--hlo-dump-dir",
        str(tmp / "hlo2"),
    ]
    rc, out, _ = run(cmd, ctx.repo, timeout=400)
    recorded = (
        sorted(p.name for p in (empty / "cpu" / "efficiency").glob("*.json"))
        if (empty / "cpu" / "efficiency").exists()
        else []
    )
    if has_traceback(out):
        cls = "traceback"
    elif rc == 0 and not recorded:
        cls = "silent-pass"
    elif rc == 0:
        cls = "ok"
    else:
        cls = "refused"
    note = (
        f"hint: {hint!r}"
        + (" (+ --snapshot-dir of the failing run)" if extra else "")
        + f"; recorded: {recorded or 'nothing'}"
    )
    return record(cmd, ctx.repo, rc, out, cls, note=note)


# ---------------------------------------------------------------------------------------------------------


def run_all(repo: Path, only: str | None) -> list[dict[str, Any]]:
    python = str(repo / ".venv" / "bin" / "python")
    tmp = Path(tempfile.mkdtemp(prefix="attack-probes-"))
    ctx = Ctx(repo, python, tmp, {}, {})
    results = []
    for p in PROBES:
        if only and not re.search(only, p.name):
            continue
        start = time.monotonic()
        rec: dict[str, Any]
        if p.needs and p.needs[1] not in ctx.help(p.needs[0]):
            rec = {
                "command": "",
                "rc": None,
                "last_line": f"{p.needs[1]} not in `{p.needs[0]} --help`",
                "tail": "",
                "lines": 0,
                "classification": "n/a",
                "note": "",
            }
        else:
            try:
                rec = p.fn(ctx)
            except Exception as err:  # a probe's own failure is recorded, not fatal
                rec = {
                    "command": "",
                    "rc": None,
                    "last_line": f"probe error: {err!r}",
                    "tail": "",
                    "lines": 0,
                    "classification": "probe-error",
                    "note": "",
                }
        rec.update({"class": p.cls, "name": p.name, "seconds": round(time.monotonic() - start, 1)})
        results.append(rec)
        print(
            f"[{rec['seconds']:6.1f}s] {p.cls:11} {rec['classification']:13} rc={rec['rc']}  {p.name}",
            file=sys.stderr,
            flush=True,
        )
    unimmutable(tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    if _INDEX:
        _INDEX[0].terminate()
    return results


def cell(rec: dict[str, Any] | None) -> str:
    if rec is None:
        return "-"
    rc = "" if rec["rc"] is None else f" (exit {rec['rc']})"
    return f"{rec['classification']}{rc}"


def table(before: dict[str, Any], after: dict[str, Any]) -> str:
    bmap = {r["name"]: r for r in before["probes"]}
    amap = {r["name"]: r for r in after["probes"]}
    names = list(dict.fromkeys([*amap, *bmap]))
    out = [f"before: {before['commit']}, after: {after['commit']}", ""]
    for cls in ("silent-pass", "lost-data", "traceback", "others"):
        out += [f"### {cls}", "", "| probe | before | after |", "|---|---|---|"]
        for n in names:
            r = amap.get(n) or bmap[n]
            if r["class"] != cls:
                continue
            out.append(f"| {n.replace('|', '/')} | {cell(bmap.get(n))} | {cell(amap.get(n))} |")
        out.append("")
    out += ["### totals", "", "| classification | before | after |", "|---|---|---|"]
    kinds = sorted({r["classification"] for r in [*before["probes"], *after["probes"]]})
    for k in kinds:
        counts = [sum(r["classification"] == k for r in doc["probes"]) for doc in (before, after)]
        out.append(f"| {k} | {counts[0]} | {counts[1]} |")
    out.append(f"| all | {len(before['probes'])} | {len(after['probes'])} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", type=Path, help="the checkout to attack (its .venv is used)")
    p.add_argument("--json", type=Path, help="write every probe's record here")
    p.add_argument("--only", help="only the probes whose name matches this regular expression")
    p.add_argument(
        "--table", nargs=2, type=Path, metavar=("BEFORE.json", "AFTER.json"), help="print the markdown table"
    )
    p.add_argument("--list", action="store_true", help="list the probes")
    p.add_argument(
        "--replace",
        action="store_true",
        help="with --only: replace those probes' records in an existing --json",
    )
    args = p.parse_args(argv)
    if args.list:
        for pr in PROBES:
            print(f"{pr.cls:11} {pr.name}")
        return 0
    if args.table:
        print(table(json.loads(args.table[0].read_text()), json.loads(args.table[1].read_text())), end="")
        return 0
    if not args.repo:
        p.error("--repo or --table is required")
    repo = args.repo.resolve()
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    probes = run_all(repo, args.only)
    doc = {"repo": str(repo), "commit": commit, "probes": probes}
    if args.replace and args.json and args.json.exists():
        old = json.loads(args.json.read_text())
        fresh = {r["name"]: r for r in probes}
        merged = [fresh.pop(r["name"], r) for r in old["probes"]]
        doc = {**old, "probes": merged + list(fresh.values())}
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=1))
    counts: dict[str, int] = {}
    for r in probes:
        counts[r["classification"]] = counts.get(r["classification"], 0) + 1
    print(json.dumps(counts), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
