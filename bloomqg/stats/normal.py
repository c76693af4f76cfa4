"""The normal approximations every floor shares: the two-sided quantile of a confidence and the
Fisher-z interval of a correlation."""

from __future__ import annotations

import math

import numpy as np

from bloomqg.stats.quantiles import norm_ppf


def z_of(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (1.96 for 0.95)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    return float(norm_ppf(0.5 + confidence / 2.0))


def fisher_z_ci(r: float, n: int, confidence: float, *, spearman: bool) -> tuple[float, float]:
    """Fisher-z interval of a correlation ``r`` of ``n`` pairs: standard error 1/√(n−3), or
    Bonett & Wright's (2000) √((1+r²/2)/(n−3)) for Spearman's ρ. NaN below 4 pairs or for a NaN
    ``r``; a perfect correlation (|r| = 1) is its own interval."""
    if n < 4 or not math.isfinite(r):
        return math.nan, math.nan
    if abs(r) >= 1:
        return float(r), float(r)
    se = math.sqrt((1.0 + r * r / 2.0) / (n - 3)) if spearman else 1.0 / math.sqrt(n - 3)
    quantile = z_of(confidence)
    z = np.arctanh(r)
    return float(np.tanh(z - quantile * se)), float(np.tanh(z + quantile * se))
