"""Dawid–Skene over a judge panel: each judge's confusion matrix, each item's posterior label.

Dawid & Skene (1979) model each judge j by a confusion matrix π_j[t, o] = P(judge says o | true
label t) and the items' true labels by class priors; EM alternates the posterior of every item's
label (E) with the judges' matrices and the priors (M). :func:`em` takes crowd-kit's
``DawidSkene`` steps one for one (started from the majority vote's label shares, as Dawid and
Skene do) in numpy: crowd-kit's pandas implementation measured 0.25 s to 1.8 s per fit on this
project's 2-core machine even for an 18-item cell, which put a default study's extra time past
its 10% budget; a test pins :func:`em` to crowd-kit's own fit (:func:`crowdkit_fit`).

Intervals of a judge's sensitivity and specificity are Jeffreys intervals of the *soft counts*
the M-step uses (e.g. sensitivity: Σ_i P(z_i = yes)·[judge said yes] out of Σ_i P(z_i = yes)·[judge
voted]): they are conditional on the fitted posteriors, which is cheap and close to a bootstrap
when items are many, but narrower when the posteriors themselves are uncertain (few items).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bloomqg.stats.quantiles import beta_ppf

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
        if row.size == 0 or np.isnan(row).any():  # no vote on the item (or none in the whole fit)
            return None, None
        best = int(np.argmax(row))
        return self.labels[best], float(row[best])


def fit_dawid_skene(votes_lists: Sequence[Sequence[str | None]], *, labels: Sequence[str] | None = None) -> DawidSkeneFit:
    """Dawid–Skene on items × judges vote strings (None = no vote).

    ``labels``: the label domain (default: the labels voted); yes/no criteria pass ``["0", "1"]``
    so a judge that never says "no" still has a specificity (0) rather than no row. Items without
    a vote get a NaN posterior row.
    """
    n_items = len(votes_lists)
    n_judges = max((len(row) for row in votes_lists), default=0)
    present = {str(v) for row in votes_lists for v in row if v is not None}
    domain = sorted(set(labels or []) | present)
    k = len(domain)
    index = {label: position for position, label in enumerate(domain)}
    onehot = np.zeros((n_items, n_judges, k))
    for item, row in enumerate(votes_lists):
        for judge, vote in enumerate(row):
            if vote is not None:
                onehot[item, judge, index[str(vote)]] = 1.0
    voted = onehot.sum(axis=(1, 2)) > 0
    posteriors = np.full((n_items, k), np.nan)
    if not voted.any():
        return DawidSkeneFit(domain, posteriors, [np.full((k, k), np.nan)] * n_judges, np.full(k, np.nan),
                             [np.zeros((k, k))] * n_judges)
    fitted, priors = em(onehot[voted])
    posteriors[voted] = fitted
    soft = [np.einsum("ik,it->tk", onehot[voted][:, judge, :], fitted) for judge in range(n_judges)]
    with np.errstate(invalid="ignore", divide="ignore"):
        confusion = [counts / counts.sum(axis=1, keepdims=True) for counts in soft]
    return DawidSkeneFit(domain, posteriors, confusion, priors, soft)


#: Floor of every probability, as crowd-kit's ``_EPS``: a log of zero would stop EM.
EPS = float(np.finfo(float).eps)


def em(onehot: np.ndarray, *, n_iter: int = N_ITER, tol: float = TOL) -> tuple[np.ndarray, np.ndarray]:
    """Dawid–Skene EM on one-hot votes (items × judges × labels, every item voted at least once):
    (posteriors items × labels, priors). The same steps as crowd-kit's ``DawidSkene.fit`` —
    start from the majority vote's label shares, M-step (priors and each judge's confusion from
    the posteriors, floored at :data:`EPS`), E-step in logs, stop when the evidence lower bound
    per vote improves by less than ``tol`` — vectorised with numpy: crowd-kit's pandas joins
    cost about 0.2 s per fit even for a 36-item cell, and a run fits several per cell."""
    counts = onehot.sum(axis=1)
    posteriors = counts / counts.sum(axis=1, keepdims=True)
    n_votes = onehot.sum()
    votes_per_item = onehot.sum(axis=(1, 2))

    def m_step(posteriors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        priors = np.clip(posteriors.mean(axis=0), EPS, None)
        errors = np.clip(np.einsum("ijk,it->jkt", onehot, posteriors), EPS, None)  # judge, said, true
        return priors, errors / errors.sum(axis=1, keepdims=True)

    priors, errors = m_step(posteriors)
    loss = -np.inf
    for _ in range(n_iter):
        joint = np.log(priors)[None, :] + np.einsum("ijk,jkt->it", onehot, np.log(errors))
        shifted = np.exp(joint - joint.max(axis=1, keepdims=True))
        posteriors = shifted / shifted.sum(axis=1, keepdims=True)
        priors, errors = m_step(posteriors)
        # crowd-kit's bound counts the prior once per vote, not once per item: kept, so that
        # both stop after the same iteration
        joint = votes_per_item[:, None] * np.log(priors)[None, :] + np.einsum("ijk,jkt->it", onehot, np.log(errors))
        entropy = -(posteriors * np.log(np.clip(posteriors, EPS, None))).sum()
        new_loss = float(((posteriors * joint).sum() + entropy) / n_votes)
        if new_loss - loss < tol:
            break
        loss = new_loss
    return posteriors, posteriors.mean(axis=0)


def crowdkit_fit(votes_lists: Sequence[Sequence[str | None]]) -> tuple[Any, Any]:
    """crowd-kit's ``DawidSkene`` on the same votes: (probas_ items × labels, errors_) — the
    reference :func:`em` is tested against."""
    import pandas as pd
    from crowdkit.aggregation import DawidSkene

    records = [(item, judge, str(vote)) for item, row in enumerate(votes_lists)
               for judge, vote in enumerate(row) if vote is not None]
    model = DawidSkene(n_iter=N_ITER, tol=TOL).fit(pd.DataFrame.from_records(records, columns=["task", "worker", "label"]))
    return model.probas_, model.errors_


def jeffreys_interval(successes: float, trials: float, confidence: float = 0.95) -> tuple[float, float]:
    """Jeffreys interval (Beta(s + ½, n − s + ½) quantiles) of a proportion; NaN without trials."""
    if trials <= 0:
        return math.nan, math.nan
    tail = (1 - confidence) / 2
    low = 0.0 if successes <= 0 else float(beta_ppf(tail, successes + 0.5, trials - successes + 0.5))
    high = 1.0 if successes >= trials else float(beta_ppf(1 - tail, successes + 0.5, trials - successes + 0.5))
    # soft counts near 0 or n can put the Jeffreys bound past the estimate: keep it inside
    estimate = successes / trials
    return min(low, estimate), max(high, estimate)


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
