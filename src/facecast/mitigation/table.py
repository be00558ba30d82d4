"""The side-by-side table: every method's figures with identity-clustered bootstrap
intervals, and each method's difference to ``raw`` with the comparison stage's paired test.

One identity draw per replicate serves every method
(:mod:`facecast.mitigation.replicates`: a replicate draws the evaluated identities with
replacement; a genuine pair weighs its identity's count, an impostor pair the product of
its two identities' counts), so every difference is *paired*. Values: the basic (pivotal)
interval for Bias, FDR, GARBE and the max/min ratios (statistics resampling biases
upwards), the bias-corrected (BC) percentile interval for the rest
(:mod:`facecast.fairness.intervals`); a ratio with infinite replicates keeps the
percentile interval; an interval that still misses its value says so in ``note``
(``<metric>: interval misses the estimate``) and in its cell. Differences (method - raw): the Wald test on the
clustered bootstrap SE with t on G - 1 degrees of freedom and its interval
(:func:`facecast.compare.inference.clustered_test`); Holm across every test of the table
(every method, every metric with a test; :func:`facecast.labels.estimators_stats.holm`).

Not a number (``note``, value and test NaN): TAR at a FAR the evaluated pairs cannot
resolve, and every figure at the global threshold when the target FMR cannot be resolved
(``n/a (k impostors)``, facecast's one rule); Bias without fairness groups or without a
cell that takes part; fewer than 3 identities or no bootstrap spread (the test's own
notes); a max/min ratio whose point estimate is infinite (a group without false matches
under one with some, facecast.fairness.threshold) is ``n/a (0 false matches in <group>)``
(false non-matches for FNMR), never ``inf``; no test of a difference whose replicates are
infinite (the ratio's value and interval are shown, the difference has no finite spread).
The ``threshold`` lives on each method's own scale: reported, never tested.

A method that cannot run on the model (a BFW score column's embedding methods) is a row
with ``status`` ``n/a``, every value NaN and its ``note``, and a differences row per metric
with that note as its verdict (:func:`add_unavailable`): never silently missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from facecast.compare.inference import clustered_test
from facecast.evaluate.metrics import far_resolvable
from facecast.fairness.intervals import interval_bounds, limits_of, method_for
from facecast.fairness.threshold import unresolved_note, zero_rate_groups, zero_rate_note
from facecast.labels.estimators_stats import holm
from facecast.mitigation.metrics import LOWER_IS_BETTER
from facecast.mitigation.replicates import Point, Reps

__all__ = ["DIFF_COLUMNS", "RATIOS", "add_unavailable", "build_tables", "metric_notes",
           "ratio_note"]

#: columns of differences.parquet, in order
DIFF_COLUMNS = ["method", "metric", "value", "value_lo", "value_hi", "raw", "difference",
                "ci_lo", "ci_hi", "test", "p", "p_adjusted", "significant", "verdict",
                "better", "note", "n_boot"]
#: metrics reported but never tested (on each method's own scale)
NOT_TESTED = ("threshold",)
#: metrics where higher is better
HIGHER_IS_BETTER = ("accuracy", "auc", "fdr")
#: max/min ratios of the per-group rates: ``n/a (0 false matches in <group>)`` when infinite
RATIOS = ("fmr_max_min", "fnmr_max_min")


def metric_notes(names: Sequence[str], *, n_impostors: int, fars: Sequence[float],
                 fmr: float, groups: Sequence[str]) -> dict[str, str]:
    """Per metric, ``""`` or why it is not a number on these pairs (module docstring)."""
    notes = {k: "" for k in names}
    for f in fars:
        if not far_resolvable(n_impostors, f):
            notes[f"tar@far={float(f):g}"] = unresolved_note(n_impostors)
    if not far_resolvable(n_impostors, fmr):
        at_threshold = ["threshold", "fmr_max_min", "fnmr_max_min", "fdr", "garbe",
                        *[f"{r}_{g}" for g in groups for r in ("fmr", "fnmr")]]
        notes.update({k: unresolved_note(n_impostors) for k in at_threshold if k in notes})
    if not groups:
        notes.update({k: "n/a (no fairness groups)" for k in ("bias_pos", "bias_neg")})
    return notes


def _better(metric: str, d: float) -> object:
    if metric in LOWER_IS_BETTER or metric.startswith("ks_"):
        return bool(d < 0)
    if metric in HIGHER_IS_BETTER or metric.startswith("tar@"):
        return bool(d > 0)
    return pd.NA


def ratio_note(vals: Mapping[str, float], metric: str) -> str:
    """``n/a (0 false matches in <group>)`` when ``fmr_max_min`` (``fnmr_max_min``: false
    non-matches) of one method's point estimates ``vals`` is infinite - a group without a
    false match under another group with some (:func:`facecast.fairness.threshold.
    zero_rate_note`); ``""`` otherwise."""
    rate = metric.removesuffix("_max_min")
    if metric not in RATIOS or not np.isinf(vals.get(metric, np.nan)):
        return ""
    groups = [k.removeprefix(f"{rate}_") for k in vals
              if k.startswith(f"{rate}_") and k != metric]
    rates = [vals[f"{rate}_{g}"] for g in groups]
    return zero_rate_note({rate: zero_rate_groups(groups, rates)})


def _value_rows(point: Point, reps: Reps, notes: Mapping[str, str], confidence: float
                ) -> list[dict[str, Any]]:
    q = (1.0 - confidence) / 2.0
    rows = []
    for m, vals in point.items():
        for k, v in vals.items():
            r = reps[m][k]
            r = r[~np.isnan(r)]
            note = (notes.get(k, "") or ratio_note(vals, k)
                    or ("n/a (no value)" if np.isnan(v) else ""))
            # a ratio with a zero minimum is inf (facecast.fairness.threshold): quantiles
            # pick sample values then, never inf - inf; finite replicates: the interval of
            # facecast.fairness.intervals (basic for Bias/FDR/GARBE/ratios, BC otherwise)
            how = "linear" if np.isfinite(r).all() else "inverted_cdf"
            lo, hi = (np.quantile(r, [q, 1.0 - q], method=how) if len(r) and not note
                      else (np.nan, np.nan))
            miss = ""
            if len(r) > 1 and not note and how == "linear":
                lo, hi, _ = interval_bounds(v, r, method=method_for(k, "auto"),
                                            confidence=confidence, limits=limits_of(k))
                miss = "" if lo - 1e-12 <= v <= hi + 1e-12 else "interval misses the estimate"
            rows.append({"method": m, "metric": k, "value": np.nan if note else v,
                         "value_lo": lo, "value_hi": hi, "value_note": note,
                         "interval_note": miss})
    return rows


def _diff_row(m: str, k: str, v: dict[str, Any], raw: dict[str, Any], reps: Reps,
              n_ids: int, confidence: float) -> dict[str, Any]:
    d = v["value"] - raw["value"]
    note = v["value_note"] or raw["value_note"]
    row = {"method": m, "metric": k, "value": v["value"], "value_lo": v["value_lo"],
           "value_hi": v["value_hi"], "raw": raw["value"], "difference": d}
    if note:
        return {**row, "ci_lo": np.nan, "ci_hi": np.nan, "test": "", "p": np.nan,
                "note": note, "n_boot": 0}
    with np.errstate(invalid="ignore"):
        col = reps[m][k] - reps["raw"][k]
    infinite = int(np.isinf(reps[m][k]).sum() + np.isinf(reps["raw"][k]).sum())
    if infinite or not np.isfinite(d):
        # a max/min ratio over a zero rate (facecast.fairness.threshold): no spread to test
        why = (f"n/a (infinite in {infinite} of {2 * len(col)} replicates of it and raw)"
               if infinite else "n/a (infinite value)")
        return {**row, "ci_lo": np.nan, "ci_hi": np.nan, "test": "", "p": np.nan,
                "note": why, "n_boot": 0}
    return {**row, **clustered_test(d, col, n_ids, confidence)}


def build_tables(point: Point, reps: Reps, *, notes: Mapping[str, str], n_identities: int,
                 confidence: float, alpha: float, counts: Mapping[str, int]
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(table, differences)``: the wide table (one row per method: each metric with
    ``_lo``/``_hi``, ``_diff``, ``_diff_lo``/``_diff_hi``, ``_p``, ``_p_adjusted``,
    ``_verdict``; counts; ``note``) and the long differences table
    (:data:`DIFF_COLUMNS`, Holm across every tested row)."""
    values = pd.DataFrame(_value_rows(point, reps, notes, confidence))
    by = {(r["method"], r["metric"]): r for r in values.to_dict("records")}
    diffs = [_diff_row(m, k, by[(m, k)], by[("raw", k)], reps, n_identities, confidence)
             for m in point if m != "raw" for k in point[m] if k not in NOT_TESTED]
    diff = pd.DataFrame(diffs, columns=[c for c in DIFF_COLUMNS
                                        if c not in ("p_adjusted", "significant", "verdict",
                                                     "better")])
    diff["p_adjusted"] = holm(diff["p"].to_numpy(np.float64))
    diff["significant"] = (diff["p_adjusted"] <= alpha).to_numpy(bool)
    diff["verdict"] = [n if n else (("higher" if d > 0 else "lower") if s else
                                    "not significant")
                       for n, s, d in zip(diff["note"], diff["significant"],
                                          diff["difference"], strict=True)]
    diff["better"] = pd.array([_better(k, d) if s else pd.NA for k, d, s in zip(
        diff["metric"], diff["difference"], diff["significant"], strict=True)],
        dtype="boolean")
    diff = diff.reindex(columns=DIFF_COLUMNS)
    return _wide(values, diff, counts), diff


def _wide(values: pd.DataFrame, diff: pd.DataFrame, counts: Mapping[str, int]
          ) -> pd.DataFrame:
    rows = []
    for m, sub in values.groupby("method", sort=False):
        row: dict[str, Any] = {"method": m, "status": "ok", **counts}
        notes = []
        for r in sub.itertuples(index=False):
            row[r.metric], row[f"{r.metric}_lo"], row[f"{r.metric}_hi"] = (
                r.value, r.value_lo, r.value_hi)
            if r.value_note or r.interval_note:
                notes.append(f"{r.metric}: {r.value_note or r.interval_note}")
        for r in diff[diff["method"] == m].itertuples(index=False):
            row.update({f"{r.metric}_diff": r.difference, f"{r.metric}_diff_lo": r.ci_lo,
                        f"{r.metric}_diff_hi": r.ci_hi, f"{r.metric}_p": r.p,
                        f"{r.metric}_p_adjusted": r.p_adjusted,
                        f"{r.metric}_verdict": r.verdict})
        row["note"] = "; ".join(dict.fromkeys(notes))
        rows.append(row)
    return pd.DataFrame(rows)


def add_unavailable(table: pd.DataFrame, diff: pd.DataFrame, unavailable: Mapping[str, str],
                    *, metrics: Sequence[str], order: Sequence[str]
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(table, differences)`` with a row per method of ``unavailable`` (method -> note):
    ``status`` ``n/a``, the counts of the evaluated pairs, every value NaN, ``note``; in
    the differences one row per tested metric of ``metrics`` with the note as ``note`` and
    ``verdict``, raw's value beside it, untested. Rows in ``order`` (others last)."""
    if not unavailable:
        return table, diff
    counts = [c for c in ("n_pairs", "n_genuine", "n_impostors", "n_identities", "n_failed",
                          "failed", "n_fits", "n_left_out") if c in table.columns]
    raw = table.set_index("method").loc["raw"]
    rows = [{"method": m, "status": "n/a", **{c: raw[c] for c in counts}, "note": why}
            for m, why in unavailable.items()]
    extra = [{"method": m, "metric": k, "raw": raw[k], "test": "", "significant": False,
              "better": pd.NA, "note": why, "verdict": why, "n_boot": 0}
             for m, why in unavailable.items() for k in metrics if k not in NOT_TESTED]
    rank = {m: i for i, m in enumerate(order)}

    def ordered(frame: pd.DataFrame) -> pd.DataFrame:
        key = frame["method"].map(lambda m: rank.get(m, len(rank)))
        return frame.iloc[np.argsort(key.to_numpy(), kind="stable")].reset_index(drop=True)

    wide = pd.concat([table, pd.DataFrame(rows)], ignore_index=True)
    wide = wide.reindex(columns=list(table.columns))
    more = pd.DataFrame(extra).reindex(columns=DIFF_COLUMNS)
    long = pd.concat([f for f in (diff, more) if len(f)] or [diff], ignore_index=True)
    long["significant"] = long["significant"].astype(bool)
    long["better"] = long["better"].astype("boolean")
    return ordered(wide), ordered(long)
