"""Prediction-powered inference for a mean: the estimators of ``ppi-python`` written out in numpy.

A human label ``Y`` exists for ``n`` randomly drawn items; a judge's value ``Ŷ`` exists for
those and for ``N`` other items of the same population. Prediction-powered inference
(Angelopoulos et al., *Science* 2023) estimates the mean of ``Y`` as

    θ̂(λ) = mean(λ·Ŷ_unlabelled) + mean(Y − λ·Ŷ_labelled)

— the judges' mean corrected by the average error the humans find — with the normal interval
θ̂ ± z·sqrt(var(λ·Ŷ_unlabelled)/N + var(Y − λ·Ŷ_labelled)/n). It is unbiased whatever the judges'
quality; ``λ = 1`` is plain PPI, ``λ = 0`` the humans' mean alone, and PPI++ (Angelopoulos,
Duchi & Zrnic 2024) picks the λ that minimises the variance, clipped to [0, 1], so the interval
is never (asymptotically) wider than the humans' alone.

Every function here reproduces ``ppi_py.ppi_mean_ci`` / ``ppi_mean_pointestimate`` /
``ppi_py.classical_mean_ci`` of ppi-python 0.2.3 to rounding (the tests check 1e-9): λ̂ =
cov(Y, Ŷ) / ((1 + n/N)·var(Ŷ over all n + N items)), with the population covariance and the
sample (ddof 1) variance as there, and standard deviations with ddof 0. One deliberate
difference: when the judges' values are constant (var 0) ppi-python's λ̂ is NaN; here λ̂ = 0
(judges without variation carry no information, so the estimate is the humans' own).

Small samples: the normal interval needs the labelled items to show the judges' errors. With
50 labels and an outcome the judges get wrong on 2% of items, a sample often holds no error at
all, the rectifier's variance is estimated as 0 and the interval collapses onto the judges'
(biased) mean. :func:`calibrated_mean` therefore adds ``pseudo_disagreements`` pseudo-labelled
items of each kind of disagreement — human 1 / judge 0 and human 0 / judge 1 — before PPI++,
the device of the Agresti–Coull interval ("add successes and failures") carried to the judges'
errors: it costs O(1/n) of bias and keeps the interval honest where errors are rare. One of each
kind is the default: ``benchmarks/calibration.py`` measured the lowest coverage over 22 metrics
at 0.942–0.957 for n = 50 … 400 labels with one (mean width 18.1 points at n = 50), 0.945–0.958
with two (19.1 points), 0.619 with none; one is the narrowest that holds 0.94. 0 gives
ppi-python's PPI++ unchanged.

Paired differences b − a whose judges err differently per arm (arm a's judge only misses, arm b's
only over-calls) were biased by the guard: the pseudo-items' rectifier sums to 0, so it shrank the
real rectifier by n / (n + 4) and left λ × the judges' difference uncorrected (+8 points at 10
labels, true difference 0, ``benchmarks/calibration.py``). For differences the guard now sets
the interval's width only: the point is PPI++ on the real labels with each label's λ tuned
without it (leave one out, so λ and the error it multiplies are independent; λ from all labels
left +1.3 points), and the half-width takes the rectifier's variance with ddof 1 and Student's t
on n − 1 degrees of freedom (the normal interval covered 0.915 at 10 labels).

The functions take the last axis as the items, so a stack of simulated replications (``R × n``
and ``R × N`` arrays) is estimated in one call (``benchmarks/calibration.py``). No import of
ppi-python (numba) is needed at run time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bloomqg.metrics.intervals import IntervalSpec, bounded_mean_interval, mover_paired, paired_binary
from bloomqg.stats.normal import z_of
from bloomqg.stats.quantiles import t_ppf


@dataclass(frozen=True)
class MeanEstimate:
    """A point estimate and its two-sided interval (arrays of one shape, or floats)."""

    value: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    lam: np.ndarray  # the λ used (0 for the humans-only estimate, NaN for the judges-only one)


def _as_items(values: np.ndarray, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 0 or array.shape[-1] == 0:
        raise ValueError(f"{what}: no items")
    if np.isnan(array).any():
        raise ValueError(f"{what}: holds NaN (every item needs a value)")
    return array


def power_tuning(y: np.ndarray, yhat: np.ndarray, yhat_unlabelled: np.ndarray) -> np.ndarray:
    """PPI++'s λ̂ for the mean, clipped to [0, 1] (0 where the judges' values do not vary)."""
    n, big_n = y.shape[-1], yhat_unlabelled.shape[-1]
    covariance = ((y - y.mean(-1, keepdims=True)) * (yhat - yhat.mean(-1, keepdims=True))).mean(-1)
    pooled = np.concatenate([yhat, yhat_unlabelled], axis=-1)
    variance = pooled.var(-1, ddof=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = covariance / ((1.0 + n / big_n) * variance)
    return np.clip(np.where(variance > 0, lam, 0.0), 0.0, 1.0)


def leave_one_out_tuning(y: np.ndarray, yhat: np.ndarray, yhat_unlabelled: np.ndarray) -> np.ndarray:
    """:func:`power_tuning`'s λ̂ for each labelled item from every other one (``... × n``): the
    same population covariance and pooled sample variance, with the item's terms taken out of
    their sums."""
    m, big_n = y.shape[-1] - 1, yhat_unlabelled.shape[-1]
    if m < 1:
        return np.zeros_like(y)
    sum_y, sum_hat = y.sum(-1, keepdims=True) - y, yhat.sum(-1, keepdims=True) - yhat
    covariance = ((y * yhat).sum(-1, keepdims=True) - y * yhat) / m - (sum_y / m) * (sum_hat / m)
    total = m + big_n
    pooled_sum = sum_hat + yhat_unlabelled.sum(-1, keepdims=True)
    pooled_squares = (yhat * yhat).sum(-1, keepdims=True) - yhat * yhat + (yhat_unlabelled ** 2).sum(-1, keepdims=True)
    variance = (pooled_squares - pooled_sum * pooled_sum / total) / (total - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = covariance / ((1.0 + m / big_n) * variance)
    return np.clip(np.where(variance > 1e-12, lam, 0.0), 0.0, 1.0)


def ppi_mean(
    y: np.ndarray,
    yhat: np.ndarray,
    yhat_unlabelled: np.ndarray,
    *,
    confidence: float = 0.95,
    lam: float | np.ndarray | None = None,
) -> MeanEstimate:
    """The prediction-powered mean of ``y`` with its interval; ``lam=None`` is PPI++.

    ``y`` and ``yhat``: the labelled items' human and judge values (``... × n``);
    ``yhat_unlabelled``: the judge values of the other items (``... × N``).
    """
    y, yhat = _as_items(y, "human values"), _as_items(yhat, "judge values of the labelled items")
    yhat_unlabelled = _as_items(yhat_unlabelled, "judge values of the unlabelled items")
    if y.shape != yhat.shape:
        raise ValueError(f"human values {y.shape} and judge values {yhat.shape} differ in shape")
    n, big_n = y.shape[-1], yhat_unlabelled.shape[-1]
    tuned = power_tuning(y, yhat, yhat_unlabelled) if lam is None else np.broadcast_to(
        np.asarray(lam, dtype=np.float64), y.shape[:-1])
    weight = tuned[..., None]
    value = (weight * yhat_unlabelled).mean(-1) + (y - weight * yhat).mean(-1)
    spread = np.sqrt((weight * yhat_unlabelled).std(-1) ** 2 / big_n + (y - weight * yhat).std(-1) ** 2 / n)
    z = z_of(confidence)
    return MeanEstimate(value, value - z * spread, value + z * spread, np.asarray(tuned))


def score_mean(values: np.ndarray, *, confidence: float = 0.95) -> MeanEstimate:
    """The mean of one sample of outcomes in [0, 1] with the rates' interval (Clopper–Pearson,
    :class:`~bloomqg.metrics.intervals.IntervalSpec`'s default): exact for 0/1 outcomes,
    conservative for fractions such as a mean over annotators. 1-D ``values`` only."""
    values = _as_items(values, "values")
    if values.ndim != 1:
        raise ValueError("score_mean: one sample (a 1-D array) at a time")
    value = float(values.mean())
    low, high = bounded_mean_interval(value, len(values), 0.0, 1.0, IntervalSpec().method, confidence)
    return MeanEstimate(np.asarray(value), np.asarray(low), np.asarray(high), np.asarray(0.0))


def paired_difference(a: np.ndarray, b: np.ndarray, *, confidence: float = 0.95) -> MeanEstimate:
    """mean(b − a) of paired outcomes in [0, 1] with the interval the strategy comparisons use:
    Tango's (:func:`bloomqg.metrics.intervals.paired_binary`) for 0/1 outcomes, MOVER on the
    arms' means (:func:`bloomqg.metrics.intervals.mover_paired`) where an arm holds a fraction
    (a mean over several annotators)."""
    a, b = _as_items(a, "first arm"), _as_items(b, "second arm")
    binary = bool(np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all())
    low, high = paired_binary(a, b, confidence) if binary else mover_paired(a, b, 0.0, 1.0, confidence)
    return MeanEstimate(np.asarray(float((b - a).mean())), np.asarray(low), np.asarray(high), np.asarray(0.0))


def classical_mean(values: np.ndarray, *, confidence: float = 0.95) -> MeanEstimate:
    """The mean with its central-limit interval (``ppi_py.classical_mean_ci``: sd with ddof 0)."""
    values = _as_items(values, "values")
    value = values.mean(-1)
    spread = values.std(-1) / np.sqrt(values.shape[-1])
    z = z_of(confidence)
    return MeanEstimate(value, value - z * spread, value + z * spread, np.zeros_like(value))


#: Pseudo-labelled disagreements of each kind :func:`calibrated_mean` adds (see the module).
DEFAULT_PSEUDO_DISAGREEMENTS = 1


def with_pseudo_disagreements(y: np.ndarray, yhat: np.ndarray, count: int, *,
                              differences: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``y`` and ``yhat`` with ``count`` items (human 1, judge 0) and ``count`` (human 0, judge 1)
    appended on the last axis.

    ``differences`` (paired differences b − a in {−1, 0, 1}): the mirror images too, (human −1,
    judge 0) and (human 0, judge −1). The pairs for 0/1 shares pull an estimate toward ½, which for
    a share is Agresti–Coull's guard but for a difference a bias of up to +50 points; with their
    mirrors the pseudo-items sum to 0 in both human and judge values, so the guard is symmetric
    (PPI(b − a) = −PPI(a − b)) and pulls a difference only toward 0."""
    if count < 0:
        raise ValueError(f"pseudo_disagreements must be at least 0, got {count}")
    y, yhat = np.asarray(y, dtype=np.float64), np.asarray(yhat, dtype=np.float64)
    human, judge = ([1.0, 0.0, -1.0, 0.0], [0.0, 1.0, 0.0, -1.0]) if differences else ([1.0, 0.0], [0.0, 1.0])
    width = len(human) * count
    pseudo_y = np.broadcast_to(np.tile(human, count), (*y.shape[:-1], width))
    pseudo_yhat = np.broadcast_to(np.tile(judge, count), (*yhat.shape[:-1], width))
    return np.concatenate([y, pseudo_y], axis=-1), np.concatenate([yhat, pseudo_yhat], axis=-1)


def calibrated_mean(
    y: np.ndarray,
    yhat: np.ndarray,
    yhat_unlabelled: np.ndarray,
    *,
    confidence: float = 0.95,
    pseudo_disagreements: int = DEFAULT_PSEUDO_DISAGREEMENTS,
    differences: bool = False,
) -> MeanEstimate:
    """PPI++ (:func:`ppi_mean`, λ tuned) on the labelled items plus the pseudo-disagreements
    (mirrored for ``differences``, see :func:`with_pseudo_disagreements`), estimate and interval
    clipped to what the quantity can be: a share to [0, 1], a difference of shares to [−1, 1]
    (the normal interval knows no range: a share of 0.08 came out as [−0.073, 0.240]).

    ``differences``: the pseudo-items set the width only, and the point is PPI++ on the real
    labels with leave-one-out λ, the half-width widened to Student's t (see the module)."""
    guarded_y, guarded_yhat = with_pseudo_disagreements(y, yhat, pseudo_disagreements, differences=differences)
    estimate = ppi_mean(guarded_y, guarded_yhat, yhat_unlabelled, confidence=confidence)
    if not differences:
        return clipped(estimate, 0.0, 1.0)
    y, yhat = np.asarray(y, dtype=np.float64), np.asarray(yhat, dtype=np.float64)
    yhat_unlabelled = np.asarray(yhat_unlabelled, dtype=np.float64)
    n = y.shape[-1]
    lam = leave_one_out_tuning(guarded_y, guarded_yhat, yhat_unlabelled)[..., :n]
    value = y.mean(-1) + (lam * (yhat_unlabelled.mean(-1, keepdims=True) - yhat)).mean(-1)
    # the width: the guarded rows' variances as in ppi_mean, the rectifier's with ddof 1 and
    # Student's t (the normal interval on ddof 0 covered 0.915 at 10 labels)
    tuned = estimate.lam[..., None]
    rectifier = (guarded_y - tuned * guarded_yhat).var(-1, ddof=1) / guarded_y.shape[-1]
    spread = np.sqrt((tuned * yhat_unlabelled).var(-1) / yhat_unlabelled.shape[-1] + rectifier)
    half = float(t_ppf(0.5 + confidence / 2.0, max(n - 1, 1))) * spread
    return clipped(MeanEstimate(value, value - half, value + half, lam.mean(-1)), -1.0, 1.0)


def clipped(estimate: MeanEstimate, lower: float, upper: float) -> MeanEstimate:
    """``estimate`` with its value and bounds clipped to [``lower``, ``upper``]."""
    value, low, high = (np.clip(v, lower, upper) for v in (estimate.value, estimate.ci_low, estimate.ci_high))
    return MeanEstimate(value, low, high, estimate.lam)
