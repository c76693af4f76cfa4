"""Paying the panel for a sample only: do PPI++ intervals from local verdicts cover the full panel?

The setting simulated: a study judges every question with local judges (the ``learned`` judge
for Bloom level and knowledge unit, ``rules`` for uniqueness) and sends a random sample of each
cell's questions to the API panel. Per cell and metric, PPI++ (bloomqg's own estimator,
:func:`bloomqg.annotation.ppi.calibrated_mean`, the one ``calibrate`` reports) combines the
panel's verdicts on the sample (gold) with the local verdicts on every question (predictions).

On the release's GLM-4-9B slice, the panel's verdict on every question is known, so the
full-panel value of each metric is known too. For each fraction of panel calls (5/10/20/40%),
``--draws`` random samples per cell: the coverage (share of intervals holding the full-panel
value) and the mean width relative to the full panel's own interval (the central-limit interval
of all the cell's panel verdicts); beside it the width of the panel sample alone (no local
judge). The learned judge's verdicts are out-of-fold (GroupKFold by original item, written by
``benchmarks/learned_judge.py --predictions``): no question's verdict comes from a model that
saw its original item — cross-fitting, the condition under which its training on panel votes
does not bias the estimate.

Metrics, per question (cells: CS CoT, CS FGP, K-12 math FGP; the level metrics on CS only):
``level_<L>`` (judged level is L), ``level_kept`` (judged level = the original's labelled
level), ``unit_kept`` (judged unit = the original's), ``unique``.

    python benchmarks/learned_judge.py --predictions results/benchmarks/learned_oof.parquet
    python benchmarks/cascade.py --predictions results/benchmarks/learned_oof.parquet [--draws 500]

The last line is JSON: ``{"coverage": {metric: {fraction: c}}, "width_ratio": {...},
"panel_only_width_ratio": {...}, "fraction_at_1_5x": {metric: fraction or null}}``, each the
lowest coverage / highest width over the cells.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bloomqg.annotation.ppi import calibrated_mean, classical_mean  # noqa: E402
from bloomqg.inputs.bloom import BLOOM_LEVELS  # noqa: E402

FRACTIONS = (0.05, 0.10, 0.20, 0.40)


def metric_columns(table: pd.DataFrame) -> dict[str, tuple[pd.Series, pd.Series]]:
    """metric -> (panel indicator, local indicator), NaN where either has no verdict."""

    def indicator(judged: pd.Series, reference) -> pd.Series:
        values = (judged == reference).astype(float)
        missing = judged.isna() | (reference.isna() if isinstance(reference, pd.Series) else False)
        return values.mask(missing)

    metrics = {}
    for level in BLOOM_LEVELS:
        metrics[f"level_{level}"] = (indicator(table["panel_level"], level), indicator(table["learned_level"], level))
    metrics["level_kept"] = (indicator(table["panel_level"], table["original_bloom_level"]),
                             indicator(table["learned_level"], table["original_bloom_level"]))
    metrics["unit_kept"] = (indicator(table["panel_unit"], table["original_unit"]),
                            indicator(table["learned_unit"], table["original_unit"]))
    metrics["unique"] = (table["panel_unique"].map(lambda v: np.nan if v is None or pd.isna(v) else float(v)),
                         table["rules_unique"].map(lambda v: np.nan if v is None or pd.isna(v) else float(v)))
    return metrics


def simulate(gold: np.ndarray, local: np.ndarray, fraction: float, draws: int, rng: np.random.Generator) -> dict:
    """Coverage of the full-panel mean and widths relative to its interval, over ``draws`` samples."""
    n_items = len(gold)
    n = max(2, int(round(fraction * n_items)))
    truth = gold.mean()
    full = classical_mean(gold)
    full_width = float(full.ci_high - full.ci_low)
    order = np.argsort(rng.random((draws, n_items)), axis=1)
    labelled, unlabelled = order[:, :n], order[:, n:]
    estimate = calibrated_mean(gold[labelled], local[labelled], local[unlabelled])
    alone = classical_mean(gold[labelled])
    covered = (estimate.ci_low <= truth) & (truth <= estimate.ci_high)
    return {"n": n, "coverage": float(covered.mean()),
            "width_ratio": float(np.mean(estimate.ci_high - estimate.ci_low) / full_width) if full_width else float("nan"),
            "panel_only_width_ratio": float(np.mean(alone.ci_high - alone.ci_low) / full_width) if full_width else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--predictions", type=Path, required=True,
                        help="out-of-fold verdicts from benchmarks/learned_judge.py --predictions")
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    table = pd.read_parquet(args.predictions)
    rng = np.random.default_rng(args.seed)

    coverage: dict[str, dict[str, float]] = {}
    width: dict[str, dict[str, float]] = {}
    alone: dict[str, dict[str, float]] = {}
    print(f"{'cell':<14}{'metric':<18}{'full':>7}" + "".join(f"{f'{f:.0%} cov/width/alone':>26}" for f in FRACTIONS))
    for (dataset, strategy), cell in table.groupby(["dataset", "strategy"]):
        for metric, (gold, local) in metric_columns(cell).items():
            both = gold.notna() & local.notna()
            g, p = gold[both].to_numpy(float), local[both].to_numpy(float)
            if len(g) < 50 or g.std() == 0:
                continue  # math has no panel level; a constant verdict has no interval to cover
            line = f"{dataset + '/' + strategy:<14}{metric:<18}{g.mean():7.3f}"
            for fraction in FRACTIONS:
                figures = simulate(g, p, fraction, args.draws, rng)
                key = f"{fraction:.2f}"
                coverage.setdefault(metric, {})[key] = min(coverage.get(metric, {}).get(key, 1.0), figures["coverage"])
                width.setdefault(metric, {})[key] = max(width.get(metric, {}).get(key, 0.0), figures["width_ratio"])
                alone.setdefault(metric, {})[key] = max(alone.get(metric, {}).get(key, 0.0), figures["panel_only_width_ratio"])
                line += f"{figures['coverage']:>12.3f}/{figures['width_ratio']:5.2f}/{figures['panel_only_width_ratio']:5.2f}"
            print(line)
    reaches = {metric: next((float(f) for f, ratio in ratios.items() if ratio <= 1.5), None) for metric, ratios in width.items()}
    worst_at_10 = min(c["0.10"] for c in coverage.values())
    print(f"\nlowest coverage at >= 10% panel calls: {min(min(v for k, v in c.items() if float(k) >= 0.1) for c in coverage.values()):.3f}"
          f" (at 10%: {worst_at_10:.3f})")
    for metric, fraction in reaches.items():
        print(f"  {metric}: width <= 1.5x the full panel's from {'never' if fraction is None else f'{fraction:.0%}'} of panel calls")
    print(json.dumps({"draws": args.draws, "coverage": coverage, "width_ratio": width,
                      "panel_only_width_ratio": alone, "fraction_at_1_5x": reaches}))


if __name__ == "__main__":
    main()
