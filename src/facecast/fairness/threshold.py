"""Fairness at one global decision threshold.

Decision rule (the same in stage ``evaluate``, :mod:`facecast.evaluate.metrics`): a pair is
accepted (declared "same person") iff ``score >= threshold``. The threshold for a target
FMR is the lowest t with FMR(t) = #{impostors >= t} / #impostors <= target, i.e. the value
just above (``nextafter``) the highest impostor score that must be rejected; so the reached
FMR never exceeds the target (with ties it may be below it), and a threshold copied to or
from ``evaluate`` gives the same decisions.

Resolvability: a target FMR below ``1 / n_impostors`` cannot be resolved by the protocol
(the only reachable FMR at or below it is 0);
:func:`facecast.evaluate.metrics.far_resolvable` (the one rule of every stage) flags it, and the
report prints such figures as ``n/a (N impostors)`` (:func:`unresolved_note`).

Per protected group g (pairs whose two images share group g): FMR_g over the group's
impostor pairs, FNMR_g over its genuine pairs, with counts and binomial intervals (Wilson
score or Clopper-Pearson). Summaries over the groups:

- NIST-style ratios ``max/min`` and ``max/geomean`` of FMR and of FNMR. Defined edge cases:
  all rates 0 -> 1.0 (no differential); a zero minimum (or geometric mean) under a
  positive maximum -> ``inf`` in the files, which no table prints: the cell reads
  ``n/a (0 false matches in <group>)`` (:func:`zero_rate_note`, the groups at 0) and the
  log says so (:func:`zero_rate_groups`, :func:`facecast.fairness.tables.mark_zero_rates`).
- FDR(t, alpha) = 1 - (alpha * A + (1 - alpha) * B), A = max_{i,j} |FMR_i - FMR_j|,
  B = max_{i,j} |FNMR_i - FNMR_j| (de Freitas Pereira & Marcel, 2021); 1 = fair.
- GARBE(t, alpha) = alpha * Gini(FMRs) + (1 - alpha) * Gini(FNMRs) with
  Gini(x) = n/(n-1) * sum_i sum_j |x_i - x_j| / (2 n^2 mean(x)) (Howard et al., 2022; ISO/IEC
  19795-10); Gini of all-zero rates (or of one group) is 0; 0 = fair.
- Inequity rate IR(t, alpha) = (max FMR / min FMR)^alpha * (max FNMR / min FNMR)^(1-alpha),
  with the ratio edge cases above; 1 = fair.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.special import betaincinv, ndtri

from facecast.evaluate.metrics import allowed_impostors
from facecast.fairness.bias import codes_of


def threshold_at(sorted_desc: np.ndarray, allowed: int) -> float:
    """The threshold that accepts the ``allowed`` highest of the descending impostor scores
    ``sorted_desc``: just above the next one (``nextafter``); all allowed: the lowest."""
    n = sorted_desc.shape[0]
    return float(np.nextafter(sorted_desc[allowed], np.inf) if allowed < n
                 else sorted_desc[-1])


def thresholds_at_fmr(impostor_scores: np.ndarray, targets: Sequence[float]) -> np.ndarray:
    """Lowest thresholds t with #{impostor >= t}/#impostors <= target, one per target.

    Accept iff ``score >= t``. With ``k = floor(target * n)`` impostors allowed
    (:func:`allowed_impostors`), t is just above the (k+1)-th highest impostor score
    (``nextafter`` towards +inf); a target that allows every impostor gives the lowest
    impostor score (:func:`threshold_at`). No impostors: NaN. The one rule of every stage.
    """
    s = np.sort(np.asarray(impostor_scores, dtype=np.float64))[::-1]
    n = s.shape[0]
    out = np.full(len(targets), np.nan)
    if n == 0:
        return out
    ks = allowed_impostors(n, targets)
    for i, k in enumerate(ks):
        out[i] = threshold_at(s, int(k))
    return out


def unresolved_note(n_impostor: int) -> str:
    """The table cell of a figure the protocol cannot resolve: ``n/a (262 impostors)``."""
    return f"n/a ({int(n_impostor)} impostors)"


#: the words of a zero rate, per rate
ZERO_RATE_WORDS = {"fmr": "false matches", "fnmr": "false non-matches"}


def zero_rate_note(zeros: Mapping[str, Sequence[str]]) -> str:
    """The table cell of a ratio over a zero rate; ``zeros``: per rate (``fmr``,
    ``fnmr``) the groups at 0: ``n/a (0 false matches in g1, g2)``, or for a figure of
    both ratios (the inequity rate) ``n/a (0 false matches in g1; 0 false non-matches in
    g3)``."""
    parts = [f"0 {ZERO_RATE_WORDS[rate]} in {', '.join(str(g) for g in groups)}"
             for rate, groups in zeros.items() if len(groups)]
    return f"n/a ({'; '.join(parts)})"


def zero_rate_groups(groups: Sequence[str], rates: np.ndarray) -> list[str]:
    """The groups whose rate is 0 where another group's is positive: the groups that make
    the ``max/min`` and ``max/geomean`` ratios infinite (none when every rate is 0 or
    NaN)."""
    r = np.asarray(rates, dtype=np.float64)
    if not (r > 0).any():
        return []
    return [str(g) for g, v in zip(groups, r, strict=True) if v == 0]


def binomial_interval(k: np.ndarray, n: np.ndarray, confidence: float = 0.95,
                      method: str = "wilson") -> tuple[np.ndarray, np.ndarray]:
    """Two-sided interval for k successes in n trials (``wilson`` or ``clopper-pearson``).

    n == 0 gives NaN bounds.
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    alpha = 1.0 - confidence
    with np.errstate(invalid="ignore", divide="ignore"):
        if method == "wilson":
            z = ndtri(1 - alpha / 2)
            p = k / n
            den = 1 + z * z / n
            centre = (p + z * z / (2 * n)) / den
            half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
            lo, hi = centre - half, centre + half
        elif method == "clopper-pearson":
            lo = np.where(k > 0, betaincinv(k, n - k + 1, alpha / 2), 0.0)
            hi = np.where(k < n, betaincinv(k + 1, n - k, 1 - alpha / 2), 1.0)
        else:
            raise ValueError(f"interval method must be 'wilson' or 'clopper-pearson', "
                             f"got {method!r}")
    lo = np.where(k <= 0, 0.0, lo)  # exact ends (no rounding residue at k = 0 or n)
    hi = np.where(k >= n, 1.0, hi)
    lo = np.where(n > 0, np.clip(lo, 0, 1), np.nan)
    hi = np.where(n > 0, np.clip(hi, 0, 1), np.nan)
    return lo, hi


def group_rates(scores: np.ndarray, labels: np.ndarray, group: np.ndarray,
                thresholds: Sequence[float], *, confidence: float = 0.95,
                method: str = "wilson") -> pd.DataFrame:
    """FMR and FNMR per (threshold, group) with counts and intervals (accept iff
    ``score >= threshold``).

    Pairs with group None are ignored. Columns: ``threshold_index``, ``threshold``,
    ``group``, ``n_impostor``, ``false_matches``, ``fmr``, ``fmr_lo``, ``fmr_hi``,
    ``n_genuine``, ``false_non_matches``, ``fnmr``, ``fnmr_lo``, ``fnmr_hi``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    g = np.asarray(group, dtype=object)
    keep = pd.notna(g)
    names = sorted({str(x) for x in g[keep]})
    codes = codes_of(g, names)
    rows = []
    thr = np.asarray(thresholds, dtype=np.float64)
    for gi, name in enumerate(names):
        m = codes == gi
        imp = np.sort(scores[m & ~labels])
        gen = np.sort(scores[m & labels])
        fm = imp.shape[0] - np.searchsorted(imp, thr, side="left")   # accept: score >= t
        fnm = np.searchsorted(gen, thr, side="left")
        rows.append(pd.DataFrame({
            "threshold_index": np.arange(thr.shape[0]), "threshold": thr, "group": name,
            "n_impostor": imp.shape[0], "false_matches": fm,
            "n_genuine": gen.shape[0], "false_non_matches": fnm}))
    cols = ["threshold_index", "threshold", "group", "n_impostor", "false_matches", "fmr",
            "fmr_lo", "fmr_hi", "n_genuine", "false_non_matches", "fnmr", "fnmr_lo", "fnmr_hi"]
    if not rows:
        return pd.DataFrame(columns=cols)
    out = pd.concat(rows, ignore_index=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["fmr"] = out["false_matches"] / out["n_impostor"].where(out["n_impostor"] > 0)
        out["fnmr"] = out["false_non_matches"] / out["n_genuine"].where(out["n_genuine"] > 0)
    out["fmr_lo"], out["fmr_hi"] = binomial_interval(out["false_matches"], out["n_impostor"],
                                                     confidence, method)
    out["fnmr_lo"], out["fnmr_hi"] = binomial_interval(
        out["false_non_matches"], out["n_genuine"], confidence, method)
    out = out.sort_values(["threshold_index", "group"], kind="stable", ignore_index=True)
    return out[cols]


def group_failures(group: np.ndarray, failed: np.ndarray) -> pd.DataFrame:
    """Per group (pairs with group None ignored): ``n_pairs``, ``n_failed`` (pairs with an
    image without a feature: no face, decode error, no embedding) and ``fte``, the
    failure-to-extract rate at the pair level (``n_failed / n_pairs``). It stands beside
    FMR and FNMR: a system that misses more faces of one group is biased in its own right,
    whatever ``evaluate.failed`` does with those pairs."""
    g = pd.Series(np.asarray(group, dtype=object))
    keep = g.notna().to_numpy()
    frame = pd.DataFrame({"group": g[keep].astype(str).to_numpy(),
                          "failed": np.asarray(failed, bool)[keep]})
    out = frame.groupby("group", sort=True)["failed"].agg(["size", "sum"]).reset_index()
    out.columns = ["group", "n_pairs", "n_failed"]
    out["n_pairs"] = out["n_pairs"].astype(np.int64)
    out["n_failed"] = out["n_failed"].astype(np.int64)
    out["fte"] = out["n_failed"] / out["n_pairs"]
    return out


def _ratio(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        r = hi / lo
    r = np.where((hi == 0) & (lo == 0), 1.0, r)
    return np.where((lo == 0) & (hi > 0), np.inf, r)


def max_min_ratio(rates: np.ndarray) -> np.ndarray | float:
    """max/min of rates over the last axis (NaN entries ignored; see module edge cases)."""
    r = np.asarray(rates, dtype=np.float64)
    out = _ratio(np.nanmax(r, axis=-1), np.nanmin(r, axis=-1))
    return float(out) if np.ndim(out) == 0 else out


def max_geomean_ratio(rates: np.ndarray) -> np.ndarray | float:
    """max/geometric mean over the last axis; a zero rate makes the geomean 0."""
    r = np.asarray(rates, dtype=np.float64)
    with np.errstate(divide="ignore"):
        gm = np.exp(np.nanmean(np.log(r), axis=-1))
    out = _ratio(np.nanmax(r, axis=-1), gm)
    return float(out) if np.ndim(out) == 0 else out


def gini(rates: np.ndarray) -> np.ndarray | float:
    """Gini coefficient with the n/(n-1) small-sample correction, over the last axis.

    NaN entries are ignored; all-zero rates or a single group give 0.
    """
    r = np.asarray(rates, dtype=np.float64)
    ok = np.isfinite(r)
    n = ok.sum(axis=-1)
    x = np.where(ok, r, 0.0)
    diff = np.abs(x[..., :, None] - x[..., None, :])
    diff = np.where(ok[..., :, None] & ok[..., None, :], diff, 0.0).sum(axis=(-1, -2))
    mean = x.sum(axis=-1) / np.maximum(n, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        g = n / (n - 1.0) * diff / (2.0 * n * n * mean)
    g = np.where((n < 2) | (mean == 0), 0.0, g)
    return float(g) if np.ndim(g) == 0 else g


def disparity(fmr: np.ndarray, fnmr: np.ndarray, alpha: float = 0.5) -> dict[str, float]:
    """All global-threshold fairness summaries for per-group FMRs and FNMRs.

    Keys: ``fmr_max_min``, ``fmr_max_geomean``, ``fnmr_max_min``, ``fnmr_max_geomean``,
    ``fmr_gap`` (A), ``fnmr_gap`` (B), ``fdr``, ``gini_fmr``, ``gini_fnmr``, ``garbe``,
    ``inequity_rate``. Groups with a NaN rate (no pairs of that kind) are left out.
    """
    fmr = np.asarray(fmr, dtype=np.float64)
    fnmr = np.asarray(fnmr, dtype=np.float64)
    out = disparity_arrays(fmr[None, :], fnmr[None, :], alpha)
    return {k: float(v[0]) for k, v in out.items()}


def disparity_arrays(fmr: np.ndarray, fnmr: np.ndarray,
                     alpha: float = 0.5) -> dict[str, np.ndarray]:
    """:func:`disparity` over a batch: rates of shape ``(B, G)`` -> arrays of shape (B,)."""
    def gap(r):
        with np.errstate(invalid="ignore"):
            return np.nanmax(r, axis=-1) - np.nanmin(r, axis=-1)

    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows -> NaN
        a, b = gap(fmr), gap(fnmr)
        fmr_mm, fnmr_mm = max_min_ratio(fmr), max_min_ratio(fnmr)
        out = {
            "fmr_max_min": np.atleast_1d(fmr_mm),
            "fmr_max_geomean": np.atleast_1d(max_geomean_ratio(fmr)),
            "fnmr_max_min": np.atleast_1d(fnmr_mm),
            "fnmr_max_geomean": np.atleast_1d(max_geomean_ratio(fnmr)),
            "fmr_gap": a,
            "fnmr_gap": b,
            "fdr": 1.0 - (alpha * a + (1.0 - alpha) * b),
            "gini_fmr": np.atleast_1d(gini(fmr)),
            "gini_fnmr": np.atleast_1d(gini(fnmr)),
        }
    out["garbe"] = alpha * out["gini_fmr"] + (1 - alpha) * out["gini_fnmr"]
    with np.errstate(invalid="ignore", over="ignore"):
        ir = np.power(out["fmr_max_min"], alpha) * np.power(out["fnmr_max_min"], 1 - alpha)
    out["inequity_rate"] = ir
    return out


def sweep_rates(scores: np.ndarray, labels: np.ndarray, group: np.ndarray,
                thresholds: np.ndarray) -> pd.DataFrame:
    """Global and per-group FMR/FNMR over many thresholds (for plots; no intervals)."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    thr = np.asarray(thresholds, dtype=np.float64)
    imp_all = np.sort(scores[~labels])
    global_fmr = (imp_all.shape[0] - np.searchsorted(imp_all, thr, side="left")) / max(
        imp_all.shape[0], 1)
    rates = group_rates(scores, labels, group, thr)
    rates["global_fmr"] = global_fmr[rates["threshold_index"].to_numpy()]
    return rates
