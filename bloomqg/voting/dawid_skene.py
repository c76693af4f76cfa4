"""Dawid–Skene over a judge panel: each judge's confusion matrix, each item's posterior label.

Dawid & Skene (1979) model each judge j by a confusion matrix π_j[t, o] = P(judge says o | true
label t) and the items' true labels by class priors; EM alternates the posterior of every item's
label (E) with the judges' matrices and the priors (M). The fit is crowd-kit's ``DawidSkene``
(a maintained implementation, started from the majority vote as Dawid and Skene do); this module
only shapes the panel's vote lists into its long format and reads the results back.

Intervals of a judge's sensitivity and specificity are Jeffreys intervals of the *soft counts*
the M-step uses (e.g. sensitivity: Σ_i P(z_i = yes)·[judge said yes] out of Σ_i P(z_i = yes)·[judge
voted]): they are conditional on the fitted posteriors, which is cheap and close to a bootstrap
when items are many, but narrower when the posteriors themselves are uncertain (few items).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

#: EM settings (crowd-kit's defaults; 100 iterations converge on every panel tried here).
N_ITER = 100
TOL = 1e-5


@dataclass(frozen=True)
class DawidSkeneFit:
    """A fitted panel: ``labels`` in sorted order; ``posteriors`` items × labels (NaN rows for
    items with no vote); ``confusion[j]`` labels × labels with rows = true, columns = said."""

    labels: list[str]
    posteriors: np.ndarray
    confusion: list[np.ndarray]
    priors: np.ndarray
    #: per judge: items × labels soft counts of (true label, said) the confusion is normalised from
    soft_counts: list[np.ndarray] = field(repr=False)

    def label_of(self, item: int) -> tuple[str | None, float | None]:
        """The item's most probable label and its posterior probability (None without votes)."""
        row = self.posteriors[item]
        if np.isnan(row).any():
            return None, None
        best = int(np.argmax(row))
        return self.labels[best], float(row[best])


def fit_dawid_skene(votes_lists: Sequence[Sequence[str | None]], *, labels: Sequence[str] | None = None) -> DawidSkeneFit:
    """Dawid–Skene on items × judges vote strings (None = no vote).

    ``labels``: the label domain (default: the labels voted); yes/no criteria pass ``["0", "1"]``
    so a judge that never says "no" still has a specificity (0) rather than no row.
    """
    import pandas as pd
    from crowdkit.aggregation import DawidSkene

    n_items = len(votes_lists)
    n_judges = max((len(row) for row in votes_lists), default=0)
    records = [
        (item, judge, str(vote))
        for item, row in enumerate(votes_lists)
        for judge, vote in enumerate(row)
        if vote is not None
    ]
    domain = sorted(set(labels or []) | {vote for _, _, vote in records})
    k = len(domain)
    posteriors = np.full((n_items, k), np.nan)
    confusion = [np.full((k, k), np.nan) for _ in range(n_judges)]
    soft = [np.zeros((k, k)) for _ in range(n_judges)]
    if not records:
        return DawidSkeneFit(domain, posteriors, confusion, np.full(k, np.nan), soft)
    data = pd.DataFrame.from_records(records, columns=["task", "worker", "label"])
    model = DawidSkene(n_iter=N_ITER, tol=TOL).fit(data)
    probas = model.probas_.reindex(columns=domain, fill_value=0.0)
    posteriors[probas.index.to_numpy()] = probas.to_numpy(dtype=float)
    index = {label: position for position, label in enumerate(domain)}
    # Soft counts straight from the posteriors (the M-step's sums), so a label a judge never says
    # gets probability 0 and every judge has a full matrix.
    said = np.array([index[vote] for vote in data["label"]])
    for judge in range(n_judges):
        mine = (data["worker"] == judge).to_numpy()
        counts = np.zeros((k, k))
        np.add.at(counts.T, said[mine], posteriors[data["task"].to_numpy()[mine]])
        soft[judge] = counts
        with np.errstate(invalid="ignore", divide="ignore"):
            confusion[judge] = counts / counts.sum(axis=1, keepdims=True)
    priors = model.priors_.reindex(domain, fill_value=0.0).to_numpy(dtype=float)
    return DawidSkeneFit(domain, posteriors, confusion, priors, soft)


def jeffreys_interval(successes: float, trials: float, confidence: float = 0.95) -> tuple[float, float]:
    """Jeffreys interval (Beta(s + ½, n − s + ½) quantiles) of a proportion; NaN without trials."""
    from scipy.stats import beta

    if trials <= 0:
        return math.nan, math.nan
    tail = (1 - confidence) / 2
    low = 0.0 if successes <= 0 else float(beta.ppf(tail, successes + 0.5, trials - successes + 0.5))
    high = 1.0 if successes >= trials else float(beta.ppf(1 - tail, successes + 0.5, trials - successes + 0.5))
    return low, high


@dataclass(frozen=True)
class BinaryRates:
    """A judge's Dawid–Skene sensitivity P(yes | yes) and specificity P(no | no), with intervals."""

    sensitivity: float
    sensitivity_ci: tuple[float, float]
    specificity: float
    specificity_ci: tuple[float, float]


def binary_rates(fit: DawidSkeneFit, judge: int, *, confidence: float = 0.95) -> BinaryRates:
    """Sensitivity and specificity of ``judge`` in a fit over the labels "0" (no) and "1" (yes)."""
    if fit.labels != ["0", "1"]:
        raise ValueError(f"binary_rates needs the labels ['0', '1'], the fit has {fit.labels}")
    counts = fit.soft_counts[judge]
    yes_total, no_total = counts[1].sum(), counts[0].sum()
    sensitivity = counts[1, 1] / yes_total if yes_total > 0 else math.nan
    specificity = counts[0, 0] / no_total if no_total > 0 else math.nan
    return BinaryRates(
        float(sensitivity), jeffreys_interval(counts[1, 1], yes_total, confidence),
        float(specificity), jeffreys_interval(counts[0, 0], no_total, confidence),
    )


def accuracy(fit: DawidSkeneFit, judge: int) -> float:
    """P(judge says the true label) under the fitted priors: Σ_t prior_t · π_j[t, t]."""
    diagonal = np.diag(fit.confusion[judge])
    weights = fit.priors
    keep = ~np.isnan(diagonal)
    if not keep.any():
        return math.nan
    return float((weights[keep] * diagonal[keep]).sum() / weights[keep].sum())
