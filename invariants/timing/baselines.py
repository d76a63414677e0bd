"""Efficiency baselines: what a throughput run's efficiency is compared with, and the rules for them.

A baseline is one program's efficiency in one configuration on one target, recorded on purpose
(``--record-baselines``) as the median of three measurements, with the machine and the versions it was
measured on. A run fails only when its whole interval lies below ``baseline * (1 - max_loss)``. Efficiency is
relative to a machine and a clock: a baseline recorded on another machine is not compared with.
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from invariants import _cores
from invariants._errors import InvariantsError
from invariants._paths import write_atomic
from invariants.scope.select import bare
from invariants.timing.paired import RatioResult, Verdict, decide_lower

if TYPE_CHECKING:
    from invariants.specfile.reader import Spec
    from invariants.verdict.checks import Case

# The loss allowed when no spec file of the target says otherwise.
DEFAULT_MAX_LOSS = 0.5
BASELINE_FOLDER = "efficiency"


def baseline_path(snapshot_root: Path, target: str, program: str, config: str) -> Path:
    return snapshot_root / target / BASELINE_FOLDER / f"{bare(program)}.{config}.json"


def max_loss_for(specs: Iterable[Spec], target: str) -> float:
    """``efficiency_max_loss`` of the first spec whose ``targets`` patterns match ``target``."""
    for spec in specs:
        if spec.efficiency_max_loss and any(fnmatch.fnmatchcase(target, p) for p in spec.targets):
            return float(spec.efficiency_max_loss)
    return DEFAULT_MAX_LOSS


def machine(device_kind: str, clock: str) -> dict[str, Any]:
    """What a baseline is relative to. The cores are this process's own (its affinity), not the host's: an
    xdist worker pinned to one core runs XLA:CPU's partitioned kernels on one thread, another machine."""
    return {"cores": len(_cores.usable()) or os.cpu_count(), "device": device_kind, "clock": clock}


# An efficiency is t_copy / t_program: a program that moves the bytes it must is within a small factor of
# the stream either way; anything outside this range was not measured by this tool.
EFFICIENCY_RANGE = (1e-4, 100.0)


def read_baseline(path: Path) -> dict[str, Any] | None:
    """The recorded baseline at ``path``, None when there is none; one line for a file this tool did not
    write (an ``efficiency`` that is not the median of its ``runs`` is a hand edit)."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(), parse_constant=_no_constant, parse_int=_bounded_int)
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as err:
        where = f":{err.lineno}" if isinstance(err, json.JSONDecodeError) else ""
        said = str(getattr(err, "msg", err)).splitlines()[0]
        raise InvariantsError(f"{path}{where}: not a baseline (not JSON: {said})") from None
    if not isinstance(data, dict):
        raise InvariantsError(f"{path}: not a baseline (a JSON object with 'efficiency' and 'runs')")
    _check_median(path, data.get("efficiency"), data.get("runs"))
    if not isinstance(data.get("machine"), dict):
        raise InvariantsError(f"{path}: not a baseline (no 'machine' it was measured on)")
    return data


def _check_median(path: Path, value: object, runs: object) -> None:
    low, high = EFFICIENCY_RANGE
    if not isinstance(value, int | float) or not _number(value) or not low <= value <= high:
        raise InvariantsError(
            f"{path}: not a baseline ('efficiency' must be a number in [{low:g}, {high:g}], "
            f"got {json.dumps(value)[:40]})"
        )
    if not isinstance(runs, list) or len(runs) != 3 or not all(_number(r) and low <= r <= high for r in runs):
        raise InvariantsError(
            f"{path}: not a baseline ('runs' must be the three measurements it is the median of)"
        )
    if abs(sorted(runs)[1] - value) > 1e-3 * value:
        raise InvariantsError(
            f"{path}: efficiency {value:g} is not the median of its recorded runs {runs}; a baseline is "
            "recorded (--record-baselines), not edited"
        )


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a baseline holds")


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 30:
        raise ValueError(f"a {len(text)}-digit number is not a measurement")
    return int(text)


def provenance(record: dict[str, Any]) -> str:
    machine = record.get("machine", {})
    versions = record.get("versions", {})
    names = ", ".join(f"{k} {versions[k]}" for k in ("jax", "jaxlib", "libtpu") if k in versions)
    return (
        f"{machine.get('device', '?')}, {machine.get('clock', '?')} clock, {names or 'versions unknown'}, "
        f"recorded {record.get('date', 'on an unknown date')}"
    )


def _figures(x: float) -> float:
    # Significant figures: a loop-bound program's efficiency is a few 1e-4.
    return float(f"{x:.4g}")


def write_baseline(
    path: Path, runs: Sequence[RatioResult], machine: dict[str, Any], versions: dict[str, str]
) -> dict[str, Any]:
    """Record the median of ``runs`` at ``path`` with what it was measured on; return the record."""
    best = sorted(runs, key=lambda r: r.median)[len(runs) // 2]
    record = {
        "efficiency": _figures(best.median),
        "low": _figures(best.low),
        "high": _figures(best.high),
        "runs": [_figures(r.median) for r in runs],
        "machine": machine,
        "versions": versions,
        "date": datetime.date.today().isoformat(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def record_programs(key: Sequence[str], cases: Iterable[Case]) -> list[str]:
    """The programs of the smallest throughput relation holding ``key``: what ``--record-baselines`` must
    select, since an efficiency item exists only where every side of its relation is selected."""
    wanted = tuple(key)
    sides = [
        (len(programs), c.id, programs)
        for c in cases
        if wanted in {tuple(k) for k in c.keys}
        for programs in [list(dict.fromkeys([wanted[0], *(k[0] for k in c.keys)]))]
    ]
    return min(sides)[2] if sides else [wanted[0]]


def baseline_floor(baseline: float, max_loss: float) -> float:
    if not baseline > 0.0:
        raise InvariantsError(f"baseline: efficiency baseline must be positive, got {baseline}")
    if not 0.0 <= max_loss < 1.0:
        raise InvariantsError(f"baseline: max_loss must be a fraction in [0, 1), got {max_loss}")
    return baseline * (1.0 - max_loss)


def baseline_verdict(result: RatioResult, baseline: float, max_loss: float) -> Verdict:
    """Measure with ``min_efficiency=baseline_floor(baseline, max_loss)``: its looks aim at this bound."""
    return decide_lower(result.low, result.high, baseline_floor(baseline, max_loss)) or "inconclusive"
