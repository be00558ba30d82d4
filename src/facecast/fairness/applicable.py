"""When a fairness figure means nothing: fewer than two groups, or an unresolvable threshold.

A fairness figure compares groups. With one group that has usable pairs (all five people
estimated male; the user's own labels with no female pair) Bias+/- are 0, FDR is 1 and
GARBE 0 by construction: the values of a perfect score, measured on nothing. So with
fewer than two such groups every fairness figure - Bias+/-, FDR, GARBE, the max/min and
max/geomean ratios, gaps, Ginis and the inequity rate - reads ``n/a (1 group: male)`` on
the page, is NaN in ``summary`` with the reason in ``fairness_note``, and is logged; the
leaderboard gives the model no rank (:mod:`facecast.fairness.leaderboard`). FDR and GARBE
at a threshold the protocol cannot resolve (fewer than 1/FMR impostors) are NaN in
``summary`` too, with ``note@<threshold>`` = ``n/a (k impostors)``.

A group has usable pairs when at least one pair of evaluate's test inside it (both images
in the group, a finite score or a failure counted by the rule) counts in the reference set.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["GROUP_FIGURES", "THRESHOLD_FIGURES", "few_group_views", "group_note",
           "mark_few_groups", "mark_group_tables", "shown", "summary_notes", "usable_groups"]

log = logging.getLogger(__name__)

#: columns of the thresholds table that compare groups
THRESHOLD_FIGURES = ("fmr_max_min", "fmr_max_geomean", "fnmr_max_min", "fnmr_max_geomean",
                     "fmr_gap", "fnmr_gap", "fdr", "gini_fmr", "gini_fnmr", "garbe",
                     "inequity_rate")
#: summary / uncertainty figures that compare groups (names before ``@``)
GROUP_FIGURES = ("bias_pos", "bias_neg", "fdr", "garbe")


def usable_groups(valid: pd.DataFrame) -> dict[str, int]:
    """Pairs per group among the reference pairs that lie inside one group (status not
    ``mixed``, a group), in group order; groups without such pairs are absent."""
    ok = (valid["in_reference"].to_numpy(bool)
          & (valid["status"].to_numpy(object) != "mixed")
          & pd.notna(valid["group"]).to_numpy())
    counts = pd.Series(valid.loc[ok, "group"].astype(str)).value_counts()
    return {str(g): int(counts[g]) for g in sorted(counts.index)}


def group_note(groups: Mapping[str, int]) -> str:
    """``""`` with two or more groups; else ``n/a (1 group: male)`` / ``n/a (0 groups)``."""
    if len(groups) >= 2:
        return ""
    if not groups:
        return "n/a (0 groups with pairs)"
    return f"n/a (1 group: {next(iter(groups))})"


def summary_notes(summary: Mapping[str, Any], valid: pd.DataFrame, thresholds: pd.DataFrame
                  ) -> dict[str, Any]:
    """The summary row with every fairness figure NaN where it means nothing: all of them
    with fewer than two usable groups (``fairness_note`` says why, ``""`` otherwise), FDR
    and GARBE at an unresolvable threshold (``note@<name>`` = ``n/a (k impostors)``,
    ``""`` otherwise). Logs each."""
    from facecast.fairness.threshold import unresolved_note

    out = dict(summary)
    note = group_note(usable_groups(valid))
    out["fairness_note"] = note
    if note:
        log.warning("%s/%s: fewer than two groups with usable pairs: every fairness figure "
                    "(Bias+/-, FDR, GARBE, ratios) is %s, and the model has no rank on "
                    "the leaderboard", out.get("model"), out.get("protocol"), note)
        for k in list(out):
            if k.split("@", 1)[0] in GROUP_FIGURES:
                out[k] = np.nan
    for _, row in thresholds.iterrows():
        name = row["name"]
        out[f"note@{name}"] = ""
        if not bool(row.get("resolvable", True)):
            out[f"note@{name}"] = unresolved_note(int(row["threshold_n_impostor"]))
            out[f"fdr@{name}"] = np.nan
            out[f"garbe@{name}"] = np.nan
    return out


def mark_few_groups(thresholds: pd.DataFrame, uncertainty: pd.DataFrame, note: str
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Display copies of the thresholds and uncertainty tables whose group-comparing
    figures read ``note`` (``n/a (1 group: male)``) when it is set."""
    if not note:
        return thresholds, uncertainty
    thr = thresholds.copy()
    for col in THRESHOLD_FIGURES:
        if col in thr.columns:
            thr[col] = note
    unc = uncertainty.copy()
    if len(unc) and "metric" in unc.columns:
        rows = unc["metric"].astype(str).str.split("@", n=1).str[0].isin(GROUP_FIGURES)
        for col in ("estimate", "boot_mean", "se", "lo", "hi"):
            if col in unc.columns:
                unc[col] = unc[col].astype(object)
                unc.loc[rows, col] = note
    return thr, unc


def shown(summary: Mapping[str, Any], key: str) -> Any:
    """A summary value as the page shows it: a group-comparing figure that is NaN for lack
    of groups reads the row's ``fairness_note``, one at an unresolvable threshold its
    ``note@<name>``; anything else as it is."""
    value = summary[key]
    if not (isinstance(value, float) and np.isnan(value)):
        return value
    if key.split("@", 1)[0] in GROUP_FIGURES and summary.get("fairness_note"):
        return summary["fairness_note"]
    return summary.get(f"note@{key.split('@', 1)[1]}", "") or value if "@" in key else value


def mark_group_tables(groups: pd.DataFrame, subsets: pd.DataFrame, note: str
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Display copies of Table A7/A8 (``groups``) and A9-A14 (``subsets``) whose
    discrimination columns read ``note`` when it is set: with one group every ``d`` is 0
    by construction."""
    if not note:
        return groups, subsets
    out = []
    for table, cols in ((groups, ("mean_d_pos", "mean_d_neg", "n_most_discriminated_pos",
                                  "n_most_discriminated_neg")),
                        (subsets, ("max_d", "max_group", "min_d", "min_group"))):
        t = table.copy()
        for col in cols:
            if col in t.columns:
                t[col] = note
        out.append(t)
    return out[0], out[1]


def few_group_views(note: str, thresholds: pd.DataFrame, uncertainty: pd.DataFrame,
                    groups: pd.DataFrame, subsets: pd.DataFrame
                    ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The report's thresholds, uncertainty, A7/A8 and A9-A14 tables with every
    group-comparing figure reading ``note`` when it is set (:func:`mark_few_groups`,
    :func:`mark_group_tables`)."""
    thresholds, uncertainty = mark_few_groups(thresholds, uncertainty, note)
    groups, subsets = mark_group_tables(groups, subsets, note)
    return thresholds, uncertainty, groups, subsets
