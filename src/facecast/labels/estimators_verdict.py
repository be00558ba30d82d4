"""The opening sentences of the estimator report (issue #47 item 8), generated from its
table (:mod:`facecast.labels.estimators`): for each estimate, its accuracy over the whole
dataset and the true groups where it is lowest and highest, with their intervals and
whether the difference to the rest holds after Holm; the detector's share of faces
found the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from facecast.labels.estimators import DETECTOR
from facecast.report.verdict import interval_text, verdict_markdown

__all__ = ["estimate_sentence", "verdict_block", "verdict_lines"]


def _group(r: pd.Series, confidence: float, alpha: float) -> str:
    ci = interval_text(r["accuracy"], r["accuracy_lo"], r["accuracy_hi"], confidence)
    p = r.get("p_adjusted", np.nan)
    mark = (f"; differs from the rest after Holm, p {p:.2g}" if np.isfinite(p) and p < alpha
            else "")
    return f"{r['group_by']} {r['group']} ({ci}{mark})"


def _single(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of single groupings (``race``, not ``race x gender``), as the figure shows."""
    return rows[(rows["group_by"] != "all") & ~rows["group_by"].str.contains(" x ")]


def estimate_sentence(rows: pd.DataFrame, confidence: float, alpha: float) -> str:
    """One estimate's sentence: overall accuracy, then its lowest and highest true group
    of a single grouping (the intersections are in the tables)."""
    est, attr = rows["estimator"].iloc[0], rows["attribute"].iloc[0]
    overall = rows[rows["group_by"] == "all"]
    whole = ("n/a" if overall.empty else
             interval_text(overall["accuracy"].iloc[0], overall["accuracy_lo"].iloc[0],
                           overall["accuracy_hi"].iloc[0], confidence))
    head = (f"The detector's share of faces found overall is {whole}" if est == DETECTOR
            else f"{est}'s {attr} accuracy overall is {whole}")
    single = _single(rows)
    groups = single[np.isfinite(pd.to_numeric(single["accuracy"], errors="coerce"))]
    if len(groups) < 2:
        return head + "; fewer than two groups have a figure, no comparison."
    g = groups.sort_values(["accuracy", "group_by", "group"], kind="stable")
    return (f"{head}; it is lowest for {_group(g.iloc[0], confidence, alpha)} and highest "
            f"for {_group(g.iloc[-1], confidence, alpha)}.")


def verdict_lines(table: pd.DataFrame, alpha: float, confidence: float, top: int = 3
                  ) -> list[str]:
    """The estimator page's opening sentences: the ``top`` estimates with the widest gap
    between their lowest and highest group, then the detector; a count of the rest."""
    if table.empty:
        return ["No estimate: the table is empty."]
    estimates: list[tuple[float, pd.DataFrame]] = []
    detector: Sequence[pd.DataFrame] = []
    for (est, _), rows in table.groupby(["estimator", "attribute"], sort=False):
        if est == DETECTOR:
            detector = [rows]
            continue
        acc = pd.to_numeric(_single(rows)["accuracy"], errors="coerce")
        gap = float(acc.max() - acc.min()) if acc.notna().sum() >= 2 else -1.0
        estimates.append((gap, rows))
    order = sorted(range(len(estimates)), key=lambda i: -estimates[i][0])
    out = [estimate_sentence(estimates[i][1], confidence, alpha) for i in order[:top]]
    if len(estimates) > top:
        out.append(f"{len(estimates) - top} more estimate(s) in the tables below (the widest "
                   "gaps between groups come first here).")
    out += [estimate_sentence(rows, confidence, alpha) for rows in detector]
    return out


def verdict_block(table: pd.DataFrame, alpha: float, confidence: float) -> str:
    """:func:`verdict_lines` as the Markdown paragraph that opens the page."""
    return verdict_markdown(verdict_lines(table, alpha, confidence))
