"""The opening sentences of the mitigation page (issue #50 item 4), generated from its
table (:mod:`facecast.mitigation.table`: one row per method, each metric with ``_lo`` /
``_hi`` and, against raw, ``_verdict`` after Holm): the groups, the threshold and why
this page's raw figures differ from the fairness page's, raw's worst group's FNMR and
FMR against the best with intervals, what the methods buy on that gap, which word means
AUC and which 10-fold accuracy, and that ``oracle_cal`` needs group labels at test time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from facecast.report.verdict import interval_text, num, verdict_markdown, with_verdict

__all__ = ["add_verdict", "gap_sentence", "group_names", "verdict_block", "verdict_lines"]

#: The words of the page, said once.
WORDS = ("Words: AUC is the area under the ROC of the evaluated pairs; accuracy % is the "
         "10-fold best-threshold accuracy; a * or 'significant' is after Holm across the "
         "whole table.")
ORACLE = ("oracle_cal needs each test pair's group labels at test time: a bound on what "
          "calibration per group can do, not a deployable method.")


def group_names(table: pd.DataFrame) -> list[str]:
    """The fairness groups of the table (its ``fnmr_<group>_lo`` columns)."""
    return [c[len("fnmr_"):-len("_lo")] for c in table.columns
            if c.startswith("fnmr_") and c.endswith("_lo")
            and not c.endswith("_diff_lo") and c != "fnmr_max_min_lo"]


def _extremes(row: pd.Series, groups: list[str], rate: str, confidence: float
              ) -> str | None:
    vals = [(float(row[f"{rate}_{g}"]), g) for g in groups
            if np.isfinite(pd.to_numeric(row.get(f"{rate}_{g}"), errors="coerce"))]
    if len(vals) < 2:
        return None
    vals.sort(key=lambda t: (t[0], t[1]))

    def text(v: float, g: str) -> str:
        ci = interval_text(v, row.get(f"{rate}_{g}_lo"), row.get(f"{rate}_{g}_hi"), confidence)
        return f"{g} ({ci})"

    return f"highest for {text(*vals[-1])} and lowest for {text(*vals[0])}"


def gap_sentence(table: pd.DataFrame) -> str:
    """What the methods buy on the FNMR gap: the method with the smallest FNMR max/min,
    raw -> it, and whether the change holds after Holm."""
    ran = table[(table.get("status", "ok") != "n/a") & (table["method"] != "raw")]
    raw = table[table["method"] == "raw"]
    if "fnmr_max_min" not in table.columns or raw.empty:
        return "No FNMR max/min on this page (no fairness groups): no gap to mitigate."
    ratio = pd.to_numeric(ran["fnmr_max_min"], errors="coerce")
    if not np.isfinite(ratio).any():
        return ("On the FNMR gap: FNMR max/min is n/a for every method (see 'Not a number'"
                " below).")
    best = ran.loc[ratio.idxmin()]
    verdict = str(best.get("fnmr_max_min_verdict") or "not tested")
    sig = f"significantly {verdict} after Holm" if verdict in ("higher", "lower") else verdict
    return (f"On that gap, {best['method']} does most: FNMR max/min "
            f"{num(raw['fnmr_max_min'].iloc[0], 4)} (raw) -> {num(best['fnmr_max_min'], 4)} "
            f"({sig}); Bias+ {num(raw['bias_pos'].iloc[0], 4)} -> {num(best['bias_pos'], 4)}.")


def verdict_lines(table: pd.DataFrame, cfg: Mapping[str, Any]) -> list[str]:
    """The mitigation page's opening sentences from its wide table and the ``mitigation``
    config section."""
    groups = group_names(table)
    confidence = float(cfg.get("confidence", 0.95))
    fmr = float(cfg.get("fmr", 1e-3))
    out = [(f"Groups: {', '.join(groups)}, the fairness groups (fairness.protected; their "
            "source and bins are listed on the fairness page)." if groups else
            "No fairness groups: no per-group figure on this page.")]
    out.append(f"Threshold: one per method at FMR {fmr:g} on the evaluated split's impostors;"
               " the fairness page uses all pairs of the protocol at its own FMR, so raw's "
               "Bias+ and group rates here (another split, another threshold) differ from "
               "it.")
    raw = table[table["method"] == "raw"]
    if groups and not raw.empty:
        r = raw.iloc[0]
        fnmr, fmr_t = (_extremes(r, groups, k, confidence) for k in ("fnmr", "fmr"))
        out.append(f"Before mitigation (raw), FNMR is "
                   f"{fnmr or 'n/a (fewer than two groups have one)'}; FMR is "
                   f"{fmr_t or 'n/a (fewer than two groups have one)'}.")
        out.append(gap_sentence(table))
    out.append(WORDS)
    if "oracle_cal" in set(table["method"]):
        out.append(ORACLE)
    return out


def verdict_block(table: pd.DataFrame, cfg: Mapping[str, Any]) -> str:
    """:func:`verdict_lines` as the Markdown paragraph that opens the page."""
    return verdict_markdown(verdict_lines(table, cfg))


def add_verdict(markdown: str, table: pd.DataFrame, cfg: Mapping[str, Any]) -> str:
    """``markdown`` (the page) with :func:`verdict_lines` under its title."""
    return with_verdict(markdown, verdict_lines(table, cfg))
