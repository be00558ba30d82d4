"""The fairness leaderboard: the whole ranking rule of the ChaLearn FairFace 2020 challenge.

The challenge (Sixta et al., "FairFace Challenge at ECCV 2020: Analyzing Bias in Face
Recognition", ECCV 2020 workshops) ranked a submission by the mean of its ranks on Bias+
(lower is better), Bias- (lower is better) and accuracy (AUC, higher is better) - and only
a submission whose accuracy beat the organisers' baseline took part in that ranking: a
model scoring every pair alike has Bias 0 and would otherwise win. Here:

- ``fairness.leaderboard.baseline`` names the baseline model (the demo: ``lbp``, the
  weight-free one). Only a model whose accuracy is above the baseline's ranks; the
  baseline itself is listed as ``baseline``, unranked; without a baseline every model
  with figures ranks (the page says no accuracy bar was set);
- a model whose fairness figures are n/a (fewer than two groups with usable pairs,
  :mod:`facecast.fairness.applicable`) or whose accuracy is unknown has no rank;
- the ranks are average ranks among the ranked models (ties share them); ``place`` = the
  lowest place of its mean rank; every unranked model's ``status`` says why.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = ["COLUMNS", "rank_models", "rule_text"]

#: the leaderboard page's columns
COLUMNS = ["place", "model", "status", "bias_pos", "bias_neg", "accuracy", "rank_bias_pos",
           "rank_bias_neg", "rank_accuracy", "mean_rank"]


def _status(row: pd.Series, baseline: str, base_acc: float) -> str:
    note = str(row.get("fairness_note") or "")
    if row["model"] == baseline:
        return "baseline"
    if note:
        return note
    if not (np.isfinite(row["bias_pos"]) and np.isfinite(row["bias_neg"])):
        return "n/a (no Bias+/- value)"
    if not np.isfinite(row["accuracy"]):
        return "n/a (no accuracy)"
    if baseline and not row["accuracy"] > base_acc:
        return (f"not above the baseline (accuracy {row['accuracy']:.4g} <= {baseline}'s "
                f"{base_acc:.4g})")
    return "ranked"


def rank_models(summaries: pd.DataFrame, baseline: str = "") -> pd.DataFrame:
    """Rank models (one row each: ``model``, ``bias_pos``, ``bias_neg``, ``accuracy``,
    optionally ``fairness_note``) by the challenge's rule (module docstring).

    Adds ``status`` (``ranked``, ``baseline`` or why not), ``rank_bias_pos``,
    ``rank_bias_neg``, ``rank_accuracy``, ``mean_rank`` and ``place`` (nullable ints /
    NaN for an unranked model); ranked models first by ``mean_rank`` then name, then the
    baseline, then the others by name. Raises when ``baseline`` is not among the models.
    """
    out = summaries.copy()
    for col in ("bias_pos", "bias_neg", "accuracy"):
        out[col] = pd.to_numeric(out[col], errors="coerce").astype(np.float64)
    base_acc = np.nan
    if baseline:
        hit = out.loc[out["model"] == baseline, "accuracy"]
        if hit.empty:
            raise ValueError(f"fairness.leaderboard.baseline: {baseline!r} is not one of the "
                             f"leaderboard's models {sorted(out['model'])}")
        base_acc = float(hit.iloc[0])
    out["status"] = [_status(r, baseline, base_acc) for _, r in out.iterrows()]
    ranked = out["status"].to_numpy(object) == "ranked"
    sub = out.loc[ranked]
    out["rank_bias_pos"] = sub["bias_pos"].rank(method="average")
    out["rank_bias_neg"] = sub["bias_neg"].rank(method="average")
    out["rank_accuracy"] = sub["accuracy"].rank(method="average", ascending=False)
    out["mean_rank"] = out[["rank_bias_pos", "rank_bias_neg", "rank_accuracy"]].mean(
        axis=1, skipna=False)
    out["place"] = out["mean_rank"].rank(method="min").astype("Int64")
    order = np.where(ranked, 0, np.where(out["status"] == "baseline", 1, 2))
    out = out.assign(_o=order).sort_values(["_o", "mean_rank", "model"], kind="stable",
                                           na_position="last", ignore_index=True)
    return out.drop(columns="_o")


def rule_text(baseline: str, models: Sequence[str] = ()) -> str:
    """The page's sentence stating the rule the board follows."""
    head = ("Ranking rule of the ChaLearn FairFace 2020 challenge: the mean of a model's "
            "ranks on Bias+ and Bias- (lower is fairer) and accuracy (AUC, higher is "
            "better), among the models that take part. ")
    if baseline:
        return head + (f"A model takes part only if its accuracy is above the baseline's "
                       f"({baseline}, fairness.leaderboard.baseline), as in the challenge: "
                       "a model that scores every pair alike has Bias 0 and must not win. "
                       "A model whose fairness figures are n/a (fewer than two groups with "
                       "usable pairs) has no rank either.")
    return head + ("No baseline is set (fairness.leaderboard.baseline), so no accuracy bar "
                   "keeps a constant-score model (Bias 0) from the top: read accuracy "
                   "beside the rank. A model whose fairness figures are n/a (fewer than "
                   "two groups with usable pairs) has no rank.")
