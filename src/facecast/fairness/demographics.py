"""What rule ``demographics`` calls: beyond one global threshold, for one model on one
protocol - cross-demographic impostor FMR matrices, per-group thresholds, and bootstrap
bands on the ROC/DET and on the per-group FMR/FNMR curves.

Writes into ``results/{ds}/demographics/{model}/{protocol}/``:

=============================  ==============================================================
``thresholds.parquet``         the global thresholds (``fairness.thresholds.fmr_targets`` on
                               all impostors, accept iff score >= t; ``resolvable``)
``cross_fmr.parquet/.csv``     FMR of impostor pairs group i x group j per attribute and
                               threshold, counts and intervals (:mod:`.cross_matrix`)
``cross_fmr.png``              annotated heatmaps
``group_thresholds.parquet/.csv``  per-group thresholds, deviation from the intended FMR,
                               TAR, cross-validated and bootstrap (:mod:`.group_thresholds`)
``group_thresholds.png``       deviation per group, global vs per-group threshold
``roc_bands.parquet/.csv``     TAR at a FAR grid with pointwise 95 % bands
``rate_bands.parquet``         per-group FMR(t)/FNMR(t) with pointwise bands
``roc_bands.png``, ``rate_bands.png``: shaded bands
=============================  ==============================================================
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import ndtri

from facecast.evaluate.bands import group_rate_band_table, roc_band_table
from facecast.evaluate.metrics import far_resolvable
from facecast.fairness.annotate import (
    attribute_names,
    labelled_pairs,
    read_scored_pairs,
    spec_columns,
    valid_pairs,
    value_order,
)
from facecast.fairness.assess import load_attributes
from facecast.fairness.cross_matrix import cross_matrices, plot_matrices
from facecast.fairness.group_thresholds import (
    group_threshold_table,
    plot_deviation,
    threshold_at_fmr,
)
from facecast.fairness.threshold import unresolved_note
from facecast.io.atomic import write_text
from facecast.io.parquet_io import write_parquet
from facecast.report.figures import pyplot, save_figure
from facecast.report.html_tables import frame_html, write_html_page

log = logging.getLogger(__name__)


def _write(df: pd.DataFrame, out: Path, stem: str, prov: Mapping[str, Any]) -> None:
    write_parquet(df, out / f"{stem}.parquet", provenance=prov)
    write_text(out / f"{stem}.csv", df.to_csv(index=False))


def global_thresholds(scores: np.ndarray, labels: np.ndarray, targets: list[float]
                      ) -> pd.DataFrame:
    """One row per target FMR: threshold over all impostors (accept iff score >= t)."""
    imp = scores[~labels]
    rows = []
    for t in targets:
        thr = threshold_at_fmr(imp, t)
        rows.append({"name": f"fmr={t:g}", "target_fmr": t, "threshold": thr,
                     "n_impostor": int(imp.size),
                     "false_matches": int((imp >= thr).sum()) if imp.size else 0,
                     "resolvable": bool(far_resolvable(imp.size, t)),
                     "text": f"{thr:.4g}" if far_resolvable(imp.size, t)
                     else unresolved_note(imp.size)})
    return pd.DataFrame(rows)


def run_demographics(scores_path: str | os.PathLike, attributes_path: str | os.PathLike,
                     out_dir: str | os.PathLike, cfg: Mapping[str, Any],
                     fairness_cfg: Mapping[str, Any], *, model: str, protocol: str,
                     seed: int, provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every output listed in the module docstring; returns a small summary dict."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prov = {**dict(provenance or {}), "stage": "demographics", "model": model,
            "protocol": protocol}
    pairs = read_scored_pairs(scores_path)
    ids = pd.concat([pairs["identity_a"], pairs["identity_b"]]).unique()
    attrs = load_attributes(attributes_path, ids, spec_columns(fairness_cfg))
    ann, _ = labelled_pairs(pairs, attrs, fairness_cfg)
    log.info("%s/%s: %d pairs, statuses %s", model, protocol, len(ann),
             ann["status"].value_counts().to_dict())
    ann = valid_pairs(ann)
    s = ann["score"].to_numpy(np.float64)
    y = ann["label"].to_numpy().astype(bool)
    conf = float(fairness_cfg.get("confidence", 0.95))
    method = str(fairness_cfg.get("interval", "wilson"))
    targets = [float(t) for t in ((fairness_cfg.get("thresholds") or {})
                                  .get("fmr_targets") or [1e-3, 1e-4])]
    thr = global_thresholds(s, y, targets)
    for _, r in thr[~thr["resolvable"]].iterrows():
        log.warning("global threshold at FMR %g: %s", r["target_fmr"], r["text"])
    write_parquet(thr, out / "thresholds.parquet", provenance=prov)

    # 1. cross-demographic impostor FMR matrices
    attrs_wanted = list(cfg.get("matrix_attributes") or attribute_names(fairness_cfg))
    orders = {}
    for a in attrs_wanted:
        col = "group" if a == "group" else a
        seen = pd.unique(pd.concat([ann[f"{col}_a"], ann[f"{col}_b"]]).dropna())
        orders[a] = value_order(fairness_cfg, a, list(seen))
    matrix = cross_matrices(ann, attrs_wanted, thr, orders, confidence=conf, method=method)
    _write(matrix, out, "cross_fmr", prov)
    plot_matrices(matrix, out / "cross_fmr.png", f"{model} on {protocol}: impostor FMR")

    # 2. per-group thresholds
    group = np.where(ann["status"].to_numpy(object) == "mixed", None,
                     ann["group"].to_numpy(object))
    folds = ann["fold"].astype(str).to_numpy() if "fold" in ann.columns else None
    n_boot = int(cfg.get("n_boot", 50))
    seed = int(seed)
    gt = group_threshold_table(s, y, group, targets, folds=folds,
                               identity_a=ann["identity_a"].to_numpy(),
                               identity_b=ann["identity_b"].to_numpy(), n_boot=n_boot,
                               seed=seed, confidence=conf)
    if len(gt):
        gt["text"] = [f"{d:+.3g}" if r else unresolved_note(n) for d, r, n in
                      zip(gt["deviation_group"], gt["resolvable"], gt["n_impostor"],
                          strict=True)]
    _write(gt, out, "group_thresholds", prov)
    plot_deviation(gt, out / "group_thresholds.png",
                   f"{model} on {protocol}: deviation from the intended FMR")

    # 3. bands: ROC/DET and per-group rate curves
    fars = np.logspace(np.log10(float(cfg.get("band_min_far", 1e-4))), 0,
                       int(cfg.get("band_points", 41)))
    roc = roc_band_table(s, y, ann["identity_a"].to_numpy(), ann["identity_b"].to_numpy(),
                         fars=fars, n_boot=n_boot, seed=seed, confidence=conf)
    _write(roc, out, "roc_bands", prov)
    grid = np.unique(np.quantile(s, np.linspace(0, 1, int(cfg.get("band_points", 41)))))
    rates = group_rate_band_table(s, y, group, ann["identity_a"].to_numpy(),
                                  ann["identity_b"].to_numpy(), thresholds=grid,
                                  n_boot=n_boot, seed=seed, confidence=conf)
    write_parquet(rates, out / "rate_bands.parquet", provenance=prov)
    write_html_page(out / "tables.html", f"Demographics: {model} on {protocol}", [
        "<p>Accept iff score >= threshold. Global thresholds from all impostor pairs; "
        "n/a where the protocol has fewer than 1/FMR impostors.</p>",
        frame_html(thr, caption="global thresholds"),
        frame_html(gt, caption="per-group thresholds: deviation (FMR_s - f*)/f* under the "
                   "global and the per-group threshold, TAR, cross-validated (_cv), "
                   "bootstrap interval (_lo/_hi)"),
        frame_html(matrix[["attribute", "threshold_name", "value_i", "value_j", "fmr",
                           "fmr_lo", "fmr_hi", "fmr_text"]],
                   caption="cross-demographic impostor FMR (false matches / impostors)"),
        frame_html(roc, caption="TAR at FAR with pointwise 95 % bootstrap bands")])
    plot_roc_bands(roc, out / "roc_bands.png", f"{model} on {protocol}")
    plot_rate_bands(rates, thr, out / "rate_bands.png", f"{model} on {protocol}")
    return {"model": model, "protocol": protocol, "n_pairs": len(ann),
            "n_matrix_cells": len(matrix), "n_groups": int(gt["group"].nunique())
            if len(gt) else 0}


def plot_roc_bands(roc: pd.DataFrame, path: str | os.PathLike, title: str) -> None:
    """ROC (TAR vs FAR) and DET (probit FRR vs probit FAR) with shaded pointwise bands;
    unresolvable FARs (fewer than 1/FAR impostors) drawn grey."""
    fig, axes = pyplot().subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    ok = roc["resolvable"].to_numpy(bool)
    far = roc["far"].to_numpy()
    ax = axes[0]
    ax.fill_between(far, roc["tar_lo"], roc["tar_hi"], step="post", alpha=0.25,
                    label="95 % band (identity bootstrap)")
    ax.step(far[ok], roc["tar"][ok], where="post", label="TAR")
    ax.step(far[~ok], roc["tar"][~ok], where="post", color="grey",
            label=f"FAR < 1/{int(roc['n_impostor'].iloc[0])}: not resolvable")
    ax.set_xscale("log")
    ax.set_xlabel("FAR")
    ax.set_ylabel("TAR")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    ax.set_title(f"{title}: ROC", fontsize=9)
    clip = 1e-6
    px = ndtri(np.clip(far, clip, 1 - clip))

    def probit(v):
        return ndtri(np.clip(np.asarray(v, dtype=np.float64), clip, 1 - clip))

    ax = axes[1]
    keep = far < 0.9  # FAR -> 1 sends the probit axis to infinity
    ax.fill_between(px[keep], probit(roc["frr_lo"][keep]), probit(roc["frr_hi"][keep]),
                    step="post", alpha=0.25)
    ax.step(px[keep], probit(roc["frr"][keep]), where="post")
    ticks = [t for t in (1e-5, 1e-4, 1e-3, 1e-2, 0.1, 0.5) if t >= far.min()]
    ax.set_xticks(ndtri(ticks), [f"{t:g}" for t in ticks])
    ax.set_yticks(ndtri(ticks), [f"{t:g}" for t in ticks])
    ax.set_xlabel("FAR (probit scale)")
    ax.set_ylabel("FRR (probit scale)")
    ax.grid(alpha=0.3)
    ax.set_title(f"{title}: DET", fontsize=9)
    save_figure(fig, path)


def plot_rate_bands(rates: pd.DataFrame, thr: pd.DataFrame, path: str | os.PathLike,
                    title: str) -> None:
    """Per-group FMR(t) (log) and FNMR(t) with shaded bands; global thresholds marked."""
    fig, axes = pyplot().subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for name, sub in rates.groupby("group", sort=True):
        for ax, key in zip(axes, ("fmr", "fnmr"), strict=True):
            line = ax.plot(sub["threshold"], sub[key], label=str(name))[0]
            ax.fill_between(sub["threshold"], sub[f"{key}_lo"], sub[f"{key}_hi"], alpha=0.2,
                            color=line.get_color())
    for ax, key in zip(axes, ("FMR", "FNMR"), strict=True):
        for t in thr["threshold"]:
            if np.isfinite(t):
                ax.axvline(t, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("threshold (accept iff score >= t)")
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
    axes[0].set_yscale("symlog", linthresh=1e-4)
    axes[0].set_ylim(bottom=0)
    axes[1].legend(fontsize=7)
    fig.suptitle(f"{title}: error rates per group (95 % pointwise bands)", fontsize=9)
    save_figure(fig, path)
