"""Open-set identification metrics (ISO/IEC 19795-1; NIST FRVT 1:N conventions).

* CMC(R): fraction of mated searches whose mate is at rank <= R.
* FPIR(N, T): fraction of non-mated searches returning at least one candidate with score
  ``>= T`` (their top-1 score ``>= T``).
* FNIR(N, R, T): fraction of mated searches whose mate is not among the top R candidates
  with score ``>= T``.
* The threshold for a target FPIR is the lowest T with FPIR(N, T) <= target, i.e. the
  next float above the ``(floor(target * n) + 1)``-th highest non-mated top-1 score. With
  fewer than ``1 / target`` non-mated searches the target is not resolvable: the row says
  ``n/a (k non-mated searches)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from facecast.evaluate.metrics import far_resolvable
from facecast.fairness.group_thresholds import threshold_at_fmr


def cmc(mate_rank: np.ndarray, ranks: Sequence[int]) -> np.ndarray:
    """Identification rate at each rank for mated searches (``mate_rank >= 1``)."""
    r = np.asarray(mate_rank)
    r = r[r >= 1]
    if r.size == 0:
        return np.full(len(ranks), np.nan)
    return np.array([(r <= int(k)).mean() for k in ranks])


def fnir(mate_rank: np.ndarray, mate_score: np.ndarray, rank: int,
         threshold: float) -> float:
    """FNIR(N, R, T) over mated searches."""
    r = np.asarray(mate_rank)
    m = r >= 1
    if not m.any() or not np.isfinite(threshold):
        return float("nan")
    hit = (r[m] <= rank) & (np.asarray(mate_score)[m] >= threshold)
    return float(1.0 - hit.mean())


def fpir(top1_nonmated: np.ndarray, threshold: float) -> float:
    """FPIR(N, T) over non-mated searches."""
    s = np.asarray(top1_nonmated, dtype=np.float64)
    if s.size == 0 or not np.isfinite(threshold):
        return float("nan")
    return float((s >= threshold).mean())


def fnir_at_fpir(mate_rank: np.ndarray, mate_score: np.ndarray, top1_nonmated: np.ndarray,
                 targets: Sequence[float], rank: int = 1) -> pd.DataFrame:
    """FNIR(N, R, T) at the thresholds meeting each target FPIR (see the module docstring).

    Columns: ``target_fpir``, ``threshold``, ``fpir``, ``fnir``, ``rank``,
    ``n_mated``, ``n_nonmated``, ``resolvable``, ``text``.
    """
    nm = np.asarray(top1_nonmated, dtype=np.float64)
    n_mated = int((np.asarray(mate_rank) >= 1).sum())
    rows = []
    for target in targets:
        t = threshold_at_fmr(nm, target)
        ok = bool(far_resolvable(nm.size, target))
        f = fnir(mate_rank, mate_score, rank, t)
        rows.append({"target_fpir": float(target), "threshold": t, "fpir": fpir(nm, t),
                     "fnir": f, "rank": int(rank), "n_mated": n_mated,
                     "n_nonmated": int(nm.size), "resolvable": ok,
                     "text": f"{f:.4g}" if ok and np.isfinite(f)
                     else f"n/a ({nm.size} non-mated searches)"})
    return pd.DataFrame(rows)


def det_curve(mate_rank: np.ndarray, mate_score: np.ndarray, top1_nonmated: np.ndarray,
              rank: int = 1, n_points: int = 200) -> pd.DataFrame:
    """Identification DET: FPIR(N, T) and FNIR(N, R, T) over thresholds T (the quantiles
    of all mated and non-mated top scores). Columns ``threshold``, ``fpir``, ``fnir``."""
    nm = np.sort(np.asarray(top1_nonmated, dtype=np.float64))
    r = np.asarray(mate_rank)
    ms = np.asarray(mate_score, dtype=np.float64)[r >= 1]
    rr = r[r >= 1]
    both = np.concatenate([nm, ms[np.isfinite(ms)]])
    if both.size == 0:
        return pd.DataFrame(columns=["threshold", "fpir", "fnir"])
    thr = np.unique(np.quantile(both, np.linspace(0, 1, n_points)))
    fp = (nm.size - np.searchsorted(nm, thr, side="left")) / max(nm.size, 1)
    ok = np.sort(ms[rr <= rank])
    hits = ok.size - np.searchsorted(ok, thr, side="left")
    fn = 1.0 - hits / max(rr.size, 1)
    return pd.DataFrame({"threshold": thr, "fpir": fp if nm.size else np.nan,
                         "fnir": fn if rr.size else np.nan})
