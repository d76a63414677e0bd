"""bisect on a real TPU structure change, from the committed compiles of several releases.

``tests/data/tpu-bisect/`` holds what ``grad_vmap_naive`` (the backward of ``vmap(lambda i: W[i])``, f32)
compiled to for tpu-v5e under real ``jax[tpu]`` releases from PyPI, each a :class:`Compiled` record (its
README says how they were made). The backward is a per-row loop in every release; what one trip of it
launches changed. Here the real measurement, the real spec file's invariant, the real evaluator and the real
search find the first release of that change, with the structural diff that proves it; the same search
over releases whose verdicts agree, or past a release it cannot judge at the change, names none.
"""

from __future__ import annotations

import itertools

import pytest
from packaging.version import Version
from tpu_releases import RELEASES, holds, measured  # tests/integration, on pytest's pythonpath

from invariants._errors import InvariantsError
from invariants.releases import bisect as b
from invariants.snapshot.diff import what_changed
from invariants.snapshot.render import render_summary


def test_the_committed_releases_span_the_change() -> None:
    assert len(RELEASES) >= 4, RELEASES
    verdicts = [holds(v) for v in RELEASES]
    assert verdicts[0] and not verdicts[-1], dict(zip(RELEASES, verdicts, strict=True))
    # One change, not a flicker: the verdict flips once along the releases.
    assert sum(a != b_ for a, b_ in itertools.pairwise(verdicts)) == 1


def test_bisect_names_the_first_release_of_the_change_with_its_proof() -> None:
    found = b.bisect_releases(RELEASES, holds)
    assert found.skipped == []
    first = RELEASES.index(found.after)
    assert RELEASES[first - 1] == found.before, "adjacent: nothing untested between them"
    assert all(holds(v) for v in RELEASES[:first]) and not any(holds(v) for v in RELEASES[first:])
    # The proof: the snapshot summaries of the two releases differ in the loop, never only in a comment.
    before, after = (render_summary(measured(v), "") for v in (found.before, found.after))
    assert before != after
    assert what_changed(before, after).startswith("HLO lines"), what_changed(before, after)
    trips = [measured(v).metrics["max_trip_count"] for v in (found.before, found.after)]
    launches = [measured(v).metrics["dynamic_kernel_launches"] for v in (found.before, found.after)]
    assert trips[0] == trips[1] and launches[1] - launches[0] >= trips[0], "a kernel more on every trip"


def test_a_bisect_whose_ends_agree_names_no_release() -> None:
    old = [v for v in RELEASES if holds(v)]
    with pytest.raises(InvariantsError, match=r"^bisect: the verdict is True at both .*; nothing to bisect$"):
        b.bisect_releases(old, holds)


def test_a_release_it_cannot_judge_at_the_change_leaves_the_boundary_open() -> None:
    """The last release with the old verdict cannot be judged: the boundary spans it, so the command names
    no release (``_Bisection.report``, tested in test_bisect.py): the search keeps it among the skipped."""
    found = b.bisect_releases(RELEASES, holds)
    hidden = found.before

    def verdict(v: Version) -> bool:
        if v == hidden and v != RELEASES[0]:
            raise b.Unusable("its jax[tpu] does not install")
        return holds(v)

    if hidden == RELEASES[0]:
        pytest.skip("the change is at the second release: no release before it to hide")
    gap = b.bisect_releases(RELEASES, verdict)
    assert hidden in gap.skipped and gap.before < hidden < gap.after
