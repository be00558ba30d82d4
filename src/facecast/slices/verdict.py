"""The opening sentences of the slices page (issue #50 item 4), generated from the search's
``info`` and findings (:mod:`facecast.slices.discover`): what the groups are here (slices:
conjunctions of attribute predicates, not the fairness groups) and how their bins are
made, the threshold and how it relates to the other pages', the worst finding of each
error type against the rest of the pairs with its interval, and where mitigation's
effect is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from facecast.report.markdown import markdown_html
from facecast.report.verdict import interval_text, num, verdict_markdown
from facecast.slices.discover import threshold_text

__all__ = ["finding_sentence", "verdict_block", "verdict_html", "verdict_lines"]

#: How the words of the error types read.
NAMES = {"fnmr": "FNMR", "fmr": "FMR"}


def finding_sentence(findings: pd.DataFrame, etype: str, confidence: float = 0.95) -> str:
    """The highest-rate finding of one error type against the rest of the pairs."""
    name = NAMES.get(etype, etype.upper())
    rows = findings[findings["error_type"] == etype] if len(findings) else findings
    if rows.empty:
        return f"No {name} finding: no slice is significant at the false-discovery rate."
    f = rows.sort_values(["error_rate", "finding"], ascending=[False, True],
                         kind="stable").iloc[0]
    pairs = "genuine" if etype == "fnmr" else "impostor"
    return (f"Worst {name} finding: {f['slice']} ({int(f['size'])} {pairs} pairs, "
            f"{int(f['n_identities'])} identities) at "
            f"{interval_text(f['error_rate'], f['error_lo'], f['error_hi'], confidence)}, "
            f"against {num(f['rest_rate'])} for the rest of the pairs (no interval), "
            f"q {num(f['q'], 2)} ({len(rows)} {name} finding(s) in all).")


def verdict_lines(info: Mapping[str, Any], findings: pd.DataFrame) -> list[str]:
    """The slices page's opening sentences from the search's ``info`` and findings."""
    columns = list(info.get("columns") or [])
    shown = ", ".join(columns[:6]) + (f" and {len(columns) - 6} more" if len(columns) > 6
                                      else "")
    out = [f"Groups here are slices, not the fairness groups: conjunctions of attribute "
           f"predicates over {shown or 'no column'} (a class per value of a categorical "
           "column, percentile-rank bins of a continuous one; each slice names its own "
           "bins)."]
    out.append(f"Threshold: {threshold_text(info['threshold'])}, one over all "
               f"{info['n_pairs']} searched pairs; the fairness page sets its own at a target"
               " FMR and mitigation at mitigation.fmr on its evaluated split, so a group's "
               "rates differ between the pages.")
    out += [finding_sentence(findings, e) for e in info.get("by_error", {})]
    out.append("What mitigation buys on these slices is on the slices pages of the "
               "mitigated models (<model>+<method>), where the mitigation stage runs.")
    return out


def verdict_block(info: Mapping[str, Any], findings: pd.DataFrame) -> str:
    """:func:`verdict_lines` as the Markdown paragraph that opens the page."""
    return verdict_markdown(verdict_lines(info, findings))


def verdict_html(info: Mapping[str, Any], findings: pd.DataFrame) -> str:
    """:func:`verdict_block` rendered (the page is written as HTML)."""
    return markdown_html(verdict_block(info, findings))
