"""What rule ``demographics`` calls: beyond one global threshold, for one model on one
protocol - cross-demographic impostor FMR matrices, per-group thresholds, and bootstrap
bands on the ROC/DET and on the per-group FMR/FNMR curves.

Writes into ``results/{ds}/demographics/{model}/{protocol}/``:

=============================  ==============================================================
``thresholds.parquet``         the global thresholds (``demographics.fmr_targets`` on the
                               impostors of ``demographics.global_pairs``, accept iff
                               score >= t; ``resolvable``)
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

The global threshold's pairs (``global_pairs``, :data:`GLOBAL_PAIRS`): ``all`` - every
impostor pair, those across groups too (NIST's convention) - or ``same_group`` - the
impostor pairs whose two images share a group, as BFW's own code keeps ``a1 == a2`` before
it fits its threshold (visionjo/facerec-bias-bfw, ``code/experiments/
find_best_thresholds.py``, ``five-fold-evaluation.py``). The job's config
(:func:`facecast.fairness.targets.demographics_config`) gives ``same_group`` and BFW's
five intended FMRs to a dataset of kind ``bfw``, ``all`` and ``fairness.thresholds.
fmr_targets`` elsewhere. ``fairness.mixed_pairs: exclude`` leaves pairs across groups out
of everything here (thresholds, matrices, bands). Pairs without a feature follow
``evaluate.failed`` (:mod:`facecast.evaluate.failures`): under ``nonmatch`` they count
(score ``-inf``: a false non-match when genuine, a correct reject when impostor) and are
fitted on by no threshold; under ``drop`` they are left out. Either way the tables carry
``n_failed`` (per group beside FMR and TAR: ``n_failed``, ``failed_rate``).
"""

from __future__ import annotations

import html
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import ndtri

from facecast.evaluate.bands import group_rate_band_table, roc_band_table
from facecast.evaluate.failures import DEFAULT_RULE, check_rule, rule_text
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

#: the values of ``demographics.global_pairs`` and what each fits the global threshold on
GLOBAL_PAIRS = {"all": "every impostor pair, across groups too (NIST's convention)",
                "same_group": "the impostor pairs whose two images share a group (BFW's "
                              "own code: a1 == a2)"}


def _write(df: pd.DataFrame, out: Path, stem: str, prov: Mapping[str, Any]) -> None:
    write_parquet(df, out / f"{stem}.parquet", provenance=prov)
    write_text(out / f"{stem}.csv", df.to_csv(index=False))


def global_thresholds(scores: np.ndarray, labels: np.ndarray, targets: list[float],
                      fit: np.ndarray | None = None, global_pairs: str = "all"
                      ) -> pd.DataFrame:
    """One row per target FMR: the threshold over the impostors ``fit`` holds (None = all;
    accept iff score >= t); ``global_pairs`` names the rule in its own column."""
    keep = ~labels if fit is None else ~labels & np.asarray(fit, bool)
    imp = scores[keep]
    rows = []
    for t in targets:
        thr = threshold_at_fmr(imp, t)
        rows.append({"name": f"fmr={t:g}", "target_fmr": t, "global_pairs": global_pairs,
                     "threshold": thr, "n_impostor": int(imp.size),
                     "false_matches": int((imp >= thr).sum()) if imp.size else 0,
                     "resolvable": bool(far_resolvable(imp.size, t)),
                     "text": f"{thr:.4g}" if far_resolvable(imp.size, t)
                     else unresolved_note(imp.size)})
    return pd.DataFrame(rows)


def annotated_pairs(scores_path: str | os.PathLike, attributes_path: str | os.PathLike,
                    fairness_cfg: Mapping[str, Any], rule: str = DEFAULT_RULE
                    ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The valid pairs of a scores file with their groups, under the failure rule ``rule``
    (module docstring; :func:`facecast.fairness.annotate.labelled_pairs`): a boolean
    column ``failed``, score ``-inf`` where it holds under ``nonmatch``, gone under
    ``drop``; pairs across groups gone under ``fairness.mixed_pairs: exclude``. Also the
    counts: ``n_pairs``, ``n_failed``, per group the pairs and the failed pairs before
    either rule (``group_pairs``, ``group_failed``), ``n_mixed_excluded``."""
    check_rule(rule)
    pairs = read_scored_pairs(scores_path)
    ids = pd.concat([pairs["identity_a"], pairs["identity_b"]]).unique()
    attrs = load_attributes(attributes_path, ids, spec_columns(fairness_cfg))
    ann, _ = labelled_pairs(pairs, attrs, fairness_cfg, rule)
    log.info("%d pairs, statuses %s", len(ann), ann["status"].value_counts().to_dict())
    failed = ann["failed"].to_numpy(bool)
    counted = ~ann["status"].isin(["bad_label", "held_out"]).to_numpy()
    grp = ann["group"].where(ann["group"] != "mixed")
    counts: dict[str, Any] = {
        "n_pairs": int(counted.sum()), "n_failed": int((failed & counted).sum()),
        "group_pairs": grp[counted].value_counts().to_dict(),
        "group_failed": grp[counted & failed].value_counts().to_dict(),
        "n_mixed_excluded": 0}
    ann = valid_pairs(ann)
    if fairness_cfg.get("mixed_pairs", "reference") == "exclude":
        mixed = (ann["status"] == "mixed").to_numpy()
        counts["n_mixed_excluded"] = int(mixed.sum())
        log.info("fairness.mixed_pairs: exclude - %d pairs across groups left out of the "
                 "thresholds, matrices and bands", int(mixed.sum()))
        ann = ann.loc[~mixed].reset_index(drop=True)
    return ann, counts


def demographics_targets(cfg: Mapping[str, Any], fairness_cfg: Mapping[str, Any]
                         ) -> list[float]:
    """The intended FMRs: ``demographics.fmr_targets`` (the job's config fills it per
    dataset kind), else ``fairness.thresholds.fmr_targets``, else 1e-3 and 1e-4."""
    listed = cfg.get("fmr_targets") or ((fairness_cfg.get("thresholds") or {})
                                        .get("fmr_targets")) or [1e-3, 1e-4]
    return [float(t) for t in listed]


def _matrices(ann: pd.DataFrame, thr: pd.DataFrame, cfg: Mapping[str, Any],
              fairness_cfg: Mapping[str, Any], conf: float, method: str) -> pd.DataFrame:
    """The cross-demographic impostor FMR matrices of ``matrix_attributes`` (all
    attributes when empty), values in their configured order, at the global thresholds."""
    attrs_wanted = list(cfg.get("matrix_attributes") or attribute_names(fairness_cfg))
    orders = {}
    for a in attrs_wanted:
        seen = pd.unique(pd.concat([ann[f"{a}_a"], ann[f"{a}_b"]]).dropna())
        orders[a] = value_order(fairness_cfg, a, list(seen))
    return cross_matrices(ann, attrs_wanted, thr, orders, confidence=conf, method=method)


def _labelled(gt: pd.DataFrame, global_pairs: str, counts: Mapping[str, Any]
              ) -> pd.DataFrame:
    """The per-group table with the rule of its global threshold, each group's pairs
    without a feature counted before either failure rule (under ``drop`` they are gone
    from the fits and rates) and the deviation's text."""
    if not len(gt):
        return gt
    gt = gt.copy()
    gt.insert(2, "global_pairs", global_pairs)
    n_grp = gt["group"].map(counts["group_pairs"]).fillna(0).astype(int)
    gt["n_failed"] = gt["group"].map(counts["group_failed"]).fillna(0).astype(int)
    gt["failed_rate"] = (gt["n_failed"] / n_grp.where(n_grp > 0)).astype(float)
    gt["text"] = [f"{d:+.3g}" if r else unresolved_note(n) for d, r, n in
                  zip(gt["deviation_group"], gt["resolvable"], gt["n_impostor"], strict=True)]
    return gt


def _log_global(thr: pd.DataFrame, global_pairs: str) -> None:
    """Say which impostors the global thresholds are fitted on, and which are n/a."""
    for _, r in thr[~thr["resolvable"]].iterrows():
        log.warning("global threshold at FMR %g: %s", r["target_fmr"], r["text"])
    log.info("global thresholds fitted on %s: %d impostors", GLOBAL_PAIRS[global_pairs],
             int(thr["n_impostor"].iloc[0]) if len(thr) else 0)


def run_demographics(scores_path: str | os.PathLike, attributes_path: str | os.PathLike,
                     out_dir: str | os.PathLike, cfg: Mapping[str, Any],
                     fairness_cfg: Mapping[str, Any], *, model: str, protocol: str,
                     seed: int, provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every output listed in the module docstring; returns a small summary dict."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rule = str(cfg.get("failed", DEFAULT_RULE))
    global_pairs = str(cfg.get("global_pairs") or "all")
    if global_pairs not in GLOBAL_PAIRS:
        raise ValueError(f"demographics.global_pairs must be one of {list(GLOBAL_PAIRS)}, "
                         f"got {global_pairs!r}")
    prov = {**dict(provenance or {}), "stage": "demographics", "model": model,
            "protocol": protocol, "global_pairs": global_pairs, "failed": rule}
    ann, counts = annotated_pairs(scores_path, attributes_path, fairness_cfg, rule)
    log.info("%s/%s: %s", model, protocol, counts)
    s = ann["score"].to_numpy(np.float64)
    y = ann["label"].to_numpy().astype(bool)
    failed = ann["failed"].to_numpy(bool)
    conf = float(fairness_cfg.get("confidence", 0.95))
    method = str(fairness_cfg.get("interval", "wilson"))
    targets = demographics_targets(cfg, fairness_cfg)
    group = np.where(ann["status"].to_numpy(object) == "mixed", None,
                     ann["group"].to_numpy(object))
    in_global = pd.notna(group) if global_pairs == "same_group" else np.ones(len(s), bool)
    thr = global_thresholds(s, y, targets, in_global & ~failed, global_pairs)
    thr["n_failed"] = counts["n_failed"]
    _log_global(thr, global_pairs)
    write_parquet(thr, out / "thresholds.parquet", provenance=prov)

    # 1. cross-demographic impostor FMR matrices
    matrix = _matrices(ann, thr, cfg, fairness_cfg, conf, method)
    _write(matrix, out, "cross_fmr", prov)
    plot_matrices(matrix, out / "cross_fmr.png", f"{model} on {protocol}: impostor FMR")

    # 2. per-group thresholds
    folds = ann["fold"].astype(str).to_numpy() if "fold" in ann.columns else None
    n_boot = int(cfg.get("n_boot", 50))
    seed = int(seed)
    gt = group_threshold_table(s, y, group, targets, folds=folds,
                               identity_a=ann["identity_a"].to_numpy(),
                               identity_b=ann["identity_b"].to_numpy(), n_boot=n_boot,
                               seed=seed, confidence=conf, global_mask=in_global,
                               failed=failed)
    gt = _labelled(gt, global_pairs, counts)
    _write(gt, out, "group_thresholds", prov)
    plot_deviation(gt, out / "group_thresholds.png",
                   f"{model} on {protocol}: deviation from the intended FMR")

    # 3. bands: ROC/DET and per-group rate curves
    fars = np.logspace(np.log10(float(cfg.get("band_min_far", 1e-4))), 0,
                       int(cfg.get("band_points", 41)))
    roc = roc_band_table(s, y, ann["identity_a"].to_numpy(), ann["identity_b"].to_numpy(),
                         fars=fars, n_boot=n_boot, seed=seed, confidence=conf)
    _write(roc, out, "roc_bands", prov)
    grid = np.unique(np.quantile(s[np.isfinite(s)] if np.isfinite(s).any() else [0.0],
                                 np.linspace(0, 1, int(cfg.get("band_points", 41)))))
    rates = group_rate_band_table(s, y, group, ann["identity_a"].to_numpy(),
                                  ann["identity_b"].to_numpy(), thresholds=grid,
                                  n_boot=n_boot, seed=seed, confidence=conf)
    write_parquet(rates, out / "rate_bands.parquet", provenance=prov)
    _write_page(out / "tables.html", f"Demographics: {model} on {protocol}", thr, gt,
                matrix, roc, global_pairs, rule_text(rule, counts["n_failed"]))
    plot_roc_bands(roc, out / "roc_bands.png", f"{model} on {protocol}")
    plot_rate_bands(rates, thr, out / "rate_bands.png", f"{model} on {protocol}")
    return {"model": model, "protocol": protocol, "n_pairs": len(ann),
            "n_matrix_cells": len(matrix), "n_groups": int(gt["group"].nunique())
            if len(gt) else 0}


def _write_page(path: Path, title: str, thr: pd.DataFrame, gt: pd.DataFrame,
                matrix: pd.DataFrame, roc: pd.DataFrame, global_pairs: str, failed: str
                ) -> None:
    """``tables.html``: the rule of the global threshold and of failed pairs, then the
    tables."""
    write_html_page(path, title, [
        "<p>" + html.escape(
            f"Accept iff score >= threshold. Global thresholds (demographics.global_pairs: "
            f"{global_pairs}) from {GLOBAL_PAIRS[global_pairs]}; n/a where they are fewer "
            f"than 1/FMR. {failed}") + "</p>",
        frame_html(thr, caption="global thresholds"),
        frame_html(gt, caption="per-group thresholds: deviation (FMR_s - f*)/f* under the "
                   "global and the per-group threshold, TAR, cross-validated (_cv), "
                   "bootstrap interval (_lo/_hi); n_failed / failed_rate: the group's pairs "
                   "without a feature"),
        frame_html(matrix[["attribute", "threshold_name", "value_i", "value_j", "fmr",
                           "fmr_lo", "fmr_hi", "fmr_text"]],
                   caption="cross-demographic impostor FMR (false matches / impostors)"),
        frame_html(roc, caption="TAR at FAR with pointwise 95 % bootstrap bands")])


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
