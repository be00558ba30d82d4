"""The opening sentences of the fairness page (issues #47 item 8 and #50 item 4), generated
from the stage's own tables: the groups and where they come from, what each legitimate
bin means, the threshold and how it relates to the other pages' thresholds, the worst
group's FNMR and FMR against the best with their intervals, and the FairFace 2020 bias.

:func:`bin_legend` and :func:`group_source` describe attribute specs
(:mod:`facecast.fairness.groups`) for the later stages' pages too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from facecast.fairness.groups import AttributeSpec, parse_specs
from facecast.report.verdict import interval_text, num, verdict_markdown

__all__ = ["bin_legend", "group_sentence", "group_source", "rate_extremes", "threshold_label",
           "verdict_block", "verdict_lines"]

#: How the other pages set their thresholds (the sentence that says why rates differ).
OTHER_THRESHOLDS = ("slices set theirs at the EER of the pairs they search (slices.threshold)"
                    " and mitigation at its own FMR (mitigation.fmr) on its evaluated split,"
                    " so one group's rates differ between those pages")


def _cut(b: float) -> str:
    return f"{b:g}"


def bin_legend(spec: AttributeSpec) -> str:
    """What each value of one spec means: ``label_age: A0 < 35 ≤ A1 < 65 ≤ A2``,
    ``|label_yaw|: P0 < 15 ≤ P1``, ``label_race: 0 = white, 1 = black``."""
    col = f"|{spec.column}|" if spec.abs else spec.column
    if spec.bins is not None:
        parts = [spec.labels[0]]
        for b, label in zip(spec.bins, spec.labels[1:], strict=True):
            parts += [f"< {_cut(b)} ≤", label]
        return f"{col}: " + " ".join(parts)
    if spec.values:
        return f"{col}: " + ", ".join(f"{k} = {v}" for k, v in spec.values.items())
    return f"{col}: its values as written"


def group_source(specs: Sequence[AttributeSpec]) -> str:
    """Where the values come from: the dataset's labels (``label_*`` columns), an
    estimator's columns, or both."""
    labels = [s.column.startswith("label_") for s in specs]
    if all(labels):
        return "the dataset's labels"
    if not any(labels):
        return "an estimator's columns"
    return "the dataset's labels and an estimator's columns"


def group_sentence(protected: Sequence[AttributeSpec], n_groups: int,
                   unit: str = "pairs") -> str:
    """``Groups: gender × skin (4 with pairs), from the dataset's labels (...).``"""
    if not protected:
        return "No protected attribute is configured: every pair is in one group."
    names = " × ".join(s.name for s in protected)
    legends = "; ".join(bin_legend(s) for s in protected)
    return (f"Groups: {names} ({n_groups} with {unit}), from {group_source(protected)} "
            f"({legends}).")


def threshold_label(row: Mapping[str, Any]) -> str:
    """``FMR 0.001`` for a target-FMR threshold, else ``t = 0.42``."""
    target = row.get("target_fmr", np.nan)
    if target is not None and np.isfinite(float(target)):
        return f"FMR {float(target):g}"
    return f"t = {float(row['threshold']):.4g}"


def rate_extremes(rows: pd.DataFrame, rate: str, confidence: float
                  ) -> tuple[str, str] | None:
    """``(worst, best)`` as ``group (value, CI)`` texts for one rate over the groups with a
    finite value; None without any (best is empty with one group only)."""
    value = pd.to_numeric(rows[rate], errors="coerce")
    ok = rows[value.notna()].assign(_v=value[value.notna()])
    if ok.empty:
        return None
    ok = ok.sort_values(["_v", "group"], kind="stable")

    def text(r: pd.Series) -> str:
        ci = interval_text(r["_v"], r.get(f"{rate}_lo"), r.get(f"{rate}_hi"), confidence)
        return f"{r['group']} ({ci})"

    worst = text(ok.iloc[-1])
    return worst, (text(ok.iloc[0]) if len(ok) > 1 else "")


def _rates_sentence(model: str, label: str, rows: pd.DataFrame, confidence: float) -> str:
    parts = []
    for rate, pairs in (("fnmr", "genuine"), ("fmr", "impostor")):
        ext = rate_extremes(rows, rate, confidence)
        if ext is None:
            parts.append(f"is n/a (no group has {pairs} pairs)")
        elif not ext[1]:
            parts.append(f"is known for one group only, {ext[0]}: no comparison")
        else:
            parts.append(f"is highest for {ext[0]} and lowest for {ext[1]}")
    return f"{model}'s FNMR at {label} {parts[0]}; its FMR {parts[1]}."


def verdict_lines(summary: Mapping[str, Any], thresholds: pd.DataFrame, rates: pd.DataFrame,
                  cfg: Mapping[str, Any]) -> list[str]:
    """The fairness page's opening sentences, from its summary row, thresholds table and
    per-group rates (numbers or their ``n/a (...)`` notes) and the ``fairness`` config."""
    protected = parse_specs(cfg.get("protected"))
    legitimate = parse_specs(cfg.get("legitimate"))
    confidence = float(cfg.get("confidence", 0.95))
    n_groups = int(summary.get("n_groups", rates["group"].nunique() if len(rates) else 0))
    out = [group_sentence(protected, n_groups)]
    out.append("Legitimate bins (a pair's x_L joins both images' bins, A0-A1): "
               + "; ".join(bin_legend(s) for s in legitimate) + "." if legitimate else
               "No legitimate attribute: all pairs form one combination x_L.")
    if thresholds.empty:
        return [*out, "No global threshold: no per-group error rates."]
    first = thresholds.iloc[0]
    label = threshold_label(first)
    t = pd.to_numeric(pd.Series([first["threshold"]]), errors="coerce").iloc[0]
    resolvable = bool(first.get("resolvable", True))
    note = ("" if resolvable else f"; {int(first['threshold_n_impostor'])} impostors cannot "
            f"resolve it, so its per-group rates read n/a")
    out.append(f"Threshold: {label} over {first['source']} (t = {num(t, 4)}){note}; "
               f"{OTHER_THRESHOLDS}.")
    if resolvable:
        rows = rates[rates["threshold_name"] == first["name"]] if len(rates) else rates
        out.append(_rates_sentence(str(summary["model"]), label, rows, confidence))
    out.append(f"Bias+ {num(summary['bias_pos'], 4)} and Bias- {num(summary['bias_neg'], 4)} "
               "(FairFace 2020: the spread of the groups' AUC gaps, 0 = fair); what "
               "mitigation buys on these gaps is on the mitigation page.")
    return out


def verdict_block(summary: Mapping[str, Any], thresholds: pd.DataFrame, rates: pd.DataFrame,
                  cfg: Mapping[str, Any]) -> str:
    """:func:`verdict_lines` as the Markdown paragraph that opens the page."""
    return verdict_markdown(verdict_lines(summary, thresholds, rates, cfg))
