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
