"""Simulated cells with a known truth, judged by a panel of a given quality: what the coverage
benchmark (``benchmarks/calibration.py``) and the sampling plan's check run on.

Per replication a cell of ``big_n`` generated questions: each has an original level (uniform
over the six), a true level of the new question (the original shifted by a drawn Δ, kept inside
1..6), true unique / readable / answerable verdicts (independent, at the given base rates), and
the panel's verdicts: the true level with probability ``level_agreement``, otherwise a wrong
level, one step away with probability ``adjacent_share`` of the errors (the judges' confusions
are mostly to adjacent levels), two or more steps otherwise; each yes/no verdict flipped with
probability 1 − its agreement. The panel's errors are symmetric flips, so its yes-rates are
biased towards 50% and its level shares towards the middle: judges-only intervals miss.

Outcomes are computed with the same definitions as :data:`bloomqg.annotation.calibration.OUTCOMES`
(the tests check one against the other), vectorised over replications × items.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from bloomqg.inputs.bloom import BLOOM_LEVELS, BLOOM_ORDERS

#: Table 9 of the paper (average over models and prompting): judge–expert agreement.
PAPER_AGREEMENT: dict[str, float] = {
    "bloom_level": 0.4658, "unique": 0.9075, "readable": 0.9808, "answerable": 0.9583,
}
#: True yes-rates of the simulated questions (the paper's judged rates are in the 90s, Table 4/7).
TRUE_RATES: dict[str, float] = {"unique": 0.93, "readable": 0.97, "answerable": 0.95}
#: Δ = true level − original level and its probability (most questions keep or raise the level).
LEVEL_SHIFT: dict[int, float] = {-3: 0.03, -2: 0.07, -1: 0.15, 0: 0.40, 1: 0.20, 2: 0.10, 3: 0.05}

#: The metrics the simulation yields (a subset of calibration.OUTCOMES with the same names).
SIMULATED_METRICS: tuple[str, ...] = (
    "unique", "readable", "answerable", "usable", "catcons_level", "cogreg", "cogdrift", "cogleap",
    *(f"share_{level.lower()}" for level in BLOOM_LEVELS),
    "catcons_order", "cogreg_order", "cogleap_order",
    *(f"share_{order.split()[0].lower()}_order" for order in BLOOM_ORDERS),
)


@dataclass(frozen=True)
class PanelQuality:
    """How the simulated panel agrees with the truth."""

    agreement: Mapping[str, float] = field(default_factory=lambda: dict(PAPER_AGREEMENT))
    adjacent_share: float = 0.8
    true_rates: Mapping[str, float] = field(default_factory=lambda: dict(TRUE_RATES))


def _judged_levels(rng: np.random.Generator, truth: np.ndarray, quality: PanelQuality) -> np.ndarray:
    """Level indices 0..5: the truth with probability level_agreement, else an adjacent level
    (adjacent_share of the errors) or one at least two steps away, uniformly among those."""
    shape = truth.shape
    correct = rng.random(shape) < quality.agreement["bloom_level"]
    adjacent = rng.random(shape) < quality.adjacent_share
    levels = np.arange(6)
    distance = np.abs(levels[None, :] - truth.reshape(-1, 1))  # items × 6
    wanted = np.where(adjacent.reshape(-1, 1), distance == 1, distance >= 2)
    # a random level among the wanted ones: the argmax of random keys on them
    keys = np.where(wanted, rng.random(wanted.shape), -1.0)
    wrong = keys.argmax(axis=1).reshape(shape)
    return np.where(correct, truth, wrong)


def _flip(rng: np.random.Generator, truth: np.ndarray, agreement: float) -> np.ndarray:
    return np.where(rng.random(truth.shape) < agreement, truth, ~truth)


def item_outcomes(original: np.ndarray, level: np.ndarray, unique: np.ndarray, readable: np.ndarray,
                  answerable: np.ndarray) -> dict[str, np.ndarray]:
    """Per item the 0/1 outcome of every :data:`SIMULATED_METRICS` metric (level indices 0..5)."""
    delta = level - original
    order_delta = level // 2 - original // 2  # Lower (0, 1), Middle (2, 3), Higher (4, 5)
    out = {
        "unique": unique, "readable": readable, "answerable": answerable, "usable": unique & readable & answerable,
        "catcons_level": delta == 0, "cogreg": delta <= -2, "cogdrift": np.abs(delta) == 1, "cogleap": delta >= 2,
        "catcons_order": order_delta == 0, "cogreg_order": order_delta <= -1, "cogleap_order": order_delta >= 1,
    }
    for index, name in enumerate(BLOOM_LEVELS):
        out[f"share_{name.lower()}"] = level == index
    for index, name in enumerate(BLOOM_ORDERS):
        out[f"share_{name.split()[0].lower()}_order"] = level // 2 == index
    return {name: out[name].astype(np.float64) for name in SIMULATED_METRICS}


def simulate(rng: np.random.Generator, replications: int, big_n: int,
             quality: PanelQuality | None = None) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(truth, panel): per metric a ``replications × big_n`` array of 0/1 outcomes."""
    quality = quality or PanelQuality()
    shape = (replications, big_n)
    original = rng.integers(0, 6, shape)
    shifts = np.array(list(LEVEL_SHIFT))
    shift = rng.choice(shifts, size=shape, p=np.array(list(LEVEL_SHIFT.values())))
    true_level = np.clip(original + shift, 0, 5)
    judged_level = _judged_levels(rng, true_level, quality)
    flags = {c: rng.random(shape) < quality.true_rates[c] for c in ("unique", "readable", "answerable")}
    judged = {c: _flip(rng, flags[c], quality.agreement[c]) for c in flags}
    truth = item_outcomes(original, true_level, flags["unique"], flags["readable"], flags["answerable"])
    panel = item_outcomes(original, judged_level, judged["unique"], judged["readable"], judged["answerable"])
    return truth, panel
