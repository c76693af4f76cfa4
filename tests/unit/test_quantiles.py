"""The quantiles computed without ``scipy.stats`` (:mod:`bloomqg.stats.quantiles`) are bit for bit
those of ``scipy.stats``: every interval, table and report of a study reads them."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from bloomqg.stats.quantiles import beta_ppf, norm_ppf, t_ppf

# probabilities as the intervals ask for them (tails of 0.8 to 0.999), the ends, and outside
QS = np.array([0.0, 1e-300, 1e-12, 0.0005, 0.005, 0.025, 0.05, 0.1, 0.5, 0.9, 0.95, 0.975, 0.995, 0.9995,
               1 - 1e-12, 1.0, -0.1, 1.1, np.nan])
# shapes as the callers pass them: counts, half counts, soft (fractional) counts, 1e-12 guards,
# degrees of freedom from 1 to large, and invalid ones (0, negative, NaN, infinite)
SHAPES = np.array([1e-12, 0.5, 1.0, 1.5, 2.0, 2.37, 3.0, 7.5, 10.0, 30.0, 100.5, 1000.0, 1e6, 0.0, -1.0, np.nan,
                   np.inf])


def same(a, b) -> bool:
    """Equal bit for bit (NaN where NaN, the sign of a zero included)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def test_the_normal_quantile_is_scipys():
    assert same(norm_ppf(QS), stats.norm.ppf(QS))
    for q in QS:
        assert same(norm_ppf(float(q)), stats.norm.ppf(float(q)))
        assert type(norm_ppf(float(q))) is type(stats.norm.ppf(float(q)))


def test_the_t_quantile_is_scipys():
    q, df = np.meshgrid(QS, SHAPES)
    assert same(t_ppf(q, df), stats.t.ppf(q, df))
    assert same(t_ppf(0.975, SHAPES), stats.t.ppf(0.975, SHAPES))
    assert same(t_ppf(0.975, 4.0), stats.t.ppf(0.975, 4.0))


@pytest.mark.filterwarnings("ignore:Error in function boost")  # extreme shapes: scipy warns the same
def test_the_beta_quantile_is_scipys():
    q, a, b = np.meshgrid(QS, SHAPES, SHAPES, indexing="ij")
    assert same(beta_ppf(q, a, b), stats.beta.ppf(q, a, b))
    # as the score intervals call it: one tail, arrays of counts
    k = np.arange(0.0, 40.0, 0.5)
    assert same(beta_ppf(0.025, np.maximum(k, 1e-12), 40 - k + 1), stats.beta.ppf(0.025, np.maximum(k, 1e-12), 40 - k + 1))
    assert same(beta_ppf(0.975, 3.5, 0.5), stats.beta.ppf(0.975, 3.5, 0.5))


@pytest.mark.parametrize("seed", [0, 1])
def test_random_arguments_agree(seed):
    rng = np.random.default_rng(seed)
    q = rng.uniform(0, 1, 2000)
    a, b = rng.exponential(20, 2000), rng.exponential(20, 2000)
    assert same(beta_ppf(q, a, b), stats.beta.ppf(q, a, b))
    assert same(t_ppf(q, a), stats.t.ppf(q, a))
    assert same(norm_ppf(q), stats.norm.ppf(q))


def test_the_analysis_modules_do_not_import_scipy_stats():
    """What the quantiles are for: a job that scores, votes, tabulates or reports, and a Snakemake
    start (the Snakefile imports the study's config and the annotation settings), start without
    ``scipy.stats`` (the functions that need it import it where they run)."""
    modules = ["bloomqg.metrics.cell", "bloomqg.voting.cell", "bloomqg.reporting.tables.write",
               "bloomqg.reporting.figures.write", "bloomqg.reporting.report", "bloomqg.reporting.explorer.write",
               "bloomqg.reporting.bundle", "bloomqg.metrics.answer", "bloomqg.metrics.robustness",
               "bloomqg.metrics.plan", "bloomqg.annotation.plan", "bloomqg.annotation.calibration_tables",
               "bloomqg.annotation.alt_test", "bloomqg.annotation.settings", "bloomqg.study.config"]
    code = f"import sys; import {', '.join(modules)}; print('scipy.stats' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
