"""The quantiles of the normal, Student's t and beta distributions, as ``scipy.stats`` computes
them, without importing ``scipy.stats``.

``import scipy.stats`` loads every distribution and test scipy has (half a second of a job's
start on a quiet core, more on a loaded one); most analysis jobs need a quantile or two and
nothing else. Each function here calls the same ``scipy.special`` ufunc that
``scipy.stats.<dist>.ppf`` calls (``ndtri``, ``stdtrit``, the beta's ``_beta_ppf``) and applies
``rv_continuous.ppf``'s own rules around it: NaN for invalid parameters (not > 0) or a
probability outside [0, 1] or NaN, the support's ends at 0 and 1, the result times scale 1 plus
loc 0. The values are bit for bit those of ``scipy.stats`` (tests/unit/test_quantiles.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _ppf(ufunc: Callable[..., Any], q: Any, shapes: tuple[Any, ...], support: tuple[float, float]) -> Any:
    """``rv_continuous.ppf`` (loc 0, scale 1) around ``ufunc(q, *shapes)``: a float for scalars."""
    arrays = np.broadcast_arrays(np.asarray(q), *(np.asarray(shape) for shape in shapes))
    q, shapes = arrays[0], arrays[1:]
    valid = np.ones(q.shape, dtype=bool)
    for shape in shapes:
        valid &= shape > 0
    output = np.full(q.shape, np.nan)
    output[valid & (q == 0)] = support[0]
    output[valid & (q == 1)] = support[1]
    inside = valid & (0 < q) & (q < 1)
    if np.any(inside):
        # scale 1 and loc 0 as scipy applies them (x + 0.0 turns a -0.0 into 0.0)
        output[inside] = ufunc(q[inside], *(shape[inside] for shape in shapes)) * 1.0 + 0.0
    return output[()] if output.ndim == 0 else output


# scipy.special is imported where a quantile is computed, not at the top: it is a sixth of a second
# more, and the jobs that only import the intervals (tables, the explorer, the report) compute none.


def norm_ppf(q: Any) -> Any:
    """``scipy.stats.norm.ppf(q)``."""
    from scipy import special

    return _ppf(special.ndtri, q, (), (-np.inf, np.inf))


def t_ppf(q: Any, df: Any) -> Any:
    """``scipy.stats.t.ppf(q, df)``."""
    from scipy import special

    return _ppf(lambda p, d: special.stdtrit(d, p), q, (df,), (-np.inf, np.inf))


def beta_ppf(q: Any, a: Any, b: Any) -> Any:
    """``scipy.stats.beta.ppf(q, a, b)``."""
    try:  # the beta quantile scipy.stats.beta.ppf calls (scipy >= 1.12; before, scipy.stats._boost's)
        from scipy.special._ufuncs import _beta_ppf
    except ImportError:  # pragma: no cover - an older scipy: ask scipy.stats itself
        from scipy import stats

        return stats.beta.ppf(q, a, b)
    return _ppf(_beta_ppf, q, (a, b), (0.0, 1.0))
