"""Does calibration hold? Coverage and width of the three 95% intervals — judges-only,
humans-only, PPI++ — on simulated cells whose truth is known (issue 30), beside the ones they
were chosen over: the humans' Wald interval (``humans_wald``; the report prints the exact one,
``humans``), PPI++ with two pseudo-disagreements of each kind instead of one (``ppi_pseudo2``) and
without any (``ppi_plain``).

Each replication simulates a cell of N = 3,200 generated questions with a true verdict and a
panel's verdict at the paper's quality (Table 9: Bloom level agreement 46.58%, confusions mostly
to adjacent levels; unique / readable / answerable 90.75% / 98.08% / 95.83%;
:mod:`bloomqg.annotation.simulation`), labels a random n of them, and asks whether each
interval covers the cell's true share (what experts would say of those N questions). "ppi" is
the estimator bloomqg reports (:func:`bloomqg.annotation.ppi.calibrated_mean`: ppi-python's
PPI++ on the labels plus one pseudo-labelled disagreement of each kind); "ppi_plain" is
ppi-python's PPI++ as is, printed beside it to show why the guard is there. 1,000
replications for n ∈ {50, 100, 200, 400}, every metric of the simulation, vectorised over the
replications (:func:`bloomqg.annotation.ppi.ppi_mean`, checked here against ppi-python on the
first replications when it is installed). The sampling plan (:mod:`bloomqg.annotation.plan`)
is checked on the same simulation: with the n it asks for, does PPI++ reach ± 5 points?

A second design checks PPI++ of a paired difference whose judges err differently per arm (a
true difference of 0 the judges see as +60 points; :func:`asymmetric_paired`) at 10, 30 and 100
labels: its mean error, coverage and width ("asymmetric_paired" in the JSON line).

Prints a table per metric, writes a figure, and ends with one JSON line
``{"coverage": {"judges": {"50": …}, "humans": {…}, "ppi": {…}}, "width": {…}, "plan": {…}}``:
each coverage the lowest over the metrics, each width the mean (percentage points); the plan
entry gives, per headline metric, the n the plan asks for ± 5 points and the half-width reached.

    python benchmarks/calibration.py [--replications 1000] [--figure results/calibration/benchmark.png]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bloomqg.annotation.plan import DEFAULT_ASSUMED_AGREEMENT, assumed_disagreement, labels_needed  # noqa: E402
from bloomqg.annotation.ppi import (  # noqa: E402
    MeanEstimate,
    calibrated_mean,
    classical_mean,
    ppi_mean,
    with_pseudo_disagreements,
)
from bloomqg.annotation.simulation import SIMULATED_METRICS, simulate  # noqa: E402
from bloomqg.metrics.intervals import IntervalSpec, rate_interval  # noqa: E402


def exact_mean(values: np.ndarray) -> MeanEstimate:
    """The report's interval of a 0/1 sample's mean (Clopper–Pearson by default), per row."""
    low, high = rate_interval(values.sum(-1), values.shape[-1], IntervalSpec().method)
    return MeanEstimate(values.mean(-1), low, high, np.zeros(values.shape[:-1]))

BIG_N = 3200
LABELLED = (50, 100, 200, 400)
ESTIMATORS = ("judges", "humans", "humans_wald", "ppi", "ppi_pseudo2", "ppi_plain")
CHUNK = 100  # replications simulated at once (memory: metrics × 2 × CHUNK × N floats)
PLAN_METRICS = ("usable", "catcons_level", "catcons_order", "cogleap")


def _check_against_ppi_python(truth, panel, n: int) -> float:
    """The largest difference from ppi-python's interval over a few replications and metrics."""
    try:
        from ppi_py import ppi_mean_ci
    except ImportError:
        return float("nan")
    worst = 0.0
    for metric in ("catcons_level", "readable", "share_apply"):
        for r in range(3):
            y, yhat, unlabelled = truth[metric][r, :n], panel[metric][r, :n], panel[metric][r, n:]
            mine = ppi_mean(y, yhat, unlabelled)
            low, high = ppi_mean_ci(y, yhat, unlabelled, alpha=0.05)
            worst = max(worst, abs(float(mine.ci_low) - float(np.ravel(low)[0])),
                        abs(float(mine.ci_high) - float(np.ravel(high)[0])))
    return worst


def run(replications: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    hits = {(e, m, n): 0 for e in ESTIMATORS for m in SIMULATED_METRICS for n in LABELLED}
    widths = {key: 0.0 for key in hits}
    plan_n = {}
    plan_widths = {m: 0.0 for m in PLAN_METRICS}
    plan_hits = {m: 0 for m in PLAN_METRICS}
    check = float("nan")
    done = 0
    while done < replications:
        size = min(CHUNK, replications - done)
        truth, panel = simulate(rng, size, BIG_N)
        if done == 0:
            check = _check_against_ppi_python(truth, panel, LABELLED[0])
            for metric in PLAN_METRICS:  # the plan from the first cell's judges, as a study would
                disagreement = assumed_disagreement(metric, DEFAULT_ASSUMED_AGREEMENT)
                plan_n[metric] = labels_needed(panel[metric][0], disagreement).n_needed
        for metric in SIMULATED_METRICS:
            target = truth[metric].mean(axis=1)
            judges = exact_mean(panel[metric])
            for n in LABELLED:
                y, yhat, unlabelled = truth[metric][:, :n], panel[metric][:, :n], panel[metric][:, n:]
                for name, estimate in (("judges", judges), ("humans", exact_mean(y)),
                                       ("humans_wald", classical_mean(y)),
                                       ("ppi", calibrated_mean(y, yhat, unlabelled)),
                                       ("ppi_pseudo2", calibrated_mean(y, yhat, unlabelled, pseudo_disagreements=2)),
                                       ("ppi_plain", ppi_mean(y, yhat, unlabelled))):
                    covered = (estimate.ci_low <= target) & (target <= estimate.ci_high)
                    hits[(name, metric, n)] += int(covered.sum())
                    widths[(name, metric, n)] += float((estimate.ci_high - estimate.ci_low).sum()) * 100
            if metric in plan_n:
                n = plan_n[metric]
                estimate = calibrated_mean(truth[metric][:, :n], panel[metric][:, :n], panel[metric][:, n:])
                plan_widths[metric] += float((estimate.ci_high - estimate.ci_low).sum()) * 50
                plan_hits[metric] += int(((estimate.ci_low <= target) & (target <= estimate.ci_high)).sum())
        done += size
    coverage = {key: hits[key] / replications for key in hits}
    width = {key: widths[key] / replications for key in widths}
    return {
        "coverage": coverage, "width": width, "ppi_python_max_difference": check,
        "plan": {m: {"n": plan_n[m], "mean_half_width": plan_widths[m] / replications,
                     "coverage": plan_hits[m] / replications} for m in PLAN_METRICS},
    }


#: Labels per paired cell in the design whose judges err differently per arm.
ASYMMETRIC_LABELLED = (10, 30, 100)
ASYMMETRIC_PAIRS = 1000
#: Replications of that design (fast; 2,000 left its mean error ± 0.5 points by chance)
ASYMMETRIC_REPLICATIONS = 20_000


def asymmetric_paired(replications: int, seed: int) -> dict:
    """PPI++ of a paired difference b − a whose true value is 0 while the judges err differently:
    both arms' true rate ½, arm a's judge only misses (false negatives), arm b's only over-calls
    (false positives), both 70% accurate, so the judges see a difference of +60 points. Per
    number of labels: mean error (points), coverage of the cell's true difference, mean width;
    for bloomqg's estimator (``ppi``: leave-one-out λ, the guard in the width, t quantile), the
    guard in the point as well (``ppi_symmetric_guard``: what bloomqg did before) and none."""
    rng = np.random.default_rng(seed)
    human_a = (rng.random((replications, ASYMMETRIC_PAIRS)) < 0.5).astype(float)
    human_b = (rng.random((replications, ASYMMETRIC_PAIRS)) < 0.5).astype(float)
    miss = rng.random(human_a.shape) < 0.6  # 0.5 × 0.6 = 30% of items wrong
    judge_a = np.where((human_a == 1) & miss, 0.0, human_a)
    judge_b = np.where((human_b == 0) & (rng.random(human_b.shape) < 0.6), 1.0, human_b)
    human, judge = human_b - human_a, judge_b - judge_a
    target = human.mean(axis=1)
    out: dict = {}
    for n in ASYMMETRIC_LABELLED:
        y, yhat, unlabelled = human[:, :n], judge[:, :n], judge[:, n:]
        guarded = ppi_mean(*with_pseudo_disagreements(y, yhat, 1, differences=True), unlabelled)
        for name, estimate in (("ppi", calibrated_mean(y, yhat, unlabelled, differences=True)),
                               ("ppi_symmetric_guard", guarded), ("ppi_plain", ppi_mean(y, yhat, unlabelled))):
            covered = (estimate.ci_low <= target) & (target <= estimate.ci_high)
            out.setdefault(name, {})[str(n)] = {
                "bias": round(100 * float(np.mean(estimate.value - target)), 2),
                "coverage": round(float(covered.mean()), 4),
                "width": round(100 * float(np.mean(estimate.ci_high - estimate.ci_low)), 1)}
    return out


def print_table(result: dict) -> None:
    header = f"{'metric':<20}" + "".join(f"{e + ' n=' + str(n):>18}" for e in ESTIMATORS for n in LABELLED)
    print("Coverage of the nominal 95% interval (mean width, points)")
    print(header)
    for metric in SIMULATED_METRICS:
        cells = "".join(
            f"{result['coverage'][(e, metric, n)]:>9.3f} ({result['width'][(e, metric, n)]:4.1f})"
            for e in ESTIMATORS for n in LABELLED
        )
        print(f"{metric:<20}{cells}")


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    colours = {"judges": "tab:red", "humans": "tab:blue", "humans_wald": "tab:cyan", "ppi": "tab:green",
               "ppi_pseudo2": "tab:purple", "ppi_plain": "tab:olive"}
    labels = {"judges": "judges only", "humans": "humans only (exact)", "humans_wald": "humans only (Wald)",
              "ppi": "PPI++ (+1 pseudo-error, bloomqg)", "ppi_pseudo2": "PPI++ (+2 pseudo-errors)",
              "ppi_plain": "PPI++ (ppi-python as is)"}
    for estimator in ESTIMATORS:
        for metric in SIMULATED_METRICS:
            left.plot(LABELLED, [result["coverage"][(estimator, metric, n)] for n in LABELLED],
                      color=colours[estimator], alpha=0.25, lw=0.8)
            right.plot(LABELLED, [result["width"][(estimator, metric, n)] for n in LABELLED],
                       color=colours[estimator], alpha=0.25, lw=0.8)
        left.plot(LABELLED, [min(result["coverage"][(estimator, m, n)] for m in SIMULATED_METRICS) for n in LABELLED],
                  color=colours[estimator], lw=2, label=f"{labels[estimator]} (lowest)")
        right.plot(LABELLED, [np.mean([result["width"][(estimator, m, n)] for m in SIMULATED_METRICS])
                              for n in LABELLED], color=colours[estimator], lw=2, label=f"{labels[estimator]} (mean)")
    left.axhline(0.95, color="black", ls="--", lw=0.8)
    left.set(xscale="log", xticks=LABELLED, xticklabels=LABELLED, xlabel="human labels per cell (n)",
             ylabel="coverage of the 95% interval", ylim=(0, 1.02))
    right.set(xscale="log", xticks=LABELLED, xticklabels=LABELLED, xlabel="human labels per cell (n)",
              ylabel="interval width (points)")
    from matplotlib.ticker import NullFormatter

    for axis in (left, right):
        axis.xaxis.set_minor_formatter(NullFormatter())
    left.legend(fontsize=7, loc="lower left")
    right.legend(fontsize=7)
    fig.suptitle(f"Simulated cells of N = {BIG_N:,}, judges at the paper's agreement; thin lines: one metric each",
                 fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replications", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--figure", type=Path, default=Path("results/calibration/benchmark.png"))
    args = parser.parse_args()
    started = time.perf_counter()
    result = run(args.replications, args.seed)
    print_table(result)
    plot(result, args.figure)
    print(f"figure: {args.figure}; ppi-python check: largest difference {result['ppi_python_max_difference']:.2e}; "
          f"{time.perf_counter() - started:.1f} s")
    for metric, entry in result["plan"].items():
        print(f"plan: {metric}: n = {entry['n']} for ± 5 points -> mean half-width {entry['mean_half_width']:.2f}, "
              f"coverage {entry['coverage']:.3f}")
    asymmetric = asymmetric_paired(ASYMMETRIC_REPLICATIONS, args.seed + 1)
    print("paired difference 0, judges erring differently per arm: bias (points), coverage, width")
    for name, by_n in asymmetric.items():
        print(f"  {name:<22}" + "".join(f"  n={n}: {v['bias']:+.2f} {v['coverage']:.3f} ({v['width']:.1f})"
                                          for n, v in by_n.items()))
    summary = {
        "asymmetric_paired": asymmetric,
        "coverage": {e: {str(n): min(result["coverage"][(e, m, n)] for m in SIMULATED_METRICS) for n in LABELLED}
                     for e in ESTIMATORS},
        "width": {e: {str(n): round(float(np.mean([result["width"][(e, m, n)] for m in SIMULATED_METRICS])), 3)
                      for n in LABELLED} for e in ESTIMATORS},
        "plan": {m: {"n": v["n"], "mean_half_width": round(v["mean_half_width"], 3)} for m, v in result["plan"].items()},
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
