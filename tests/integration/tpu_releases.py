"""The committed compiles of ``tests/data/tpu-bisect`` (its README says how they were made): each release's
:class:`Compiled` record of ``grad_vmap_naive`` f32 on tpu-v5e, measured, and the verdict of that folder's
spec-file invariant on it, as the gate decides it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from packaging.version import Version

from invariants.measure.measurement import Measurement, measure
from invariants.records.compiled import Compiled, Key
from invariants.specfile.reader import load_spec
from invariants.verdict.checks import Case, evaluate

DATA = Path(__file__).parents[1] / "data" / "tpu-bisect"
SPECS = DATA / "specs"
(INVARIANT,) = load_spec(SPECS / "loop_body.toml").invariants
KEY = Key("grad_vmap_naive", "f32", "tpu-v5e")
RECORDS = {
    Version(p.name.removeprefix("jax-").removesuffix(".json.gz")): p
    for p in sorted(DATA.glob("compiled/jax-*.json.gz"))
}
RELEASES = sorted(RECORDS)


def measured(v: Version) -> Measurement:
    compiled = Compiled.from_json(json.loads(gzip.decompress(RECORDS[v].read_bytes())))
    assert compiled.key == KEY, RECORDS[v]
    return measure(compiled, source=RECORDS[v].name)


def holds(v: Version) -> bool:
    m = measured(v)
    return evaluate(Case(INVARIANT, KEY.target, KEY.config, None), lambda key: m).holds
