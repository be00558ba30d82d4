"""The fairness stage's assessment of one model on one protocol (rule ``fairness`` calls
:func:`run_fairness` through :mod:`facecast.fairness.stage`), and the attribute rows the
later per-group analyses (demographics, identification, quality) read.

:func:`run_fairness` writes into ``results/{ds}/fairness/{model}/{protocol}/``:

==========================  ==============================================================
``pairs.parquet``           every input pair + ``group``, ``combo``, ``legit_*``,
                            ``status``, ``message``, ``in_cells``, ``in_reference``
``summary.parquet/.csv``    one row: Bias+, Bias-, accuracy (AUC), TAR@FMR, counts
``cells.parquet/.csv``      per sign, group, combination: n, AUC, d
``groups.parquet/.csv``     Tables A7/A8: mean discrimination per group, times worst
``subsets.parquet/.csv``    Tables A9-A14: per legitimate attribute subset, max/min
``thresholds.parquet/.csv`` global thresholds + NIST ratios, FDR, GARBE, inequity rate
``rates.parquet/.csv``      FMR/FNMR per group and threshold with counts and intervals,
                            and the group's failure-to-extract rate (``n_failed``, ``fte``)
``bootstrap.parquet``       identity-clustered bootstrap replicates
``uncertainty.parquet/.csv`` estimate, se and interval per metric (which, notes)
``soft_accuracy.parquet/.csv`` CAST probabilistic vs hard inter-category accuracy
``hard_pairs.parquet/.csv`` + ``hard_pairs.png``: hardest genuine/impostor pairs
``rates_vs_threshold.png``, ``fdr_vs_fmr.png``: plots
``predictions.csv``, ``pairs.csv``: the scores in the challenge interchange format
``report.md``               all of the above, readable
``report.html``             the same as HTML tables (shown inline by ``snakemake --report``)
==========================  ==============================================================

Pairs without a feature count by ``evaluate.failed`` (:mod:`facecast.evaluate.failures`,
argument ``failed``): under ``nonmatch`` at score ``-inf`` in every figure (the bias AUCs
rank them lowest; thresholds at a target FMR count them among the impostors as correct
rejects, as evaluate's TAR@FAR does); under ``drop`` with status ``no_feature`` in none.
Either way each group's share of them stands beside its FMR and FNMR (``fte``), and the
summary and report count them (``n_failed``) and name the rule.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.evaluate.failures import DEFAULT_RULE, check_rule, failure_counts, rule_text
from facecast.evaluate.metrics import far_resolvable, min_impostors
from facecast.fairness.annotate import mark_failures, with_failures
from facecast.fairness.applicable import few_group_views, shown, summary_notes
from facecast.fairness.bias import BiasResult, fairface_bias, legitimate_subsets
from facecast.fairness.bootstrap import bootstrap
from facecast.fairness.groups import MIXED, annotate_pairs, image_labels, parse_specs
from facecast.fairness.hardpairs import hard_pairs_grid, hardest_pairs, load_tiles
from facecast.fairness.interchange import write_interchange
from facecast.fairness.intervals import few_false_matches
from facecast.fairness.plots import plot_fdr_vs_fmr, plot_rates_vs_threshold
from facecast.fairness.race import add_race_columns, source_columns
from facecast.fairness.soft import category_probs, soft_accuracy
from facecast.fairness.tables import group_table, report_views, to_markdown, zero_rate_notes
from facecast.fairness.threshold import (
    disparity,
    group_failures,
    group_rates,
    sweep_rates,
    thresholds_at_fmr,
)
from facecast.fairness.verdict import verdict_block
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.report.html_tables import write_markdown_html

log = logging.getLogger(__name__)

OUTPUT_FILES = (
    "pairs.parquet", "summary.parquet", "summary.csv", "cells.parquet", "cells.csv",
    "groups.parquet", "groups.csv", "subsets.parquet", "subsets.csv", "thresholds.parquet",
    "thresholds.csv", "rates.parquet", "rates.csv", "bootstrap.parquet", "uncertainty.parquet",
    "uncertainty.csv", "soft_accuracy.parquet", "soft_accuracy.csv", "hard_pairs.parquet",
    "hard_pairs.csv", "hard_pairs.png", "rates_vs_threshold.png", "fdr_vs_fmr.png",
    "predictions.csv", "pairs.csv", "report.md", "report.html",
)


def _needed_columns(cfg: Mapping[str, Any]) -> list[str]:
    cols = {spec["column"] for sect in ("protected", "legitimate")
            for spec in (cfg.get(sect) or {}).values()}
    for soft in (cfg.get("soft_attributes") or {}).values():
        for expr in (soft.get("categories") or {}).values():
            e = str(expr).replace(" ", "")
            cols.add(e[2:] if e.startswith("1-") else e)
    return sorted(cols)


def load_attributes(path: str | os.PathLike, identities: Sequence[str],
                    columns: Sequence[str]) -> pd.DataFrame:
    """The attribute-table rows of the given identities (all their images, for the
    per-identity vote), with ``image_id``, ``identity`` and the needed columns only (a
    derived race column, :mod:`facecast.fairness.race`, from its seven sources)."""
    import pyarrow.parquet as pq

    names = pq.read_schema(path).names
    read = [c for c in source_columns(columns) if c not in ("image_id", "identity")]
    missing = sorted(set(read) - set(names))
    if missing:
        raise KeyError(f"{path} lacks attribute column(s) {missing} named in the fairness "
                       f"config; available: {sorted(names)}")
    ids = sorted({str(i) for i in identities})
    return add_race_columns(read_parquet(path, columns=["image_id", "identity", *read],
                                         filters=[("identity", "in", ids)] if ids else None),
                            columns)


def _thresholds(ann: pd.DataFrame, cfg: Mapping[str, Any],
                reuse: pd.DataFrame | None) -> pd.DataFrame:
    """Global thresholds: reused from a dev protocol run, fixed values, or target FMRs."""
    ref = ann[ann["in_reference"]]
    imp = ref.loc[ref["label"] == 0, "score"].to_numpy(np.float64)
    gen = ref.loc[ref["label"] == 1, "score"].to_numpy(np.float64)
    tcfg = cfg.get("thresholds") or {}
    if reuse is not None:
        names = reuse["name"].astype(str).tolist()
        values = reuse["threshold"].to_numpy(np.float64)
        source = "reused from " + str(tcfg.get("from_protocol"))
        targets = reuse["target_fmr"].to_numpy(np.float64)
    elif tcfg.get("fixed"):
        values = np.asarray(tcfg["fixed"], dtype=np.float64)
        names = [f"t={v:g}" for v in values]
        source = "fixed in config"
        targets = np.full(values.shape, np.nan)
    else:
        targets = np.asarray(tcfg.get("fmr_targets", [1e-3, 1e-4]), dtype=np.float64)
        values = thresholds_at_fmr(imp, targets)
        names = [f"fmr={t:g}" for t in targets]
        source = "all impostor pairs of this protocol"
    fmr = np.array([(imp >= t).mean() if imp.size else np.nan for t in values])  # accept >=
    tar = np.array([(gen >= t).mean() if gen.size else np.nan for t in values])
    basis = (reuse["n_impostor"].to_numpy() if reuse is not None and "n_impostor" in reuse
             else np.full(len(values), imp.size))  # impostors the threshold was set from
    resolvable = (reuse["resolvable"].to_numpy(bool) if reuse is not None
                  and "resolvable" in reuse else far_resolvable(basis, targets))
    for name, ok, n, target in zip(names, np.atleast_1d(resolvable), basis, targets,
                                   strict=True):
        if not ok:
            log.warning("threshold %s needs at least %d impostor pairs, it rests on %d: "
                        "flagged unresolvable, shown as n/a", name,
                        min_impostors(target), n)
    return pd.DataFrame({"name": names, "threshold": values, "target_fmr": targets,
                         "source": source, "fmr_reached": fmr,
                         "false_matches": [(imp >= t).sum() for t in values],
                         "n_impostor": imp.size, "tar": tar, "n_genuine": gen.size,
                         "resolvable": np.atleast_1d(resolvable).astype(bool),
                         "threshold_n_impostor": basis.astype(np.int64)})


def write_frame(df: pd.DataFrame, out: Path, stem: str, provenance: Mapping[str, Any],
                csv: bool = True) -> None:
    """``out/<stem>.parquet`` (+ ``out/<stem>.csv`` unless ``csv`` is false)."""
    write_parquet(df, out / f"{stem}.parquet", provenance=provenance)
    if csv:
        write_text(out / f"{stem}.csv", df.to_csv(index=False))


def _read_scores(path: str | os.PathLike) -> pd.DataFrame:
    pairs = read_parquet(path)
    required = ["image_a", "image_b", "label", "score"]
    missing = [c for c in required if c not in pairs.columns]
    if missing:
        raise ValueError(f"{path} lacks column(s) {missing}; scored pairs need {required}")
    pairs = pairs.rename(columns={"status": "input_status", "message": "input_message"})
    for col in ("image_a", "image_b"):
        pairs[col] = pairs[col].astype(str)
    return pairs


def sweep_thresholds(ref: pd.DataFrame, n: int = 200) -> np.ndarray:
    """Thresholds for the plots: evenly spaced quantiles of all scores plus impostor
    quantiles at log-spaced FMRs (1e-5 .. 1), so the low-FMR tail is resolved."""
    ref = ref[np.isfinite(ref["score"].to_numpy(np.float64))]  # no -inf of failed pairs
    if not len(ref):
        return np.array([])
    allq = np.quantile(ref["score"], np.linspace(0, 1, n + 1))
    imp = ref.loc[ref["label"] == 0, "score"]
    tail = np.quantile(imp, 1 - np.logspace(-5, 0, n)) if len(imp) else []
    return np.unique(np.concatenate([allq, tail]))


def run_fairness(scores_path: str | os.PathLike, attributes_path: str | os.PathLike,
                 out_dir: str | os.PathLike, cfg: Mapping[str, Any], *, model: str,
                 protocol: str, seed: int, provenance: Mapping[str, Any] | None = None,
                 reuse_thresholds: str | os.PathLike | None = None,
                 faces_paths: Sequence[str | os.PathLike] = (),
                 manifest_path: str | os.PathLike | None = None,
                 dataset_root: str | os.PathLike | None = None,
                 failed: str = DEFAULT_RULE) -> dict[str, Any]:
    """Every fairness output for one model on one protocol (see the module docstring).

    ``cfg`` is the ``fairness`` config section with schema defaults filled in; ``failed``
    the failure rule (``evaluate.failed``). Returns the summary row as a dict.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prov = {**dict(provenance or {}), "stage": "fairness", "model": model,
            "protocol": protocol}
    ann, attrs, legitimate = _annotated_pairs(scores_path, attributes_path, cfg, failed)
    log.info("%s/%s: %d pairs, statuses %s", model, protocol, len(ann),
             ann["status"].value_counts().to_dict())
    fails = group_failures(np.where(_counted(ann), ann["group"].to_numpy(object), None),
                           ann["failed"].to_numpy(bool))
    if int(fails["n_failed"].sum()):
        log.warning("%s/%s: pairs without a feature per group: %s; %s", model, protocol,
                    dict(zip(fails["group"], fails["n_failed"], strict=True)),
                    rule_text(failed))
    write_parquet(ann, out / "pairs.parquet", provenance=prov)
    valid = _valid_pairs(ann)
    res, groups, subsets = _bias(valid, legitimate, cfg)
    write_frame(res.cells, out, "cells", prov)
    write_frame(groups, out, "groups", prov)
    write_frame(subsets, out, "subsets", prov)
    reuse = read_parquet(reuse_thresholds) if reuse_thresholds else None
    thr, rates = _thresholds_and_rates(valid, cfg, reuse)
    rates = rates.merge(fails, on="group", how="left")
    write_frame(thr, out, "thresholds", prov)
    write_frame(rates, out, "rates", prov)
    replicates, unc = _uncertainty(valid, thr, cfg, reuse, seed)
    write_parquet(replicates, out / "bootstrap.parquet", provenance=prov)
    write_frame(unc, out, "uncertainty", prov)
    soft = _soft_accuracy(valid, attrs, thr, cfg)
    write_frame(soft, out, "soft_accuracy", prov)
    hard = hardest_pairs(valid[valid["in_reference"] & ~valid["failed"]],  # scored ones
                         int(cfg.get("hard_pairs", 8)))
    write_frame(hard, out, "hard_pairs", prov)
    _plot_hard_pairs(hard, out / "hard_pairs.png", faces_paths, manifest_path, dataset_root)
    _plot_rates(valid, thr, cfg, out, f"{model} on {protocol}")
    write_interchange(ann, out / "predictions.csv", out / "pairs.csv")
    summary = summary_notes(_summary(model, protocol, res, ann, valid, thr, cfg, failed),
                            valid, thr)  # n/a: < 2 usable groups, unresolvable thresholds
    write_frame(pd.DataFrame([summary]), out, "summary", prov)
    write_report(out / "report.md", summary=summary, ann=ann, groups=groups, subsets=subsets,
                 thresholds=thr, rates=rates, uncertainty=unc, soft=soft, hard=hard, cfg=cfg)
    return summary


def _annotated_pairs(scores_path: str | os.PathLike, attributes_path: str | os.PathLike,
                     cfg: Mapping[str, Any], rule: str = DEFAULT_RULE
                     ) -> tuple[pd.DataFrame, pd.DataFrame, list[Any]]:
    """Every scored pair with its groups, combination, status and membership
    (:func:`annotate_pairs`; numeric label and float64 score) under the failure ``rule``
    (column ``failed``; :func:`facecast.fairness.annotate.mark_failures`), the attribute
    rows of the pairs' identities and the legitimate-attribute specs. Raises when the
    pairs lack identities or the config names no protected attribute."""
    check_rule(rule)
    pairs = with_failures(_read_scores(scores_path))
    if "identity_a" not in pairs.columns or "identity_b" not in pairs.columns:
        raise ValueError(f"{scores_path} lacks identity_a/identity_b")
    protected = parse_specs(cfg.get("protected"))
    legitimate = parse_specs(cfg.get("legitimate"))
    if not protected:
        raise ValueError("fairness.protected names no attribute; the bias metric needs groups")
    ids = pd.concat([pairs["identity_a"], pairs["identity_b"]]).astype(str).unique()
    attrs = load_attributes(attributes_path, ids, _needed_columns(cfg))
    labels = image_labels(attrs, protected, legitimate, sync=cfg.get("sync", "majority"))
    ann = annotate_pairs(pairs, labels, protected, legitimate,
                         mixed_pairs=cfg.get("mixed_pairs", "reference"))
    _check_some_group(ann, protected, scores_path, attributes_path)
    ann["label"] = pd.to_numeric(ann["label"], errors="coerce")
    ann["score"] = pd.to_numeric(ann["score"], errors="coerce").astype(np.float64)
    return mark_failures(ann, rule), attrs, legitimate


def _check_some_group(ann: pd.DataFrame, protected: Sequence[Any], scores: Any, attrs: Any) -> None:
    """Raise when no pair has its two images in one group (no figure could compare any)."""
    group = ann["group"].to_numpy(object)
    if not len(ann) or (pd.notna(group) & (group != MIXED)).any():
        return
    images = pd.concat([ann["image_a"], ann["image_b"]]).astype(str)
    labelled = pd.concat([ann["group_a"], ann["group_b"]]).notna().to_numpy()
    raise ValueError(
        f"{scores}: none of its {len(ann)} pairs has two images of one group under "
        f"fairness.protected ({', '.join(f'{s.name}: {s.column}' for s in protected)}); "
        f"{images[labelled].nunique()} of their {images.nunique()} images have a group in "
        f"{attrs}. Fairness compares groups through pairs inside a group.")


def _counted(ann: pd.DataFrame) -> np.ndarray:
    """The pairs a group's error rates or failure rate count (whatever the rule): a
    comparison inside evaluate's test whose two images share a group."""
    group = ann["group"].to_numpy(object)
    return (ann["status"].isin(["ok", "missing_legitimate", "no_feature"]).to_numpy()
            & pd.notna(group) & (group != MIXED))


def _valid_pairs(ann: pd.DataFrame) -> pd.DataFrame:
    """The pairs in the reference set or in a cell, renumbered, with an int label."""
    valid = ann[ann["in_reference"] | ann["in_cells"]].reset_index(drop=True)
    valid["label"] = valid["label"].astype(int)
    return valid


def _scores_labels(valid: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The valid pairs' scores (float64) and genuine flags (bool)."""
    return valid["score"].to_numpy(np.float64), valid["label"].to_numpy(bool)


def _bias(valid: pd.DataFrame, legitimate: Sequence[Any], cfg: Mapping[str, Any]
          ) -> tuple[BiasResult, pd.DataFrame, pd.DataFrame]:
    """The FairFace bias metric (cells, Bias+, Bias-, accuracy), its per-group table
    (A7/A8) and its per legitimate-attribute subset table (A9-A14)."""
    scores, y = _scores_labels(valid)
    res = fairface_bias(scores, y, valid["group"].to_numpy(object),
                        valid["combo"].to_numpy(object), valid["in_cells"].to_numpy(bool),
                        valid["in_reference"].to_numpy(bool),
                        min_pairs=int(cfg.get("min_pairs", 10)),
                        min_groups=int(cfg.get("min_groups", 1)))
    groups = group_table(res.groups) if len(res.groups) else res.groups
    subsets = legitimate_subsets(res.cells, [s.name for s in legitimate])
    return res, groups, subsets


def _rate_groups(valid: pd.DataFrame) -> np.ndarray:
    """Each valid pair's group for the per-group error rates (None for mixed pairs)."""
    return np.where(valid["status"].to_numpy(object) == "mixed", None,
                    valid["group"].to_numpy(object))


def _thresholds_and_rates(valid: pd.DataFrame, cfg: Mapping[str, Any],
                          reuse: pd.DataFrame | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The global thresholds (:func:`_thresholds`) with their disparity measures at
    ``alpha``, and FMR/FNMR per group and threshold with intervals."""
    scores, y = _scores_labels(valid)
    thr = _thresholds(valid, cfg, reuse)
    alpha = float(cfg.get("alpha", 0.5))
    conf = float(cfg.get("confidence", 0.95))
    rates = group_rates(scores, y, _rate_groups(valid), thr["threshold"].to_numpy(),
                        confidence=conf, method=cfg.get("interval", "wilson"))
    rates.insert(0, "threshold_name", thr["name"].to_numpy()[rates["threshold_index"]])
    disp_rows = []
    for i in range(len(thr)):
        sub = rates[rates["threshold_index"] == i]
        disp_rows.append(disparity(sub["fmr"].to_numpy(), sub["fnmr"].to_numpy(), alpha))
    thr = pd.concat([thr, pd.DataFrame(disp_rows)], axis=1)
    thr["alpha"] = alpha
    for name, notes in zip(thr["name"], zero_rate_notes(thr, rates), strict=True):
        by_note: dict[str, list[str]] = {}
        for col, note in notes.items():
            by_note.setdefault(note, []).append(col)
        for note, cols in by_note.items():
            log.warning("threshold %s: %s infinite (a ratio over a zero rate), shown as %s",
                        name, ", ".join(cols), note)
    return thr, rates


def _uncertainty(valid: pd.DataFrame, thr: pd.DataFrame, cfg: Mapping[str, Any],
                 reuse: pd.DataFrame | None, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Identity-clustered bootstrap (``n_boot``, seeded): the replicates and per metric
    estimate, se and interval (``bootstrap_interval``; notes: a miss, few false matches).
    Thresholds reused or fixed stay fixed; target FMR thresholds are re-set in every
    replicate."""
    fixed = thr["threshold"].tolist() if (reuse is not None or (cfg.get("thresholds") or {})
                                          .get("fixed")) else None
    targets = [float(t) for t in thr["target_fmr"]] if fixed is None else []
    reps, unc = bootstrap(valid, n_boot=int(cfg.get("n_boot", 1000)), seed=int(seed),
                          targets=targets, fixed_thresholds=fixed,
                          alpha=float(cfg.get("alpha", 0.5)),
                          min_pairs=int(cfg.get("min_pairs", 10)),
                          min_groups=int(cfg.get("min_groups", 1)),
                          confidence=float(cfg.get("confidence", 0.95)),
                          interval=str(cfg.get("bootstrap_interval", "auto")),
                          jackknife_blocks=int(cfg.get("jackknife_blocks", 100)))
    return reps, few_false_matches(unc, thr, int(cfg.get("few_false_matches", 10)))


def _soft_accuracy(valid: pd.DataFrame, attrs: pd.DataFrame, thr: pd.DataFrame,
                   cfg: Mapping[str, Any]) -> pd.DataFrame:
    """CAST probabilistic vs hard inter-category accuracy of every ``soft_attributes``
    entry on the reference pairs (an empty table when none is configured)."""
    soft_rows = []
    for attr, scfg in (cfg.get("soft_attributes") or {}).items():
        probs = category_probs(attrs, scfg.get("categories") or {})
        soft_rows.append(soft_accuracy(valid[valid["in_reference"]], probs,
                                       thr["threshold"].tolist(), thr["name"].tolist(),
                                       attribute=attr,
                                       pair_prob=scfg.get("pair_prob", "product")))
    return pd.concat(soft_rows, ignore_index=True) if soft_rows else pd.DataFrame(
        columns=["attribute", "category", "threshold_name", "threshold", "prob_accuracy",
                 "prob_mass", "hard_accuracy", "hard_n"])


def _plot_hard_pairs(hard: pd.DataFrame, path: Path,
                     faces_paths: Sequence[str | os.PathLike],
                     manifest_path: str | os.PathLike | None,
                     dataset_root: str | os.PathLike | None) -> None:
    """The grid of the hardest pairs: face crops from the faces shards, else the images
    the manifest points to (only the rows of the pairs shown are read)."""
    manifest = None
    if manifest_path:
        manifest = read_parquet(manifest_path, columns=["image_id", "path"],
                                filters=[("image_id", "in",
                                          sorted(set(hard["image_a"]) | set(hard["image_b"])))]
                                if len(hard) else None)
    tiles = load_tiles(list(hard["image_a"]) + list(hard["image_b"]), faces_paths, manifest,
                       dataset_root)
    hard_pairs_grid(hard, tiles, path)


def _plot_rates(valid: pd.DataFrame, thr: pd.DataFrame, cfg: Mapping[str, Any], out: Path,
                title: str) -> None:
    """rates_vs_threshold.png and fdr_vs_fmr.png over a sweep of thresholds
    (:func:`sweep_thresholds` of the reference pairs)."""
    scores, y = _scores_labels(valid)
    ref = valid[valid["in_reference"]]
    sweep = sweep_rates(scores, y, _rate_groups(valid), sweep_thresholds(ref))
    plot_rates_vs_threshold(sweep, thr, out / "rates_vs_threshold.png", title)
    plot_fdr_vs_fmr(sweep, float(cfg.get("alpha", 0.5)), out / "fdr_vs_fmr.png", title)


def _summary(model: str, protocol: str, res: BiasResult, ann: pd.DataFrame, valid: pd.DataFrame,
             thr: pd.DataFrame, cfg: Mapping[str, Any], rule: str) -> dict[str, Any]:
    """The summary row: Bias+, Bias-, accuracy, counts (``n_failed``: pairs without a
    feature in evaluate's test, whatever the rule; ``failed``: the rule) and, per
    threshold, TAR, FDR, GARBE and whether the protocol resolves it."""
    test = ~ann["status"].isin(["held_out", "bad_label"]).to_numpy()
    summary = {
        "model": model, "protocol": protocol, "bias_pos": res.bias_pos,
        "bias_neg": res.bias_neg, "accuracy": res.accuracy, "n_pairs": len(ann),
        "n_valid": int(ann["in_reference"].sum()),
        "n_genuine": int((valid["label"] == 1).sum()),
        "n_impostor": int((valid["label"] == 0).sum()),
        "n_in_cells": int(ann["in_cells"].sum()),
        "n_groups": int(valid.loc[valid["in_cells"], "group"].nunique()),
        "n_combos": int(valid.loc[valid["in_cells"], "combo"].nunique()),
        "n_combos_used_pos": res.n_combos_used["+"], "n_combos_used_neg": res.n_combos_used["-"],
        "min_pairs": int(cfg.get("min_pairs", 10)), "min_groups": int(cfg.get("min_groups", 1)),
        "failed": rule,
        **{k: v for k, v in failure_counts(ann["failed"].to_numpy(bool)[test],
                                           ann["label"].to_numpy()[test]).items()
           if k != "n_pairs"},
    }
    for _, row in thr.iterrows():
        summary[f"tar@{row['name']}"] = row["tar"]
        summary[f"fdr@{row['name']}"] = row["fdr"]
        summary[f"garbe@{row['name']}"] = row["garbe"]
        summary[f"resolvable@{row['name']}"] = bool(row["resolvable"])
    return summary


def write_report(path: Path, *, summary: Mapping[str, Any], ann: pd.DataFrame,
                 groups: pd.DataFrame, subsets: pd.DataFrame, thresholds: pd.DataFrame,
                 rates: pd.DataFrame, uncertainty: pd.DataFrame, soft: pd.DataFrame,
                 hard: pd.DataFrame, cfg: Mapping[str, Any]) -> None:
    """The readable Markdown report of one model on one protocol (+ its HTML twin,
    ``report.html``, for the Snakemake report). Figures at a target FMR the protocol
    cannot resolve read ``n/a (N impostors)``."""
    s = summary
    thresholds, rates, uncertainty = report_views(thresholds, rates, uncertainty)
    thresholds, uncertainty, groups, subsets = few_group_views(  # n/a (1 group: male)
        s.get("fairness_note", ""), thresholds, uncertainty, groups, subsets)
    lines = [
        f"# Fairness: {s['model']} on {s['protocol']}", "",
        verdict_block(s, thresholds, rates, cfg),
        "ChaLearn FairFace 2020 metric (lower Bias is fairer; accuracy = AUC over all pairs):",
        "",
        to_markdown(pd.DataFrame([{k: shown(s, k) for k in (
            "bias_pos", "bias_neg", "accuracy", "n_pairs", "n_valid", "n_failed",
            "n_in_cells", "n_groups", "n_combos")}])),
        rule_text(s["failed"], s["n_failed"]), "",
        f"Cells need >= {s['min_pairs']} pairs of their sign and a combination needs >= "
        f"{s['min_groups']} groups to take part; combinations used: "
        f"{s['n_combos_used_pos']} (+), {s['n_combos_used_neg']} (-). Mixed pairs: "
        f"{cfg.get('mixed_pairs', 'reference')}.", "",
        "## Pair statuses", "",
        to_markdown(ann["status"].value_counts().rename_axis("status").reset_index()),
        "## Average discrimination per group (Table A7) and times most discriminated (A8)",
        "", to_markdown(groups) if len(groups) else "(no groups)\n",
        "## Per legitimate attribute subset: max/min average discrimination (A9-A14)", "",
        to_markdown(subsets) if len(subsets) else "(no combinations took part)\n",
        "## Global thresholds (accept if score >= threshold)", "",
        "n/a (N impostors): fewer than 1/FMR impostor pairs, too few to resolve the target. "
        "n/a (0 false matches in <group>): a max/min or max/geomean ratio (and the inequity "
        "rate) over a group without false matches (non-matches) has no finite value.",
        "",
        to_markdown(thresholds, ["name", "threshold", "source", "fmr_reached",
                                 "false_matches", "n_impostor", "tar", "fmr_max_min",
                                 "fmr_max_geomean", "fnmr_max_min", "fnmr_max_geomean",
                                 "fdr", "garbe", "inequity_rate"]),
        "## Error rates per group", "",
        "fte: the group's pairs with an image without a feature (n_failed of n_pairs), "
        "a bias in its own right beside FMR and FNMR.", "",
        to_markdown(rates, ["threshold_name", "group", "false_matches", "n_impostor", "fmr",
                            "fmr_lo", "fmr_hi", "false_non_matches", "n_genuine", "fnmr",
                            "fnmr_lo", "fnmr_hi", "n_failed", "n_pairs", "fte"]),
        "## Identity-clustered bootstrap", "",
        to_markdown(uncertainty),
        "## Probabilistic (CAST) vs hard inter-category accuracy", "",
        to_markdown(soft) if len(soft) else "(no soft attributes configured)\n",
        "## Hardest pairs", "", "![hardest pairs](hard_pairs.png)", "",
        to_markdown(hard), "",
        "![rates](rates_vs_threshold.png) ![fdr](fdr_vs_fmr.png)", "",
    ]
    write_text(path, "\n".join(lines))
    write_markdown_html(path, Path(path).with_suffix(".html"))
