"""Rule ``estimators``: the estimator report of an attribute benchmark
(:mod:`facecast.labels.estimators`) written to ``results/{ds}/labels/``.

``estimators.parquet`` / ``.csv`` (the table), ``estimators.md`` + ``.html`` (readable:
image statuses, then one table per estimate; figures below ``min_n`` read
``n/a (why)``), ``estimators.png`` (accuracy per group with its interval, one panel per
estimate) and ``estimator_confusion.parquet`` / ``.csv`` (the confusion per group).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.fairness.tables import to_markdown
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.labels.estimators import (
    DETECTOR,
    Settings,
    estimator_tables,
)
from facecast.report.figures import fixed_grid_layout, pyplot, save_figure
from facecast.report.html_tables import write_markdown_html

log = logging.getLogger("facecast.labels")

OUTPUT_FILES = ("estimators.parquet", "estimators.csv", "estimators.md", "estimators.html",
                "estimators.png", "estimator_confusion.parquet", "estimator_confusion.csv")
#: the group_bys the figure shows (intersections are in the tables)
FIGURE_GROUP_BYS = ("all", "race", "gender", "age")


def _cell(value: float, lo: float, hi: float, note: str, what: str) -> str:
    """``0.912 [0.901, 0.922]``, or the row's n/a note for ``what``."""
    if np.isfinite(value):
        return f"{value:.3f} [{lo:.3f}, {hi:.3f}]"
    why = [n for n in note.split("; ") if n.startswith(f"{what}:")]
    return why[0].removeprefix(f"{what}: ") if why else "–"


def display_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """The readable columns of one estimate's rows (intervals inline, n/a with reasons)."""
    out = pd.DataFrame({
        "group_by": rows["group_by"], "group": rows["group"], "n": rows["n"],
        "n_no_face": rows["n_no_face"], "n_scored": rows["n_scored"],
        "accuracy [CI]": [_cell(a, lo, hi, n, "accuracy") for a, lo, hi, n in
                          zip(rows["accuracy"], rows["accuracy_lo"], rows["accuracy_hi"],
                              rows["note"], strict=True)],
        "p": rows["p"], "p_adjusted": rows["p_adjusted"]})
    if rows["mae"].notna().any() or rows["note"].str.contains("mae:").any():
        out["mae years [CI]"] = [_cell(m, lo, hi, n, "mae") for m, lo, hi, n in
                                 zip(rows["mae"], rows["mae_lo"], rows["mae_hi"],
                                     rows["note"], strict=True)]
        out["p_mae_adjusted"] = rows["p_mae_adjusted"]
    return out


def report_markdown(table: pd.DataFrame, statuses: pd.DataFrame, ds: str,
                    s: Settings, alpha: float) -> str:
    """The readable report (see the module docstring)."""
    lines = [f"# Estimator report: {ds}", "",
             "Accuracy of each estimator that groups people, per true group of this "
             "attribute benchmark. Accuracy = right / scored faces (a probability counts as "
             "its argmax, P(male) >= 0.5 is male; ages are compared in FairFace's bins), "
             f"{s.confidence:.0%} Wilson interval; p = Fisher's exact test of the group "
             "against the rest of the dataset; age MAE in years where the truth has years, "
             f"percentile bootstrap interval ({s.n_boot} resamples) and Welch's test; "
             "p_adjusted: Holm over every test of the table "
             f"(significant at alpha {alpha:g}: {int((table['p_adjusted'] < alpha).sum())} "
             f"accuracy and {int((table['p_mae_adjusted'] < alpha).sum())} MAE tests). "
             f"Figures with fewer than {s.min_n} faces (estimators.min_n) read n/a. The "
             "detector rows give the share of images whose face was found "
             "(n_no_face: not found; those images have no estimate).", "",
             "## Images by manifest status", "",
             "Images whose label or file name is bad are in no group.", "",
             to_markdown(statuses), "![accuracy per group](estimators.png)", ""]
    for (est, attr), rows in table.groupby(["estimator", "attribute"], sort=False):
        title = "face detection" if est == DETECTOR else f"{est}: {attr}"
        lines += [f"## {title}", "", to_markdown(display_frame(rows)), ""]
    return "\n".join(lines)


def plot_accuracy(table: pd.DataFrame, path: str | os.PathLike, title: str) -> None:
    """Accuracy per group with its interval, one panel per estimate (n/a groups named
    ``(n/a)`` without a point; the dashed line is the whole dataset's accuracy)."""
    plt = pyplot()
    panels = list(table.groupby(["estimator", "attribute"], sort=False))
    show = table[table["group_by"].isin(FIGURE_GROUP_BYS)]
    n_rows = max(int(show.groupby(["estimator", "attribute"]).size().max()), 1) if len(show) \
        else 1
    fig, axes = plt.subplots(1, max(len(panels), 1), squeeze=False,
                             figsize=(2.6 * max(len(panels), 1) + 1.2, 0.22 * n_rows + 1.4))
    for ax, ((est, attr), rows) in zip(axes[0], panels, strict=False):
        rows = rows[rows["group_by"].isin(FIGURE_GROUP_BYS)].reset_index(drop=True)
        y = np.arange(len(rows))[::-1]
        acc = rows["accuracy"].to_numpy(np.float64)
        err = np.vstack([acc - rows["accuracy_lo"], rows["accuracy_hi"] - acc])
        ok = np.isfinite(acc)
        ax.errorbar(acc[ok], y[ok], xerr=err[:, ok], fmt="o", ms=3, lw=1, color="#2b5d8a")
        overall = rows.loc[rows["group_by"] == "all", "accuracy"]
        if len(overall) and np.isfinite(overall.iloc[0]):
            ax.axvline(overall.iloc[0], color="grey", ls="--", lw=0.8)
        ax.set_yticks(y, [g if np.isfinite(a) else f"{g} (n/a)" for g, a in
                          zip(rows["group"], acc, strict=True)], fontsize=6)
        ax.set_ylim(-0.5, n_rows - 0.5)
        ax.set_xlim(-0.02, 1.02)
        ax.tick_params(axis="x", labelsize=6)
        ax.set_title("detected" if est == DETECTOR else f"{est}\n{attr}", fontsize=7)
    fixed_grid_layout(fig, 1, max(len(panels), 1), left=1.0, wgap=1.1, top=0.8,
                      title=title)
    save_figure(fig, path)


def run_estimators(attributes_path: str | os.PathLike, manifest_path: str | os.PathLike,
                   out_dir: str | os.PathLike, cfg: Mapping[str, Any], *, seed: int,
                   dataset: str, provenance: Mapping[str, Any] | None = None
                   ) -> pd.DataFrame:
    """Write the estimator report of dataset ``dataset`` (see the module docstring);
    returns its table."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    s = Settings.from_config(cfg, seed)
    alpha = float(cfg.get("alpha", 0.05))
    attrs = read_parquet(attributes_path)
    manifest = read_parquet(manifest_path, columns=["image_id", "status"])
    table, conf = estimator_tables(attrs, manifest, s)
    prov = {**dict(provenance or {}), "stage": "estimators", "dataset": dataset,
            "min_n": s.min_n, "n_boot": s.n_boot, "confidence": s.confidence}
    write_parquet(table, out / "estimators.parquet", provenance=prov)
    write_text(out / "estimators.csv", table.to_csv(index=False))
    write_parquet(conf, out / "estimator_confusion.parquet", provenance=prov)
    write_text(out / "estimator_confusion.csv", conf.to_csv(index=False))
    statuses = (manifest["status"].value_counts().rename_axis("status")
                .rename("images").reset_index())
    write_text(out / "estimators.md", report_markdown(table, statuses, dataset, s, alpha))
    write_markdown_html(out / "estimators.md", out / "estimators.html")
    plot_accuracy(table, out / "estimators.png", f"Estimator accuracy per true group: {dataset}")
    na = table[table["accuracy"].isna()]
    log.info("%s: %d rows, %d with accuracy n/a (e.g. %s)", dataset, len(table), len(na),
             "; ".join(f"{r.estimator} {r.attribute} {r.group_by}={r.group}: {r.note}"
                       for r in na.head(3).itertuples()) or "none")
    return table
