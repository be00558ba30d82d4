"""The files of one (model, protocol) mitigation run, and what a person reads.

=======================  ===============================================================
``table.parquet/.csv``   one row per method: each metric with ``_lo``/``_hi``
                         (percentile), and against raw ``_diff``, ``_diff_lo``/``_hi``,
                         ``_p``, ``_p_adjusted``, ``_verdict``; counts; ``note``
``table.md``             the headline sentences, the table and the differences
``differences.*``        one row per method and tested metric (the Holm family)
``<method>/pairs.*``     the evaluated pairs with the method's ``score`` (scores-file
                         format: ``slices``/``compare`` read ``<model>+<method>``)
``split.parquet``        every input pair of the protocol with its ``status`` (and
                         ``fit``, ``failed``)
``fits.parquet/.csv``    one row per fit: the folds it excludes, its calibration pairs,
                         the pairs it evaluates and leaves out
``faircal.parquet/.csv`` FairCal's figures in FairCal's convention, per fold, their
                         mean and SD over the folds, and pooled
                         (:mod:`facecast.mitigation.faircal_figures`)
``calibration.parquet``  the calibration identities (``dataset``, ``identity``)
``learned.json``         what each method learned (thresholds, maps, weights, counts)
``pareto.png``           accuracy vs Bias+/Bias- per method, with intervals
``report.html``          the page of ``table.md`` with the figure and the differences
=======================  ===============================================================
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.evaluate.failures import rule_text
from facecast.io.atomic import write_text
from facecast.io.parquet_io import write_parquet
from facecast.mitigation.crossfit import fits_table
from facecast.mitigation.figures import plot_pareto
from facecast.mitigation.learned import learned_records
from facecast.mitigation.methods import Result
from facecast.mitigation.split import Split
from facecast.mitigation.verdict import add_verdict
from facecast.report.html_tables import frame_html, markdown_html, write_html_page

__all__ = ["PAIR_COLUMNS", "headline", "table_markdown", "write_outputs"]

#: columns of ``<method>/pairs.parquet`` (those of the scores file that exist)
PAIR_COLUMNS = ["fold", "image_a", "image_b", "identity_a", "identity_b", "label", "status",
                "message", "raw_score", "score", "probability", "eval_fold", "fit",
                "failed"]
#: FairCal's figures shown in table.md (mean +- SD over the folds), heading, scale
FAIRCAL_SHOWN = [("auroc", "AUROC", 1), ("tpr@fpr=0.001", "TPR @ 0.1 % FPR", 1),
                 ("tpr@fpr=0.01", "TPR @ 1 % FPR", 1),
                 ("fpr@fpr=0.001_aad", "FPR AAD @ 0.1 %", 1),
                 ("fpr@fpr=0.001_mad", "FPR MAD @ 0.1 %", 1),
                 ("fpr@fpr=0.001_std", "FPR STD @ 0.1 %", 1),
                 ("fpr@fpr=0.01_aad", "FPR AAD @ 1 %", 1), ("fpr@fpr=0.01_mad", "FPR MAD @ 1 %", 1),
                 ("fpr@fpr=0.01_std", "FPR STD @ 1 %", 1), ("ks_mean", "KS mean", 1),
                 ("ks_aad", "KS AAD", 1), ("ks_mad", "KS MAD", 1), ("ks_std", "KS STD", 1),
                 ("ece_mean", "ECE mean", 1), ("ece_aad", "ECE AAD", 1)]
#: the table.md columns: metric, heading, scale (100 = percent)
SHOWN = [("accuracy", "accuracy %", 100), ("auc", "AUC", 1), ("bias_pos", "Bias+", 1),
         ("bias_neg", "Bias-", 1), ("fmr_max_min", "FMR max/min", 1),
         ("fnmr_max_min", "FNMR max/min", 1), ("garbe", "GARBE", 1), ("fdr", "FDR", 1),
         ("ks", "KS", 1), ("ks_mad", "KS MAD", 1)]


def _num(v: float, scale: float = 1, sign: bool = False) -> str:
    if not np.isfinite(v):
        return "n/a" if np.isnan(v) else ("inf" if v > 0 else "-inf")
    return f"{v * scale:+.4g}" if sign else f"{v * scale:.4g}"


def _verdict(r: pd.Series) -> str:
    """``lower, significant`` / ``higher, significant`` / ``not significant``."""
    if r["verdict"] in ("higher", "lower"):
        return f"{r['verdict']}, significant"
    return "not significant"


def headline(diff: pd.DataFrame, method: str) -> str:
    """One bullet's text per method, one or two short sentences: what it does to Bias+
    and Bias- and what it costs in 10-fold accuracy (raw -> method, and whether the change
    is significant after Holm); intervals and p-values stay in the tables."""
    sub = diff[diff["method"] == method].set_index("metric")
    bits = []
    for k, name in (("bias_pos", "Bias+"), ("bias_neg", "Bias-")):
        if k in sub.index:
            r = sub.loc[k]
            bits.append(f"{name} {r['note']}" if r["note"] else
                        f"{name} {_num(r['raw'])} -> {_num(r['value'])} ({_verdict(r)})")
    r = sub.loc["accuracy"]
    if r["note"]:
        cost = f"Accuracy {r['note']}."
    elif r["difference"] == 0:
        cost = f"Accuracy unchanged ({_num(r['raw'], 100)} %)."
    else:
        cost = (f"Accuracy {_num(r['raw'], 100)} % -> {_num(r['value'], 100)} % "
                f"({_num(r['difference'], 100, sign=True)} points, {_verdict(r)}).")
    return f"`{method}`: " + "; ".join(bits) + ". " + cost


def _value_notes(row: pd.Series) -> dict[str, str]:
    """The wide table's ``note`` (``<metric>: n/a (...)``, "; "-joined) per metric."""
    out = {}
    for part in str(row.get("note") or "").split("; "):
        metric, _, note = part.partition(": ")
        if note:
            out[metric] = note
    return out


def _not_run(row: pd.Series) -> bool:
    """Whether the row is a method that did not run on this model (``status`` n/a)."""
    return row.get("status", "ok") == "n/a"


def _cell(row: pd.Series, k: str, scale: float) -> str:
    if _not_run(row):
        return "n/a"
    if k not in row.index or np.isnan(row.get(k, np.nan)):
        return _value_notes(row).get(k, "n/a")
    miss = " (interval misses it)" if _value_notes(row).get(k) == "interval misses the " \
        "estimate" else ""
    return (f"{_num(row[k], scale)} [{_num(row[f'{k}_lo'], scale)}, "
            f"{_num(row[f'{k}_hi'], scale)}]{miss}")


def _diff_cell(row: pd.Series, k: str, scale: float) -> str:
    if _not_run(row):
        return "n/a"
    d = row.get(f"{k}_diff", np.nan)
    if not np.isfinite(d):
        return str(row.get(f"{k}_verdict") or "n/a") if f"{k}_verdict" in row.index else "-"
    mark = " *" if row[f"{k}_verdict"] in ("higher", "lower") else ""
    return (f"{_num(d, scale, True)} [{_num(row[f'{k}_diff_lo'], scale, True)}, "
            f"{_num(row[f'{k}_diff_hi'], scale, True)}]{mark}")


def table_markdown(table: pd.DataFrame, diff: pd.DataFrame, *, title: str,
                   intro: str, sentences: list[str]) -> str:
    """``table.md``: headline sentences, values with intervals, differences to raw."""
    shown = [(k, h, s) for k, h, s in SHOWN if k in table.columns]
    head = "| method | " + " | ".join(h for _, h, _ in shown) + " |"
    sep = "|---" * (len(shown) + 1) + "|"
    md = [f"# {title}", "", intro, "", "## What each method buys and costs", "",
          "Each method against raw on the same evaluated pairs (raw -> method; "
          "significance after Holm across the table; intervals in the tables below):", ""]
    md += [f"- {s}" for s in sentences] + ["", "## Values (95 % identity-clustered "
                                               "bootstrap intervals)", "", head, sep]
    for _, row in table.iterrows():
        md.append(f"| {row['method']} | " + " | ".join(_cell(row, k, s) for k, _, s in shown)
                  + " |")
    md += ["", "## Differences to raw (* = significant after Holm across the table)", "",
           head, sep]
    for _, row in table[table["method"] != "raw"].iterrows():
        md.append(f"| {row['method']} | " + " | ".join(_diff_cell(row, k, s)
                                                       for k, _, s in shown) + " |")
    notes = [f"- {r['method']}: {r['note']}" for _, r in table.iterrows() if r["note"]]
    if notes:
        md += ["", "## Not a number", "", *notes]
    md += ["", "![accuracy vs bias](pareto.png)", ""]
    return "\n".join(md)


def faircal_markdown(fc: pd.DataFrame) -> list[str]:
    """The table.md section of FairCal's figures: per method the mean +- SD over the
    folds (FairCal's convention), and the pooled value."""
    shown = [(k, h) for k, h, _ in FAIRCAL_SHOWN if k in fc.columns]
    md = ["## FairCal's figures (FairCal's convention)", "",
          "Each figure on each fold's evaluated pairs, then the mean +- population SD over "
          "the folds, as FairCal reports (Salvador et al., ICLR 2022); TPR read off the "
          "global ROC by linear interpolation, subgroup FPRs at the global threshold of "
          "each FPR; AAD / MAD / STD over the subgroups; KS and ECE of each method's "
          "probability. `faircal.csv` holds every fold, every subgroup and the pooled "
          "figures.", "", "| method | folds | " + " | ".join(h for _, h in shown) + " |",
          "|---" * (len(shown) + 2) + "|"]
    for m, sub in fc.groupby("method", sort=False):
        by = sub.set_index("fold")
        cells = []
        for k, _ in shown:
            mean, sd = by.loc["mean", k], by.loc["std", k]
            cells.append("n/a" if not np.isfinite(mean) else f"{mean:.4g} +- {sd:.2g}"
                         if np.isfinite(sd) else f"{mean:.4g}")
        md.append(f"| {m} | {by.loc['mean', 'note'].removeprefix('over ')} | "
                  + " | ".join(cells) + " |")
    return [*md, ""]


def fits_markdown(fits: pd.DataFrame) -> list[str]:
    """The table.md section of the fits: each fit's excluded folds and pair counts."""
    md = ["## Fits", "", f"{len(fits)} fit(s) of every method; each evaluated pair is "
          "scored by the fit that excludes its identities' folds.", "",
          "| fit | excludes | calibration pairs | calibration identities | evaluated "
          "pairs | left out |", "|---|---|---|---|---|---|"]
    md += [f"| {r.fit} | {r.excluded} | {r.n_calibration} | {r.calibration_identities} | "
           f"{r.n_evaluated} | {r.n_left_out} |" for r in fits.itertuples(index=False)]
    return [*md, ""]


def _intro(split: Split, counts: Mapping[str, int], diff: pd.DataFrame,
           cfg: Mapping[str, Any], rule: str, n_failed: int) -> str:
    tested = int(np.isfinite(diff["p"].to_numpy(np.float64)).sum())
    side = ("the smallest fit's calibration side" if len(split.fits) > 1 else "")
    return (f"Calibration: {split.source} - {side + ': ' if side else ''}"
            f"{counts['calibration_identities']} identities, "
            f"{counts['calibration_genuine']} genuine and {counts['calibration_impostors']} "
            f"impostor pairs; every method learns there. Evaluated: "
            f"{counts['evaluated_identities']} other identities, "
            f"{counts['evaluated_genuine']} genuine and {counts['evaluated_impostors']} "
            f"impostor pairs. Intervals: identity-clustered bootstrap "
            f"({int(cfg.get('n_boot', 1000))} replicates, one draw shared by every method). "
            "Differences: method - raw on the same pairs, Wald test on the clustered "
            "bootstrap SE with t on G - 1 degrees of freedom; Holm across all "
            f"{tested} tests of the table (alpha {float(cfg.get('alpha', 0.05)):g}). "
            f"Figures at one global threshold: target FMR {float(cfg.get('fmr', 1e-3)):g} "
            f"on each method's evaluated impostors. {rule_text(rule, n_failed)}")


def _write_pairs(out: Path, split: Split, scores: Mapping[str, np.ndarray],
                 probs: Mapping[str, np.ndarray], prov: Mapping[str, Any]) -> None:
    ev = split.evaluated
    for m, score in scores.items():
        frame = ev.assign(raw_score=ev["score"].to_numpy(np.float64), score=score,
                          probability=probs[m], status="ok", message="")
        failed = ev["failed"].to_numpy(bool)
        frame.loc[failed, "message"] = "not scored (no feature): score -inf, a non-match"
        frame = frame[[c for c in PAIR_COLUMNS if c in frame.columns]]
        (out / m).mkdir(parents=True, exist_ok=True)
        write_parquet(frame, out / m / "pairs.parquet", provenance={**prov, "method": m})


def _write_split(out: Path, split: Split, ds: str, source: tuple[str, str] | None,
                 prov: Mapping[str, Any]) -> None:
    cols = [c for c in ("fold", "image_a", "image_b", "identity_a", "identity_b", "label",
                        "score", "eval_fold", "fit", "failed", "status", "message")
            if c in split.pairs]
    write_parquet(split.pairs[cols], out / "split.parquet", provenance=prov)
    where = source[0] if source else ds
    ids = [i.removeprefix(f"{where}::") for i in split.calibration_ids]
    write_parquet(pd.DataFrame({"dataset": where, "identity": ids}),
                  out / "calibration.parquet", provenance=prov)


def write_outputs(out: Path, *, split: Split, results: list[Result], table: pd.DataFrame,
                  diff: pd.DataFrame, cfg: Mapping[str, Any], counts: Mapping[str, int],
                  model: str, protocol: str, ds: str, source: tuple[str, str] | None,
                  faircal: pd.DataFrame, rule: str, scores: Mapping[str, np.ndarray],
                  probs: Mapping[str, np.ndarray], provenance: Mapping[str, Any]) -> None:
    """Every file of the module docstring into ``out`` (created)."""
    out.mkdir(parents=True, exist_ok=True)
    prov = dict(provenance)
    _write_pairs(out, split, scores, probs, prov)
    _write_split(out, split, ds, source, prov)
    fits = fits_table(split)
    for name, frame in (("table", table), ("differences", diff), ("fits", fits),
                        ("faircal", faircal)):
        write_parquet(frame, out / f"{name}.parquet", provenance=prov)
        write_text(out / f"{name}.csv", frame.to_csv(index=False))
    write_text(out / "learned.json", json.dumps(
        learned_records(results, split, counts), indent=1, sort_keys=True) + "\n")
    sentences = [f"`{r['method']}`: {r['note']}." if _not_run(r) else headline(diff, r["method"])
                 for _, r in table.iterrows() if r["method"] != "raw"]
    n_failed = int(table["n_failed"].iat[0])
    md = table_markdown(table, diff, title=f"Bias mitigation: {model} on {protocol} ({ds})",
                        intro=_intro(split, counts, diff, cfg, rule, n_failed),
                        sentences=sentences)
    md = md.replace("\n![accuracy vs bias]", "\n" + "\n".join(
        [*faircal_markdown(faircal), *fits_markdown(fits)]) + "\n![accuracy vs bias]")
    md = add_verdict(md, table, cfg)
    write_text(out / "table.md", md)
    plot_pareto(table, out / "pareto.png", f"{model} on {protocol}: accuracy vs bias")
    write_html_page(out / "report.html", f"Bias mitigation: {model} on {protocol}", [
        markdown_html(md, base=out),
        frame_html(diff, caption="differences to raw (the Holm family)")])
