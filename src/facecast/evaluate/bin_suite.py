"""Tables of the verification ``.bin`` sets: CAST's CC11 and the insightface suite.

* :func:`write_cc11_table` (rule ``cc11_table``, per dataset of ``layout: cc11``): one row
  per model, one column per CC11 block in CAST's order (cc11.py's names: Black, Caucasian,
  E. Asian, Latinx, M.E., Young, Female, Male, G&FH, L-p2p, Random) and ``Avg``; a cell is
  the 10-fold accuracy ``acc+-std`` in percent with two decimals, as cc11.py prints it, and
  ``Avg`` is the mean of the eleven accuracies +- the mean of the eleven stds (as cc11.py
  averages its blocks). The Markdown also gives each model's figures in the layout of
  cc11.py's printout, to compare line by line.
* :func:`write_bin_suite` (rule ``bin_suite``, one for the run): every ``.bin`` set of the
  config (lfw, cfp_fp, agedb_30, calfw, cplfw, a CC11 file as its ``Avg``) as one table,
  one row per model, ``acc +- std`` per set, and the same figures as arcface_torch's
  verification log lines (``[lfw]Accuracy-Flip: 0.99817+-0.00229``; ``Accuracy-Flip`` for
  a model configured with ``flip: true``, whose embeddings are flip-summed as
  arcface_torch's, else ``Accuracy``).

Every (model, protocol) asked for reaches the tables: a missing or NaN figure (no scorable
pair) is printed ``n/a`` with the reason, and an average over it ``n/a (k of 11 blocks)``;
pairs without a feature (an undecodable image) are counted per protocol (``n_failed``) and
count by the failure rule ``evaluate.failed``, which the pairs table names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from facecast.config.bin_sets import CC11_LABELS, CC11_NAMES
from facecast.evaluate.chance import chance_accuracy, constant_answer
from facecast.evaluate.failures import FAILED_RULES, rule_text
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.report.html_tables import html_page, markdown_html
from facecast.report.markdown import table_head

#: the metric columns the tables carry over from each metrics.parquet
METRIC_COLUMNS = ("accuracy", "accuracy_std", "n_pairs", "n_genuine", "n_impostor",
                  "n_failed", "failed_statuses", "failed", "n_skipped", "skipped_statuses",
                  "folds")


def read_items(items: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per item (``dataset``, ``protocol``, ``set``, ``model``, ``path``): its
    metrics, or status ``missing`` when the file is absent, ``no_pairs`` when the accuracy
    is NaN."""
    rows = []
    for it in items:
        row: dict[str, Any] = {k: it[k] for k in ("set", "dataset", "protocol", "model")}
        row["block"] = str(it.get("block") or "")
        path = str(it["path"])
        if os.path.exists(path):
            m = read_parquet(path)
            for c in METRIC_COLUMNS:
                row[c] = m[c].iloc[0] if c in m and len(m) else np.nan
            ok = not pd.isna(row["accuracy"])
            row["status"] = "ok" if ok else "no_pairs"
            row["message"] = "" if ok else "no scorable genuine and impostor pairs"
        else:
            row.update({c: np.nan for c in METRIC_COLUMNS})
            row.update({"status": "missing", "message": "no metrics file"})
        row["path"] = path
        rows.append(row)
    cols = ["set", "dataset", "protocol", "block", "model", *METRIC_COLUMNS, "status",
            "message", "path"]
    out = pd.DataFrame(rows, columns=cols)
    for c in ("accuracy", "accuracy_std"):
        out[c] = out[c].astype(float)
    return out


def block_average(rows: pd.DataFrame) -> dict[str, Any]:
    """cc11.py's average of one model's CC11 rows: mean accuracy, mean std (NaN with a
    reason unless all eleven blocks have a figure)."""
    have = rows[rows["status"] == "ok"]
    n_have = len(set(have["block"]) & set(CC11_NAMES))
    if n_have < len(CC11_NAMES):
        return {"accuracy": np.nan, "accuracy_std": np.nan, "status": "incomplete",
                "message": f"{n_have} of {len(CC11_NAMES)} blocks have a figure"}
    return {"accuracy": float(have["accuracy"].mean()),
            "accuracy_std": float(have["accuracy_std"].mean()), "status": "ok", "message": ""}


def _pct(acc: float, std: float, sep: str = "+-") -> str:
    return f"{100 * acc:.2f}{sep}{100 * std:.2f}"


def _cell(row: Mapping[str, Any] | None, sep: str = "+-") -> str:
    if row is None:
        return "n/a (not evaluated)"
    if row["status"] != "ok":
        return f"n/a ({row['message'] or row['status']})".replace("|", "/")
    return _pct(row["accuracy"], row["accuracy_std"], sep)


def _chance_cell(n_genuine: Any, n_impostor: Any) -> str:
    """``84.00 (different)``: the constant answer's accuracy and the answer; ``–`` without
    counts."""
    if n_genuine is None or n_impostor is None or pd.isna(n_genuine) or pd.isna(n_impostor):
        return "–"
    c = chance_accuracy(n_genuine, n_impostor)
    return "–" if not np.isfinite(c) else (
        f"{100 * c:.2f} ({constant_answer(n_genuine, n_impostor)})")


def _pairs_lines(long: pd.DataFrame, label: str) -> list[str]:
    rules = sorted({str(r) for r in long["failed"].dropna()} & set(FAILED_RULES))
    lines = ["", "## Pairs and folds", "",
             "Pairs counted, pairs without a feature (n_failed, with their statuses: e.g. an "
             "image that did not decode), pairs left out (n_skipped, with their statuses), "
             "and how the folds were formed. " + " ".join(rule_text(r) for r in rules)
             + " Beside the counts, the accuracy of always giving the majority answer "
             "(\"different\" where impostors outnumber genuine pairs): a 10-fold accuracy "
             "near it is no better than chance.", "",
             f"| {label} | model | n_pairs | genuine | impostor | constant answer (%) | "
             "n_failed | failed statuses | n_skipped | skipped statuses | folds |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]

    def num(v: Any) -> str:
        return "–" if v is None or pd.isna(v) else str(int(v))

    def text(v: Any) -> str:
        return "–" if v is None or pd.isna(v) or not str(v) else str(v).replace("|", "/")

    for r in long.itertuples():
        what = r.block or r.set
        if r.status == "missing":
            lines.append(f"| {what} | {r.model} | – | – | – | – | – | – | – | (no metrics) "
                         "| – |")
            continue
        lines.append(f"| {what} | {r.model} | {num(r.n_pairs)} | {num(r.n_genuine)} | "
                     f"{num(r.n_impostor)} | {_chance_cell(r.n_genuine, r.n_impostor)} | "
                     f"{num(r.n_failed)} | {text(r.failed_statuses)} | {num(r.n_skipped)} | "
                     f"{text(r.skipped_statuses)} | {text(r.folds)} |")
    return lines


# ------------------------------------------------------------------------------ CC11


def cc11_wide(long: pd.DataFrame, models: Sequence[str]) -> pd.DataFrame:
    """One row per model: ``<block>`` and ``<block>_std`` per CC11 block, ``average`` and
    ``average_std`` (cc11.py's Avg), ``status`` (``ok`` or why the average is n/a)."""
    rows = []
    for m in models:
        mine = long[long["model"] == m]
        row: dict[str, Any] = {"model": m}
        for b in CC11_NAMES:
            r = mine[mine["block"] == b]
            ok = len(r) and r["status"].iloc[0] == "ok"
            row[b] = float(r["accuracy"].iloc[0]) if ok else np.nan
            row[f"{b}_std"] = float(r["accuracy_std"].iloc[0]) if ok else np.nan
        avg = block_average(mine)
        row.update({"average": avg["accuracy"], "average_std": avg["accuracy_std"],
                    "status": avg["status"], "message": avg["message"]})
        rows.append(row)
    return pd.DataFrame(rows)


def cc11_printout(long: pd.DataFrame, model: str) -> str:
    """One model's figures in the layout of CAST's cc11.py printout."""
    rule = " --------------------------"
    lines = [rule]
    mine = long[long["model"] == model]
    for b, label in zip(CC11_NAMES, CC11_LABELS, strict=True):
        r = mine[mine["block"] == b]
        cell = _cell(r.iloc[0] if len(r) else None)
        lines += [f"| {label.ljust(11)} | {cell}|", rule]
    avg = block_average(mine)
    lines += ["", rule, f"| {'Avg'.ljust(11)} | {_cell(avg)}|", rule]
    return "\n".join(lines)


def cc11_markdown(long: pd.DataFrame, models: Sequence[str], *, dataset: str,
                  source: str = "") -> str:
    """The CC11 table of one dataset (module docstring)."""
    lines = table_head(
        f"CC11: {dataset}" + (f" ({source})" if source else ""),
        "10-fold accuracy (%, mean+-std over the 10 folds of each block: the best squared-L2 "
        "threshold of nine folds applied to the tenth), per CC11 sub-benchmark in CAST's "
        "order, as cc11.py computes and prints it. Avg: mean of the eleven accuracies +- "
        "mean of the eleven stds.", [*CC11_LABELS, "Avg"])
    for m in models:
        mine = long[long["model"] == m]
        cells = []
        for b in CC11_NAMES:
            r = mine[mine["block"] == b]
            cells.append(_cell(r.iloc[0] if len(r) else None))
        cells.append(_cell(block_average(mine)))
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += ["", "## As cc11.py prints it", ""]
    for m in models:
        lines += [f"### {m}", "", "```", cc11_printout(long, m), "```", ""]
    lines += _pairs_lines(long, "block")
    return "\n".join(lines) + "\n"


def write_cc11_table(items: Sequence[Mapping[str, Any]], out_parquet: str | os.PathLike,
                     out_md: str | os.PathLike, out_html: str | os.PathLike, *,
                     models: Sequence[str], dataset: str, source: str = "",
                     provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Write the CC11 table of ``dataset`` (Parquet: one row per model and block, plus the
    ``average`` row per model; Markdown; HTML for the report); return the long table."""
    long = read_items(items)
    wide = cc11_wide(long, models)
    avg = pd.DataFrame({"set": long["set"].iloc[0] if len(long) else dataset,
                        "dataset": dataset, "protocol": "average", "block": "average",
                        "model": wide["model"], "accuracy": wide["average"],
                        "accuracy_std": wide["average_std"], "status": wide["status"],
                        "message": wide["message"]})
    table = pd.concat([long, avg], ignore_index=True)
    prov = dict(provenance or {})
    prov.update({"stage": "cc11_table", "dataset": dataset, "source": source})
    write_parquet(table, out_parquet, provenance=prov)
    md = cc11_markdown(long, models, dataset=dataset, source=source)
    write_text(out_md, md)
    write_text(out_html, html_page(f"CC11: {dataset}", markdown_html(md)))
    return table


# ------------------------------------------------------------------------ the suite


def suite_rows(long: pd.DataFrame, sets: Sequence[str], models: Sequence[str]
               ) -> pd.DataFrame:
    """One row per (set, model): a ``pairs`` set's own figure, a CC11 set's average."""
    rows = []
    for s in sets:
        for m in models:
            mine = long[(long["set"] == s) & (long["model"] == m)]
            if len(mine) and (mine["block"] != "").any():
                fig = block_average(mine)
                n_pairs, n_failed, n_skip = (mine[c].sum(min_count=1) for c in
                                             ("n_pairs", "n_failed", "n_skipped"))
            elif len(mine):
                r = mine.iloc[0]
                fig = {k: r[k] for k in ("accuracy", "accuracy_std", "status", "message")}
                n_pairs, n_failed, n_skip = r["n_pairs"], r["n_failed"], r["n_skipped"]
            else:
                fig = {"accuracy": np.nan, "accuracy_std": np.nan, "status": "missing",
                       "message": "not evaluated"}
                n_pairs = n_failed = n_skip = np.nan
            rows.append({"set": s, "model": m, **fig, "n_pairs": n_pairs,
                         "n_failed": n_failed, "n_skipped": n_skip,
                         "failed": ", ".join(dict.fromkeys(mine["failed"].dropna()
                                                           .astype(str))),
                         "dataset": ", ".join(dict.fromkeys(mine["dataset"]))})
    return pd.DataFrame(rows, columns=["set", "model", "accuracy", "accuracy_std", "status",
                                       "message", "n_pairs", "n_failed", "n_skipped",
                                       "failed", "dataset"])


def verification_log(rows: pd.DataFrame, flips: Mapping[str, bool]) -> str:
    """arcface_torch's verification log lines (``[set]Accuracy-Flip: acc+-std``, fractions
    with five decimals), per model."""
    lines = []
    for m, part in rows.groupby("model", sort=False):
        lines.append(f"# {m}")
        what = "Accuracy-Flip" if flips.get(str(m)) else "Accuracy"
        for r in part.itertuples():
            fig = (f"{r.accuracy:1.5f}+-{r.accuracy_std:1.5f}" if r.status == "ok"
                   else f"n/a ({r.message or r.status})")
            lines.append(f"[{r.set}]{what}: {fig}")
    return "\n".join(lines)


def suite_markdown(rows: pd.DataFrame, long: pd.DataFrame, sets: Sequence[str],
                   models: Sequence[str], flips: Mapping[str, bool]) -> str:
    """The suite table, the log lines and the pairs table."""
    cc11 = [s for s in sets if (long.loc[long["set"] == s, "block"] != "").any()]
    lines = ["# Verification .bin sets", "",
             "10-fold accuracy (%, mean ± std over insightface's 10 consecutive folds: the "
             "best squared-L2 threshold of nine folds applied to the tenth), one row per "
             "model. " + (f"{', '.join(cc11)}: the CC11 average (mean of the eleven block "
                          "accuracies ± mean of their stds, as cc11.py prints it; the blocks "
                          "are in results/<dataset>/eval/cc11.md). " if cc11 else "")
             + "Models with flip: true embed the crop and its mirror image and sum them, as "
               "arcface_torch's Accuracy-Flip.", "",
             "| model | " + " | ".join(sets) + " |", "|---|" + "---|" * len(sets)]
    for m in models:
        cells = []
        for s in sets:
            r = rows[(rows["set"] == s) & (rows["model"] == m)]
            cells.append(_cell(r.iloc[0] if len(r) else None, " ± "))
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += ["", "## As arcface_torch's verification log prints it", "", "```",
              verification_log(rows, flips), "```"]
    lines += _pairs_lines(long, "set / block")
    return "\n".join(lines) + "\n"


def write_bin_suite(items: Sequence[Mapping[str, Any]], out_parquet: str | os.PathLike,
                    out_md: str | os.PathLike, out_html: str | os.PathLike, *,
                    models: Sequence[str], flips: Mapping[str, bool] | None = None,
                    provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Write the suite table (Parquet: one row per set and model, with the dataset, the
    figure and its status; Markdown; HTML for the report); return it."""
    long = read_items(items)
    sets = list(dict.fromkeys(str(it["set"]) for it in items))
    rows = suite_rows(long, sets, models)
    prov = dict(provenance or {})
    prov.update({"stage": "bin_suite", "sets": sets})
    write_parquet(rows, out_parquet, provenance=prov)
    md = suite_markdown(rows, long, sets, models, dict(flips or {}))
    write_text(out_md, md)
    write_text(out_html, html_page("Verification .bin sets", markdown_html(md)))
    return rows
