"""Do the intervals keep their promise? Coverage and width of every interval the report prints,
at the n it prints them at, for the methods the report uses beside the ones it replaced.

For each kind of number, true values are known and cells are drawn from them
(n ∈ {5, 10, 20, 30, 50, 100, 400}, true rates ∈ {0.005, 0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98, 0.995}:
the extreme margins included). Every printed figure is the **minimum over designs**; the final
JSON line's ``"designs": {KIND: [names]}`` says what each minimum ran over.

- ``rate`` (unique, readable, answerable, usability, CatCons, the shift shares, the accuracies):
  coverage computed exactly, summing over every count k ~ Binomial(n, p); Clopper–Pearson (the
  report's), Wilson, Jeffreys and the percentile bootstrap (its limit as resamples grow);
- graded outcomes, simulated: ``knowcov`` (a third of the originals carry two units),
  ``knowcov_skewed`` (fractions from a beta with its mass at the ends), ``knowcov_thirds``
  (originals of three units: fractions 0, ⅓, ⅔, 1), ``cogshift`` (|Δ| in 0..5 concentrated near
  0, the release's magnitudes), ``cogshift_shifted`` (every question 1–3 levels off),
  ``cogshift_skewed`` (a geometric tail of |Δ|), ``cogshift_bimodal`` (|Δ| 0 or 4–5 only),
  ``cogshift_outliers`` (every question 1 level off, a few 5) and ``cogleap_mean`` (|Δ| of
  leaps, 2..5): the rescaled Clopper–Pearson interval, the betting interval (n ≤ 100) and
  Student's t; the width ratio is each method's mean width over the rescaled Clopper–Pearson's;
- ``rate_6_units``, ``rate_12_units``, ``rate_30_units``: questions on 6, 12 or 30 knowledge
  units of unequal size (1 : 5) whose rates differ with intraclass correlation 0.05, 0.1 or 0.3
  (n ≥ 2 per unit): ``cluster: unit`` beside the unclustered interval;
- ``paired_binary`` (correlated arms, a true difference of 0 and of 0.4 × 0.375): Tango's score
  interval beside the percentile bootstrap, and ``paired_binary_exact``: its exact coverage over
  one-sided, balanced, 3:1 and no-discordance designs; ``paired_knowcov`` and
  ``paired_cogshift`` (correlated arms with b shifted or not, and one-sided: b never below a):
  MOVER beside the betting interval of the differences (n ≤ 100);
- the study plan: the n it asks for, simulated with the exact McNemar test (and a graded plan
  with the Wilcoxon test); the power reached must be the stated one ± 0.05.

Simulated kinds use ``--replications`` per design; the bootstrap 250 resamples, at n ≤ 50.
Prints a table per kind, writes a figure, and ends with one JSON line (coverage and width of the
report's methods per kind and n, the goals, the designs).

    python benchmarks/intervals.py [--replications 2000] [--figure results/benchmarks/intervals.png]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bloomqg.metrics.intervals import (  # noqa: E402
    IntervalSpec,
    bounded_mean_interval,
    effective_size,
    betting_mean_interval,
    betting_paired,
    mover_paired,
    paired_binary,
    tango_paired,
    rate_interval,
    wilson,
)
from bloomqg.metrics.plan import mcnemar_power, pairs_needed  # noqa: E402

SIZES = (5, 10, 20, 30, 50, 100, 400)
#: The betting interval is measured up to this n (its cost grows with n; the claim is n = 10–100).
BETTING_MAX_N = 100
RATES = (0.005, 0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.98, 0.995)
CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 250
BOOTSTRAP_MAX_N = 50
#: The report's rate method (the config default).
RATE = IntervalSpec().method
#: |Δ| of a shifted question, 1..5: the release's GLM-4-9B CS shifts, rounded.
SHIFT_MAGNITUDES = np.array([0.45, 0.30, 0.15, 0.07, 0.03])
#: A graded outcome's interval as the report makes it: the rate's on its rescaled mean at n.
GRADED = f"{RATE}_bounded_mean"
BETTING = "betting_bounded_mean"
BETTING_PAIRED = "betting_paired"
MOVER = "mover_paired_score"
#: What the report prints for each kind (the goal is judged on these).
REPORT_METHOD = {
    "rate": RATE, "knowcov": GRADED, "knowcov_skewed": GRADED, "knowcov_thirds": GRADED,
    "cogshift": BETTING, "cogshift_shifted": BETTING, "cogshift_skewed": BETTING, "cogshift_bimodal": BETTING,
    "cogshift_outliers": BETTING, "cogleap_mean": BETTING, "paired_binary": "tango_paired_score",
    "paired_knowcov": MOVER, "paired_cogshift": BETTING_PAIRED,
}
#: Each graded kind's interval before the betting one (the width ratio's denominator).
FORMER_METHOD = {kind: GRADED for kind in REPORT_METHOD if kind.startswith(("knowcov", "cog"))}
FORMER_METHOD.update(paired_knowcov=MOVER, paired_cogshift=MOVER)
#: Measured too, but not printed by default (config intervals.cluster: unit).
OPTIONAL_METHOD = {f"rate_{units}_units": f"{RATE}_clustered_unit" for units in (6, 12, 30)}


def rates_exact() -> dict:
    """Exact coverage and mean width of each rate method at every (n, p)."""
    out: dict = {}
    for method in ("wilson", "clopper_pearson", "jeffreys", "percentile_bootstrap"):
        for n in SIZES:
            k = np.arange(n + 1)
            if method == "percentile_bootstrap":
                low = stats.binom.ppf(0.025, n, k / n) / n
                high = stats.binom.ppf(0.975, n, k / n) / n
            else:
                low, high = rate_interval(k, n, method, CONFIDENCE)
            for p in RATES:
                weight = stats.binom.pmf(k, n, p)
                covered = (low <= p + 1e-12) & (p - 1e-12 <= high)
                out[(method, n, p)] = (float(np.sum(weight * covered)), float(np.sum(weight * (high - low))))
    return out


def _draw_knowcov(rng: np.random.Generator, p: float, shape: tuple[int, int]) -> np.ndarray:
    two = rng.random(shape) < 1 / 3
    return np.where(two, rng.binomial(2, p, shape) / 2.0, rng.binomial(1, p, shape).astype(float))


def _draw_cogshift(rng: np.random.Generator, p: float, shape: tuple[int, int]) -> np.ndarray:
    shifted = rng.random(shape) < p
    return np.where(shifted, rng.choice(np.arange(1, 6), size=shape, p=SHIFT_MAGNITUDES), 0.0)


def _draw_leap(rng: np.random.Generator, p: float, shape: tuple[int, int]) -> np.ndarray:
    return 2.0 + rng.binomial(3, 1 - p, shape)  # p near 1: leaps of 2 levels


def _draw_bimodal(rng: np.random.Generator, p: float, shape: tuple[int, int]) -> np.ndarray:
    """CogShift levels 0 or 4–5 only: most questions keep their level, the rest leap far."""
    shifted = rng.random(shape) < p
    return np.where(shifted, 4.0 + (rng.random(shape) < 0.5), 0.0)


def _draw_skewed(rng: np.random.Generator, p: float, shape: tuple[int, int]) -> np.ndarray:
    """KnowCov fractions from a beta whose mean is p and whose mass sits at one end (a = b / 4
    around p = 0.2): most questions keep almost nothing or almost everything."""
    return rng.beta(0.3 * p / (1 - p) if p < 1 else 1.0, 0.3, shape) if 0 < p < 1 else np.full(shape, p)


def _draw_thirds(rng: np.random.Generator, p: float, shape: tuple[int, int]) -> np.ndarray:
    """KnowCov of originals with three units: 0, ⅓, ⅔ or 1, each unit kept with probability p."""
    return rng.binomial(3, p, shape) / 3.0


def _draw_shifted(rng: np.random.Generator, p: float, shape: tuple[int, int]) -> np.ndarray:
    """|Δ| of 1, 2 or 3 levels: every question off target, by 1 + Binomial(2, p)."""
    return 1.0 + rng.binomial(2, p, shape)


def _draw_geometric(rng: np.random.Generator, p: float, shape: tuple[int, int]) -> np.ndarray:
    """|Δ| with a geometric tail: P(|Δ| ≥ k) = p^k, cut at 5 (p small: nearly all 0)."""
    return np.minimum(rng.geometric(1.0 - p, shape) - 1.0, 5.0) if p < 1 else np.full(shape, 5.0)


def _draw_outliers(rng: np.random.Generator, p: float, shape: tuple[int, int]) -> np.ndarray:
    """|Δ| of 1 level, but 5 levels with probability p / 4: one value with rare outliers."""
    return np.where(rng.random(shape) < p / 4, 5.0, 1.0)


def _geometric_mean(p: float) -> float:
    return float(sum(p**k for k in range(1, 6)))


MEANS = {  # kind: (draw, true mean of the rate p, range)
    "knowcov": (_draw_knowcov, lambda p: p, (0.0, 1.0)),
    "knowcov_skewed": (_draw_skewed, lambda p: p, (0.0, 1.0)),
    "knowcov_thirds": (_draw_thirds, lambda p: p, (0.0, 1.0)),
    "cogshift": (_draw_cogshift, lambda p: p * float(np.arange(1, 6) @ SHIFT_MAGNITUDES), (0.0, 5.0)),
    "cogshift_shifted": (_draw_shifted, lambda p: 1.0 + 2 * p, (0.0, 5.0)),
    "cogshift_skewed": (_draw_geometric, _geometric_mean, (0.0, 5.0)),
    "cogshift_bimodal": (_draw_bimodal, lambda p: 4.5 * p, (0.0, 5.0)),
    "cogshift_outliers": (_draw_outliers, lambda p: 1.0 + p, (0.0, 5.0)),
    "cogleap_mean": (_draw_leap, lambda p: 2.0 + 3 * (1 - p), (2.0, 5.0)),
}


def _bootstrap(rng: np.random.Generator, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap of the mean of each row of ``values`` (R × n)."""
    r, n = values.shape
    picks = rng.integers(0, n, size=(r, BOOTSTRAP_RESAMPLES, n))
    means = np.take_along_axis(values[:, None, :], picks, axis=2).mean(axis=2)
    return np.percentile(means, 2.5, axis=1), np.percentile(means, 97.5, axis=1)


def means_simulated(rng: np.random.Generator, replications: int) -> dict:
    out: dict = {}
    for kind, (draw, truth_of, (lower, upper)) in MEANS.items():
        for n in SIZES:
            for p in RATES:
                values = draw(rng, p, (replications, n))
                truth = truth_of(p)
                means = values.mean(axis=1)
                exact = np.array([bounded_mean_interval(m, n, lower, upper, RATE, CONFIDENCE) for m in means])
                sd = values.std(axis=1, ddof=1) if n > 1 else np.zeros(replications)
                half = stats.t.ppf(0.975, max(n - 1, 1)) * sd / np.sqrt(n)
                candidates = {GRADED: (exact[:, 0], exact[:, 1]), "student_t": (means - half, means + half)}
                if n <= BETTING_MAX_N:
                    candidates[BETTING] = betting_mean_interval(values, lower, upper, CONFIDENCE)
                for method, (low, high) in candidates.items():
                    covered = (low <= truth + 1e-9) & (truth - 1e-9 <= high)
                    out[(kind, method, n, p)] = (float(covered.mean()), float(np.mean(high - low)))
    return out


#: Clustered designs: (units, intraclass correlation); unit sizes grow 1 : 5 across the units.
CLUSTER_DESIGNS = tuple((units, icc) for units in (6, 12, 30) for icc in (0.05, 0.1, 0.3))


def _unit_labels(n: int, units: int) -> np.ndarray:
    """Each of ``n`` questions' unit, the units' sizes growing 1 : 5 (at least one question each)."""
    weights = np.linspace(1.0, 5.0, units)
    sizes = np.maximum(1, np.floor(n * weights / weights.sum())).astype(int)
    sizes[-1] += n - sizes.sum()
    return np.repeat(np.arange(units), sizes)


def clustered_simulated(rng: np.random.Generator, replications: int) -> dict:
    """Questions spread over the units of each :data:`CLUSTER_DESIGNS` entry (n ≥ 2 per unit on
    average) whose own rates are beta-distributed around p with the design's intraclass
    correlation; the truth is p (the population the units are drawn from). Keys carry the
    units, so the table can print 6, 12 and 30 apart."""
    out: dict = {}
    for units, icc in CLUSTER_DESIGNS:
        for n in (n for n in SIZES[1:] if n >= 2 * units):
            clusters = _unit_labels(n, units)
            member = np.ones(n)
            for p in RATES:
                a, b = p * (1 - icc) / icc, (1 - p) * (1 - icc) / icc
                unit_rates = rng.beta(a, b, size=(replications, units))
                values = (rng.random((replications, n)) < unit_rates[:, clusters]).astype(float)
                plain, clustered = [], []
                for row in values:
                    mean = row.mean()
                    plain.append(bounded_mean_interval(mean, n, 0.0, 1.0, RATE, CONFIDENCE))
                    n_eff, df = effective_size(row, member, clusters, 0.0, 1.0, CONFIDENCE)
                    clustered.append(bounded_mean_interval(mean, n_eff, 0.0, 1.0, RATE, CONFIDENCE, df))
                for method, bounds in ((f"{RATE}_clustered_unit", clustered), (RATE, plain)):
                    low, high = np.array(bounds).T
                    out[(units, method, n, icc, p)] = (float(np.mean((low <= p) & (p <= high))),
                                                       float(np.mean(high - low)))
    return out


def _paired_binary_draw(rng: np.random.Generator, p: float, shift: float, shape: tuple[int, int]):
    """Arm a ~ Bernoulli(p); arm b copies a with probability 0.6, else Bernoulli(p + shift)."""
    q = min(max(p + shift, 0.0), 1.0)
    a = rng.random(shape) < p
    b = np.where(rng.random(shape) < 0.6, a, rng.random(shape) < q)
    return a, b, 0.4 * (q - p)


#: Paired designs: b's shift in rate (0: none, 0.375: b better), and −1 for one-sided (graded
#: only: b never below a).
PAIRED_SHIFTS = (0.0, 0.375, -1.0)


def paired_simulated(rng: np.random.Generator, replications: int) -> dict:
    out: dict = {}
    for n in SIZES:
        for p in RATES:
            for shift in PAIRED_SHIFTS:
                if shift >= 0:
                    a, b, truth = _paired_binary_draw(rng, p, shift, (replications, n))
                    score = np.array([paired_binary(x, y, CONFIDENCE) for x, y in zip(a, b)])
                    candidates = {"tango_paired_score": (score[:, 0], score[:, 1])}
                    if n <= BOOTSTRAP_MAX_N:
                        candidates["percentile_bootstrap"] = _bootstrap(rng, b.astype(float) - a.astype(float))
                    for method, (low, high) in candidates.items():
                        key = ("paired_binary", method, n, p, shift)
                        out[key] = (float(np.mean((low <= truth + 1e-9) & (truth - 1e-9 <= high))),
                                    float(np.mean(high - low)))
                for kind, draw, bound, mean_of in (("paired_knowcov", _draw_knowcov, 1.0, MEANS["knowcov"][1]),
                                                   ("paired_cogshift", _draw_cogshift, 5.0, MEANS["cogshift"][1])):
                    shape = (replications, n)
                    q = min(p + shift, 1.0)
                    a = draw(rng, p, shape)
                    if shift < 0:
                        # one-sided: b never below a (it keeps a, or the larger of a and its own draw)
                        own = draw(rng, p, shape)
                        b = np.where(rng.random(shape) < 0.6, a, np.maximum(a, own))
                        truth = 0.4 * float(np.mean(np.maximum(draw(rng, p, (200_000,)),
                                                               draw(rng, p, (200_000,)))) - mean_of(p))
                    else:
                        # correlated arms: b keeps a's value with probability 0.6, else draws its
                        # own at the shifted rate
                        b = np.where(rng.random(shape) < 0.6, a, draw(rng, q, shape))
                        truth = 0.4 * (mean_of(q) - mean_of(p))
                    score = np.array([mover_paired(x, y, 0.0, bound, CONFIDENCE) for x, y in zip(a, b)])
                    candidates = {MOVER: (score[:, 0], score[:, 1])}
                    if n <= BETTING_MAX_N:
                        bet = np.array([betting_paired(x, y, 0.0, bound, CONFIDENCE) for x, y in zip(a, b)])
                        candidates[BETTING_PAIRED] = (bet[:, 0], bet[:, 1])
                    for method, (low, high) in candidates.items():
                        # the one-sided truth is itself simulated: a tolerance of its error
                        slack = 2e-3 * bound if shift < 0 else 1e-9
                        out[(kind, method, n, p, shift)] = (
                            float(np.mean((low <= truth + slack) & (truth - slack <= high))), float(np.mean(high - low)))
    return out


#: Designs of the exact paired check: (name, discordance ψ, difference δ). One-sided: every
#: discordant pair favours b (δ = ψ); balanced: δ = 0; half: three in four favour b; none: ψ = 0.
PAIRED_EXACT_DESIGNS = tuple(
    [(f"one-sided psi={psi}", psi, psi) for psi in (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8)]
    + [(f"balanced psi={psi}", psi, 0.0) for psi in (0.02, 0.1, 0.3, 0.5, 0.8)]
    + [(f"3:1 psi={psi}", psi, psi / 2) for psi in (0.02, 0.1, 0.3, 0.5, 0.8)]
    + [("no discordance", 0.0, 0.0)]
)


def paired_exact(sizes: tuple[int, ...] = (5, 10, 12, 15, 20, 22, 30, 50, 100, 200, 400)) -> dict:
    """Exact coverage of the report's paired yes/no interval (Tango's; it depends on the discordant
    counts only) summed over every trinomial (b only, a only, agree) at each n, per design of
    :data:`PAIRED_EXACT_DESIGNS`: {n: (lowest coverage, its design, mean width over designs)}."""
    out = {}
    for n in sizes:
        only_b, only_a = (g.ravel() for g in np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij"))
        keep = only_b + only_a <= n
        only_b, only_a = only_b[keep], only_a[keep]
        low, high = tango_paired(only_b, only_a, n, CONFIDENCE)
        worst, widths = (2.0, ""), []
        for name, psi, delta in PAIRED_EXACT_DESIGNS:
            weight = stats.multinomial.pmf(np.stack([only_b, only_a, n - only_b - only_a], 1), n,
                                           [(psi + delta) / 2, (psi - delta) / 2, 1 - psi])
            coverage = float(np.sum(weight * ((low <= delta + 1e-12) & (delta - 1e-12 <= high))))
            widths.append(float(np.sum(weight * (high - low))))
            worst = min(worst, (coverage, name))
        out[str(n)] = {"coverage": round(worst[0], 4), "design": worst[1], "width": round(float(np.mean(widths)), 4)}
    return out


def plan_checked(rng: np.random.Generator, replications: int) -> list[dict]:
    """The plan's n for a few (discordance, difference), and the power reached by simulation."""
    checks = []
    for psi, difference, alpha in ((0.3, 0.1, 0.05), (0.2, 0.1, 0.05 / 3), (0.5, 0.15, 0.05), (0.15, 0.08, 0.05)):
        n = pairs_needed("mcnemar", psi, difference, 0.8, alpha)
        cells = rng.choice(3, size=(replications, n), p=[(psi + difference) / 2, (psi - difference) / 2, 1 - psi])
        only_b, only_a = (cells == 0).sum(1), (cells == 1).sum(1)
        rejected = [stats.binomtest(int(x), int(x + y), 0.5).pvalue < alpha if x + y else False
                    for x, y in zip(only_b, only_a)]
        checks.append({"test": "mcnemar", "discordance": psi, "difference": difference, "alpha": round(alpha, 4),
                       "n": int(n), "stated_power": 0.8, "planned_power": round(mcnemar_power(n, psi, difference, alpha), 4),
                       "simulated_power": round(float(np.mean(rejected)), 4)})
    for sd, difference in ((0.5, 0.1), (0.35, 0.1)):
        n = pairs_needed("paired_t", sd, difference, 0.8, 0.05)
        # KnowCov differences in {-1, -0.5, 0, 0.5, 1} with that mean and about that spread
        values = rng.choice([-1.0, 0.0, 1.0], size=(replications, n),
                            p=[(sd**2 + difference**2 - difference) / 2, 1 - sd**2 - difference**2,
                               (sd**2 + difference**2 + difference) / 2])
        rejected = [stats.wilcoxon(row[row != 0]).pvalue < 0.05 if np.any(row != 0) else False for row in values]
        checks.append({"test": "wilcoxon (planned as paired t)", "sd": sd, "difference": difference, "alpha": 0.05,
                       "n": int(n), "stated_power": 0.8, "simulated_power": round(float(np.mean(rejected)), 4)})
    return checks


def summarise(exact: dict, means: dict, clustered: dict, paired: dict) -> dict:
    coverage: dict = {}
    width: dict = {}
    compared: dict = {}

    def put(kind: str, method: str, n: int, values: list[tuple[float, float]]) -> None:
        coverage.setdefault(kind, {}).setdefault(method, {})[str(n)] = round(min(v[0] for v in values), 4)
        width.setdefault(kind, {}).setdefault(method, {})[str(n)] = round(float(np.mean([v[1] for v in values])), 4)

    for method in ("wilson", "clopper_pearson", "jeffreys", "percentile_bootstrap"):
        for n in SIZES:
            put("rate", method, n, [exact[(method, n, p)] for p in RATES])
    for kind in MEANS:
        for method in (GRADED, BETTING, "student_t"):
            for n in SIZES:
                found = [means[(kind, method, n, p)] for p in RATES if (kind, method, n, p) in means]
                if found:
                    put(kind, method, n, found)
    for units in sorted({key[0] for key in clustered}):
        for method in (f"{RATE}_clustered_unit", RATE):
            for n in SIZES:
                found = [v for k, v in clustered.items() if k[0] == units and k[1] == method and k[2] == n]
                if found:
                    put(f"rate_{units}_units", method, n, found)
    for kind in ("paired_binary", "paired_knowcov", "paired_cogshift"):
        for method in ("tango_paired_score", MOVER, BETTING_PAIRED, "percentile_bootstrap"):
            for n in SIZES:
                found = [v for k, v in paired.items() if k[0] == kind and k[1] == method and k[2] == n]
                if found:
                    put(kind, method, n, found)
    ratio = {}
    for n in SIZES:
        ratio[str(n)] = round(max(exact[(RATE, n, p)][1] / exact[("clopper_pearson", n, p)][1] for p in RATES), 4)
    compared["coverage_all"] = coverage
    compared["width_all"] = width
    chosen = {**REPORT_METHOD, **OPTIONAL_METHOD}
    report_coverage = {kind: coverage[kind][chosen[kind]] for kind in chosen}
    report_width = {kind: width[kind][chosen[kind]] for kind in chosen}
    return {"coverage": report_coverage, "width": report_width, "method": chosen,
            "width_vs_clopper_pearson": ratio, **compared}


def designs() -> dict[str, list[str]]:
    """What each printed minimum ran over: {METRIC: [design names]}."""
    rates = [f"p={p}" for p in RATES]
    out = {"rate": rates, **{kind: rates for kind in MEANS}}
    for units in sorted({u for u, _ in CLUSTER_DESIGNS}):
        out[f"rate_{units}_units"] = [f"{units} units (sizes 1:5) ICC={icc} p={p}" for u, icc in CLUSTER_DESIGNS
                                      if u == units for p in RATES]
    out["paired_binary"] = [f"p_a={p} shift={shift} (b keeps a with prob. 0.6)" for p in RATES for shift in (0.0, 0.375)]
    for kind in ("paired_knowcov", "paired_cogshift"):
        out[kind] = [f"p_a={p} " + ("one-sided (b keeps a with prob. 0.6, else the larger of a and its own draw)"
                                    if shift < 0 else f"shift={shift} (b keeps a with prob. 0.6)")
                     for p in RATES for shift in PAIRED_SHIFTS]
    out["paired_binary_exact"] = [name for name, _, _ in PAIRED_EXACT_DESIGNS]
    return out


GRADED_SIZES = ("10", "20", "30", "50", "100")


def graded_ratio(summary: dict) -> dict:
    """Per graded kind and n = 10 … 100: the betting interval's mean width over the former
    method's (:data:`FORMER_METHOD`), and the printed one's (1 where it is the former)."""
    width = summary["width_all"]
    out = {}
    for kind, former in FORMER_METHOD.items():
        betting = BETTING_PAIRED if kind.startswith("paired") else BETTING
        out[kind] = {f"{which}_n{n}": round(width[kind][method][n] / width[kind][former][n], 3)
                     for n in GRADED_SIZES for which, method in (("betting", betting), ("printed", REPORT_METHOD[kind]))}
    return out


def print_graded(summary: dict) -> None:
    """The graded kinds' lowest coverage of the printed interval and its width over the former one, per n."""
    ratios = summary["goals"]["graded_width_vs_former"]
    print("\ngraded outcomes: printed method, lowest coverage / width over the former method's, per n")
    print("  kind".ljust(22) + "method".ljust(24) + "".join(f"n={n}".rjust(15) for n in GRADED_SIZES))
    for kind in FORMER_METHOD:
        cells = [f"{summary['coverage'][kind][n]:.3f} / {ratios[kind][f'printed_n{n}']:.2f}" for n in GRADED_SIZES]
        print(f"  {kind:20}{REPORT_METHOD[kind]:24}" + "".join(c.rjust(15) for c in cells))


def print_tables(summary: dict) -> None:
    for kind, methods in summary["coverage_all"].items():
        print(f"\n{kind}: lowest coverage over the true rates (mean width)")
        print("  method".ljust(28) + "".join(f"n={n}".rjust(15) for n in SIZES))
        for method, by_n in methods.items():
            cells = [f"{by_n[str(n)]:.3f} ({summary['width_all'][kind][method][str(n)]:.3f})" if str(n) in by_n else "–"
                     for n in SIZES]
            mark = " *" if REPORT_METHOD.get(kind) == method else ""
            print(f"  {method + mark:26}" + "".join(c.rjust(15) for c in cells))
    print("\n* the report's method. Widths in the outcome's units (rates 0..1, CogShift levels).")


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(summary["coverage_all"])
    fig, axes = plt.subplots(2, (len(kinds) + 1) // 2, figsize=(4 * ((len(kinds) + 1) // 2), 7), sharey=True)
    for ax, kind in zip(axes.ravel(), kinds):
        for method, by_n in summary["coverage_all"][kind].items():
            ns = [int(n) for n in by_n]
            style = "-o" if REPORT_METHOD.get(kind) == method else "--x"
            ax.plot(ns, list(by_n.values()), style, label=method, markersize=4)
        ax.axhline(0.95, color="grey", lw=0.8)
        ax.axhline(0.94, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_title(kind, fontsize=9)
        ax.set_ylim(0.3, 1.01)
        ax.legend(fontsize=6)
    for ax in axes.ravel()[len(kinds):]:
        ax.axis("off")
    fig.supxlabel("n (questions, or pairs)")
    fig.supylabel("lowest coverage over true rates 0.02 … 0.98")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replications", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--figure", type=Path, default=Path("results/benchmarks/intervals.png"))
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    summary = summarise(rates_exact(), means_simulated(rng, args.replications),
                        clustered_simulated(rng, args.replications), paired_simulated(rng, args.replications))
    summary["plan"] = plan_checked(rng, args.replications)
    summary["paired_binary_exact"] = paired_exact()
    summary["designs"] = designs()
    print("\npaired yes/no, Tango's interval, exact: lowest coverage over the designs (its design; mean width)")
    for n, entry in summary["paired_binary_exact"].items():
        print(f"  n={n:>4}: {entry['coverage']:.4f} ({entry['design']}; {entry['width']:.3f})")
    print_tables(summary)
    print("\nplan: n asked for, and the power reached")
    for check in summary["plan"]:
        print("  ", check)
    plot(summary, args.figure)
    at_least_10 = [c for kind, by_n in summary["coverage"].items() if kind in REPORT_METHOD
                   for n, c in by_n.items() if int(n) >= 10]
    summary["goals"] = {
        "coverage_at_least_0.94_from_n_10": min(at_least_10) >= 0.94,
        "lowest_coverage_from_n_10": min(at_least_10),
        "rate_width_at_most_1.2x_clopper_pearson": max(summary["width_vs_clopper_pearson"].values()) <= 1.2,
        "clustered_unit_lowest_from_n_10": {kind: min(summary["coverage"][kind].values())
                                             for kind in OPTIONAL_METHOD},
        "graded_width_vs_former": graded_ratio(summary),
        "plan_power_within_0.05": all(abs(c["simulated_power"] - c["stated_power"]) <= 0.05 for c in summary["plan"]),
    }
    print_graded(summary)
    summary["seconds"] = round(time.perf_counter() - started, 1)
    summary["replications"] = args.replications
    summary["figure"] = str(args.figure)
    del summary["coverage_all"], summary["width_all"]
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
