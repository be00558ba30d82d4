"""Logistic regression, beta calibration and the KS calibration error.

* :func:`logistic_fit` is an (essentially) unpenalised logistic regression by Newton's
  method with step halving: the objective is scikit-learn's, ``sum(log-loss) +
  ||w||^2 / (2 C)`` with the intercept unpenalised, at ``C = 1e11`` - the
  ``LogisticRegression(C=99999999999)`` of the betacal package that FairCal's code
  (``tiagosalvador/faircal``, ``calibration_methods.py``) copies.
* :func:`beta_fit` is beta calibration (Kull, Silva Filho & Flach, AISTATS 2017) as the
  betacal package and FairCal fit it ("abm"): scores mapped to [0, 1] by fixed bounds
  (FairCal: a cosine's [-1, 1]), clipped to [eps, 1 - eps], a logistic regression on the
  features ``ln s`` and ``-ln(1 - s)``; a negative coefficient is dropped and the other
  refitted. The map is ``p = sigmoid(a ln s - b ln(1 - s) + c)``.
* :func:`ks_error` is the Kolmogorov-Smirnov calibration error FairCal reports (Gupta et
  al., ICLR 2021): pairs sorted by probability, the largest absolute gap between the
  cumulative sums of probabilities and of labels, divided by the number of pairs (with
  weights: by their sum; one value per weight row).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

__all__ = ["BetaMap", "C_BETACAL", "RunningKS", "beta_fit", "ks_error", "ks_sorted",
           "logistic_fit", "normalise"]

#: the inverse penalty of betacal's (and FairCal's) logistic regressions
C_BETACAL = 99999999999.0
_EPS = float(np.finfo(np.float64).eps)


def _loss(x1: np.ndarray, y: np.ndarray, theta: np.ndarray, lam: np.ndarray) -> float:
    z = x1 @ theta
    return float(np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * np.sum(lam * theta * theta))


def logistic_fit(x: np.ndarray, y: np.ndarray, *, c: float = C_BETACAL,
                 max_iter: int = 100, tol: float = 1e-10) -> tuple[np.ndarray, float]:
    """``(coef, intercept)`` minimising ``sum(log-loss) + ||coef||^2 / (2 c)`` (the
    intercept unpenalised) by Newton's method with step halving. ``x``: ``(n, p)``
    features, ``y``: 0/1 labels (both present). Promises scikit-learn's
    ``LogisticRegression(C=c)`` solution to the solvers' tolerance."""
    x = np.asarray(x, np.float64)
    x = x[:, None] if x.ndim == 1 else x
    y = np.asarray(y, np.float64)
    if len(np.unique(y)) < 2:
        raise ValueError("logistic regression needs labels of both classes")
    x1 = np.column_stack([x, np.ones(len(x))])
    lam = np.r_[np.full(x.shape[1], 1.0 / float(c)), 0.0]
    theta = np.zeros(x1.shape[1])
    theta[-1] = np.log(y.mean() / (1.0 - y.mean()))
    loss = _loss(x1, y, theta, lam)
    for _ in range(max_iter):
        p = expit(x1 @ theta)
        grad = x1.T @ (p - y) + lam * theta
        hess = (x1 * (p * (1.0 - p))[:, None]).T @ x1 + np.diag(lam + 1e-12)
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while t > 1e-8:
            new = theta - t * step
            new_loss = _loss(x1, y, new, lam)
            if new_loss <= loss:
                break
            t /= 2.0
        else:
            break
        done = abs(loss - new_loss) <= tol * max(1.0, abs(loss))
        theta, loss = new, new_loss
        if done:
            break
    return theta[:-1], float(theta[-1])


def normalise(score: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """FairCal's ``normalize``: ``(s - lo) / (hi - lo)``."""
    return (np.asarray(score, np.float64) - lo) / (hi - lo)


@dataclass(frozen=True)
class BetaMap:
    """A fitted beta calibration map on scores within ``[lo, hi]``."""

    a: float
    b: float
    c: float
    lo: float = -1.0
    hi: float = 1.0

    def logit(self, score: np.ndarray) -> np.ndarray:
        """``a ln s - b ln(1 - s) + c`` of the normalised, clipped scores."""
        s = np.clip(normalise(score, self.lo, self.hi), _EPS, 1.0 - _EPS)
        return self.a * np.log(s) - self.b * np.log1p(-s) + self.c

    def __call__(self, score: np.ndarray) -> np.ndarray:
        """The calibrated probability of each score."""
        return expit(self.logit(score))

    def as_list(self) -> list[float]:
        """``[a, b, c, lo, hi]`` (for the learned-parameters record)."""
        return [self.a, self.b, self.c, self.lo, self.hi]



def beta_fit(score: np.ndarray, label: np.ndarray, lo: float = -1.0,
             hi: float = 1.0) -> BetaMap:
    """Beta calibration of ``score`` (within ``[lo, hi]``) to ``label`` (0/1, both
    present), fitted as betacal's "abm" (module docstring)."""
    s = np.clip(normalise(score, lo, hi), _EPS, 1.0 - _EPS)
    feats = np.column_stack([np.log(s), -np.log1p(-s)])
    y = np.asarray(label).astype(np.float64)
    coef, inter = logistic_fit(feats, y)
    if coef[0] < 0:
        (b,), inter = logistic_fit(feats[:, 1:], y)
        return BetaMap(0.0, float(b), inter, lo, hi)
    if coef[1] < 0:
        (a,), inter = logistic_fit(feats[:, :1], y)
        return BetaMap(float(a), 0.0, inter, lo, hi)
    return BetaMap(float(coef[0]), float(coef[1]), inter, lo, hi)


def ks_sorted(weights: np.ndarray, gap: np.ndarray) -> np.ndarray:
    """KS calibration error per row of ``weights`` ``(B, n)``, pairs already sorted by
    probability, ``gap`` = probability - label in that order; NaN for a row without
    weight."""
    total = weights.sum(axis=1)
    cum = np.cumsum(weights * gap[None, :], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.abs(cum).max(axis=1, initial=0.0) / total
    return np.where(total > 0, out, np.nan)


class RunningKS:
    """:func:`ks_sorted` over pairs that arrive in blocks, in probability order: a block's
    first running sum continues the last block's, so every sum is the one
    :func:`ks_sorted` adds, in its order - the same numbers. ``rows`` weight rows."""

    def __init__(self, rows: int):
        self.last = np.zeros(rows)
        self.top = np.zeros(rows)
        self.total = np.zeros(rows)

    def add(self, weights: np.ndarray, gap: np.ndarray) -> None:
        """The next block: ``(rows, L)`` weights and the pairs' probability - label."""
        if not weights.shape[1]:
            return
        x = weights * gap[None, :]
        x[:, 0] += self.last
        c = np.cumsum(x, axis=1)
        np.maximum(self.top, np.abs(c).max(axis=1), out=self.top)
        self.last = c[:, -1]
        self.total += weights.sum(axis=1)

    def result(self) -> np.ndarray:
        """The KS error per row (NaN for a row without weight)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            out = self.top / self.total
        return np.where(self.total > 0, out, np.nan)


def ks_error(prob: np.ndarray, label: np.ndarray, weights: np.ndarray | None = None
             ) -> np.ndarray:
    """KS calibration error per weight row ``(B,)`` (module docstring); unit weights
    without ``weights``."""
    p = np.asarray(prob, np.float64)
    order = np.argsort(p, kind="stable")
    gap = p[order] - np.asarray(label, np.float64)[order]
    w = np.ones((1, len(p))) if weights is None else np.atleast_2d(weights)[:, order]
    return ks_sorted(w, gap)
