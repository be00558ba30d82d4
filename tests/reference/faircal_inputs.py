"""Hostile inputs for FairCal's reference code (our code): scored pairs with protected
subgroups, built deterministically from a seed, so that the recorder and the tests
(tests/test_mitigation_reference.py) rebuild the same arrays.

* :func:`gst_case`: three subgroups whose own thresholds all lie above the global one
  (low-scoring mixed pairs pull the global threshold down), so FairCal's ``gst`` bounds
  ``[-1 - max d, 1 - min d]`` differ from bounds with an added 0; calibration and test
  pairs; a test score outside the bounds.
* :data:`BETA_CASES`: beta calibration where both coefficients stay, where the one on
  ``ln s`` turns negative (betacal drops it) and where the one on ``-ln(1 - s)`` does;
  test scores beyond the bounds (clipped).
"""

from __future__ import annotations

import numpy as np

#: subgroups of the protected attribute ``g``
SUBGROUPS = ("a", "b", "c")
#: FairCal's fpr argument of ``gst`` (its thresholds' target)
GST_FPR = 0.05


def _side(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    left = rng.integers(0, 3, n)
    right = np.where(rng.random(n) < 0.55, left, rng.integers(0, 3, n))
    label = (rng.random(n) < 0.3).astype(int)
    same = left == right
    # one impostor distribution for every subgroup (the mixed pairs' is lower): each
    # subgroup's own threshold lies above the pooled one; genuine scores differ by group
    mean = np.where(label == 1, 0.45 + 0.1 * left, 0.1) - np.where(same, 0.0, 0.35)
    score = np.clip(rng.normal(mean, 0.12), -0.99, 0.99)
    names = np.array(SUBGROUPS)
    return {"score": score, "label": label, "left": names[left], "right": names[right]}


def gst_case(seed: int = 41) -> dict[str, dict[str, np.ndarray]]:
    """``{"cal": side, "test": side}``, each ``score``, ``label``, ``left``, ``right``; the
    last test score is 0.999 (above ``1 - min d``: clipped by the calibration map)."""
    rng = np.random.default_rng(seed)
    out = {"cal": _side(rng, 4000), "test": _side(rng, 600)}
    out["test"]["score"][-1] = 0.999
    return out


def _beta_side(rng: np.random.Generator, n: int, a: float, b: float, c: float,
               lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    s = rng.uniform(lo + 0.02 * (hi - lo), hi - 0.02 * (hi - lo), n)
    u = (s - lo) / (hi - lo)
    p = 1.0 / (1.0 + np.exp(-(a * np.log(u) - b * np.log1p(-u) + c)))
    return s, (rng.random(n) < p).astype(int)


#: name -> (seed, a, b, c, lo, hi): the generating beta map of each case
BETA_CASES = {"both": (51, 2.0, 0.7, 0.3, -1.0, 1.0),
              "negative_a": (52, -1.5, 2.0, -2.0, -1.0, 1.0),
              "negative_b": (53, 2.0, -1.5, 1.0, -1.3, 0.8)}


def beta_case(name: str) -> dict[str, np.ndarray | float]:
    """Calibration scores and labels of :data:`BETA_CASES` ``name``, test scores (a grid
    reaching beyond the bounds) and the bounds."""
    seed, a, b, c, lo, hi = BETA_CASES[name]
    rng = np.random.default_rng(seed)
    s, y = _beta_side(rng, 4000, a, b, c, lo, hi)
    test = np.r_[lo - 0.2, lo, np.linspace(lo, hi, 41), hi, hi + 0.2]
    return {"score": s, "label": y, "test": test, "lo": lo, "hi": hi}
