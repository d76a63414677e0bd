"""Statistics of paired timings: a distribution-free interval for a median, and the spending of error over
repeated looks. Pure functions of numbers (numpy, scipy); nothing here times anything."""

from __future__ import annotations

import math

import numpy as np

from invariants._errors import InvariantsError

_MAD_TO_SIGMA = 1.4826  # MAD * this estimates the standard deviation of a normal distribution


def median_interval(values: np.ndarray | list[float], confidence: float) -> tuple[float, float]:
    """Distribution-free confidence interval for the median of ``values``: ``[x_(k), x_(n+1-k)]`` covers it
    with probability ``1 - 2 * P(Binom(n, 1/2) <= k - 1)``, exactly, whatever the distribution (per-pair
    ratios on a loaded machine are skewed and heavy-tailed; a bootstrap of a median under-covers)."""
    x = np.sort(np.asarray(values, dtype=float))
    n = x.size
    alpha = 1.0 - confidence
    from scipy import stats  # here, not at import: scipy.stats costs ~1 s in every child run that collects

    k = int(np.count_nonzero(2.0 * stats.binom.cdf(np.arange(n), n, 0.5) <= alpha)) if n else 0
    if k < 1:
        raise InvariantsError(
            f"timing: {n} pairs cannot give a {confidence:.1%} interval for a median "
            f"(need at least {min_pairs_for(confidence)})"
        )
    return float(x[k - 1]), float(x[n - k])


def min_pairs_for(confidence: float) -> int:
    """Smallest ``n`` for which :func:`median_interval` exists: ``2 * 0.5**n <= 1 - confidence``."""
    return max(1, math.ceil(math.log2(2.0 / (1.0 - confidence))))


def robust_cv(values: np.ndarray | list[float]) -> float:
    """``1.4826 * MAD / median``: a coefficient of variation that ignores the odd preempted sample."""
    x = np.asarray(values, dtype=float)
    med = float(np.median(x))
    mad = float(np.median(np.abs(x - med)))
    return _MAD_TO_SIGMA * mad / med if med else math.inf


def look_alpha(alpha: float, look: int) -> float:
    """Error spent at look ``look`` (1-based): ``alpha * 6 / (pi^2 * look^2)``, a series that sums to
    ``alpha``, so that by the union bound looking again (optional stopping) never raises the false-failure
    rate above ``alpha``."""
    return alpha * 6.0 / (math.pi**2 * look**2)
