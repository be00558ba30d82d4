"""Average ranks (ties share the mean of their positions), in numpy alone.

The same numbers as ``scipy.stats.rankdata(x, method="average")`` for finite values, without
importing ``scipy.stats``: that import costs about a second, and every correlation, subset,
mining and evaluation job would pay it at start-up.
"""

from __future__ import annotations

import numpy as np


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based average ranks of ``values`` (float64; ties get the mean of their ranks).

    NaN is not handled here: callers rank the non-missing values only.
    """
    x = np.asarray(values).ravel()
    n = x.shape[0]
    ranks = np.empty(n, dtype=np.float64)
    if n == 0:
        return ranks
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    bounds = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1], True])
    starts, ends = bounds[:-1], bounds[1:]
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks
