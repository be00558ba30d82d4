"""RFW's table (rule ``rfw_table``): accuracy per set, its spread across sets and the
skewed error ratio.

The layout is the one the RFW papers report: accuracy per set in the RFW paper's order
(Caucasian, Indian, Asian, African; Wang et al., ICCV 2019), with the average, the
standard deviation across the sets (STD) and the skewed error ratio (SER) as Wang & Deng
(CVPR 2020, RL-RBN) introduced them and the later RFW papers report them.

Per (model, set): ``accuracy`` and ``accuracy_std`` are evaluate's 10-fold figures
(insightface's rule: best threshold on nine folds applied to the tenth, mean and
population std over the folds; :func:`facecast.evaluate.metrics.kfold_accuracy`) under
the failure rule ``evaluate.failed`` (:mod:`facecast.evaluate.failures`, named in
``failed`` and in the table's text): under ``nonmatch`` all of a set's pairs count, a pair
without a feature is a non-match (wrong when genuine, right when impostor); under ``drop``
it is left out. ``n_pairs`` is the pairs the accuracy counts, ``n_failed`` the pairs
without a feature among them (nonmatch) or left out (drop), ``n_skipped`` the pairs of the
set's test that are no comparison or were left out (``skipped_statuses`` says why), and
``structure`` the set's pairs file as found (:func:`facecast.datasets.rfw.fold_structure`:
RFW's layout, or what differs). Per model an ``average`` row: the mean accuracy over the
sets, ``std_across_sets`` (population std of the sets' accuracies, numpy's default) and
``ser`` (skewed error ratio: the largest error ``1 - accuracy`` over the sets divided by
the smallest), ``n_pairs`` / ``n_failed`` / ``n_skipped`` summed over the sets. Where a
figure cannot be computed the row says so in ``status`` (``n/a (<why>)``) and the value is
NaN: a set without scorable pairs, an average over a missing set, an SER whose smallest
error is 0.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from facecast.datasets.rfw import STRUCTURE_MARK
from facecast.evaluate.chance import chance_accuracy
from facecast.evaluate.failures import rule_text
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.report.html_tables import write_markdown_html
from facecast.report.markdown import table_head

log = logging.getLogger(__name__)

#: the row of a model's figures over its sets
AVERAGE = "average"
COLUMNS = ["model", "set", "accuracy", "accuracy_std", "std_across_sets", "ser", "n_pairs",
           "n_genuine", "n_impostor", "chance_accuracy", "n_failed", "n_skipped",
           "skipped_statuses", "failed", "structure", "status"]


def _num(row: Mapping[str, Any], key: str) -> float:
    v = row.get(key)
    return float(v) if v is not None and not pd.isna(v) else float("nan")


def _count(row: Mapping[str, Any], key: str) -> int:
    v = _num(row, key)
    return int(v) if np.isfinite(v) else 0


def structure_of(folds_note: Any) -> str:
    """The pairs file structure a protocol's fold note states ('' when it states none)."""
    text = str(folds_note or "")
    return text.split(STRUCTURE_MARK, 1)[1] if STRUCTURE_MARK in text else ""


def _set_row(model: str, set_name: str, metrics: pd.DataFrame | None) -> dict[str, Any]:
    row: dict[str, Any] = {"model": model, "set": set_name}
    m = metrics.iloc[0].to_dict() if metrics is not None and len(metrics) else {}
    row.update(accuracy=_num(m, "accuracy"), accuracy_std=_num(m, "accuracy_std"),
               std_across_sets=np.nan, ser=np.nan, n_pairs=_count(m, "n_pairs"),
               n_genuine=_count(m, "n_genuine"), n_impostor=_count(m, "n_impostor"),
               n_failed=_count(m, "n_failed"), n_skipped=_count(m, "n_skipped"),
               skipped_statuses=str(m.get("skipped_statuses") or ""),
               failed=str(m.get("failed") or ""), structure=structure_of(m.get("folds")))
    row["chance_accuracy"] = chance_accuracy(row["n_genuine"], row["n_impostor"])
    row["status"] = ("ok" if np.isfinite(row["accuracy"]) else
                     "n/a (no scorable genuine and impostor pairs)" if m else
                     "n/a (no metrics for this set)")
    return row


def average_row(model: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``average`` row of one model's set rows (module docstring)."""
    acc = np.array([r["accuracy"] for r in rows], np.float64)
    out: dict[str, Any] = {"model": model, "set": AVERAGE, "accuracy_std": np.nan,
                           "n_pairs": int(sum(r["n_pairs"] for r in rows)),
                           "n_genuine": int(sum(r.get("n_genuine", 0) for r in rows)),
                           "n_impostor": int(sum(r.get("n_impostor", 0) for r in rows)),
                           "n_failed": int(sum(r.get("n_failed", 0) for r in rows)),
                           "n_skipped": int(sum(r["n_skipped"] for r in rows)),
                           "skipped_statuses": "", "structure": "",
                           "failed": ", ".join(dict.fromkeys(
                               r.get("failed", "") for r in rows if r.get("failed")))}
    out["chance_accuracy"] = chance_accuracy(out["n_genuine"], out["n_impostor"])
    missing = [r["set"] for r in rows if not np.isfinite(r["accuracy"])]
    if missing or not len(rows):
        out.update(accuracy=np.nan, std_across_sets=np.nan, ser=np.nan,
                   status=f"n/a (no accuracy on {', '.join(missing) or 'any set'})")
        return out
    err = 1.0 - acc
    out.update(accuracy=float(acc.mean()), std_across_sets=float(acc.std()))
    if err.min() <= 0:
        zero = [r["set"] for r, e in zip(rows, err, strict=True) if e <= 0]
        out.update(ser=np.nan, status=f"n/a (SER: no error on {', '.join(zero)}, the smallest "
                                      "error is 0)")
    else:
        out.update(ser=float(err.max() / err.min()), status="ok")
    return out


def rfw_table(entries: Sequence[Mapping[str, str]], models: Sequence[str],
              sets: Sequence[str]) -> pd.DataFrame:
    """The table (:data:`COLUMNS`): ``entries`` are ``{model, set, path}`` of the metrics
    files; a (model, set) without an entry is a row saying so."""
    where = {(e["model"], e["set"]): e["path"] for e in entries}
    rows = []
    for m in models:
        own = [_set_row(m, s, read_parquet(where[(m, s)]) if (m, s) in where else None)
               for s in sets]
        rows += own + [average_row(m, own)]
    return pd.DataFrame(rows, columns=COLUMNS)


def _pct(v: float, std: float | None = None) -> str:
    if not np.isfinite(v):
        return "n/a"
    return f"{100 * v:.2f}" + (f" ± {100 * std:.2f}" if std is not None and np.isfinite(std)
                               else "")


def _rule_sentence(table: pd.DataFrame) -> str:
    """The failure rule(s) of the table's set rows, with the pairs they concern."""
    sets = table[table["set"] != AVERAGE]
    out = []
    for rule in dict.fromkeys(r for r in sets["failed"] if r):
        out.append(rule_text(rule, int(sets.loc[sets["failed"] == rule, "n_failed"].sum())))
    return " ".join(out)


def rfw_markdown(table: pd.DataFrame, sets: Sequence[str], ds: str) -> str:
    """The papers' layout: one line per model, accuracy (%) per set, average, STD and SER;
    the pairs files' structure where it is not RFW's; then every row's pairs and status."""
    lines = table_head(
        f"RFW: accuracy per set ({ds})",
        "10-fold accuracy (%, mean ± std over the folds: insightface's rule) per set in the "
        "RFW paper's order (Wang et al., ICCV 2019), the average over the sets, the "
        "standard deviation of the sets' accuracies (STD) and the skewed error ratio (SER: "
        "largest error / smallest error over the sets; 1 = equal errors), as Wang & Deng "
        "(CVPR 2020) and the later RFW papers report them. " + _rule_sentence(table),
        [*sets, "Avg", "STD", "SER"])
    for m, sub in table.groupby("model", sort=False):
        by = sub.set_index("set")
        avg = by.loc[AVERAGE]
        cells = [_pct(by.loc[s, "accuracy"], by.loc[s, "accuracy_std"]) for s in sets]
        ser = f"{avg['ser']:.3f}" if np.isfinite(avg["ser"]) else avg["status"]
        cells += [_pct(avg["accuracy"]), _pct(avg["std_across_sets"]), ser]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    first = table.drop_duplicates("set").set_index("set")
    odd = [s for s in sets if s in first.index and first.loc[s, "structure"]
           and not str(first.loc[s, "structure"]).startswith("RFW's layout")]
    if odd:
        lines += ["", "## Pairs files that are not in RFW's layout", "",
                  "The folds stay insightface's 10 consecutive blocks of the file; RFW's own "
                  "file has 10 blocks of 300 genuine then 300 impostor lines.", ""]
        lines += [f"- {s}: {first.loc[s, 'structure']}" for s in odd]
    lines += ["", "## Pairs per set", "",
              "Pairs counted (test folds, under the failure rule), pairs without a feature "
              "among them or left out (n_failed), pairs that are no comparison or were left "
              "out (n_skipped, with their statuses); `status` says why a figure is n/a. "
              "Genuine and impostor pairs, and the accuracy of always giving the majority "
              "answer (RFW's blocks are half genuine: 50 %): an accuracy near it is chance.",
              "",
              "| model | set | n_pairs | genuine | impostor | constant answer (%) | n_failed "
              "| n_skipped | skipped statuses | status |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        skipped = (r.skipped_statuses or "–").replace("|", "\\|")
        lines.append(f"| {r.model} | {r.set} | {r.n_pairs} | {r.n_genuine} | {r.n_impostor} "
                     f"| {_pct(r.chance_accuracy)} | {r.n_failed} | {r.n_skipped} | "
                     f"{skipped} | {r.status} |")
    return "\n".join(lines) + "\n"


def write_rfw_table(entries: Sequence[Mapping[str, str]], models: Sequence[str],
                    sets: Sequence[str], out_parquet: str | os.PathLike,
                    out_md: str | os.PathLike, out_html: str | os.PathLike, *, ds: str = "",
                    provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Write the table as Parquet, Markdown and its HTML twin (for the report)."""
    table = rfw_table(entries, models, sets)
    for r in table[table["status"] != "ok"].itertuples(index=False):
        log.warning("RFW %s / %s: %s", r.model, r.set, r.status)
    write_parquet(table, out_parquet, provenance={**dict(provenance or {}),
                                                  "stage": "rfw_table", "sets": list(sets)})
    write_text(out_md, rfw_markdown(table, sets, ds))
    write_markdown_html(out_md, out_html)
    return table
