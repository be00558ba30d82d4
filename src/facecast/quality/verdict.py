"""The opening sentences of the quality-bias page (issue #50 item 4), generated from its
tables (:mod:`facecast.quality.bias`): the groups, where they come from and their bins,
the threshold tau and how it relates to the other pages', the worst group's FNMR
against the best, the largest quality gap with its interval, and what rejecting the
lowest-quality images does to the worst group.

The rejection table has no interval on its FNMRs and no FMR per group: the sentences say
so instead of inventing one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from facecast.fairness.groups import parse_specs
from facecast.fairness.verdict import group_sentence
from facecast.report.markdown import markdown_html
from facecast.report.verdict import interval_text, num, verdict_markdown

__all__ = ["verdict_html", "verdict_lines"]


def _pct(share: float) -> str:
    """``0.502`` as ``50.2 %``."""
    return f"{num(100 * float(share))} %"


def _groups(table: pd.DataFrame) -> pd.DataFrame:
    return table[(table["attribute"] == "group") & (table["status"] == "ok")]


def _fnmr_sentence(rejection: pd.DataFrame) -> tuple[str, str | None]:
    """The FNMR sentence (before any rejection) and the worst group's name."""
    rows = _groups(rejection)
    if rows.empty:
        return "FNMR per group: n/a (no group has enough identities).", None
    before = (rows.sort_values("reject", kind="stable").groupby("group", sort=True)
              ["fnmr_before"].first().dropna())
    if len(before) < 2:
        return "FNMR per group: fewer than two groups have one, no comparison.", None
    order = before.sort_values(kind="stable")
    worst, best = order.index[-1], order.index[0]
    return (f"At tau, FNMR is highest for {worst} ({num(order.iloc[-1])}) and lowest for "
            f"{best} ({num(order.iloc[0])}), no interval (the rejection table has none); "
            "FMR per group is not on this page (rejection judges mated pairs only).", worst)


def _gap_sentence(bias: pd.DataFrame, confidence: float) -> tuple[str, str | None]:
    """The largest significant quality gap (lowest standardised difference) and its
    measure."""
    rows = _groups(bias)
    sig = rows[rows["significant"].astype(bool)].sort_values(["difference", "measure"],
                                                             kind="stable")
    if sig.empty:
        return ("No group's quality differs significantly from the rest's "
                "(Benjamini-Hochberg over the table).", None)
    r = sig.iloc[0]
    ci = interval_text(r["difference"], r["ci_lo"], r["ci_hi"], confidence)
    side = "lower" if r["difference"] < 0 else "higher"
    return (f"The largest quality gap: {r['group']} has {side} {r['measure']} than the rest "
            f"(standardised difference {ci}; BH-adjusted p {num(r['p_adjusted'], 2)}).",
            str(r["measure"]))


def _rejection_sentence(rejection: pd.DataFrame, worst: str, measure: str) -> str:
    rows = rejection[(rejection["measure"] == measure) & (rejection["status"] == "ok")]
    top = rows[rows["reject"] == rows["reject"].max()]
    g, every = top[top["group"] == worst], top[top["attribute"] == "all"]
    if g.empty or every.empty:
        return f"Rejection by {measure}: n/a for {worst} (too few identities)."
    g, every = g.iloc[0], every.iloc[0]
    return (f"Rejecting the lowest {_pct(g['reject'])} of images by {measure} discards "
            f"{_pct(g['discarded_share'])} of {worst}'s images against "
            f"{_pct(every['discarded_share'])} overall; {worst}'s FNMR goes "
            f"{num(g['fnmr_before'])} -> {num(g['fnmr_after'])}.")


def verdict_lines(bias: pd.DataFrame, rejection: pd.DataFrame, tau: float,
                  fairness_cfg: Mapping[str, Any] | None = None,
                  confidence: float = 0.95) -> list[str]:
    """The quality-bias page's opening sentences from its bias and rejection tables, the
    threshold ``tau`` and the ``fairness`` config (the groups' specs)."""
    protected = parse_specs((fairness_cfg or {}).get("protected"))
    n_groups = int(_groups(bias)["group"].nunique()) if len(bias) else 0
    out = [group_sentence(protected, n_groups, "enough identities") if protected else
           f"Groups: {n_groups} protected groups (fairness.protected)."]
    out.append(f"Threshold: tau = {tau:.4g}, the EDC's one threshold (quality.threshold) on "
               "this protocol's comparisons; the fairness page sets its own at a target FMR,"
               " slices theirs at the EER and mitigation at mitigation.fmr on its split, so "
               "a group's FNMR differs between the pages.")
    fnmr, worst = _fnmr_sentence(rejection)
    gap, measure = _gap_sentence(bias, confidence)
    out += [fnmr, gap]
    if worst is not None and measure is not None and (
            np.asarray(rejection["measure"] == measure).any()):
        out.append(_rejection_sentence(rejection, worst, measure))
    out.append("What mitigation buys on the FNMR gap is on the mitigation page.")
    return out


def verdict_html(bias: pd.DataFrame, rejection: pd.DataFrame, tau: float,
                 fairness_cfg: Mapping[str, Any] | None = None,
                 confidence: float = 0.95) -> str:
    """:func:`verdict_lines` as the HTML paragraph(s) that open the page."""
    return markdown_html(verdict_markdown(
        verdict_lines(bias, rejection, tau, fairness_cfg, confidence)))
