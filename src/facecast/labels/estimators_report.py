"""Rule ``estimators``: the estimator report of an attribute benchmark
(:mod:`facecast.labels.estimators`) written to ``results/{ds}/labels/``.

``estimators.parquet`` / ``.csv`` (the table), ``estimators.md`` + ``.html`` (readable:
what each column means, image statuses and splits, then one table per estimate; figures
below ``min_n`` read ``n/a (why)``), ``estimators.png`` (accuracy per group with its interval, one panel per
estimate), ``estimator_confusion.parquet`` / ``.csv`` (the confusion per group) and
``estimator_imports.parquet`` / ``.csv`` (the status of every row of the imported
predictions, :mod:`facecast.labels.estimator_imports`).
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
from facecast.labels.estimator_imports import (
    imports_markdown,
    join_imports,
    write_import_statuses,
)
from facecast.labels.estimators import (
    DETECTOR,
    Settings,
    estimator_tables,
)
from facecast.labels.estimators_verdict import verdict_block
from facecast.report.figures import fixed_grid_layout, pyplot, save_figure
from facecast.report.html_tables import write_markdown_html

log = logging.getLogger("facecast.labels")

OUTPUT_FILES = ("estimators.parquet", "estimators.csv", "estimators.md", "estimators.html",
                "estimators.png", "estimator_confusion.parquet", "estimator_confusion.csv",
                "estimator_imports.parquet", "estimator_imports.csv")
#: the group_bys the figure shows (intersections are in the tables)
FIGURE_GROUP_BYS = ("all", "race", "gender", "age")


def _cell(value: float, lo: float, hi: float, note: str, what: str) -> str:
    """``0.912 [0.901, 0.922]``, or the row's n/a note for ``what``."""
    if np.isfinite(value):
        return f"{value:.3f} [{lo:.3f}, {hi:.3f}]"
    why = [n for n in note.split("; ") if n.startswith(f"{what}:")]
    return why[0].removeprefix(f"{what}: ") if why else "–"


def _std(value: float, note: str, what: str) -> str:
    """``0.912``, or the row's n/a note for ``what``."""
    if np.isfinite(value):
        return f"{value:.3f}"
    why = [n for n in note.split("; ") if n.startswith(f"{what}:")]
    return why[0].removeprefix(f"{what}: ") if why else "–"


def display_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """The readable columns of one estimate's rows (intervals inline, n/a with reasons)."""
    notes = rows["note"].tolist()
    out = pd.DataFrame({
        "group_by": rows["group_by"], "group": rows["group"], "n": rows["n"],
        "n_train_excluded": rows["n_train_excluded"],
        "n_no_face": rows["n_no_face"], "n_scored": rows["n_scored"],
        "accuracy [CI]": [_cell(a, lo, hi, n, "accuracy") for a, lo, hi, n in
                          zip(rows["accuracy"], rows["accuracy_lo"], rows["accuracy_hi"],
                              notes, strict=True)],
        "accuracy_all [CI]": [_cell(a, lo, hi, n, "accuracy_all") for a, lo, hi, n in
                              zip(rows["accuracy_all"], rows["accuracy_all_lo"],
                                  rows["accuracy_all_hi"], notes, strict=True)],
        "accuracy_std": [_std(a, n, "accuracy_std") for a, n in
                         zip(rows["accuracy_std"], notes, strict=True)],
        "stratified_by": rows["stratified_by"],
        "p_raw": rows["p_raw"], "p": rows["p"], "p_adjusted": rows["p_adjusted"]})
    if rows["mae"].notna().any() or rows["note"].str.contains("mae:").any():
        out["mae years [CI]"] = [_cell(m, lo, hi, n, "mae") for m, lo, hi, n in
                                 zip(rows["mae"], rows["mae_lo"], rows["mae_hi"],
                                     notes, strict=True)]
        out["mae_std"] = [_std(m, n, "mae_std") for m, n in
                          zip(rows["mae_std"], notes, strict=True)]
        out["p_mae_raw"] = rows["p_mae_raw"]
        out["p_mae_adjusted"] = rows["p_mae_adjusted"]
    return out


def _columns_text(s: Settings) -> list[str]:
    """What the columns mean (a list: one item per column group)."""
    return [
        "- **n** the group's images in the estimate's figures; **n_no_face** no face "
        "detected (those images have no estimate); **n_scored** detected and estimated.",
        "- **n_train_excluded** the estimator's own training images, left out of its "
        "figures (the fairface head was trained on FairFace's train split).",
        "- **accuracy** right / scored faces (a probability counts as its argmax, P(male) "
        f">= 0.5 is male; ages are compared in FairFace's bins), {s.confidence:.0%} Wilson "
        "interval.",
        "- **accuracy_all** right / all labelled images of the group: a missed face or a "
        "missing estimate counts as wrong, so a group whose hard faces are missed is not "
        "scored on an easier subset.",
        "- **accuracy_std**, **mae_std** the group's figure directly standardised to this "
        "dataset's age mix (FairFace's age bins; weights = the share of each bin among the "
        "scored faces). n/a for a grouping by age, or where the group has no face in an "
        "age bin.",
        "- **p** the group against the rest within strata (**stratified_by**): "
        "Cochran-Mantel-Haenszel with the continuity correction for accuracy, a "
        f"permutation test within strata ({s.n_perm} permutations; smallest p "
        f"{1 / (s.n_perm + 1):.1g}) for MAE (**p_mae**).",
        "- Strata: race and gender groups are compared within age bins, a race x age cell "
        "within its own age bin, age groups within race x gender.",
        "- **p_raw** / **p_mae_raw**: Fisher's exact / Welch's test on the pooled rows, "
        "confounded by the groups' age mix.",
        "- **p_adjusted** / **p_mae_adjusted** Holm over the stratified tests of one "
        "estimate (the **family**: estimator / attribute).",
        f"- **mae** age error in years where the truth has years (UTKFace), percentile "
        f"bootstrap interval ({s.n_boot} resamples).",
        f"- Figures with fewer than {s.min_n} faces (estimators.min_n) read n/a with the "
        "reason.",
        "- **detector** rows: the share of images whose face was found. FairFace and "
        "UTKFace were themselves cut out by a face detector, so this rate is an upper "
        "bound on the detector's rate in the wild."]


def report_markdown(table: pd.DataFrame, statuses: pd.DataFrame, ds: str,
                    s: Settings, alpha: float) -> str:
    """The readable report (see the module docstring)."""
    sig = table.groupby("family", sort=False).apply(
        lambda r: f"{r.name}: {int((r['p_adjusted'] < alpha).sum())} accuracy and "
                  f"{int((r['p_mae_adjusted'] < alpha).sum())} MAE tests",
        include_groups=False).tolist() if len(table) else []
    lines = [f"# Estimator report: {ds}", "", verdict_block(table, alpha, s.confidence),
             "Accuracy of each estimator that groups people, per true group of this "
             "attribute benchmark. The columns:", "", *_columns_text(s), "",
             f"Significant at alpha {alpha:g} after Holm:", "",
             *[f"- {x}" for x in sig], "",
             "## Images by manifest status and split", "",
             "Images whose label or file name is bad are in no group; FairFace splits "
             "outside estimators.fairface_splits are in no group.", "",
             to_markdown(statuses), "![accuracy per group](estimators.png)", ""]
    for (est, attr), rows in table.groupby(["estimator", "attribute"], sort=False):
        title = "face detection" if est == DETECTOR else f"{est}: {attr}"
        lines += [f"## {title}", "", to_markdown(display_frame(rows)), ""]
    return "\n".join(lines)


def status_table(manifest: pd.DataFrame, kind: str, s: Settings) -> pd.DataFrame:
    """Images per manifest status, and for FairFace per split left out
    (``estimators.fairface_splits``)."""
    out = (manifest["status"].value_counts().rename_axis("status").rename("images")
           .reset_index())
    if kind == "fairface" and s.fairface_splits and "split" in manifest:
        ok = manifest[manifest["status"].astype(str) == "ok"]
        left = ok.loc[~ok["split"].astype(str).isin(s.fairface_splits), "split"]
        extra = (left.astype(str).value_counts().rename("images").rename_axis("status")
                 .reset_index())
        extra["status"] = [f"ok, split {x} (not in estimators.fairface_splits)"
                           for x in extra["status"]]
        out = pd.concat([out, extra], ignore_index=True)
    return out


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
                   dataset: str, kind: str = "", root: str = "",
                   provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Write the estimator report of dataset ``dataset`` of kind ``kind`` (see the module
    docstring; ``root``: the dataset's root as configured, which imported predictions may
    name their images under); returns its table."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    s = Settings.from_config(cfg, seed)
    alpha = float(cfg.get("alpha", 0.05))
    attrs = read_parquet(attributes_path)
    manifest = read_parquet(manifest_path)
    attrs, imported = join_imports(attrs, manifest, cfg, dataset, kind, root)
    table, conf = estimator_tables(attrs, manifest, s, kind, extra=imported.estimates)
    prov = {**dict(provenance or {}), "stage": "estimators", "dataset": dataset,
            "kind": kind, "min_n": s.min_n, "n_boot": s.n_boot, "n_perm": s.n_perm,
            "confidence": s.confidence, "fairface_splits": list(s.fairface_splits)}
    write_parquet(table, out / "estimators.parquet", provenance=prov)
    write_text(out / "estimators.csv", table.to_csv(index=False))
    write_parquet(conf, out / "estimator_confusion.parquet", provenance=prov)
    write_text(out / "estimator_confusion.csv", conf.to_csv(index=False))
    statuses = status_table(manifest, kind, s)
    write_import_statuses(imported, out, prov)
    write_text(out / "estimators.md", report_markdown(table, statuses, dataset, s, alpha)
               + "\n" + imports_markdown(imported))
    plot_accuracy(table, out / "estimators.png", f"Estimator accuracy per true group: {dataset}")
    write_markdown_html(out / "estimators.md", out / "estimators.html")  # embeds the png
    excluded = table[(table["group_by"] == "all") & (table["n_train_excluded"] > 0)]
    for r in excluded.itertuples():
        log.info("%s %s: %d of its training images left out (n_train_excluded)",
                 r.estimator, r.attribute, r.n_train_excluded)
    na = table[table["accuracy"].isna()]
    log.info("%s: %d rows, %d with accuracy n/a (e.g. %s)", dataset, len(table), len(na),
             "; ".join(f"{r.estimator} {r.attribute} {r.group_by}={r.group}: {r.note}"
                       for r in na.head(3).itertuples()) or "none")
    return table
