"""Bloom-aware metrics over votes frames: values, bootstrap CIs, transitions, correlations, tests.

Every function here is pure: DataFrames in (columns of :data:`bloomqg.schemas.VOTES`,
:data:`bloomqg.schemas.RELIABILITY` or :data:`bloomqg.schemas.METRICS`), DataFrames out.
The definitions follow the paper as pinned down against its release (``DESIGN.md``,
"Definitions"); the choices the paper leaves open are listed here once and tested.

Denominators (``n`` in the metrics frame) — "useful" means ``useful`` is True:

- ``unique`` / ``readable`` / ``answerable``: questions with a non-null majority vote for it.
  For an imported published run, :func:`score_cell` is given the run's votes file line by line
  (``published_lines``) and these three are taken over *every line as published* instead: a
  question text judged on several lines counts on each. That is the paper's Table 4 rule and it
  reproduces all six models' printed figures; the one-row-per-original join (duplicate texts
  take the first judged line) gives the same for GLM-4-9B only, and stays the basis of every
  other metric (usability, CatCons, shifts, KnowCov, the auxiliary accuracies).
- ``usability``: questions with a non-null ``useful``.
- ``catcons``: useful questions with a judged level. A judged level is either one of the six
  levels or *judged Uncategorized* (``bloom_level`` null with ``bloom_level_null_reason ==``
  :data:`JUDGED_UNCATEGORIZED`). An Uncategorized original is a mismatch, except against a
  judged-Uncategorized question: Eq. (1) compares category labels, and this is what reproduces
  the paper's FGP CatCons for GLM-4-9B (51.42; treating it as a mismatch gives 51.35). A useful
  question whose judged level is null for any other reason (tie, parse failure, gated out) has
  no verdict and is left out of the denominator, as a null vote is everywhere else.
- ``cogreg`` / ``cogdrift`` / ``cogleap`` (percent of shifts): useful, mismatched, both levels
  known; Δ = W_new − W_ori, regression Δ ≤ −2, drift |Δ| = 1, leap Δ ≥ 2.
- ``cogshift``: mean of (1 − δ)·|Δ| over useful questions with both levels known (Eq. 4).
- ``cog*_total``: sum of |Δ| over the shifts of that type (0 when there are none, NaN when no
  useful question has both levels known; ``n`` counts the shifts); ``cog*_mean``: its mean per shift (the paper's Figure 3 "mean shift score").
- ``knowcov``: mean of |K_ori ∩ K_new| / |K_ori| over useful questions with a non-null voted
  unit set; a null set (no majority) has no verdict and is left out; an empty voted set
  counts 0.
- ``classification_acc``: identified level == original level over all rows with an original
  level (a null or unrecognised identification counts as wrong).
- ``knowledge_id_acc``: identified unit set == original unit set over all rows.
- ``parse_failure_rate``: ``parse_status != "ok"`` over all rows; ``n_generated``: rows;
  ``n_useful``: useful rows.

Metrics that do not apply — the auxiliary accuracies outside CoT or when the identification
column is null throughout, or any ratio whose denominator is empty — are kept as a row with
``value`` NaN, NaN CI and ``n`` = 0, so every cell has the same metric rows.

Percent metrics (:data:`PERCENT_METRICS`) are in 0..100; the others are raw scores or counts.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from bloomqg.bloom import BLOOM_LEVELS, LEVEL_WEIGHT, UNCATEGORIZED
from bloomqg.schemas import BINARY_CRITERIA, METRICS

logger = logging.getLogger(__name__)

METRIC_NAMES: tuple[str, ...] = (
    "unique",
    "readable",
    "answerable",
    "usability",
    "catcons",
    "cogshift",
    "cogreg",
    "cogdrift",
    "cogleap",
    "cogreg_total",
    "cogdrift_total",
    "cogleap_total",
    "cogreg_mean",
    "cogdrift_mean",
    "cogleap_mean",
    "knowcov",
    "classification_acc",
    "knowledge_id_acc",
    "parse_failure_rate",
    "n_generated",
    "n_useful",
)

METRIC_LABELS: dict[str, str] = {
    "unique": "Unique",
    "readable": "Readable",
    "answerable": "Answerable",
    "usability": "Usability",
    "catcons": "CatCons",
    "cogshift": "CogShift",
    "cogreg": "CogReg",
    "cogdrift": "CogDrift",
    "cogleap": "CogLeap",
    "cogreg_total": "CogReg total |Δ|",
    "cogdrift_total": "CogDrift total |Δ|",
    "cogleap_total": "CogLeap total |Δ|",
    "cogreg_mean": "CogReg mean |Δ|",
    "cogdrift_mean": "CogDrift mean |Δ|",
    "cogleap_mean": "CogLeap mean |Δ|",
    "knowcov": "KnowCov",
    "classification_acc": "Classification acc.",
    "knowledge_id_acc": "Knowledge-ID acc.",
    "parse_failure_rate": "Parse failures",
    "n_generated": "Generated",
    "n_useful": "Useful",
}

#: Metrics reported as percentages (0..100).
PERCENT_METRICS: frozenset[str] = frozenset(
    {
        "unique",
        "readable",
        "answerable",
        "usability",
        "catcons",
        "cogreg",
        "cogdrift",
        "cogleap",
        "knowcov",
        "classification_acc",
        "knowledge_id_acc",
        "parse_failure_rate",
    }
)

#: Counts: no bootstrap interval.
COUNT_METRICS: frozenset[str] = frozenset({"n_generated", "n_useful"})

#: ``bloom_level_null_reason`` meaning the judges' majority placed the question at no level.
JUDGED_UNCATEGORIZED = "uncategorized"

_USEFUL_CRITERIA = frozenset(BINARY_CRITERIA)
_BLOOM_FED = _USEFUL_CRITERIA | {"bloom_level"}

#: The judging criteria each metric depends on (for the α gate). Metrics over useful
#: questions depend on the three usefulness criteria too, since they select the questions.
METRIC_CRITERIA: dict[str, frozenset[str]] = {
    "unique": frozenset({"unique"}),
    "readable": frozenset({"readable"}),
    "answerable": frozenset({"answerable"}),
    "usability": _USEFUL_CRITERIA,
    "n_useful": _USEFUL_CRITERIA,
    "knowcov": _USEFUL_CRITERIA | {"knowledge_units"},
    **{
        name: _BLOOM_FED
        for name in METRIC_NAMES
        if name == "catcons" or name.startswith("cog")
    },
}

SHIFT_TYPES: tuple[str, ...] = ("cogreg", "cogdrift", "cogleap")

_TRANSITION_ORDER = {name: rank for rank, name in enumerate(BLOOM_LEVELS + (UNCATEGORIZED,))}

#: Resample rows per block, so memory stays bounded for large cells.
_BOOTSTRAP_BLOCK_CELLS = 4_000_000


# --------------------------------------------------------------------------------------------
# Per-row building blocks


def _require_columns(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [name for name in columns if name not in frame.columns]
    if missing:
        raise ValueError(f"{what}: missing columns {missing}")


def _weights(values: pd.Series, column: str) -> np.ndarray:
    """Ordinal weights 1..6 of canonical level names; NaN for null. Unknown names raise."""
    out = np.full(len(values), np.nan)
    for position, value in enumerate(values.tolist()):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        try:
            out[position] = LEVEL_WEIGHT[value]
        except KeyError:
            raise ValueError(
                f"column {column!r}, row {values.index[position]!r}: {value!r} is not a canonical "
                f"Bloom level ({', '.join(BLOOM_LEVELS)}) or null"
            ) from None
    return out


def _true(values: pd.Series) -> np.ndarray:
    """Boolean array: the value is True (null and False are both False)."""
    return np.array([value is True or value is np.True_ for value in values.tolist()], dtype=bool)


def _not_null(values: pd.Series) -> np.ndarray:
    return values.notna().to_numpy(dtype=bool)


def _unit_set(value: object) -> set[str] | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return {str(unit).strip() for unit in value}  # type: ignore[union-attr]


def _cell_key(votes: pd.DataFrame) -> tuple[str, str, str]:
    cells = votes[["model", "dataset", "strategy"]].drop_duplicates()
    if len(cells) != 1:
        found = [tuple(row) for row in cells.itertuples(index=False)]
        raise ValueError(f"votes must hold exactly one (model, dataset, strategy) cell, got {found}")
    model, dataset, strategy = cells.iloc[0].tolist()
    return str(model), str(dataset), str(strategy)


_REQUIRED_VOTE_COLUMNS = (
    "model",
    "dataset",
    "strategy",
    "original_bloom_level",
    "original_knowledge_units",
    "identified_bloom_level",
    "identified_knowledge_units",
    "parse_status",
    "unique",
    "readable",
    "answerable",
    "bloom_level",
    "bloom_level_null_reason",
    "knowledge_units",
    "useful",
    "alpha_gated",
)


def _per_row(votes: pd.DataFrame, strategy: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """For each ratio metric: (numerator, denominator) per row; value = Σnum / Σden.

    The denominator is a 0/1 membership indicator for every metric except the shift totals,
    whose "denominator" marks the shifts of the type (used as ``n``; the value is Σnum).
    """
    n = len(votes)
    useful = _true(votes["useful"])
    w_ori = _weights(votes["original_bloom_level"], "original_bloom_level")
    w_new = _weights(votes["bloom_level"], "bloom_level")
    ori_known, new_known = ~np.isnan(w_ori), ~np.isnan(w_new)
    judged_uncategorized = ~new_known & (
        votes["bloom_level_null_reason"].to_numpy(dtype=object) == JUDGED_UNCATEGORIZED
    )

    rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for criterion in BINARY_CRITERIA:
        rows[criterion] = (_true(votes[criterion]), _not_null(votes[criterion]))
    rows["usability"] = (useful, _not_null(votes["useful"]))

    in_catcons = useful & (new_known | judged_uncategorized)
    same_level = ori_known & new_known & (w_ori == w_new)
    both_uncategorized = ~ori_known & judged_uncategorized
    rows["catcons"] = (in_catcons & (same_level | both_uncategorized), in_catcons)

    both = useful & ori_known & new_known
    delta = np.where(both, w_new - w_ori, 0.0)
    magnitude = np.abs(delta)
    shifted = both & (delta != 0)
    rows["cogshift"] = (magnitude, both)
    shift_kind = {
        "cogreg": shifted & (delta <= -2),
        "cogdrift": shifted & (magnitude == 1),
        "cogleap": shifted & (delta >= 2),
    }
    for name, member in shift_kind.items():
        rows[name] = (member, shifted)
        rows[f"{name}_total"] = (np.where(member, magnitude, 0.0), member)
        rows[f"{name}_mean"] = (np.where(member, magnitude, 0.0), member)

    coverage = np.zeros(n)
    in_knowcov = np.zeros(n, dtype=bool)
    originals = votes["original_knowledge_units"].tolist()
    voted = votes["knowledge_units"].tolist()
    for position in np.flatnonzero(useful):
        k_new = _unit_set(voted[position])
        if k_new is None:
            continue
        k_ori = _unit_set(originals[position])
        if not k_ori:
            raise ValueError(
                f"column 'original_knowledge_units', row {votes.index[position]!r}: "
                "an original needs at least one knowledge unit"
            )
        in_knowcov[position] = True
        coverage[position] = len(k_ori & k_new) / len(k_ori)
    rows["knowcov"] = (coverage, in_knowcov)

    none = (np.zeros(n), np.zeros(n, dtype=bool))
    identified_levels = votes["identified_bloom_level"]
    if strategy == "cot" and identified_levels.notna().any():
        w_id = _weights(identified_levels, "identified_bloom_level")
        rows["classification_acc"] = (ori_known & (w_id == w_ori), ori_known)
    else:
        rows["classification_acc"] = none
    identified_units = votes["identified_knowledge_units"]
    if strategy == "cot" and identified_units.notna().any():
        correct = np.array(
            [
                _unit_set(found) is not None and _unit_set(found) == _unit_set(original)
                for found, original in zip(identified_units.tolist(), originals)
            ],
            dtype=bool,
        )
        rows["knowledge_id_acc"] = (correct, np.ones(n, dtype=bool))
    else:
        rows["knowledge_id_acc"] = none

    rows["parse_failure_rate"] = (
        (votes["parse_status"] != "ok").to_numpy(dtype=bool),
        np.ones(n, dtype=bool),
    )
    return rows


# --------------------------------------------------------------------------------------------
# Bootstrap


def _resample_counts(rng: np.random.Generator, n: int, n_resamples: int) -> Iterable[np.ndarray]:
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


def _percentile_interval(estimates: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    tail = (1.0 - confidence) / 2.0 * 100.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: metric not defined
        low, high = np.nanpercentile(estimates, [tail, 100.0 - tail], axis=0)
    return low, high


# --------------------------------------------------------------------------------------------
# Public API


def gated_criteria(reliability: pd.DataFrame | None, cell: tuple[str, str, str]) -> set[str]:
    """Criteria whose panel-level row for ``cell`` failed the α gate (``gate_passed`` False).

    A null ``gate_passed`` (α not computable) is not a failure.
    """
    if reliability is None or reliability.empty:
        return set()
    _require_columns(
        reliability, ("model", "dataset", "strategy", "criterion", "judge", "gate_passed"), "reliability"
    )
    model, dataset, strategy = cell
    panel = reliability[
        (reliability["model"] == model)
        & (reliability["dataset"] == dataset)
        & (reliability["strategy"] == strategy)
        & reliability["judge"].isna()
    ]
    failed = panel[panel["gate_passed"].map(lambda value: value is False or value is np.False_)]
    return set(failed["criterion"].tolist())


def score_cell(
    votes: pd.DataFrame,
    reliability: pd.DataFrame | None,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    published_lines: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """All :data:`METRIC_NAMES` for the one (model, dataset, strategy) cell in ``votes``.

    Returns the columns of :data:`bloomqg.schemas.METRICS`, one row per metric in
    :data:`METRIC_NAMES` order. CIs are percentile bootstrap intervals over questions
    (``n_resamples`` resamples of the cell's rows, seeded by ``seed``); counts get none.
    ``alpha_gated`` is True when a criterion in :data:`METRIC_CRITERIA` failed the α gate in
    ``reliability``; without a reliability frame, the votes' own cell-level ``alpha_gated``
    flag marks every metric that depends on a judged criterion.

    ``published_lines`` (columns of :data:`bloomqg.schemas.PUBLISHED_VOTE_LINES`, the same cell):
    an imported run's votes file line by line; unique, readable and answerable are then the
    share of its lines (non-null) voted yes, with a bootstrap over lines and ``n`` = lines.
    """
    _require_columns(votes, _REQUIRED_VOTE_COLUMNS, "votes")
    if votes.empty:
        raise ValueError("votes: no rows; a cell needs at least one generated question")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    model, dataset, strategy = cell = _cell_key(votes)
    votes = votes.reset_index(drop=True)
    per_row = _per_row(votes, strategy)

    ratio_names = [name for name in METRIC_NAMES if name in per_row]
    numerators = np.column_stack([per_row[name][0].astype(np.float64) for name in ratio_names])
    members = np.column_stack([per_row[name][1].astype(np.float64) for name in ratio_names])
    is_total = np.array([name.endswith("_total") for name in ratio_names])
    scale = np.array([100.0 if name in PERCENT_METRICS else 1.0 for name in ratio_names])

    def estimate(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
        return np.where(is_total, num, ratio) * scale

    sizes = members.sum(axis=0)
    values = estimate(numerators.sum(axis=0), sizes)
    rng = np.random.default_rng(seed)
    estimates = np.concatenate(
        [
            estimate(counts @ numerators, counts @ members)
            for counts in _resample_counts(rng, len(votes), n_resamples)
        ]
    )
    low, high = _percentile_interval(estimates, confidence)
    if sizes[ratio_names.index("cogshift")] == 0:
        # No question with both levels known: shift totals are undefined, not zero.
        values[is_total] = np.nan
    undefined = np.isnan(values)
    low[undefined] = np.nan
    high[undefined] = np.nan

    results = {
        name: (values[i], low[i], high[i], int(sizes[i])) for i, name in enumerate(ratio_names)
    }
    if published_lines is not None:
        results.update(_line_rates(published_lines, cell, n_resamples, confidence, seed))
    useful_rows = int(per_row["usability"][0].sum())
    results["n_generated"] = (float(len(votes)), np.nan, np.nan, len(votes))
    results["n_useful"] = (float(useful_rows), np.nan, np.nan, int(per_row["usability"][1].sum()))

    if reliability is not None:
        gated = gated_criteria(reliability, cell)
    elif bool(votes["alpha_gated"].any()):
        gated = set(BINARY_CRITERIA) | {"bloom_level", "knowledge_units"}
    else:
        gated = set()
    if gated:
        logger.info("%s/%s/%s: criteria failing the α gate: %s", model, dataset, strategy, sorted(gated))

    records = []
    for name in METRIC_NAMES:
        value, ci_low, ci_high, size = results[name]
        records.append(
            {
                "model": model,
                "dataset": dataset,
                "strategy": strategy,
                "metric": name,
                "value": float(value),
                "ci_low": float(ci_low),
                "ci_high": float(ci_high),
                "n": int(size),
                "alpha_gated": bool(METRIC_CRITERIA.get(name, frozenset()) & gated),
            }
        )
    return pd.DataFrame.from_records(records, columns=METRICS.names)


def _line_rates(
    lines: pd.DataFrame, cell: tuple[str, str, str], n_resamples: int, confidence: float, seed: int
) -> dict[str, tuple[float, float, float, int]]:
    """Table 4's unique / readable / answerable over every published line: (value, CI, n)."""
    _require_columns(lines, ("model", "dataset", "strategy", *BINARY_CRITERIA), "published_lines")
    if lines.empty:
        raise ValueError(f"published_lines of {cell}: no lines")
    if _cell_key(lines) != cell:
        raise ValueError(f"published_lines are of cell {_cell_key(lines)}, votes of {cell}")
    numerators = np.column_stack([_true(lines[c]) for c in BINARY_CRITERIA]).astype(np.float64)
    members = np.column_stack([_not_null(lines[c]) for c in BINARY_CRITERIA]).astype(np.float64)

    def rate(num: np.ndarray, den: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan) * 100.0

    sizes = members.sum(axis=0)
    values = rate(numerators.sum(axis=0), sizes)
    rng = np.random.default_rng(seed)
    estimates = np.concatenate(
        [rate(counts @ numerators, counts @ members) for counts in _resample_counts(rng, len(lines), n_resamples)]
    )
    low, high = _percentile_interval(estimates, confidence)
    return {
        name: (float(values[i]), float(low[i]), float(high[i]), int(sizes[i]))
        for i, name in enumerate(BINARY_CRITERIA)
    }


def _level_label(value: object) -> str:
    return UNCATEGORIZED if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _level_pairs(votes: pd.DataFrame, kind: str) -> pd.DataFrame:
    """(original_level, other_level) labels of the rows ``kind`` looks at."""
    if kind == "judged":
        _require_columns(
            votes, ("useful", "original_bloom_level", "bloom_level", "bloom_level_null_reason"), "votes"
        )
        has_verdict = votes["bloom_level"].notna() | (
            votes["bloom_level_null_reason"] == JUDGED_UNCATEGORIZED
        )
        chosen = votes[_true(votes["useful"]) & has_verdict.to_numpy(dtype=bool)]
        other = chosen["bloom_level"]
    elif kind == "classified":
        _require_columns(votes, ("original_bloom_level", "identified_bloom_level"), "votes")
        if votes["identified_bloom_level"].isna().all():
            chosen = votes.iloc[0:0]
        else:
            chosen = votes
        other = chosen["identified_bloom_level"]
    else:
        raise ValueError(f"kind must be 'judged' or 'classified', got {kind!r}")
    return pd.DataFrame(
        {
            "original_level": [_level_label(value) for value in chosen["original_bloom_level"].tolist()],
            "other_level": [_level_label(value) for value in other.tolist()],
        }
    )


def transition_counts(votes: pd.DataFrame, kind: str = "judged") -> pd.DataFrame:
    """Counts of (original level → other level), in Bloom order, non-zero pairs only.

    ``kind="judged"``: original vs the judged level of the new question over useful questions
    with a verdict (the paper's Figure 2). ``kind="classified"``: original vs the generating
    model's own classification of the original, over all rows (Figure 6); empty when the model
    made none. A null level is labelled ``"Uncategorized"``.
    """
    pairs = _level_pairs(votes, kind)
    counts = pairs.groupby(["original_level", "other_level"]).size().rename("count").reset_index()
    counts["count"] = counts["count"].astype("int64")
    order = counts["original_level"].map(_TRANSITION_ORDER) * 10 + counts["other_level"].map(
        _TRANSITION_ORDER
    )
    return counts.iloc[np.argsort(order.to_numpy(), kind="stable")].reset_index(drop=True)


def per_level_accuracy(votes: pd.DataFrame, kind: str = "classified") -> pd.DataFrame:
    """Per original level: n, correct, accuracy (percent).

    ``kind="classified"``: the model's classification of originals that have a level
    (Figure 6). ``kind="judged"``: CatCons per original level, Uncategorized originals
    included as their own row (a match only against a judged-Uncategorized question).
    """
    pairs = _level_pairs(votes, kind)
    if kind == "classified":
        pairs = pairs[pairs["original_level"] != UNCATEGORIZED]
    pairs = pairs.assign(correct=pairs["original_level"] == pairs["other_level"])
    table = (
        pairs.groupby("original_level")["correct"].agg(n="size", correct="sum").reset_index()
    )
    table["n"] = table["n"].astype("int64")
    table["correct"] = table["correct"].astype("int64")
    table["accuracy"] = table["correct"] / table["n"] * 100.0
    order = table["original_level"].map(_TRANSITION_ORDER).to_numpy()
    return table.iloc[np.argsort(order, kind="stable")].reset_index(drop=True)


def _fisher_interval(r: float, n: int, confidence: float, spearman: bool) -> tuple[float, float]:
    """Fisher-z interval; Spearman uses the Bonett–Wright (2000) standard error."""
    from scipy import stats

    if n <= 3 or not np.isfinite(r):
        return math.nan, math.nan
    se = math.sqrt((1.0 + r * r / 2.0) / (n - 3)) if spearman else 1.0 / math.sqrt(n - 3)
    quantile = stats.norm.ppf(0.5 + confidence / 2.0)
    with np.errstate(divide="ignore"):
        z = np.arctanh(np.clip(r, -1.0, 1.0))
    return float(np.tanh(z - quantile * se)), float(np.tanh(z + quantile * se))


def correlations(
    all_metrics: pd.DataFrame,
    pairs: Sequence[tuple[str, str]] = (("classification_acc", "catcons"), ("knowledge_id_acc", "knowcov")),
    *,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Pearson and Spearman correlation across models within each (dataset, strategy).

    Columns: dataset, strategy, x_metric, y_metric, method, r, p_value, n, ci_low, ci_high.
    Models with either metric NaN are left out; ``n`` counts the rest. With n < 3, r and p are
    NaN; with n ≤ 3 the CI is NaN (Fisher z needs n > 3). Constant input gives NaN r.
    """
    from scipy import stats

    _require_columns(all_metrics, ("model", "dataset", "strategy", "metric", "value"), "all_metrics")
    records = []
    for (dataset, strategy), group in all_metrics.groupby(["dataset", "strategy"], sort=True):
        wide = group.pivot_table(index="model", columns="metric", values="value", aggfunc="first")
        for x_metric, y_metric in pairs:
            if x_metric in wide and y_metric in wide:
                both = wide[[x_metric, y_metric]].dropna()
                x, y = both[x_metric].to_numpy(float), both[y_metric].to_numpy(float)
            else:
                x = y = np.array([])
            n = len(x)
            for method in ("pearson", "spearman"):
                r = p = math.nan
                constant = n >= 3 and (np.ptp(x) == 0 or np.ptp(y) == 0)
                if n >= 3 and not constant:
                    result = stats.pearsonr(x, y) if method == "pearson" else stats.spearmanr(x, y)
                    r, p = float(result.statistic), float(result.pvalue)
                ci_low, ci_high = _fisher_interval(r, n, confidence, spearman=method == "spearman")
                records.append(
                    {
                        "dataset": dataset,
                        "strategy": strategy,
                        "x_metric": x_metric,
                        "y_metric": y_metric,
                        "method": method,
                        "r": r,
                        "p_value": p,
                        "n": n,
                        "ci_low": ci_low,
                        "ci_high": ci_high,
                    }
                )
    columns = ["dataset", "strategy", "x_metric", "y_metric", "method", "r", "p_value", "n", "ci_low", "ci_high"]
    return pd.DataFrame.from_records(records, columns=columns)


#: Per-question outcomes that are 0/1 (McNemar); the rest are graded (Wilcoxon).
_BINARY_OUTCOMES = frozenset(
    {"unique", "readable", "answerable", "usability", "catcons", "classification_acc", "knowledge_id_acc", "parse_failure_rate"}
)
_PAIRABLE = _BINARY_OUTCOMES | {"knowcov", "cogshift"}


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
    denominator in :func:`score_cell`). ``cot``/``fgp`` are the metric over those pairs,
    ``diff`` = fgp − cot (percentage points for percent metrics) with a paired percentile
    bootstrap CI. Binary outcomes: exact McNemar (binomial test on the discordant pairs; p = 1
    when there are none) with Cohen's h. Graded outcomes (knowcov, cogshift): Wilcoxon
    signed-rank on the non-zero differences (p = 1 when all are zero) with the matched-pairs
    rank-biserial correlation. No pairs: NaN throughout with ``n_pairs`` 0.
    """
    from scipy import stats

    unknown = [name for name in metrics if name not in _PAIRABLE]
    if unknown:
        raise ValueError(f"metrics {unknown} have no per-question outcome; pairable: {sorted(_PAIRABLE)}")
    for frame, what in ((cot_votes, "cot_votes"), (fgp_votes, "fgp_votes")):
        _require_columns(frame, _REQUIRED_VOTE_COLUMNS + ("item_id",), what)
        if frame["item_id"].duplicated().any():
            duplicated = frame.loc[frame["item_id"].duplicated(), "item_id"].tolist()[:5]
            raise ValueError(f"{what}: item_id must be unique, repeated: {duplicated}")
    cot_model, cot_dataset, cot_strategy = _cell_key(cot_votes)
    fgp_model, fgp_dataset, fgp_strategy = _cell_key(fgp_votes)
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
    cot_rows, fgp_rows = _per_row(cot, "cot"), _per_row(fgp, "fgp")
    rng = np.random.default_rng(seed)

    records = []
    for name in metrics:
        scale = 100.0 if name in PERCENT_METRICS else 1.0
        defined = cot_rows[name][1].astype(bool) & fgp_rows[name][1].astype(bool)
        a = cot_rows[name][0][defined].astype(float)
        b = fgp_rows[name][0][defined].astype(float)
        n_pairs = int(defined.sum())
        record = {
            "model": cot_model,
            "dataset": cot_dataset,
            "metric": name,
            "n_pairs": n_pairs,
            "cot": math.nan,
            "fgp": math.nan,
            "diff": math.nan,
            "ci_low": math.nan,
            "ci_high": math.nan,
            "test": "mcnemar" if name in _BINARY_OUTCOMES else "wilcoxon",
            "p_value": math.nan,
            "effect_size": math.nan,
            "effect_size_name": "cohens_h" if name in _BINARY_OUTCOMES else "rank_biserial",
        }
        if n_pairs:
            differences = (b - a) * scale
            boot = np.concatenate(
                [counts @ differences / n_pairs for counts in _resample_counts(rng, n_pairs, n_resamples)]
            )
            ci_low, ci_high = _percentile_interval(boot[:, None], confidence)
            record.update(
                cot=float(a.mean() * scale),
                fgp=float(b.mean() * scale),
                diff=float(differences.mean()),
                ci_low=float(ci_low[0]),
                ci_high=float(ci_high[0]),
            )
            if name in _BINARY_OUTCOMES:
                only_fgp = int(np.sum((b == 1) & (a == 0)))
                only_cot = int(np.sum((a == 1) & (b == 0)))
                discordant = only_fgp + only_cot
                record["p_value"] = (
                    float(stats.binomtest(only_fgp, discordant, 0.5).pvalue) if discordant else 1.0
                )
                record["effect_size"] = float(
                    2 * math.asin(math.sqrt(b.mean())) - 2 * math.asin(math.sqrt(a.mean()))
                )
            else:
                nonzero = differences[differences != 0]
                if nonzero.size:
                    record["p_value"] = float(stats.wilcoxon(nonzero).pvalue)
                    ranks = stats.rankdata(np.abs(nonzero))
                    record["effect_size"] = float(
                        (ranks[nonzero > 0].sum() - ranks[nonzero < 0].sum()) / ranks.sum()
                    )
                else:
                    record["p_value"] = 1.0
                    record["effect_size"] = 0.0
        records.append(record)
    return pd.DataFrame.from_records(records, columns=list(PAIRED_COLUMNS))


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
    _require_columns(votes, ("model", "dataset", "strategy"), "votes")
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

