"""Per-judge diagnostics and the panel's effective number of independent judges, for one
criterion, from the items × judges vote strings (the ``*_votes`` lists).

For each judge: how often it says yes (or how its votes spread over the categories), its
agreement and Cohen's κ with the strict majority of the *other* judges (a judge is not compared
with a majority it helped make), κ with every other judge, and its Dawid–Skene estimates
(:mod:`bloomqg.voting.dawid_skene`): sensitivity and specificity for yes/no criteria, the
confusion matrix and accuracy for the others.

**Effective number of judges.** Each judge's error on an item is 1 when its vote differs from
the Dawid–Skene label. With n judges whose errors have mean pairwise correlation ρ̄, the panel's
average error varies like that of n / (1 + (n − 1)·ρ̄) independent judges (Kish's design effect
for equicorrelated members). It is n when the judges err independently and 1 when they err
together; negative ρ̄ is clipped to n. Judges that never err (zero variance) count as
uncorrelated with the others. The estimator is chosen because it answers the question a reader
has (how many judges' worth of independent evidence does a vote carry) from the quantity that
matters for a majority vote (correlated errors are what a majority cannot outvote), and because
it needs nothing beyond the votes. Its blind spot: judges that are exact copies of each other
dominate the Dawid–Skene label, never err against it, and so look independent; the pairwise κ
matrix (κ = 1 between copies) shows that case.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bloomqg.voting.dawid_skene import DawidSkeneFit, accuracy, binary_rates
from bloomqg.stats.kappa import cohen_kappa
from bloomqg.store.json_columns import json_mapping


@dataclass(frozen=True)
class JudgeDiagnostics:
    """One judge on one criterion (the RELIABILITY judge row's diagnostic columns)."""

    vote_rate: float | None
    vote_distribution: str | None
    agreement_with_others: float | None
    kappa_with_others: float | None
    kappa_pairwise: str | None
    ds_sensitivity: float | None = None
    ds_sensitivity_ci: tuple[float, float] = (math.nan, math.nan)
    ds_specificity: float | None = None
    ds_specificity_ci: tuple[float, float] = (math.nan, math.nan)
    ds_accuracy: float | None = None
    ds_confusion: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def columns(self) -> dict[str, Any]:
        return {
            "vote_rate": self.vote_rate,
            "vote_distribution": self.vote_distribution,
            "agreement_with_others": self.agreement_with_others,
            "kappa_with_others": self.kappa_with_others,
            "kappa_pairwise": self.kappa_pairwise,
            "ds_sensitivity": self.ds_sensitivity,
            "ds_sensitivity_ci_low": self.ds_sensitivity_ci[0],
            "ds_sensitivity_ci_high": self.ds_sensitivity_ci[1],
            "ds_specificity": self.ds_specificity,
            "ds_specificity_ci_low": self.ds_specificity_ci[0],
            "ds_specificity_ci_high": self.ds_specificity_ci[1],
            "ds_accuracy": self.ds_accuracy,
            "ds_confusion": self.ds_confusion,
        }


#: The judge-row diagnostic columns, null on panel rows.
JUDGE_DIAGNOSTIC_COLUMNS: tuple[str, ...] = tuple(JudgeDiagnostics(None, None, None, None, None).columns())


def _strict_majority(votes: Sequence[str]) -> str | None:
    if len(votes) < 2:
        return None
    (top, count), *rest = Counter(votes).most_common()
    return top if count * 2 > len(votes) else None


def judge_diagnostics(
    votes_lists: Sequence[Sequence[str | None]],
    judge: int,
    fit: DawidSkeneFit | None,
    *,
    binary: bool,
    judge_names: Sequence[str],
    confidence: float = 0.95,
) -> JudgeDiagnostics:
    """The diagnostics of the judge at position ``judge`` (vote strings "1"/"0" when ``binary``)."""
    mine = [row[judge] if judge < len(row) else None for row in votes_lists]
    given = [vote for vote in mine if vote is not None]
    if not given:
        return JudgeDiagnostics(None, None, None, None, None)
    counts = Counter(given)
    distribution = {label: counts[label] / len(given) for label in sorted(counts)}
    vote_rate = distribution.get("1", 0.0) if binary else max(distribution.values())
    own, others_majority = [], []
    for row, vote in zip(votes_lists, mine):
        others = [v for position, v in enumerate(row) if position != judge and v is not None]
        majority = _strict_majority(others) if len(others) >= 2 else (others[0] if len(others) == 1 else None)
        if vote is not None and majority is not None:
            own.append(vote)
            others_majority.append(majority)
    agreement = sum(x == y for x, y in zip(own, others_majority)) / len(own) if own else None
    kappa = cohen_kappa(own, others_majority) if own else None
    pairwise = {}
    for other, name in enumerate(judge_names):
        if other == judge:
            continue
        pairs = [(row[judge], row[other]) for row in votes_lists
                 if len(row) > max(judge, other) and row[judge] is not None and row[other] is not None]
        value = cohen_kappa([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else math.nan
        pairwise[name] = None if math.isnan(value) else round(value, 6)
    diagnostics: dict[str, Any] = {}
    if fit is not None and judge < len(fit.confusion):
        if binary:
            rates = binary_rates(fit, judge, confidence=confidence)
            diagnostics.update(
                ds_sensitivity=rates.sensitivity, ds_sensitivity_ci=rates.sensitivity_ci,
                ds_specificity=rates.specificity, ds_specificity_ci=rates.specificity_ci,
            )
        diagnostics["ds_accuracy"] = accuracy(fit, judge)
        matrix = fit.confusion[judge]
        diagnostics["ds_confusion"] = json.dumps({
            "labels": fit.labels,
            "rows_true_columns_said": [[None if math.isnan(v) else round(float(v), 6) for v in row] for row in matrix],
        }, ensure_ascii=False)
    return JudgeDiagnostics(
        float(vote_rate), json.dumps(distribution, ensure_ascii=False), agreement,
        None if kappa is None or math.isnan(kappa) else kappa, json.dumps(pairwise, ensure_ascii=False),
        **diagnostics,
    )


def varying_positions(votes_lists: Sequence[Sequence[str | None]], n_judges: int) -> list[int]:
    """The panel positions of the judges that give two answers or more over the items (a judge
    that always gives one answer, or abstains, adds no evidence of agreement)."""
    return [position for position in range(n_judges)
            if len({row[position] for row in votes_lists if position < len(row) and row[position] is not None}) >= 2]


def effective_judges(votes_lists: Sequence[Sequence[str | None]], fit: DawidSkeneFit | None,
                     varying: Sequence[int]) -> float | None:
    """n / (1 + (n − 1)·ρ̄) from the correlation of the judges' errors against the Dawid–Skene
    labels, over the judges whose votes vary (``varying``: :func:`varying_positions`) and the items
    each of them voted on (None with fewer than two such judges or items). A judge that gives one
    answer throughout adds no information, and the zero spread of its errors would count it as an
    independent judge."""
    if fit is None:
        return None
    width = max((len(row) for row in votes_lists), default=0)
    n_judges = len(varying)
    rows = []
    for item, row in enumerate(votes_lists):
        label, _ = fit.label_of(item)
        if label is None or len(row) < width or any(row[k] is None for k in varying):
            continue
        rows.append([float(row[k] != label) for k in varying])
    if n_judges < 2 or len(rows) < 2:
        return None
    errors = np.array(rows)
    spread = errors.std(axis=0)
    correlations = []
    for a in range(n_judges):
        for b in range(a + 1, n_judges):
            if spread[a] == 0 or spread[b] == 0:
                correlations.append(0.0)
            else:
                correlations.append(float(np.corrcoef(errors[:, a], errors[:, b])[0, 1]))
    rho = float(np.mean(correlations))
    if rho <= 0:
        return float(n_judges)
    return float(n_judges / (1 + (n_judges - 1) * rho))


#: A yes/no judge saying "yes" (or "no") at least this often, while the other judges say the
#: opposite at least :data:`OTHERS_OPPOSITE_RATE` of the time, tells nothing apart.
ALWAYS_SAME_RATE = 0.98
OTHERS_OPPOSITE_RATE = 0.05
#: Youden's J (sensitivity + specificity − 1) at or below this: no better than a coin; only
#: claimed when both Dawid–Skene intervals are narrower than :data:`MAX_CI_WIDTH`.
CHANCE_YOUDEN = 0.1
MAX_CI_WIDTH = 0.3
#: κ with the others' majority below this: disagreeing beyond chance.
CONTRARIAN_KAPPA = -0.05
#: A judge giving one answer to at least this share of the questions it rates, on a criterion with
#: many answers (six Bloom levels, a dataset's units), is no rating: the report's artefact warning
#: (:mod:`bloomqg.reporting.panel`) and :func:`suspicious_judges` share this one threshold.
CONSTANT_SHARE = 0.9
#: The same for yes/no criteria, where most questions may truly be readable: only a (nearly)
#: constant answer is an artefact.
CONSTANT_SHARE_BINARY = ALWAYS_SAME_RATE


def _finite(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def others_rate(rates: Sequence[Any], position: int) -> float | None:
    """The mean ``vote_rate`` of every judge but the one at ``position`` (those with one): how
    often the others say yes."""
    others = [float(r) for k, r in enumerate(rates) if k != position and _finite(r)]
    return sum(others) / len(others) if others else None


def modal_answer(row: dict[str, Any]) -> tuple[str, float] | None:
    """(the answer a judge gave most often, its share of the judge's votes) from a judge row's
    ``vote_distribution``; None without one."""
    return modal_of(row.get("vote_distribution"))


def modal_of(vote_distribution: Any) -> tuple[str, float] | None:
    """(the commonest answer, its share) of one recorded ``vote_distribution`` (JSON text); None
    without one."""
    shares = json_mapping(vote_distribution)
    if not shares:
        return None
    top = max(shares, key=lambda k: shares[k])
    return str(top), float(shares[top])


#: Every reason :func:`suspicious_judges` can give, short name → the rule in words (the report's
#: notes state them from here, so a new reason cannot go unexplained; its tables print the short name).
SUSPICIOUS_REASONS: dict[str, str] = {
    "constant": f"a yes/no judge that gives one answer on at least {ALWAYS_SAME_RATE:.0%} of the questions where the "
                f"others give the other answer at least {OTHERS_OPPOSITE_RATE:.0%} of the time",
    "one answer": f"a judge that gives one answer (one Bloom level, one unit set) to at least {CONSTANT_SHARE:.0%} of "
                  "the questions it rates",
    "coin": f"a judge no better than a coin under Dawid–Skene (sensitivity + specificity − 1 ≤ {CHANCE_YOUDEN:g})",
    "contrarian": f"a judge that disagrees with the others' majority more than chance would (Cohen's κ below "
                  f"{CONTRARIAN_KAPPA:g})",
}


def suspicious_judge_reasons(
    judge_names: Sequence[str], judges: Sequence[dict[str, Any]], *, binary: bool
) -> dict[str, list[tuple[str, str]]]:
    """Judges whose votes carry little information, each with its reasons as (short name of
    :data:`SUSPICIOUS_REASONS`, the reason in words with this judge's numbers): a yes/no judge
    that (nearly) always says yes, or no, where the others do not; a judge giving one answer to at
    least :data:`CONSTANT_SHARE` of the questions on a criterion with many answers (Bloom level,
    knowledge units); one no better than chance under Dawid–Skene (Youden's J ≤ 0.1, with
    intervals narrow enough to say so); one that disagrees with the others' majority beyond
    chance (κ < −0.05)."""
    flagged: dict[str, list[tuple[str, str]]] = {}
    rates = [row.get("vote_rate") for row in judges]
    for position, (name, row) in enumerate(zip(judge_names, judges)):
        reasons: list[tuple[str, str]] = []
        rate = rates[position]
        others_yes = others_rate(rates, position)
        if binary and _finite(rate) and others_yes is not None:
            others_no = 1 - others_yes
            if rate >= ALWAYS_SAME_RATE and others_no >= OTHERS_OPPOSITE_RATE:
                reasons.append(("constant", f"says yes to {rate:.1%} of items, while the others say no to {others_no:.0%} of them"))
            elif rate <= 1 - ALWAYS_SAME_RATE and 1 - others_no >= OTHERS_OPPOSITE_RATE:
                reasons.append(("constant",
                                f"says no to {1 - rate:.1%} of items, while the others say yes to {1 - others_no:.0%} of them"))
        modal = None if binary else modal_answer(row)
        if modal is not None and modal[1] >= CONSTANT_SHARE:
            answer = modal[0].replace("|", " + ")  # a unit set's units, as one answer
            reasons.append(("one answer", f"gives one answer ({answer}) to {modal[1]:.1%} of the questions it rates"))
        sensitivity, specificity = row.get("ds_sensitivity"), row.get("ds_specificity")
        if not reasons and _finite(sensitivity) and _finite(specificity):
            widths = [row.get(f"ds_{k}_ci_high", math.nan) - row.get(f"ds_{k}_ci_low", math.nan)
                      for k in ("sensitivity", "specificity")]
            youden = sensitivity + specificity - 1
            if youden <= CHANCE_YOUDEN and all(_finite(w) and w <= MAX_CI_WIDTH for w in widths):
                reasons.append(("coin", f"no better than chance (sensitivity {sensitivity:.2f} + specificity "
                                        f"{specificity:.2f} − 1 = {youden:.2f})"))
        kappa = row.get("kappa_with_others")
        if _finite(kappa) and kappa < CONTRARIAN_KAPPA:
            # a third decimal where two would print the threshold itself ("κ -0.05" beside "below -0.05")
            shown = f"{kappa:.3f}" if f"{kappa:.2f}" == f"{CONTRARIAN_KAPPA:.2f}" else f"{kappa:.2f}"
            reasons.append(("contrarian", f"agrees with the other judges less often than chance would (κ {shown})"))
        if reasons:
            flagged[name] = reasons
    return flagged


def suspicious_judges(
    judge_names: Sequence[str], judges: Sequence[dict[str, Any]], *, binary: bool
) -> dict[str, str]:
    """:func:`suspicious_judge_reasons`, each judge's reasons in words, joined."""
    return {name: "; ".join(text for _, text in reasons)
            for name, reasons in suspicious_judge_reasons(judge_names, judges, binary=binary).items()}
