"""The mutation-score table: per injection, whether it was caught and by which items, and a score line
that says whether the baseline passed and what it ran."""

from __future__ import annotations

from collections.abc import Sequence

from .judge import Outcome, item_label
from .registry import coverage


def _verdict(o: Outcome) -> str:
    if o.injection.is_baseline:
        return "passes" if o.caught else "**FAILS**"
    return "yes" if o.caught else "**no**"


def _row(o: Outcome, examples: int) -> str:
    inj = o.injection
    expected = "pass" if inj.is_baseline else ", ".join(inj.expect)
    labels = sorted({item_label(it) for it in o.failed})
    ids = [it.nodeid.split("::", 1)[-1] for it in o.failed[:examples]]
    extra = f"; missing {', '.join(o.missing)}" if o.missing and not inj.is_baseline else ""
    note = f" ({o.note})" if o.note else ""
    by = f"{len(o.failed)}: {', '.join(labels)}{extra}{note}"
    return f"| {inj.name} | {expected} | {_verdict(o)} | {by} | {', '.join(ids)} | {o.seconds:.0f} |"


def render_table(outcomes: Sequence[Outcome], examples: int = 3) -> str:
    lines = [
        "| injection | expected | caught | failing items | e.g. | s |",
        "|---|---|---|---|---|---|",
        *(_row(o, examples) for o in outcomes),
    ]
    injected = [o for o in outcomes if not o.injection.is_baseline]
    caught = sum(o.caught for o in injected)
    base = next((o for o in outcomes if o.injection.is_baseline), None)
    base_text = "passes" if base and base.caught else "FAILS (scores are meaningless)"
    lines += ["", f"mutation score: {caught}/{len(injected)} injections caught; baseline {base_text}"]
    if base:
        # So that "passes" never reads as "the gate is green".
        lines.append(
            f"baseline ran: {coverage(base.injection)}; the gate's default run (pytest invariants/gate) "
            "covers every program and target"
        )
    return "\n".join(lines)
