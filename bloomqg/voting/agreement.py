"""Agreement that survives prevalence: percent agreement, prevalence and Gwet's AC1 of a panel,
beside Krippendorff's α (:mod:`bloomqg.voting.alpha`), each with a percentile bootstrap over items.

When nearly every vote is "yes", α and κ collapse although the judges agree on almost every item
(the prevalence paradox: expected agreement is then nearly 1, so the little disagreement left is
all the coefficient sees). Gwet's AC1 takes chance agreement as Σπ_k(1−π_k)/(q−1), which is small
when one category dominates, so it stays close to the percent agreement there. Reporting α, AC1,
percent agreement and the prevalence side by side lets a reader tell a weak instrument from a
skewed one.

Definitions (Gwet 2014, *Handbook of Inter-Rater Reliability*, ch. 2 and 5, as in irrCAC's
``pa.coeff.raw`` and ``gwet.ac1.raw``; raters may miss items):

- ``r_ik``: votes of item i for category k, ``r_i`` = Σ_k r_ik.
- percent agreement ``pa`` = mean over items with r_i ≥ 2 of Σ_k r_ik(r_ik−1) / (r_i(r_i−1))
  (the share of agreeing ordered pairs of votes).
- ``π_k`` = mean over items with r_i ≥ 1 of r_ik / r_i; chance agreement
  ``pe`` = Σ_k π_k(1−π_k) / (q−1) over the q categories of the domain (for yes/no criteria the
  domain is always {no, yes}, so a panel that only ever says yes has AC1 = pa = 1, not 0/0).
- ``AC1`` = (pa − pe) / (1 − pe).
- prevalence = share of all votes in the most frequent category (the majority category).
- unanimous share = share of items with r_i ≥ 2 whose votes are all equal.

Bloom levels are treated as nominal categories for AC1 (α keeps its ordinal distance); knowledge
unit sets are categories as whole sets (exact-set agreement; α keeps its Jaccard distance).

Written here rather than taken from the ``irrcac`` package: irrcac 0.4.4 pins scipy==1.12 and
pandas<3 (this project runs scipy 1.17 and pandas 3), and the bootstrap needs the sums vectorised
over resamples anyway. Tests pin the values to the irrCAC documentation's worked examples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bloomqg.store.cells import CELL_COLUMNS
from bloomqg.voting.alpha import CodedVotes, encode_votes, unit_set

#: Criteria voted yes/no: their AC1 always uses the two-category domain.
BINARY_DOMAIN_CRITERIA = frozenset({"unique", "readable", "answerable"})


@dataclass(frozen=True)
class AgreementResult:
    """Percent agreement, prevalence and AC1 of one criterion, with bootstrap intervals.

    ``n_items``: items with at least two votes (the items agreement is measured on).
    ``n_items_rare_agreed``: items where two judges or more gave the same answer other than the
    commonest (at high prevalence, the only agreement that shows the judges tell questions apart).
    """

    percent_agreement: float
    percent_agreement_ci_low: float
    percent_agreement_ci_high: float
    prevalence: float
    majority_category: str | None
    unanimous_share: float
    ac1: float
    ac1_ci_low: float
    ac1_ci_high: float
    n_items: int
    n_items_rare_agreed: int

    @classmethod
    def empty(cls) -> "AgreementResult":
        nan = float("nan")
        return cls(nan, nan, nan, nan, None, nan, nan, nan, nan, 0, 0)


def category_counts(coded: CodedVotes) -> np.ndarray:
    """items × categories: how many judges gave each category to each item."""
    return (coded.codes.T[..., None] == coded.domain[None, None, :]).sum(axis=1).astype(np.float64)


def _terms(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per item: its pairwise agreement (NaN when r_i < 2), pair indicator, π contribution, rated."""
    raters = counts.sum(axis=1)
    pairable = raters >= 2
    rated = raters >= 1
    with np.errstate(invalid="ignore", divide="ignore"):
        agreement = np.where(
            pairable, (counts * (counts - 1)).sum(axis=1) / np.where(pairable, raters * (raters - 1), 1), 0.0
        )
        shares = np.where(rated[:, None], counts / np.where(rated, raters, 1)[:, None], 0.0)
    return agreement, pairable.astype(np.float64), shares, rated.astype(np.float64)


def _ac1_from_sums(
    agreement_sum: np.ndarray, n_pairable: np.ndarray, share_sums: np.ndarray, n_rated: np.ndarray, q: int
) -> tuple[np.ndarray, np.ndarray]:
    """(pa, AC1) from item sums (vectorised over resamples)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        pa = agreement_sum / n_pairable
        pi = share_sums / n_rated[..., None]
        pe = (pi * (1 - pi)).sum(axis=-1) / (q - 1) if q >= 2 else np.zeros_like(pa)
        ac1 = (pa - pe) / (1 - pe)
    return pa, ac1


def ac1_point(counts: np.ndarray) -> tuple[float, float]:
    """(percent agreement, Gwet's AC1) of an items × categories count matrix (NaN without pairs)."""
    agreement, pairable, shares, rated = _terms(counts)
    pa, ac1 = _ac1_from_sums(agreement.sum(), pairable.sum(), shares.sum(axis=0), rated.sum(), counts.shape[1])
    return float(pa), float(ac1)


def nominal_rows(votes_lists: Sequence[Sequence[Any]], criterion: str, level: str) -> list[list[str | None]]:
    """Votes as nominal labels: yes/no as "0"/"1", unit sets as one sorted "a|b" label each."""
    if criterion in BINARY_DOMAIN_CRITERIA:
        return [[None if v is None else ("1" if str(v) in ("1", "True", "true") else "0") for v in row]
                for row in votes_lists]
    if level == "jaccard":
        return [[None if v is None else "|".join(sorted(unit_set(v))) for v in row] for row in votes_lists]
    return [[None if v is None else str(v) for v in row] for row in votes_lists]


def _coded(rows: list[list[str | None]], criterion: str) -> tuple[CodedVotes, list[str]]:
    """Nominal codes and their labels; yes/no criteria always over the domain {"0", "1"}."""
    seed_rows = [["0", "1"]] if criterion in BINARY_DOMAIN_CRITERIA else []
    coded = encode_votes([*seed_rows, *rows], "nominal")  # a seed row puts both labels in the domain
    labels = sorted({v for row in [*seed_rows, *rows] for v in row if v is not None})
    return CodedVotes(coded.codes[:, len(seed_rows):], coded.domain, "nominal", "nominal"), labels


def agreement_with_ci(
    votes_lists: Sequence[Sequence[Any]],
    criterion: str,
    level: str,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> AgreementResult:
    """Percent agreement, prevalence, unanimous share and AC1 of items × judges ``votes_lists``
    (None = no vote), with percentile bootstrap CIs over items (``n_resamples`` 0: no CI)."""
    if not votes_lists or not any(v is not None for row in votes_lists for v in row):
        return AgreementResult.empty()
    coded, labels = _coded(nominal_rows(votes_lists, criterion, level), criterion)
    counts = category_counts(coded)
    q = counts.shape[1]
    agreement, pairable, shares, rated = _terms(counts)
    n_pairable = int(pairable.sum())
    if n_pairable == 0:
        return AgreementResult.empty()
    pa, ac1 = _ac1_from_sums(agreement.sum(), pairable.sum(), shares.sum(axis=0), rated.sum(), q)
    totals = counts.sum(axis=0)
    top = int(np.argmax(totals))
    majority_label = labels[top]
    pair_counts = counts[pairable.astype(bool)]
    unanimous = float(np.mean((pair_counts > 0).sum(axis=1) == 1))
    prevalence = float(totals[top] / totals.sum())
    rare_agreed = int((np.delete(counts, top, axis=1) >= 2).any(axis=1).sum())

    pa_low = pa_high = ac1_low = ac1_high = float("nan")
    if n_resamples > 0:
        rng = np.random.default_rng(seed)
        n = counts.shape[0]
        stats_pa, stats_ac1 = [], []
        block = max(1, 2_000_000 // max(n, 1))
        done = 0
        while done < n_resamples:
            size = min(block, n_resamples - done)
            draws = rng.integers(0, n, size=(size, n))
            weights = np.stack([np.bincount(row, minlength=n) for row in draws]).astype(np.float64)
            boot_pa, boot_ac1 = _ac1_from_sums(
                weights @ agreement, weights @ pairable, weights @ shares, weights @ rated, q
            )
            stats_pa.append(boot_pa)
            stats_ac1.append(boot_ac1)
            done += size
        tail = (1 - confidence) / 2 * 100
        pa_low, pa_high = _percentiles(np.concatenate(stats_pa), tail)
        ac1_low, ac1_high = _percentiles(np.concatenate(stats_ac1), tail)
    return AgreementResult(
        float(pa), pa_low, pa_high, prevalence, majority_label, unanimous,
        float(ac1), ac1_low, ac1_high, n_pairable, rare_agreed,
    )


def _percentiles(samples: np.ndarray, tail: float) -> tuple[float, float]:
    samples = samples[~np.isnan(samples)]
    if samples.size == 0:
        return float("nan"), float("nan")
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


# -- the gate's coefficient --------------------------------------------------------------------

#: Coefficients the gate can use.
GATE_COEFFICIENTS: tuple[str, ...] = ("alpha", "ac1")


def gate_value(coefficient: str, alpha: float, ac1: float) -> float:
    """The value the gate compares with its threshold."""
    if coefficient == "alpha":
        return alpha
    if coefficient == "ac1":
        return ac1
    raise ValueError(f"gate coefficient {coefficient!r} is not one of {list(GATE_COEFFICIENTS)}")


#: Above this share of all votes in one category, α and κ measure the few disagreements left
#: rather than the agreement (the prevalence paradox, module docstring): the gate reads Gwet's AC1
#: there, whichever coefficient the config names. On the paper's release the panel agrees on 96–99%
#: of readability and answerability labels at prevalence ≥ 0.95 while α is 0.0–0.3.
PREVALENCE_LIMIT = 0.9

#: The gate's three outcomes: agreement measured and high enough, measured and too low, not measured.
RELIABLE, UNRELIABLE, NOT_MEASURED = "reliable", "unreliable", "not_measured"


@dataclass(frozen=True)
class GateDecision:
    """Whether a panel reliably rates one criterion in one cell, and the figure that says so.

    The one rule every reader of reliability follows (the gate's † marks, the Answer's verdicts,
    the trust line): :func:`gate_decision`."""

    status: str  # RELIABLE | UNRELIABLE | NOT_MEASURED
    coefficient: str  # "alpha" | "ac1": the coefficient compared with the threshold
    value: float
    threshold: float
    why: str  # for NOT_MEASURED, why; for UNRELIABLE by α's interval below 0, BELOW_CHANCE; else ""

    @property
    def passed(self) -> bool:
        return self.status == RELIABLE

    @property
    def brief_why(self) -> str:
        """:func:`brief_reason` of ``why``; "" where there is none."""
        return brief_reason(self.why)


def brief_reason(why: str) -> str:
    """A gate reason without its explanation after a colon ("at most one judge's votes vary"), for
    a table cell or a Why column."""
    return why.split(":")[0]


def gate_decision(
    coefficient: str, alpha: float, ac1: float, prevalence: float, threshold: float, *, n_items: int,
    n_varying_judges: int | None = None, n_items_rare_agreed: int | None = None, alpha_ci_low: float = math.nan,
    alpha_ci_high: float = math.nan,
) -> GateDecision:
    """The gate's rule, written once:

    1. no item with two votes, every vote in one category (prevalence 1), or at most one judge
       whose votes vary (``n_varying_judges``: the others always give one answer or abstain, so
       any agreement is the panel's make-up): agreement was **not measured** (a judge that always
       says "yes" beside two others that do cannot show it agrees; nor can it show disagreement
       beyond chance: beside one varying judge α is at most 0, its value fixed by how often that
       judge says "no");
    1b. with two judges or more varying, α's interval (``alpha_ci_low``..``alpha_ci_high``, its
       bootstrap's ends) below 0 as the page prints it (two decimals): they disagree more than
       chance would: **unreliable** (:data:`BELOW_CHANCE`);
    2. prevalence ≥ :data:`PREVALENCE_LIMIT`: Gwet's AC1 is compared with the threshold, since α
       collapses there although the judges agree; but where no two judges ever gave the rarer answer
       to the same question (``n_items_rare_agreed`` 0), all their agreement is on the common answer,
       which judges that vote independently of the question reach as well (AC1 then stays high while
       α and κ fall to or below 0): agreement is **not measured** (:data:`NO_RARE_AGREEMENT`);
       and where α's interval (``alpha_ci_low``, its bootstrap's lower end) reaches 0, the judges'
       agreement beyond chance is not shown either: judges voting "yes" at their own rates whatever
       the question share a rarer answer now and then, and AC1 passed a fifth to a half of such
       panels at 34 to 100 questions where this condition passes at most 1 in 200
       (``benchmarks/gate_false_pass.py``):
       **not measured** (:data:`AT_CHANCE`; with no bootstrap there is no interval, and the shared
       rarer answer alone is asked for);
    3. otherwise the configured coefficient (``alpha`` or ``ac1``);
    an undefined coefficient is not measured; at or above the threshold is reliable, below it unreliable.
    """
    if coefficient not in GATE_COEFFICIENTS:
        raise ValueError(f"gate coefficient {coefficient!r} is not one of {list(GATE_COEFFICIENTS)}")
    if n_items == 0:
        return GateDecision(NOT_MEASURED, coefficient, math.nan, threshold, NO_TWO_VOTES)
    if not math.isnan(prevalence) and prevalence >= 1.0:
        return GateDecision(NOT_MEASURED, coefficient, math.nan, threshold, ALL_SAME)
    if n_varying_judges is not None and n_varying_judges < 2:
        return GateDecision(NOT_MEASURED, coefficient, math.nan, threshold, ONE_VARYING)
    if not math.isnan(alpha_ci_high) and round(alpha_ci_high, 2) < 0:
        return GateDecision(UNRELIABLE, "alpha", alpha, threshold, BELOW_CHANCE)
    prevalence_bound = not math.isnan(prevalence) and prevalence >= PREVALENCE_LIMIT
    if prevalence_bound and n_items_rare_agreed == 0:
        return GateDecision(NOT_MEASURED, "ac1", math.nan, threshold, NO_RARE_AGREEMENT)
    if prevalence_bound and not math.isnan(alpha_ci_low) and round(alpha_ci_low, 2) <= 0:
        return GateDecision(NOT_MEASURED, "ac1", math.nan, threshold, AT_CHANCE)
    used = "ac1" if prevalence_bound else coefficient
    value = gate_value(used, alpha, ac1)
    if math.isnan(value):
        return GateDecision(NOT_MEASURED, used, value, threshold, f"{used} undefined")
    return GateDecision(RELIABLE if value >= threshold else UNRELIABLE, used, value, threshold, "")


#: Why agreement is not measured where no question has two votes, every vote is one answer, or
#: (an imported release) the panel's votes are not given judge by judge.
NO_TWO_VOTES = "no question has two judges' votes"
ALL_SAME = "every vote the same"
NO_JUDGE_VOTES = "no per-judge votes"

#: A not-measured row that records no reason (one built by hand).
NO_REASON = "no reason recorded"

#: Why agreement is not measured where at most one judge's votes vary.
ONE_VARYING = "at most one judge's votes vary: agreement by construction"

#: Why agreement is not measured where one answer dominates and the judges never share the other.
NO_RARE_AGREEMENT = (f"rarer answer never shared: no two judges gave it to the same question, and with one answer "
                     f"in ≥ {PREVALENCE_LIMIT:.0%} of the votes, agreement on that one alone is what judges reach by "
                     "chance")

#: Why judges are unreliable where two or more of them vary and α's interval lies below 0 (rule 1b of the gate).
BELOW_CHANCE = ("below chance: α's interval lies below 0, so the judges (two or more of them varying) disagree more "
                "than chance would")

#: Why agreement is not measured where one answer dominates and α's interval reaches 0.
AT_CHANCE = (f"chance not ruled out: with one answer in ≥ {PREVALENCE_LIMIT:.0%} of the votes AC1 reads high on that "
             "answer alone, and α's interval reaches 0, so the judges' agreement beyond chance is not shown")

#: The gate's rule in one line, for pages that state it.
GATE_RULE = ("first, agreement is not measured where no question has two votes, every vote is the same, or at most "
             "one judge's votes vary (the others always give one answer or abstain, so any agreement is the panel's "
             "make-up); then the judges are unreliable where α's interval lies below 0 (they disagree more than chance "
             f"would); agreement is not measured either where one answer holds ≥ {PREVALENCE_LIMIT:.0%} of the votes and either no two judges ever gave the "
             "rarer answer to the same question or α's interval reaches 0 (agreement beyond chance not shown); otherwise it is reliable when Krippendorff's α is at least the threshold (0.7 by default), "
             f"or, where one answer holds ≥ {PREVALENCE_LIMIT:.0%} of the votes (α then reads near 0 even when the "
             "judges agree), when Gwet's AC1 is")


def recorded_decision(row: Mapping[str, Any]) -> GateDecision:
    """The gate's decision as a RELIABILITY panel row records it: ``gate_status`` and
    ``gate_reason``, as :func:`gate_decision` decided them when the votes were counted (a row
    without ``gate_status``, built by hand: passed → reliable, null → not measured, else unreliable)."""
    coefficient = row.get("gate_coefficient") if isinstance(row.get("gate_coefficient"), str) else "alpha"
    raw = row.get(coefficient)
    value = math.nan if raw is None or _isnan(raw) else float(raw)
    threshold = float(row.get("gate_threshold", math.nan))
    status = row.get("gate_status")
    if not isinstance(status, str):
        passed = row.get("gate_passed")
        status = (NOT_MEASURED if passed is None or _isnan(passed) or math.isnan(value)
                  else RELIABLE if bool(passed) else UNRELIABLE)
    reason = row.get("gate_reason")
    why = reason if isinstance(reason, str) else NO_REASON if status == NOT_MEASURED else ""
    return GateDecision(status, coefficient, value, threshold, why)



def gate_statuses(reliability: Any) -> dict[tuple[str, str, str, str], str]:
    """(dataset, strategy, model, criterion) → the gate's status (:func:`recorded_decision`) of
    every panel row of a RELIABILITY frame: one lookup for every page and plan that asks whether a
    criterion was reliable in a cell."""
    panel = reliability[reliability["judge"].isna()] if "judge" in reliability else reliability
    return {(*(str(row[c]) for c in CELL_COLUMNS), str(row["criterion"])): recorded_decision(row).status
            for row in panel.to_dict("records")}

def _isnan(value: Any) -> bool:
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return value is None
