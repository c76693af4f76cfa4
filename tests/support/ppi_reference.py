"""ppi-python's numbers on bloomqg's per-item calibration data: what the calibrated estimates
are checked against (tests/unit/test_calibration.py, tests/integration/test_rater_validation.py,
tests/integration/test_workflow.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

#: bloomqg.annotation.ppi.DEFAULT_PSEUDO_DISAGREEMENTS, spelled out: (human, judge) pairs appended;
#: for paired differences with their mirror images.
PSEUDO_HUMAN = [1.0, 0.0]
PSEUDO_JUDGE = [0.0, 1.0]
PSEUDO_HUMAN_DIFFERENCES = [1.0, 0.0, -1.0, 0.0]
PSEUDO_JUDGE_DIFFERENCES = [0.0, 1.0, 0.0, -1.0]


def humans_interval(y: np.ndarray, *, alpha: float) -> list[float]:
    """The humans' own share and its Clopper–Pearson (``beta``) interval, in percent, by statsmodels."""
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(float(y.sum()), len(y), alpha=alpha, method="beta")
    return [100 * y.mean(), 100 * low, 100 * high]


def ppi_python_estimates(part: pd.DataFrame, *, alpha: float = 0.05,
                         differences: bool = False) -> tuple[list[float], list[float]]:
    """([PPI++ point, low, high], [humans' mean, low, high]) in percent, by ppi-python, from one
    (cell, metric)'s joined rows (columns human, judge; NaN = unlabelled / no verdict)."""
    import ppi_py

    human, judge = part["human"].to_numpy(float), part["judge"].to_numpy(float)
    labelled = ~np.isnan(human)
    # a null verdict enters as the judges' mean of the cell; no verdict at all, as 0
    prediction = np.where(np.isnan(judge), np.nanmean(judge) if (~np.isnan(judge)).any() else 0.0, judge)
    y, yhat, unlabelled = human[labelled], prediction[labelled], prediction[~labelled]
    # a difference's own interval needs its two arms: the caller checks it (Tango's, paired)
    humans = [math.nan] * 3 if differences else humans_interval(y, alpha=alpha)
    if not len(unlabelled):  # every item labelled: bloomqg's PPI is the humans' own estimate
        return humans, humans
    pseudo = (PSEUDO_HUMAN_DIFFERENCES, PSEUDO_JUDGE_DIFFERENCES) if differences else (PSEUDO_HUMAN, PSEUDO_JUDGE)
    if differences:
        return difference_reference(y, yhat, unlabelled, pseudo, alpha), humans
    y, yhat = np.concatenate([y, pseudo[0]]), np.concatenate([yhat, pseudo[1]])
    lam = None if np.var(np.concatenate([yhat, unlabelled])) > 0 else 0.0
    low, high = ppi_py.ppi_mean_ci(y, yhat, unlabelled, alpha=alpha, lam=lam)
    point = ppi_py.ppi_mean_pointestimate(y, yhat, unlabelled, lam=lam)
    # bloomqg clips to what the quantity can be: a share 0..100, a difference -100..100
    lowest = -100.0 if differences else 0.0
    return [min(max(100 * float(np.ravel(v)[0]), lowest), 100.0) for v in (point, low, high)], humans


def difference_reference(y: np.ndarray, yhat: np.ndarray, unlabelled: np.ndarray,
                         pseudo: tuple[list[float], list[float]], alpha: float) -> list[float]:
    """bloomqg's PPI++ of a paired difference, by loops: λ of each label tuned on the others
    plus the pseudo-items (bloomqg's power_tuning, pinned to ppi-python by the unit tests), the
    point on the real labels, the width from the guarded rows (ddof 1, Student's t)."""
    from scipy import stats

    from bloomqg.annotation.ppi import power_tuning

    n = len(y)
    guarded_y, guarded_yhat = np.concatenate([y, pseudo[0]]), np.concatenate([yhat, pseudo[1]])
    lams = [float(power_tuning(np.delete(guarded_y, i), np.delete(guarded_yhat, i), unlabelled)) for i in range(n)]
    point = y.mean() + float(np.mean([lam * (unlabelled.mean() - yhat[i]) for i, lam in enumerate(lams)]))
    lam = float(power_tuning(guarded_y, guarded_yhat, unlabelled))
    variance = np.var(lam * unlabelled) / len(unlabelled) + np.var(guarded_y - lam * guarded_yhat, ddof=1) / len(guarded_y)
    half = stats.t.ppf(1 - alpha / 2, max(n - 1, 1)) * math.sqrt(variance)
    return [min(max(100 * v, -100.0), 100.0) for v in (point, point - half, point + half)]


def check_estimates_against_ppi_python(estimates: pd.DataFrame, joined: pd.DataFrame) -> int:
    """Assert every row of ``estimates`` (CALIBRATION_ESTIMATES) has the n / N of its (cell,
    metric) rows in ``joined`` (CALIBRATION_ITEMS) and, with 2 or more labels, ppi-python's PPI++
    and classical intervals on them to 1e-9; returns how many rows were compared that way."""
    import pytest

    compared = 0
    for row in estimates.itertuples(index=False):
        part = joined[(joined["dataset"] == row.dataset) & (joined["strategy"] == row.strategy)
                      & (joined["model"] == row.model) & (joined["metric"] == row.metric)]
        assert (row.n, row.big_n) == (part["human"].notna().sum(), len(part)), row
        if row.n >= 2:
            ppi, humans = ppi_python_estimates(part)
            assert [row.ppi, row.ppi_low, row.ppi_high] == pytest.approx(ppi, abs=1e-9), row
            assert [row.humans, row.humans_low, row.humans_high] == pytest.approx(humans, abs=1e-9), row
            compared += 1
    return compared
