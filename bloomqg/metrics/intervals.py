"""Percentile bootstrap over rows, in blocks so memory stays bounded for large cells."""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import numpy as np

#: Resample rows per block, so memory stays bounded for large cells.
_BOOTSTRAP_BLOCK_CELLS = 4_000_000


def resample_counts(rng: np.random.Generator, n: int, n_resamples: int) -> Iterable[np.ndarray]:
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


def percentile_interval(estimates: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    tail = (1.0 - confidence) / 2.0 * 100.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: metric not defined
        low, high = np.nanpercentile(estimates, [tail, 100.0 - tail], axis=0)
    return low, high
