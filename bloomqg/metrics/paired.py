"""CoT vs FGP on the same items: paired differences, bootstrap CIs, McNemar or Wilcoxon tests.

Which metrics can be paired, and with which test, is each metric spec's ``paired_outcome``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from bloomqg.metrics.cell import row_terms
from bloomqg.metrics.intervals import percentile_interval, resample_counts
from bloomqg.metrics.registry import METRIC_SPECS, metric_spec
from bloomqg.metrics.rows import REQUIRED_VOTE_COLUMNS, cell_key, require_columns


#: Metrics with a per-question outcome in both arms, so a pair can be compared.
PAIRABLE: frozenset[str] = frozenset(spec.name for spec in METRIC_SPECS if spec.paired_outcome)


def paired_comparison(
    cot_votes: pd.DataFrame,
    fgp_votes: pd.DataFrame,
    *,
    metrics: Sequence[str] = ("usability", "catcons", "knowcov"),
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """CoT vs FGP for one model × dataset, paired on ``item_id``.

    A pair enters a metric when the per-question outcome is defined in both arms (the metric's
    denominator in :func:`bloomqg.metrics.cell.score_cell`). ``cot``/``fgp`` are the metric over those pairs,
    ``diff`` = fgp − cot (percentage points for percent metrics) with a paired percentile
    bootstrap CI. Binary outcomes: exact McNemar (binomial test on the discordant pairs; p = 1
    when there are none) with Cohen's h. Graded outcomes (knowcov, cogshift): Wilcoxon
    signed-rank on the non-zero differences (p = 1 when all are zero) with the matched-pairs
    rank-biserial correlation. No pairs: NaN throughout with ``n_pairs`` 0.
    """
    unknown = [name for name in metrics if name not in PAIRABLE]
    if unknown:
        raise ValueError(f"metrics {unknown} have no per-question outcome; pairable: {sorted(PAIRABLE)}")
    for frame, what in ((cot_votes, "cot_votes"), (fgp_votes, "fgp_votes")):
        require_columns(frame, REQUIRED_VOTE_COLUMNS + ("item_id",), what)
        if frame["item_id"].duplicated().any():
            duplicated = frame.loc[frame["item_id"].duplicated(), "item_id"].tolist()[:5]
            raise ValueError(f"{what}: item_id must be unique, repeated: {duplicated}")
    cot_model, cot_dataset, cot_strategy = cell_key(cot_votes)
    fgp_model, fgp_dataset, fgp_strategy = cell_key(fgp_votes)
    if (cot_strategy, fgp_strategy) != ("cot", "fgp"):
        raise ValueError(
            f"paired_comparison: cot_votes must be a cot cell and fgp_votes an fgp cell, got "
            f"{cot_strategy!r} and {fgp_strategy!r}"
        )
    if (cot_model, cot_dataset) != (fgp_model, fgp_dataset):
        raise ValueError(
            f"paired_comparison needs one model × dataset, got cot {(cot_model, cot_dataset)} "
            f"and fgp {(fgp_model, fgp_dataset)}"
        )
    common = sorted(set(cot_votes["item_id"]) & set(fgp_votes["item_id"]))
    cot = cot_votes.set_index("item_id").loc[common].reset_index()
    fgp = fgp_votes.set_index("item_id").loc[common].reset_index()
    cot_rows, fgp_rows = row_terms(cot, "cot"), row_terms(fgp, "fgp")
    rng = np.random.default_rng(seed)

    records = []
    for name in metrics:
        outcome = compare_outcomes(cot_rows, fgp_rows, name, rng, n_resamples=n_resamples, confidence=confidence)
        records.append({
            "model": cot_model, "dataset": cot_dataset, "metric": name, "n_pairs": outcome["n_pairs"],
            "cot": outcome["a"], "fgp": outcome["b"],
            **{key: outcome[key] for key in ("diff", "ci_low", "ci_high", "test", "p_value", "effect_size", "effect_size_name")},
        })
    return pd.DataFrame.from_records(records, columns=list(PAIRED_COLUMNS))


def compare_outcomes(
    a_rows: dict, b_rows: dict, name: str, rng: np.random.Generator, *, n_resamples: int, confidence: float
) -> dict:
    """Metric ``name`` over pairs defined in both arms (row terms of the same items, in the same
    order): ``a``, ``b``, ``diff`` = b − a with a paired bootstrap CI, and the spec's test
    (McNemar with Cohen's h, or Wilcoxon with the rank-biserial correlation)."""
    from scipy import stats

    spec = metric_spec(name)
    binary = spec.paired_outcome == "binary"
    scale = spec.scale
    defined = a_rows[name][1].astype(bool) & b_rows[name][1].astype(bool)
    a = a_rows[name][0][defined].astype(float)
    b = b_rows[name][0][defined].astype(float)
    n_pairs = int(defined.sum())
    record = {
        "n_pairs": n_pairs, "a": math.nan, "b": math.nan, "diff": math.nan, "ci_low": math.nan,
        "ci_high": math.nan, "test": "mcnemar" if binary else "wilcoxon", "p_value": math.nan,
        "effect_size": math.nan, "effect_size_name": "cohens_h" if binary else "rank_biserial",
    }
    if not n_pairs:
        return record
    differences = (b - a) * scale
    boot = np.concatenate(
        [counts @ differences / n_pairs for counts in resample_counts(rng, n_pairs, n_resamples)]
    )
    ci_low, ci_high = percentile_interval(boot[:, None], confidence)
    record.update(a=float(a.mean() * scale), b=float(b.mean() * scale), diff=float(differences.mean()),
                  ci_low=float(ci_low[0]), ci_high=float(ci_high[0]))
    if binary:
        only_b = int(np.sum((b == 1) & (a == 0)))
        only_a = int(np.sum((a == 1) & (b == 0)))
        discordant = only_b + only_a
        record["p_value"] = float(stats.binomtest(only_b, discordant, 0.5).pvalue) if discordant else 1.0
        record["effect_size"] = float(2 * math.asin(math.sqrt(b.mean())) - 2 * math.asin(math.sqrt(a.mean())))
    else:
        nonzero = differences[differences != 0]
        if nonzero.size:
            record["p_value"] = float(stats.wilcoxon(nonzero).pvalue)
            ranks = stats.rankdata(np.abs(nonzero))
            record["effect_size"] = float((ranks[nonzero > 0].sum() - ranks[nonzero < 0].sum()) / ranks.sum())
        else:
            record["p_value"] = 1.0
            record["effect_size"] = 0.0
    return record


PAIRED_COLUMNS: tuple[str, ...] = (
    "model", "dataset", "metric", "n_pairs", "cot", "fgp", "diff", "ci_low", "ci_high",
    "test", "p_value", "effect_size", "effect_size_name",
)


def paired_comparisons(
    votes: pd.DataFrame,
    *,
    metrics: Sequence[str] = ("usability", "catcons", "knowcov"),
    n_resamples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """:func:`paired_comparison` for every model × dataset of ``votes`` run under both CoT and
    FGP (cells with one strategy only are skipped); the columns of :data:`PAIRED_COLUMNS`."""
    require_columns(votes, ("model", "dataset", "strategy"), "votes")
    frames = []
    for (model, dataset), group in votes.groupby(["model", "dataset"], sort=True):
        cot, fgp = group[group["strategy"] == "cot"], group[group["strategy"] == "fgp"]
        if cot.empty or fgp.empty:
            continue
        frames.append(
            paired_comparison(
                cot, fgp, metrics=metrics, n_resamples=n_resamples, seed=seed, confidence=confidence
            )
        )
    if not frames:
        return pd.DataFrame(columns=list(PAIRED_COLUMNS))
    return pd.concat(frames, ignore_index=True)
