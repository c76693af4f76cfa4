"""Correlations of two metrics across models (Figure 5), with Fisher-z intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from bloomqg.metrics.rows import require_columns
from bloomqg.stats.normal import fisher_z_ci

#: The paper's Figure 5: does a model that classifies the original well also write at its level,
#: and one that names the original's knowledge unit also keep it?
FIGURE5_PAIRS: tuple[tuple[str, str], ...] = (("classification_acc", "catcons"), ("knowledge_id_acc", "knowcov"))


def correlations(
    all_metrics: pd.DataFrame,
    pairs: Sequence[tuple[str, str]] = FIGURE5_PAIRS,
    *,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Pearson and Spearman correlation across models within each (dataset, strategy).

    Columns: dataset, strategy, x_metric, y_metric, method, r, p_value, n, ci_low, ci_high.
    Models with either metric NaN are left out; ``n`` counts the rest. With n < 3, r and p are
    NaN; with n ≤ 3 the CI is NaN (Fisher z needs n > 3). Constant input gives NaN r.
    """
    from scipy import stats

    require_columns(all_metrics, ("model", "dataset", "strategy", "metric", "value"), "all_metrics")
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
                ci_low, ci_high = fisher_z_ci(r, n, confidence, spearman=method == "spearman")
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
