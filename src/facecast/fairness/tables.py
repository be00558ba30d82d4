"""Readable tables in the shape of the FairFace 2020 paper, and the leaderboard.

- leaderboard: models ranked by the average of their ranks on Bias+ (lower is better),
  Bias- (lower is better) and accuracy (higher is better); ties share the average rank;
- Table A7: average discrimination mean_{x_L} d(a; x_L) per group, + and -;
- Table A8: how often each group is the most discriminated (per model: over the
  combinations; across models: over the models);
- Tables A9-A14: per legitimate attribute and subset, the max/min average discrimination
  with the group attaining it (:func:`facecast.fairness.bias.legitimate_subsets`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "–"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:.4g}"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    return str(value).replace("|", "\\|")


def to_markdown(df: pd.DataFrame, columns: Sequence[str] | None = None) -> str:
    """A GitHub Markdown table (floats to 4 significant digits, NaN as an en dash)."""
    cols = list(columns or df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df[cols].itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def leaderboard(summaries: pd.DataFrame) -> pd.DataFrame:
    """Rank models (one row each: ``model``, ``bias_pos``, ``bias_neg``, ``accuracy``).

    Adds ``rank_bias_pos``, ``rank_bias_neg``, ``rank_accuracy`` (1 = best; NaN metrics
    rank last), ``mean_rank`` and ``place``; sorted by ``mean_rank`` then model name.
    """
    out = summaries.copy()
    out["rank_bias_pos"] = out["bias_pos"].rank(method="average", na_option="bottom")
    out["rank_bias_neg"] = out["bias_neg"].rank(method="average", na_option="bottom")
    out["rank_accuracy"] = out["accuracy"].rank(method="average", ascending=False,
                                                na_option="bottom")
    out["mean_rank"] = out[["rank_bias_pos", "rank_bias_neg", "rank_accuracy"]].mean(axis=1)
    out = out.sort_values(["mean_rank", "model"], kind="stable", ignore_index=True)
    out["place"] = out["mean_rank"].rank(method="min").astype(int)
    return out


def most_discriminated_across_models(groups: pd.DataFrame) -> pd.DataFrame:
    """Table A8 across models: for each sign and group, in how many models the group has
    the largest mean discrimination (ties count for every tied group).

    ``groups`` holds ``model``, ``sign``, ``group``, ``mean_d`` rows of every model.
    """
    g = groups.dropna(subset=["mean_d"])
    best = g.groupby(["model", "sign"])["mean_d"].transform("max")
    top = g[g["mean_d"] == best]
    counts = top.groupby(["sign", "group"]).size().rename("n_models_most_discriminated")
    all_groups = groups[["sign", "group"]].drop_duplicates().set_index(["sign", "group"])
    out = all_groups.join(counts).fillna(0).reset_index()
    out["n_models_most_discriminated"] = out["n_models_most_discriminated"].astype(int)
    return out.sort_values(["sign", "n_models_most_discriminated", "group"],
                           ascending=[True, False, True], ignore_index=True)


def group_table(groups: pd.DataFrame) -> pd.DataFrame:
    """Tables A7/A8 for one model, wide: one row per group with the + and - columns."""
    wide = groups.pivot(index="group", columns="sign",
                        values=["mean_d", "n_combos", "n_most_discriminated"])
    wide.columns = [f"{a}{'_pos' if s == '+' else '_neg'}" for a, s in wide.columns]
    wide = wide.reset_index()
    order = ["group", "mean_d_pos", "mean_d_neg", "n_most_discriminated_pos",
             "n_most_discriminated_neg", "n_combos_pos", "n_combos_neg"]
    return wide[[c for c in order if c in wide.columns]]


#: columns of the global-threshold table that mean nothing at an unresolvable target FMR
UNRESOLVED_THRESHOLD_COLUMNS = (
    "threshold", "fmr_reached", "false_matches", "tar", "fmr_max_min", "fmr_max_geomean",
    "fnmr_max_min", "fnmr_max_geomean", "fmr_gap", "fnmr_gap", "fdr", "gini_fmr", "gini_fnmr",
    "garbe", "inequity_rate")
UNRESOLVED_RATE_COLUMNS = ("false_matches", "fmr", "fmr_lo", "fmr_hi", "false_non_matches",
                           "fnmr", "fnmr_lo", "fnmr_hi")
UNRESOLVED_UNCERTAINTY_COLUMNS = ("estimate", "boot_mean", "se", "lo", "hi")


def mark_unresolved(df: pd.DataFrame, columns: Sequence[str], unresolved, n_impostor
                    ) -> pd.DataFrame:
    """A copy of ``df`` for display: in rows flagged ``unresolved`` the given columns read
    ``n/a (N impostors)`` (N from ``n_impostor``, per row) instead of a number."""
    from facecast.fairness.threshold import unresolved_note

    out = df.copy()
    bad = np.asarray(unresolved, dtype=bool)
    if not bad.any():
        return out
    n = np.broadcast_to(np.asarray(n_impostor), bad.shape)
    for col in columns:
        if col in out.columns:
            out[col] = out[col].astype(object)
            out.loc[bad, col] = [unresolved_note(int(k)) for k in n[bad]]
    return out


#: the ratio columns of the thresholds table, each with the per-group rate it divides
RATIO_COLUMNS = {"fmr_max_min": "fmr", "fmr_max_geomean": "fmr", "fnmr_max_min": "fnmr",
                 "fnmr_max_geomean": "fnmr"}


def zero_rate_notes(thresholds: pd.DataFrame, rates: pd.DataFrame) -> list[dict[str, str]]:
    """Per row of ``thresholds``: ``{column: note}`` for each infinite ratio (the
    :data:`RATIO_COLUMNS` and ``inequity_rate``, their weighted product), the note
    ``n/a (0 false matches in <groups>)`` naming the groups at 0 in ``rates`` (rows
    ``threshold_index``, ``group``, ``fmr``, ``fnmr``: :func:`group_rates`)."""
    from facecast.fairness.threshold import zero_rate_groups, zero_rate_note

    out: list[dict[str, str]] = []
    for i in range(len(thresholds)):
        row = thresholds.iloc[i]
        inf = [c for c in (*RATIO_COLUMNS, "inequity_rate") if c in thresholds.columns
               and isinstance(row[c], (float, np.floating)) and np.isinf(row[c])]
        sub = rates[rates["threshold_index"].to_numpy() == i] if inf else rates.iloc[:0]
        zeros = {r: zero_rate_groups(sub["group"].astype(str).tolist(), sub[r].to_numpy())
                 for r in ("fmr", "fnmr") if len(sub)}
        notes = {}
        for c in inf:
            rate = RATIO_COLUMNS.get(c)
            if rate is None and any(zeros.values()):      # the inequity rate: both
                notes[c] = zero_rate_note(zeros)
            elif zeros.get(rate):
                notes[c] = zero_rate_note({rate: zeros[rate]})
        out.append(notes)
    return out


def mark_zero_rates(thresholds: pd.DataFrame, rates: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``thresholds`` for display: each infinite ratio reads
    ``n/a (0 false matches in <groups>)`` (:func:`zero_rate_notes`)."""
    out = thresholds.copy()
    for i, notes in enumerate(zero_rate_notes(thresholds, rates)):
        for col, note in notes.items():
            out[col] = out[col].astype(object)
            out.iloc[i, out.columns.get_loc(col)] = note
    return out


def report_views(thresholds: pd.DataFrame, rates: pd.DataFrame, uncertainty: pd.DataFrame
                 ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The thresholds, per-group rates and bootstrap tables as the report shows them: every
    figure tied to a target FMR the protocol cannot resolve reads ``n/a (N impostors)``;
    a ratio over a group without false matches (non-matches) reads ``n/a (0 false
    matches in <group>)`` (:func:`mark_zero_rates`), never ``inf``.

    ``thresholds`` needs ``name``, ``resolvable`` and ``threshold_n_impostor``; ``rates``
    ``threshold_index``; ``uncertainty`` ``metric`` (``<figure>@<threshold name>``).
    """
    if len(rates) and "threshold_index" in rates.columns:
        thresholds = mark_zero_rates(thresholds, rates)
    if "resolvable" not in thresholds.columns:
        return thresholds, rates, uncertainty
    bad = ~thresholds["resolvable"].to_numpy(bool)
    n_thr = thresholds["threshold_n_impostor"].to_numpy()
    thr_view = mark_unresolved(thresholds, UNRESOLVED_THRESHOLD_COLUMNS, bad, n_thr)
    idx = rates["threshold_index"].to_numpy(int) if len(rates) else np.zeros(0, int)
    rates_view = mark_unresolved(rates, UNRESOLVED_RATE_COLUMNS, bad[idx], n_thr[idx])
    unc_view = uncertainty
    if len(uncertainty) and "metric" in uncertainty.columns:
        suffix = uncertainty["metric"].astype(str).str.rsplit("@", n=1).str[-1]
        names = thresholds["name"].astype(str).tolist()
        pos = suffix.map({n: i for i, n in enumerate(names)})
        has = pos.notna().to_numpy()
        p = pos.fillna(0).astype(int).to_numpy()
        unc_view = mark_unresolved(uncertainty, UNRESOLVED_UNCERTAINTY_COLUMNS,
                                   has & bad[p], n_thr[p])
    return thr_view, rates_view, unc_view
