"""Models x benchmarks summary tables, like CAST's Table 4 (accuracy mean +/- std and average).

Written as Parquet (the long table, one row per model and benchmark, every metric and flag),
Markdown and HTML (the same tables; the HTML page is what ``snakemake --report`` shows).
A TAR@FAR the protocol cannot resolve (fewer than ``1 / FAR`` impostors; flag
``resolvable@far=..`` False) is printed ``n/a (N impostors)``, and an average over it as
``n/a``. A last table gives, per benchmark and model, the pairs counted, those without a
feature (``n_failed``; the failure rule ``evaluate.failed`` is named above the table) and
those left out, and how the folds were formed. Beside the accuracy: each benchmark's
genuine and impostor pairs, its pairs held out (``val``), the accuracy of the constant
answer and each model's margin over it; with imbalanced classes the page leads with AUC
and TAR@FAR (:mod:`facecast.evaluate.chance`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from facecast.evaluate.chance import chance_lines, lead_lines
from facecast.evaluate.failures import FAILED_RULES, rule_text
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.report.html_tables import markdown_html, write_html_page


def collect_metrics(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Concatenate per-(model, benchmark) metric rows."""
    frames = [read_parquet(p) for p in paths]
    if not frames:
        return pd.DataFrame(columns=["model", "benchmark"])
    return pd.concat(frames, ignore_index=True)


def wide_table(long: pd.DataFrame, value: str, benchmarks: Sequence[str],
               models: Sequence[str]) -> pd.DataFrame:
    """``value`` as a models x benchmarks table with an ``average`` column."""
    t = long.pivot(index="model", columns="benchmark", values=value)
    t = t.reindex(index=list(models), columns=list(benchmarks))
    t["average"] = t.mean(axis=1, skipna=False)  # a missing benchmark makes it undefined
    return t


def _fmt_pm(mean: float, std: float) -> str:
    if np.isnan(mean):
        return "–"
    return f"{100 * mean:.2f} ± {100 * std:.2f}"


def far_key(far: float) -> str:
    """The column suffix of a FAR target (``1e-3``), as :mod:`facecast.evaluate.metrics`."""
    return f"{far:.0e}".replace("e-0", "e-")


def _value(long: pd.DataFrame, model: str, bench: str, col: str):
    m = long[(long["model"] == model) & (long["benchmark"] == bench)]
    if not len(m) or col not in m:
        return None
    return m[col].iloc[0]


def _tar_cells(long: pd.DataFrame, t: pd.DataFrame, far: float, model: str,
               benchmarks: Sequence[str], scale: float) -> list[str]:
    flag = f"resolvable@far={far_key(far)}"
    cells, unresolved = [], False
    for b in benchmarks:
        ok = _value(long, model, b, flag)
        if ok is not None and not pd.isna(ok) and not bool(ok):
            unresolved = True
            n_imp = _value(long, model, b, "n_impostor")
            cells.append(f"n/a ({int(n_imp)} impostors)")
        else:
            v = t.loc[model, b]
            cells.append("–" if np.isnan(v) else f"{scale * v:.2f}")
    avg = t.loc[model, "average"]
    cells.append("n/a" if unresolved else ("–" if np.isnan(avg) else f"{scale * avg:.2f}"))
    return cells


def _pairs_table(long: pd.DataFrame, benchmarks: Sequence[str], models: Sequence[str]
                 ) -> list[str]:
    lines = ["", "## Pairs and folds", "",
             "Pairs counted (test folds), genuine / impostor, pairs without a feature "
             "(n_failed, with their statuses), pairs left out (n_skipped, with their "
             "statuses: rows that are no comparison and, under evaluate.failed: drop, the "
             "failed pairs) and how the folds of the 10-fold accuracy were formed. "
             + _rule_sentence(long), "",
             "| benchmark | model | n_pairs | genuine | impostor | n_failed | failed statuses "
             "| n_skipped | skipped statuses | folds |", "|---|---|---|---|---|---|---|---|---|---|"]

    def num(v) -> str:
        return "–" if v is None or pd.isna(v) else str(int(v))

    def text(v) -> str:
        return "–" if v is None or pd.isna(v) or not str(v) else str(v).replace("|", "\\|")

    for b in benchmarks:
        for m in models:
            if _value(long, m, b, "model") is None:
                lines.append(f"| {b} | {m} | – | – | – | – | – | – | (no metrics) | – |")
                continue
            lines.append(" | ".join([
                f"| {b}", m, num(_value(long, m, b, "n_pairs")),
                num(_value(long, m, b, "n_genuine")), num(_value(long, m, b, "n_impostor")),
                num(_value(long, m, b, "n_failed")), text(_value(long, m, b, "failed_statuses")),
                num(_value(long, m, b, "n_skipped")),
                text(_value(long, m, b, "skipped_statuses")),
                text(_value(long, m, b, "folds"))]) + " |")
    return lines


def _rule_sentence(long: pd.DataFrame) -> str:
    """The failure rule of the rows (:func:`facecast.evaluate.failures.rule_text`), or what
    the rows say when they disagree."""
    rules = (sorted({str(r) for r in long["failed"].dropna()}) if "failed" in long.columns
             else [])
    if not rules:
        return ""
    if len(rules) == 1 and rules[0] in FAILED_RULES:
        return rule_text(rules[0])
    return f"Rows under different failure rules ({', '.join(rules)}): see column failed."


def summary_markdown(long: pd.DataFrame, benchmarks: Sequence[str], models: Sequence[str],
                     fars: Sequence[float] = (1e-3, 1e-4)) -> str:
    """Markdown: accuracy (%, mean ± std over folds), then TAR@FAR, AUC and EER tables,
    then pairs used/skipped and fold formation per benchmark and model.

    Accept-iff ``score >= threshold`` throughout; unresolvable TAR@FAR cells read
    ``n/a (N impostors)``.
    """
    acc = wide_table(long, "accuracy", benchmarks, models)
    std = wide_table(long, "accuracy_std", benchmarks, models)
    cols = list(benchmarks) + ["average"]
    lead = lead_lines(long, benchmarks)  # imbalanced classes: AUC and TAR@FAR first
    accuracy = ["10-fold accuracy (%, mean ± std over folds; best threshold on nine folds "
                "applied to the tenth). The average is over benchmarks (std: mean of the "
                "stds). " + _rule_sentence(long), "",
                "| model | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for m in models:
        cells = [_fmt_pm(acc.loc[m, b], std.loc[m, b]) for b in cols]
        accuracy.append(f"| {m} | " + " | ".join(cells) + " |")
    accuracy += chance_lines(long, benchmarks, models)
    lines = ["# Verification summary", "", *lead, *([] if lead else accuracy)]
    for title, value, scale, far in [(f"TAR at FAR={f:g} (%)", f"tar@far={far_key(f)}", 100, f)
                                     for f in fars] + \
                                    [("AUC (%)", "auc", 100, None), ("EER (%)", "eer", 100, None)]:
        if value not in long:
            continue
        t = wide_table(long, value, benchmarks, models)
        lines += ["", f"## {title}", ""]
        if far is not None:
            lines += [f"n/a (N impostors): the protocol has fewer than {1 / far:g} impostor "
                      "pairs, too few to resolve this FAR (accept iff score >= threshold).", ""]
        lines += ["| model | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
        for m in models:
            if far is not None:
                cells = _tar_cells(long, t, far, m, benchmarks, scale)
            else:
                cells = ["–" if np.isnan(t.loc[m, b]) else f"{scale * t.loc[m, b]:.2f}"
                         for b in cols]
            lines.append(f"| {m} | " + " | ".join(cells) + " |")
    if lead:
        lines += ["", "## 10-fold accuracy", "", *accuracy]
    lines += _pairs_table(long, benchmarks, models)
    return "\n".join(lines) + "\n"


def write_summary(metric_paths: Iterable[str | os.PathLike], out_parquet: str | os.PathLike,
                  out_md: str | os.PathLike, *, benchmarks: Sequence[str], models: Sequence[str],
                  fars: Sequence[float] = (1e-3, 1e-4), out_html: str | os.PathLike | None = None,
                  provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Write the long metrics table (Parquet), the Markdown summary and (``out_html``) its
    HTML twin for the Snakemake report; return the table."""
    long = collect_metrics(metric_paths)
    prov = dict(provenance or {})
    prov.update({"stage": "evaluate_summary"})
    write_parquet(long, out_parquet, provenance=prov)
    md = summary_markdown(long, benchmarks, models, fars)
    write_text(out_md, md)
    if out_html is not None:
        write_html_page(out_html, "Verification summary", markdown_html(md))
    return long
