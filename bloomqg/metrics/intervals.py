"""Confidence intervals that keep their promise at the n they are printed at.

A percentile bootstrap of a rate covers a true 95% rate about 40% of the time at n = 10 (every
resample of ten yes votes is 100%); this module gives each kind of number an interval whose
coverage ``benchmarks/intervals.py`` measures by simulation:

- **rates** (a share of 0/1 outcomes): Clopper–Pearson's exact interval (default), Wilson's score
  interval or Jeffreys' (Brown, Cai & DasGupta 2001). Never degenerate: 0 of 10 gives [0, 30.8].
  The default is the one whose coverage held: computed exactly over the true rates 0.02 … 0.98,
  Wilson's dips to 0.92 at n = 10 and n = 50 (its known oscillation near the boundaries),
  Clopper–Pearson's stays ≥ 0.955 from n = 10, at 1.03–1.16 × Wilson's width.
- **bounded means on a scale of levels** (CogShift's |Δ| in 0..5, the shift totals and magnitudes):
  Waudby-Smith and Ramdas' (2024) betting interval (:func:`betting_mean_interval`), exact for any
  distribution on the range and narrow where the outcome varies much less than a yes/no one of
  its mean (most questions a level or two off). It needs the observations, not only their mean.
  Written here rather than taken from ``confseq`` (Howard & Waudby-Smith): its last release
  (0.0.11, 2023) builds a C++ extension from source, and its ``betting_ci`` finds the ends on a
  grid of 1/1000 of the range; the bets are the same predictable-mixture ones.
- **bounded means of fractions** (KnowCov's share of units, mostly 0 or 1): the rate's interval
  on the mean rescaled to [0, 1]. A variable in [a, b] with mean μ has variance at most
  (μ − a)(b − μ), the binomial's, so the interval is conservative where the outcome is not 0/1
  and exact where it is. On KnowCov as the release has it (originals of one or two units, so
  fractions mostly 0 or 1, variance 0.83 × the binomial's) the betting interval measured 5–14%
  wider (``benchmarks/intervals.py``); it is narrower only where most originals carry three
  units or more.
- **clustered designs** (``cluster: unit``: questions on one knowledge unit are not independent):
  the interval of the effective sample size n / design effect (Korn & Graubard 1998), the design
  effect from the CR2 cluster-robust variance with Bell–McCaffrey degrees of freedom (the CR1
  variance on clusters − 1 df, used before, covered 0.902 at 12 units), guarded where the rarer
  outcome sits in few clusters (:func:`effective_size`).
- **paired differences of 0/1 outcomes** b − a: Tango's score interval (1998) with a continuity
  correction of ½ on the discordant counts (Laud's ``ratesci``: the corrected score interval),
  beside the exact McNemar p of :mod:`bloomqg.metrics.paired`. Newcombe's hybrid interval, used
  before, covered 0.909 when every discordant pair favours one strategy (22 pairs, p_a = 0.5,
  δ = ψ = 0.10): 11 of 22 in both arms gave [−8.2, 8.2] points. Tango's interval depends on the
  discordant counts only, and with none it still reaches a difference the sample cannot rule out
  (±14.9 points at 22 pairs). Computed exactly over every trinomial of discordant counts
  (n = 10 … 400, discordance 0.01 … 0.8, every balance of the two directions), the corrected
  interval covers ≥ 0.950; uncorrected it dips to 0.930 (30 pairs, ψ = δ = 0.3).
- **paired differences of graded outcomes**, beside the Wilcoxon p: CogShift's, the betting
  interval of the mean difference (:func:`betting_paired`); KnowCov's, each arm's score interval
  combined with the arms' correlation (MOVER, Zou & Donner 2008). Neither biases a difference
  nor collapses when every pair agrees.
- **clustered graded outcomes** keep the rescaled rate interval at the effective n (the betting
  interval assumes independent observations).

``percentile_bootstrap`` stays available as an explicit choice (config ``intervals.method``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from bloomqg.stats.normal import z_of
from bloomqg.stats.quantiles import beta_ppf, t_ppf

#: Resample rows per block, so memory stays bounded for large cells.
_BOOTSTRAP_BLOCK_CELLS = 4_000_000

RateMethod = Literal["wilson", "clopper_pearson", "jeffreys", "percentile_bootstrap"]
RATE_METHODS: tuple[str, ...] = ("wilson", "clopper_pearson", "jeffreys", "percentile_bootstrap")
ClusterBy = Literal["item", "unit", "none"]
CLUSTER_CHOICES: tuple[str, ...] = ("item", "unit", "none")

#: Names written to ``ci_method`` and the tables' notes (single samples: :func:`interval_method`).
TANGO = "tango_paired_score"
MOVER = "mover_paired_score"
BETTING_PAIRED = "betting_paired"
#: ``ci_method`` of a single sample's betting interval (:func:`interval_method` with ``betting``).
BETTING_MEAN = "betting_bounded_mean"
PERCENTILE = "percentile_bootstrap"
#: Suffix of a clustered ``ci_method`` whose cell had fewer than :data:`MIN_CLUSTERS` clusters.
FEW_CLUSTERS = "_few_clusters"


@dataclass(frozen=True)
class IntervalSpec:
    """How a study's intervals are made (config ``intervals:`` and ``bootstrap:``)."""

    method: RateMethod = "clopper_pearson"
    cluster: ClusterBy = "item"
    confidence: float = 0.95
    #: Resamples of the percentile bootstrap (when chosen) and of the statistics that keep one.
    n_resamples: int = 1000

    def __post_init__(self) -> None:
        if self.method not in RATE_METHODS:
            raise ValueError(f"intervals.method: {self.method!r} is not one of {', '.join(RATE_METHODS)}")
        if self.cluster not in CLUSTER_CHOICES:
            raise ValueError(f"intervals.cluster: {self.cluster!r} is not one of {', '.join(CLUSTER_CHOICES)}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must lie in (0, 1), got {self.confidence}")
        if self.n_resamples < 1:
            raise ValueError(f"n_resamples must be at least 1, got {self.n_resamples}")

    @classmethod
    def from_config(cls, config: dict) -> IntervalSpec:
        """From a resolved config: ``intervals`` (method, cluster) and ``bootstrap``."""
        intervals = config.get("intervals") or {}
        bootstrap = config.get("bootstrap") or {}
        return cls(method=intervals.get("method", cls.method), cluster=intervals.get("cluster", "item"),
                   confidence=float(bootstrap.get("confidence", 0.95)),
                   n_resamples=int(bootstrap.get("n_resamples", 1000)))

    @property
    def bootstrap(self) -> bool:
        return self.method == PERCENTILE

    def describe(self) -> dict[str, object]:
        """What provenance records: the ``ci_method`` each kind of row gets (before any
        ``_clustered_`` suffix a cell's design adds)."""
        return {"method": self.method, "cluster": self.cluster, "confidence": self.confidence,
                "n_resamples": self.n_resamples, "shares": interval_method(self.method, graded=False),
                "bounded_means": interval_method(self.method, graded=True),
                "bounded_means_of_levels": interval_method(self.method, graded=True, betting=True),
                "paired_binary": TANGO if not self.bootstrap else PERCENTILE,
                "paired_graded": MOVER if not self.bootstrap else PERCENTILE,
                "paired_graded_levels": BETTING_PAIRED if not self.bootstrap else PERCENTILE}


def interval_method(method: str, *, graded: bool, cluster: str | None = None, clusters: int | None = None,
                    betting: bool = False) -> str:
    """The ``ci_method`` of one sample's interval, named from the metric (not from the values a
    cell happens to hold): a share's is the method's own name, a graded outcome's (KnowCov,
    CogShift, the shift magnitudes) adds ``_bounded_mean``, a clustered design
    ``_clustered_<cluster>``, and ``_few_clusters`` when it had fewer than
    :data:`MIN_CLUSTERS` ``clusters`` (coverage not measured there); the bootstrap is the bootstrap.
    ``betting`` (a metric whose mean takes :func:`betting_mean_interval`) gives
    :data:`BETTING_MEAN` where the design is not clustered."""
    if method == PERCENTILE:
        return PERCENTILE
    if betting and graded and not cluster:
        return BETTING_MEAN
    name = f"{method}_bounded_mean" if graded else method
    if not cluster:
        return name
    few = clusters is not None and clusters < MIN_CLUSTERS
    return f"{name}_clustered_{cluster}{FEW_CLUSTERS if few else ''}"


def wilson(successes: np.ndarray | float, n: np.ndarray | float, confidence: float = 0.95,
           *, z: np.ndarray | float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's score interval of ``successes`` / ``n`` (arrays broadcast; ``n`` may be an
    effective, fractional size); NaN where ``n`` is 0."""
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    z = z_of(confidence) if z is None else np.asarray(z, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        z2 = z * z
        centre = (p + z2 / (2 * n)) / (1 + z2 / n)
        half = z / (1 + z2 / n) * np.sqrt(np.maximum(p * (1 - p) / n + z2 / (4 * n * n), 0.0))
    low, high = np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    # the exact endpoints at the boundary (rounding must not leave 1e-17 above 0)
    low = np.where(k <= 0, 0.0, low)
    high = np.where(k >= n, 1.0, high)
    empty = ~(n > 0)
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def clopper_pearson(successes: np.ndarray | float, n: np.ndarray | float,
                    confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The exact (Clopper–Pearson) interval; ``n`` may be fractional (beta quantiles)."""
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    tail = (1.0 - confidence) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(k > 0, beta_ppf(tail, np.maximum(k, 1e-12), n - k + 1), 0.0)
        high = np.where(k < n, beta_ppf(1 - tail, k + 1, np.maximum(n - k, 1e-12)), 1.0)
    empty = ~(n > 0)
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def jeffreys(successes: np.ndarray | float, n: np.ndarray | float,
             confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Jeffreys' interval (beta(k + ½, n − k + ½) quantiles), with Brown et al.'s boundary rule:
    0 of n has lower end 0, n of n upper end 1."""
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    tail = (1.0 - confidence) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(k > 0, beta_ppf(tail, k + 0.5, n - k + 0.5), 0.0)
        high = np.where(k < n, beta_ppf(1 - tail, k + 0.5, n - k + 0.5), 1.0)
    empty = ~(n > 0)
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


_SCORE_RATE = {"wilson": wilson, "clopper_pearson": clopper_pearson, "jeffreys": jeffreys}


def rate_interval(successes: np.ndarray | float, n: np.ndarray | float, method: str = "clopper_pearson",
                  confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The interval of a rate by a score method (not the bootstrap, which needs the rows)."""
    try:
        return _SCORE_RATE[method](successes, n, confidence)
    except KeyError:
        raise ValueError(f"no closed-form rate interval {method!r}; known: {', '.join(_SCORE_RATE)}") from None


#: The fewest clusters at which ``benchmarks/intervals.py`` measured the clustered interval
#: (coverage ≥ 0.94 at 6, 12 and 30 units); a cell with fewer is labelled (:func:`interval_method`).
MIN_CLUSTERS = 6


def cluster_count(members: np.ndarray, clusters: np.ndarray | None) -> int:
    """How many distinct clusters hold a member (0 without clusters)."""
    if clusters is None:
        return 0
    return len(np.unique(clusters[members > 0]))


def cr2_mean(totals: np.ndarray, sizes: np.ndarray) -> tuple[float, float]:
    """(CR2 variance, Bell–McCaffrey degrees of freedom) of the mean Σtotals / Σsizes of
    clustered observations, from each cluster's total and size (Bell & McCaffrey 2002).

    For an intercept-only model the hat matrix's block of cluster g is 1 1ᵀ/n, so CR2's
    (I − H_gg)^−½ scales the cluster's residual sum by (1 − m_g/n)^−½; the df are the
    Satterthwaite df of that estimate under independent errors, (tr M)² / tr M², with
    M = D (diag(m) − m mᵀ/n) D and D = diag((1 − m_g/n)^−½) (Imbens & Kolesár 2016).
    """
    m = np.asarray(sizes, dtype=np.float64)
    n = float(m.sum())
    scale = 1.0 / (1.0 - m / n)
    residual = np.asarray(totals, dtype=np.float64) - m * (float(np.sum(totals)) / n)
    variance = float(np.sum(scale * residual**2)) / n**2
    root = np.sqrt(scale)
    matrix = root[:, None] * (np.diag(m) - np.outer(m, m) / n) * root[None, :]
    return variance, float(np.trace(matrix) ** 2 / np.sum(matrix * matrix))


def effective_size(values: np.ndarray, members: np.ndarray, clusters: np.ndarray | None,
                   lower: float, upper: float, confidence: float = 0.95) -> tuple[float, float]:
    """(effective n, degrees of freedom) of the ratio Σvalues / Σmembers under ``clusters``.

    ``values`` are per row (0 where not a member), ``members`` 0/1. Without clusters, or when
    every cluster holds one member, the design is simple: (n, inf). Otherwise n_eff = n / deff
    (Korn & Graubard 1998), the design effect from the CR2 variance (Bell & McCaffrey 2002: each
    cluster's residual sum scaled by (1 − m_g/n)^−½, unbiased under independence where CR1
    is biased down with few clusters), capped below at 1, with Bell and McCaffrey's degrees of
    freedom (Imbens & Kolesár 2016), which fall with unequal cluster sizes. Two guards, measured
    in ``benchmarks/intervals.py`` (ICC 0.3, 12 units, p = 0.02 covered 0.71 without them):

    - the degrees of freedom are at most one less than the clusters holding the rarer outcome
      (the variance is estimated from those alone; with none it is 1), and
    - the interval is never wider than the one that treats each cluster as one draw: the n
      returned is at least n² / Σm_g² × (t / z)², the design effect's bound at ICC 1, so after
      :func:`bounded_mean_interval` shrinks it by (z / t)² it is at least the clusters' own
      effective number.
    """
    n = float(members.sum())
    if clusters is None or n == 0:
        return n, math.inf
    member = members > 0
    labels, codes = np.unique(clusters[member], return_inverse=True)
    if len(labels) == member.sum():
        return n, math.inf
    c = len(labels)
    y = np.bincount(codes, weights=values[member])
    m = np.bincount(codes, weights=members[member].astype(np.float64))
    mean = y.sum() / n
    spread = (mean - lower) * (upper - mean)
    if c < 2:
        return n, 1.0
    robust, df = cr2_mean(y, m)
    # every outcome at one end: no spread to estimate a design effect from, only the guards
    deff = max(robust / (spread / n), 1.0) if spread > 0 else 1.0
    varied = min(int(np.sum(y > lower * m)), int(np.sum(y < upper * m)))
    df = max(min(df, varied - 1.0), 1.0)
    t = float(t_ppf(0.5 + confidence / 2.0, df))
    per_cluster = n * n / float(np.sum(m * m)) * (t / z_of(confidence)) ** 2
    return max(n / deff, per_cluster), df


def bounded_mean_interval(mean: float, n: float, lower: float, upper: float, method: str = "clopper_pearson",
                          confidence: float = 0.95, df: float = math.inf) -> tuple[float, float]:
    """The interval of a mean over ``n`` (possibly effective, fractional) observations of a
    variable in [``lower``, ``upper``]: a rate's score interval on the rescaled mean (see the
    module). ``df`` < inf (a clustered design) uses the t quantile for the normal one in Wilson's
    interval, and shrinks n by (z / t)² for the beta-based ones (Korn & Graubard)."""
    if not n > 0 or math.isnan(mean):
        return math.nan, math.nan
    width = upper - lower
    if width <= 0:  # the variable takes one value: its mean is known exactly
        return lower, lower
    share = min(max((mean - lower) / width, 0.0), 1.0)
    if math.isfinite(df):
        t = float(t_ppf(0.5 + confidence / 2.0, max(df, 1.0)))
        if method == "wilson":
            low, high = wilson(share * n, n, confidence, z=t)
            return lower + width * float(low), lower + width * float(high)
        n = n * (z_of(confidence) / t) ** 2
    low, high = rate_interval(share * n, n, method, confidence)
    return lower + width * float(low), lower + width * float(high)


def mover_paired(a: np.ndarray, b: np.ndarray, lower: float = 0.0, upper: float = 1.0,
                 confidence: float = 0.95) -> tuple[float, float]:
    """The interval of mean(b) − mean(a) over pairs of outcomes in [``lower``, ``upper``]: each
    arm's Wilson interval on its rescaled mean, combined with the arms' correlation (the method
    of variance estimates recovery, Zou & Donner 2008). For 0/1 outcomes it is Newcombe's hybrid
    score interval (1998, method 10) exactly, with his φ*: a positive covariance is shrunk by
    1/(2n) (n/2 in the 2 × 2 table's counts), which keeps the interval from narrowing on an
    association a small table cannot yet show. Graded outcomes (KnowCov's fractions, CogShift's
    levels) get the same construction, conservative because each arm's interval is."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    n = len(a)
    if n == 0:
        return math.nan, math.nan
    mean_a, mean_b = float(a.mean()), float(b.mean())
    low_a, high_a = bounded_mean_interval(mean_a, n, lower, upper, "wilson", confidence)
    low_b, high_b = bounded_mean_interval(mean_b, n, lower, upper, "wilson", confidence)
    covariance = float(np.mean((a - mean_a) * (b - mean_b)))
    if covariance > 0:
        covariance = max(covariance - (upper - lower) ** 2 / (2 * n), 0.0)
    spread = math.sqrt(float(a.var()) * float(b.var()))
    r = covariance / spread if spread > 0 else 0.0
    diff = mean_b - mean_a
    delta = math.sqrt(max((mean_b - low_b) ** 2 - 2 * r * (mean_b - low_b) * (high_a - mean_a)
                          + (high_a - mean_a) ** 2, 0.0))
    epsilon = math.sqrt(max((high_b - mean_b) ** 2 - 2 * r * (high_b - mean_b) * (mean_a - low_a)
                            + (mean_a - low_a) ** 2, 0.0))
    width = upper - lower
    return max(diff - delta, -width), min(diff + epsilon, width)


#: The betting interval's bets never exceed this share of what the capital can lose
#: (Waudby-Smith & Ramdas' truncation c; 0.99 was narrowest of 0.5, 0.75, 0.9, 0.99 in a sweep).
BETTING_TRUNCATION = 0.99
#: Points of the first grid of candidate means, then of each refinement round (two rounds), and
#: the most grid cells (samples × observations × points) held at once.
_BETTING_GRID = 401
_BETTING_REFINE = 33
_BETTING_BLOCK_CELLS = 4_000_000


def _betting_rejects(x: np.ndarray, m: np.ndarray, confidence: float) -> np.ndarray:
    """Whether the hedged capital process of each row of ``x`` (samples × observations in
    [0, 1]) rejects each candidate mean of the same row of ``m`` (samples × points).

    The capital is ½K⁺ + ½K⁻ with K^± = Π(1 ± λ_t^± (x_t − m)), the predictable bets
    λ_t = √(2 log(2/α) / (n σ̂²_{t−1})) for a fixed n (σ̂² the running variance with a prior
    observation of variance ¼, as Waudby-Smith & Ramdas 2024, and ``confseq.betting_ci``), capped at
    c/m and c/(1 − m) so no factor reaches 0. It rejects where its running maximum reaches 1/α
    (Ville's inequality: valid whatever the distribution on [0, 1])."""
    alpha = 1.0 - confidence
    n = x.shape[1]
    t = np.arange(1, n + 1)
    mean = (0.5 + np.cumsum(x, axis=1)) / (t + 1)
    variance = (0.25 + np.cumsum((x - mean) ** 2, axis=1)) / (t + 1)
    previous = np.concatenate([np.full((x.shape[0], 1), 0.25), variance[:, :-1]], axis=1)
    bet = np.sqrt(2.0 * math.log(2.0 / alpha) / (n * previous))[:, :, None]
    candidate = m[:, None, :]
    with np.errstate(divide="ignore"):
        up = np.minimum(bet, BETTING_TRUNCATION / candidate)
        down = np.minimum(bet, BETTING_TRUNCATION / (1.0 - candidate))
    excess = x[:, :, None] - candidate
    log_up = np.cumsum(np.log1p(up * excess), axis=1)
    log_down = np.cumsum(np.log1p(-down * excess), axis=1)
    log_capital = np.logaddexp(log_up, log_down) - math.log(2.0)
    return log_capital.max(axis=1) >= math.log(1.0 / alpha)


def _betting_block(x: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`betting_mean_interval` of each row of ``x`` (values in [0, 1]): the candidates not
    rejected on a grid, each end refined between its last rejected and first kept point and
    returned at the rejected one (outward, so rounding never narrows it)."""
    rows = np.arange(x.shape[0])
    grid = np.sort(np.concatenate([np.broadcast_to(np.linspace(0.0, 1.0, _BETTING_GRID), (len(x), _BETTING_GRID)),
                                   x.mean(axis=1, keepdims=True)], axis=1), axis=1)
    kept = ~_betting_rejects(x, grid, confidence)
    found = kept.any(axis=1)
    first = np.argmax(kept, axis=1)
    last = grid.shape[1] - 1 - np.argmax(kept[:, ::-1], axis=1)

    def refine(outside: np.ndarray, inside: np.ndarray) -> np.ndarray:
        for _ in range(2):
            steps = np.linspace(0.0, 1.0, _BETTING_REFINE)
            points = outside[:, None] + (inside - outside)[:, None] * steps[None, :]
            step_kept = ~_betting_rejects(x, points, confidence)
            step_kept[:, -1] = True  # the inside point was kept
            index = np.argmax(step_kept, axis=1)
            outside, inside = points[rows, np.maximum(index - 1, 0)], points[rows, index]
        return outside

    low = np.where(first == 0, 0.0, refine(grid[rows, np.maximum(first - 1, 0)], grid[rows, first]))
    top = grid.shape[1] - 1
    high = np.where(last == top, 1.0, refine(grid[rows, np.minimum(last + 1, top)], grid[rows, last]))
    return np.where(found, low, np.nan), np.where(found, high, np.nan)


def betting_mean_interval(values: np.ndarray, lower: float, upper: float,
                          confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Waudby-Smith & Ramdas' (2024) betting confidence interval of the mean of independent
    outcomes in [``lower``, ``upper``]: every mean m the hedged capital process of
    :func:`_betting_rejects`, betting on the observations in their order, does not reject. Exact
    for any distribution on the range; narrow where the outcome varies little. ``values``: one
    sample (returns floats) or rows of samples of one size (returns arrays). Ends are found on a
    grid to 2.4e-6 of the range and rounded outward. Where no candidate survives the grid (not
    seen in the benchmark) the rescaled Clopper–Pearson interval stands in."""
    x = np.asarray(values, dtype=np.float64)
    single = x.ndim == 1
    x = np.atleast_2d(x)
    if x.shape[1] == 0:
        nan = np.full(x.shape[0], np.nan)
        return (math.nan, math.nan) if single else (nan, nan)
    width = upper - lower
    if width <= 0:  # the variable takes one value: its mean is known exactly
        ends = np.full(x.shape[0], float(lower))
        return (float(lower), float(lower)) if single else (ends, ends)
    x = np.clip((x - lower) / width, 0.0, 1.0)
    block = max(1, _BETTING_BLOCK_CELLS // (x.shape[1] * _BETTING_GRID))
    parts = [_betting_block(x[i:i + block], confidence) for i in range(0, len(x), block)]
    low, high = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    missing = np.isnan(low)
    if missing.any():
        n = x.shape[1]
        low[missing], high[missing] = clopper_pearson(x[missing].sum(axis=1), n, confidence)
    low, high = lower + width * low, lower + width * high
    low, high = np.clip(low, lower, upper), np.clip(high, lower, upper)
    return (float(low[0]), float(high[0])) if single else (low, high)


def betting_paired(a: np.ndarray, b: np.ndarray, lower: float = 0.0, upper: float = 1.0,
                   confidence: float = 0.95) -> tuple[float, float]:
    """The interval of mean(b) − mean(a) over pairs of outcomes in [``lower``, ``upper``]: the
    betting interval (:func:`betting_mean_interval`) of the differences, which lie in
    [−(upper − lower), upper − lower]. Exactly antisymmetric: it is computed on the differences
    whose sum is not negative and mirrored, and where the sum is 0 it is the widest end of both
    orientations on either side, so swapping the arms negates it bit for bit."""
    difference = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if difference.size == 0:
        return math.nan, math.nan
    span = upper - lower
    total = float(np.sum(difference))
    if total > 0:
        return betting_mean_interval(difference, -span, span, confidence)
    if total < 0:
        low, high = betting_mean_interval(-difference, -span, span, confidence)
        return -high, -low
    low, high = betting_mean_interval(difference, -span, span, confidence)
    mirrored_low, mirrored_high = betting_mean_interval(-difference, -span, span, confidence)
    half = max(high, -low, mirrored_high, -mirrored_low)
    return -half, half


#: Tango's continuity correction (in discordant pairs): ½ keeps the exact coverage ≥ 0.95
#: where 0 dips to 0.930 and ¼ to 0.931 (see the module).
TANGO_CORRECTION = 0.5


def _tango_score(delta: np.ndarray, only_b: np.ndarray, only_a: np.ndarray, n: np.ndarray,
                 correction: float) -> np.ndarray:
    """Tango's (1998) score statistic of H0: π(b only) − π(a only) = ``delta``, the nuisance
    π(a only) at its restricted maximum likelihood (a root of a quadratic, closed form)."""
    quad_b = -only_b - only_a + (2 * n - only_b + only_a) * delta
    quad_c = -only_a * delta * (1 - delta)
    pi_a = (np.sqrt(np.maximum(quad_b * quad_b - 8 * n * quad_c, 0.0)) - quad_b) / (4 * n)
    variance = n * (2 * pi_a + delta * (1 - delta))
    excess = only_b - only_a - n * delta
    excess = np.sign(excess) * np.maximum(np.abs(excess) - correction, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = excess / np.sqrt(variance)
    # no variance left (delta at ±1 or every pair one way): the data are then either exactly
    # at delta (inside) or impossible under it (outside)
    return np.where(variance > 0, score, np.where(excess > 0, np.inf, np.where(excess < 0, -np.inf, 0.0)))


def tango_paired(only_b: np.ndarray | float, only_a: np.ndarray | float, n: np.ndarray | float,
                 confidence: float = 0.95, *, correction: float = TANGO_CORRECTION
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Tango's score interval of π(b only) − π(a only), the difference mean(b) − mean(a) of
    0/1 pairs, from the discordant counts (arrays broadcast): every δ whose corrected score
    statistic lies within ±z. NaN where ``n`` is 0.

    Exactly antisymmetric: the bounds are solved with the larger count first and mirrored, so
    swapping the arms negates the interval bit for bit (a tie is symmetric by construction).
    """
    from scipy.optimize import elementwise

    b = np.asarray(only_b, dtype=np.float64)
    a = np.asarray(only_a, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    b, a, n = np.broadcast_arrays(b, a, n)
    swapped = a > b
    high_count, low_count = np.where(swapped, a, b), np.where(swapped, b, a)
    size = np.where(n > 0, n, 1.0)
    z = z_of(confidence)
    estimate = (high_count - low_count) / size
    one = np.ones_like(estimate)

    def above(delta, hi, lo, m):  # > 0 while delta is below the upper bound
        return _tango_score(delta, hi, lo, m, correction) + z

    def below(delta, hi, lo, m):  # < 0 while delta is above the lower bound
        return _tango_score(delta, hi, lo, m, correction) - z

    args = (high_count, low_count, size)
    upper = np.where(above(one, *args) >= 0, 1.0, elementwise.find_root(above, (estimate, one), args=args).x)
    lower = np.where(below(-one, *args) <= 0, -1.0, elementwise.find_root(below, (-one, estimate), args=args).x)
    lower = np.where(high_count == low_count, -upper, lower)
    low, high = np.where(swapped, -upper, lower), np.where(swapped, -lower, upper)
    empty = ~(n > 0)
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def discordant_counts(a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
    """(pairs with b 1 and a 0, pairs with a 1 and b 0) of two 0/1 arms."""
    a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    return int(np.sum(b & ~a)), int(np.sum(a & ~b))


def paired_binary(a: np.ndarray, b: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """:func:`tango_paired` of mean(b) − mean(a) over the pairs of 0/1 outcomes ``a``, ``b``."""
    only_b, only_a = discordant_counts(a, b)
    low, high = tango_paired(only_b, only_a, len(np.asarray(a)), confidence)
    return float(low), float(high)


def resample_counts(rng: np.random.Generator, n: int, n_resamples: int) -> Iterable[np.ndarray]:
    """Blocks of (resamples × n) multiplicities of rows drawn with replacement."""
    block = max(1, _BOOTSTRAP_BLOCK_CELLS // max(n, 1))
    done = 0
    while done < n_resamples:
        size = min(block, n_resamples - done)
        draws = rng.integers(0, n, size=(size, n))
        offsets = (np.arange(size) * n)[:, None]
        counts = np.bincount((draws + offsets).ravel(), minlength=size * n).reshape(size, n)
        yield counts.astype(np.float64)
        done += size


def percentile_interval(estimates: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentiles of bootstrap estimates (rows: resamples); NaN columns stay NaN."""
    tail = (1.0 - confidence) / 2.0 * 100.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: metric not defined
        low, high = np.nanpercentile(estimates, [tail, 100.0 - tail], axis=0)
    return low, high
