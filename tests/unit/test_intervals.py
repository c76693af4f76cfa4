"""The betting interval of bounded means and of paired graded differences
(:func:`bloomqg.metrics.intervals.betting_mean_interval`, :func:`~bloomqg.metrics.intervals.betting_paired`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bloomqg.metrics.intervals import (
    BETTING_MEAN,
    bounded_mean_interval,
    betting_mean_interval,
    betting_paired,
    interval_method,
)


def test_ten_zeros_reach_what_ten_draws_cannot_rule_out():
    # a mass q at the top gives ten zeros with probability (1 − q)^10: the upper end must be at
    # least the q where that is α/2 = 0.025 (0.308 of the range), Clopper–Pearson's exactly
    low, high = betting_mean_interval(np.zeros(10), 0.0, 5.0)
    assert low == 0.0
    assert 5 * (1 - 0.025 ** (1 / 10)) <= high <= 5 * 0.32


def test_a_sample_of_one_level_off_is_far_narrower_than_the_rescaled_rate_interval():
    values = np.array([1.0] * 18 + [2.0] * 2)
    low, high = betting_mean_interval(values, 0.0, 5.0)
    rate_low, rate_high = bounded_mean_interval(values.mean(), 20, 0.0, 5.0)
    assert low <= values.mean() <= high
    assert high - low < 0.6 * (rate_high - rate_low)


def test_betting_interval_is_clipped_to_the_range_and_a_one_value_range_is_exact():
    low, high = betting_mean_interval(np.full(5, 5.0), 0.0, 5.0)
    assert high == 5.0 and 0.0 < low < 5.0
    assert betting_mean_interval(np.ones(4), 1.0, 1.0) == (1.0, 1.0)
    assert all(math.isnan(x) for x in betting_mean_interval(np.zeros(0), 0.0, 5.0))


def test_rows_give_what_each_sample_gives_alone():
    rng = np.random.default_rng(3)
    values = rng.integers(0, 4, size=(7, 15)).astype(float)
    low, high = betting_mean_interval(values, 0.0, 5.0)
    for row, a, b in zip(values, low, high):
        assert betting_mean_interval(row, 0.0, 5.0) == (a, b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_swapping_the_arms_negates_the_paired_interval_to_the_bit(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, 25).astype(float)
    b = np.where(rng.random(25) < 0.5, a, rng.integers(0, 6, 25).astype(float))
    low, high = betting_paired(a, b, 0.0, 5.0)
    swapped_low, swapped_high = betting_paired(b, a, 0.0, 5.0)
    assert (swapped_low, swapped_high) == (-high, -low)
    assert low <= float(np.mean(b - a)) <= high
    assert -5.0 <= low and high <= 5.0


def test_a_paired_sample_whose_differences_sum_to_zero_is_symmetric():
    a = np.array([0.0, 1.0, 2.0, 1.0, 0.0, 3.0])
    b = np.array([1.0, 0.0, 2.0, 2.0, 0.0, 2.0])
    low, high = betting_paired(a, b, 0.0, 5.0)
    assert low == -high and high > 0
    assert betting_paired(b, a, 0.0, 5.0) == (low, high)


def test_betting_covers_a_small_skewed_design():
    # |Δ| 0 with rare 5s and some 1s at n = 10: the design that breaks a t interval
    rng = np.random.default_rng(11)
    probabilities = [0.8, 0.15, 0.0, 0.0, 0.0, 0.05]
    truth = float(np.arange(6) @ np.array(probabilities))
    values = rng.choice(6, size=(400, 10), p=probabilities).astype(float)
    low, high = betting_mean_interval(values, 0.0, 5.0)
    assert np.mean((low <= truth) & (truth <= high)) >= 0.94


def test_betting_is_named_only_where_the_design_is_not_clustered():
    assert interval_method("clopper_pearson", graded=True, betting=True) == BETTING_MEAN
    assert interval_method("clopper_pearson", graded=True, betting=True, cluster="unit", clusters=12) == (
        "clopper_pearson_bounded_mean_clustered_unit")
    assert interval_method("percentile_bootstrap", graded=True, betting=True) == "percentile_bootstrap"


def _capital_by_hand(x: list[float], m: float, confidence: float) -> float:
    """The largest ½K⁺ + ½K⁻ over time, written out step by step (the module's formula)."""
    alpha = 1 - confidence
    n = len(x)
    total, squares, variance = 0.5, 0.0, 0.25  # the prior observation: mean ½, variance ¼
    up = down = 1.0
    best = 0.0
    for t, value in enumerate(x, start=1):
        bet = math.sqrt(2 * math.log(2 / alpha) / (n * variance))
        up *= 1 + min(bet, 0.99 / m if m > 0 else math.inf) * (value - m)
        down *= 1 - min(bet, 0.99 / (1 - m) if m < 1 else math.inf) * (value - m)
        best = max(best, (up + down) / 2)
        total += value
        mean = total / (t + 1)
        squares += (value - mean) ** 2
        variance = (0.25 + squares) / (t + 1)
    return best


def test_the_interval_ends_where_the_capital_written_out_by_hand_reaches_one_over_alpha():
    x = [0.2, 0.4, 0.2, 0.0, 0.6, 0.2, 0.2, 0.4]
    low, high = betting_mean_interval(np.array(x), 0.0, 1.0)
    for inside in (low + 1e-4, float(np.mean(x)), high - 1e-4):
        assert _capital_by_hand(x, inside, 0.95) < 20
    for outside in (low - 1e-4, high + 1e-4):
        assert _capital_by_hand(x, outside, 0.95) >= 20 or not 0 <= outside <= 1


def test_levels_take_betting_and_fractions_the_rescaled_rate_interval_in_specs_and_notes():
    from bloomqg.metrics.registry import metric_spec
    from bloomqg.reporting.tables.model import interval_words

    assert metric_spec("cogshift").betting_interval and metric_spec("cogleap_mean").betting_interval
    assert not metric_spec("knowcov").betting_interval
    words = interval_words(["clopper_pearson", BETTING_MEAN, "betting_paired"])
    assert "built from fair bets" in words and "(a betting interval)" in words
    assert "exact betting interval, of the paired differences" in words
    assert "rescaled" not in words
