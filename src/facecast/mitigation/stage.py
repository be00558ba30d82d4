"""What rule ``mitigation`` calls: one model on one protocol - the calibration split (or
the cross-fitting's fits, :mod:`facecast.mitigation.crossfit`), every method learned on
each fit's calibration identities and applied to the evaluated pairs it scores, the
side-by-side table with intervals and paired tests against ``raw`` over the pooled
evaluated pairs, and FairCal's figures in FairCal's convention
(:mod:`facecast.mitigation.faircal_figures`). Pairs without a feature follow
``evaluate.failed`` (:mod:`facecast.evaluate.failures`): no method learns on them; under
``nonmatch`` an evaluated one is a non-match after every method.

Writes into ``results/{ds}/mitigation/{model}/{protocol}/`` (files listed in
:mod:`facecast.mitigation.report`); each method's transformed scores go to
``<method>/pairs.parquet`` in the scores-file format, so ``slices`` and ``compare`` read a
mitigated model (``dlib+fsn``) like any other.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.evaluate.failures import DEFAULT_RULE, FAILED_SCORE, check_rule, rule_text
from facecast.evaluate.folds import EVAL_FOLD
from facecast.mitigation.crossfit import choose_split
from facecast.mitigation.faircal_figures import ECE_BINS, FAIRCAL_FPRS, faircal_table
from facecast.mitigation.inputs import (
    annotate,
    attach_partners,
    build_images,
    image_groups,
    namespaced,
    read_embeddings,
    read_scores,
    side,
)
from facecast.mitigation.methods import Images, Result, Settings, learn_and_apply
from facecast.mitigation.metrics import metric_names
from facecast.mitigation.replicates import bootstrap
from facecast.mitigation.report import write_outputs
from facecast.mitigation.split import Fit, Split, check_sides, split_by_source
from facecast.mitigation.table import add_unavailable, build_tables, metric_notes
from facecast.mitigation.targets import EMBEDDING_METHODS, FUSION_METHODS, METHODS

__all__ = ["fit_all", "run_mitigation"]

log = logging.getLogger(__name__)


def _read_side(scores: str | os.PathLike, partner_paths: Sequence[str], model: str,
               partners: Sequence[str]) -> pd.DataFrame:
    frames = {m: read_scores(p) for m, p in zip(partners, partner_paths, strict=True)}
    return attach_partners(read_scores(scores), model, frames)


def _split(inputs: Mapping[str, Any], cfg: Mapping[str, Any], *, model: str,
           partners: Sequence[str], ds: str, protocol: str, seed: int,
           source: tuple[str, str] | None, rule: str) -> Split:
    """The split of the protocol's pairs (module :mod:`facecast.mitigation.split`)."""
    pairs = _read_side(inputs["scores"], inputs.get("partners", []), model, partners)
    if EVAL_FOLD not in pairs.columns:
        raise ValueError(f"{inputs['scores']} has no {EVAL_FOLD} column (each pair's fold in "
                         "evaluate's 10-fold test); rerun the evaluate stage")
    if source is None:
        split, why = choose_split(pairs, dict(cfg.get("calibration") or {}), seed, rule)
        log.info("%s on %s: mitigation.calibration.%s", model, protocol, why)
        return split
    cds, bench = source
    cal = _read_side(inputs["cal_scores"], inputs.get("cal_partners", []), model, partners)
    same = cds == ds
    return split_by_source(pairs, cal if same else namespaced(cal, cds), same_dataset=same,
                           name=f"{bench} on {cds}", rule=rule)


def _drop_unpartnered(split: Split, fused: Sequence[str]) -> Split:
    """Evaluated and calibration pairs some fused model did not score: status
    ``no_partner_score`` (counted nowhere), logged."""
    if not fused:
        return split
    cols = [f"score@{m}" for m in fused]
    pairs = split.pairs.copy()
    scored = ~pairs["failed"].to_numpy(bool)
    lost = pairs[cols].isna().any(axis=1) & pairs["status"].isin(
        ["evaluated", "calibration"]) & scored
    pairs.loc[lost, "status"] = "no_partner_score"
    pairs.loc[lost, "message"] = "a model of the fusion did not score it: left out of every row"

    def partnered(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[~frame[cols].isna().any(axis=1)].reset_index(drop=True)

    cal = partnered(split.calibration)
    if lost.any() or len(cal) < len(split.calibration):
        log.warning("%d evaluated/calibration pairs and %d calibration-source pairs lack a "
                    "fusion partner's score: left out", int(lost.sum()),
                    len(split.calibration) - len(cal))
    fits = [Fit(f.name, f.excluded, partnered(f.calibration), f.rows) for f in split.fits]
    out = Split(pairs, split.calibration_ids, cal, split.source, fits, split.how)
    if len(fits) > 1 or lost.any():   # the evaluated rows of each fit, renumbered
        fit = out.evaluated["fit"].to_numpy() if "fit" in pairs else None
        n = len(out.evaluated)
        out.fits = [Fit(f.name, f.excluded, f.calibration,
                        np.flatnonzero(fit == f.name) if fit is not None else np.arange(n))
                    for f in fits]
    return out


def _images(inputs: Mapping[str, Any], split: Split, fairness: Mapping[str, Any], *,
            methods: Sequence[str], source: tuple[str, str] | None, ds: str) -> Images:
    """The :class:`facecast.mitigation.methods.Images` of both sides."""
    ev, cal = split.evaluated, split.calibration
    ev = ev[~ev["failed"].to_numpy(bool)]          # a pair without a feature: no image read
    other = source is not None and source[0] != ds
    here = [ev] if other else [ev, cal]
    ids = pd.concat([pd.concat([f["identity_a"], f["identity_b"]]) for f in here]).unique()
    groups = image_groups(inputs.get("attributes"), list(ids), fairness)
    emb: dict[str, np.ndarray] = {}
    need = any(m in EMBEDDING_METHODS for m in methods)
    if need:
        imgs = pd.concat([pd.concat([f["image_a"], f["image_b"]]) for f in here]).unique()
        emb = read_embeddings(inputs["embeddings"], list(imgs))
    if other:
        prefix = f"{source[0]}::"
        cids = pd.concat([cal["identity_a"], cal["identity_b"]]).unique()
        g = image_groups(inputs.get("cal_attributes"),
                         [i.removeprefix(prefix) for i in cids], fairness)
        groups = pd.concat([groups, g.set_axis(prefix + g.index.astype(str))])
        if need:
            cimg = pd.concat([cal["image_a"], cal["image_b"]]).unique()
            emb.update(read_embeddings(inputs["cal_embeddings"], list(cimg), prefix))
    im = build_images([ev, cal], emb, groups)
    missing = int((np.abs(im.emb).sum(axis=1) == 0).sum()) if need else 0
    if missing:
        raise ValueError(f"{missing} images of scored pairs have no embedding in the embed "
                         "index; rerun the embed stage")
    return im


def _log_missing(diff: pd.DataFrame) -> None:
    """One log line per metric that is not a number or not tested, with the methods."""
    na = diff[diff["note"].astype(str) != ""]
    for (metric, note), sub in na.groupby(["metric", "note"], sort=True):
        log.warning("%s: %s (%s)", metric, note, ", ".join(sub["method"]))


def _settings(cfg: Mapping[str, Any], methods: Sequence[str], fused: Sequence[str],
              seed: int) -> Settings:
    return Settings(methods=list(methods), fmr=float(cfg.get("fmr", 1e-3)),
                    cohort_size=int(cfg.get("cohort_size", 1000)),
                    top_k=int(cfg.get("top_k", 200)), clusters=int(cfg.get("clusters", 100)),
                    seed=int(seed), fusion_models=list(fused))


def fit_all(im: Images, split: Split, fused: Sequence[str], st: Settings
            ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], list[Result]]:
    """Every fit of the split learned on its calibration pairs and applied to its
    evaluated rows; pooled per method over the evaluated pairs. A pair without a feature
    (``failed``) is scored by no method: score ``-inf``, probability 0 (a non-match at
    every threshold, :mod:`facecast.evaluate.failures`)."""
    ev = split.evaluated
    scored = ~ev["failed"].to_numpy(bool)
    scores: dict[str, np.ndarray] = {}
    probs: dict[str, np.ndarray] = {}
    results = []
    for fit in split.fits:
        rows = fit.rows[scored[fit.rows]]
        res = learn_and_apply(im, side(ev.iloc[rows], im, fused),
                              side(fit.calibration, im, fused), st)
        for m in res.scores:
            scores.setdefault(m, np.full(len(ev), FAILED_SCORE))[rows] = res.scores[m]
            probs.setdefault(m, np.zeros(len(ev)))[rows] = res.probs[m]
        results.append(res)
    return ({m: scores[m] for m in st.methods if m in scores},
            {m: probs[m] for m in st.methods if m in probs}, results)


def _counts(ev: pd.DataFrame, n_imp: int, n_ids: int, split: Split, rule: str
            ) -> dict[str, Any]:
    """The table's counts: pairs, genuine, impostors, identities, pairs without a
    feature (``n_failed``, the rule in ``failed``), fits and pairs left out."""
    status = split.pairs["status"]
    lost = ~status.isin(["evaluated", "calibration", "bad_score", "bad_label", "invalid"])
    n_failed = int(ev["failed"].sum()) if rule == "nonmatch" else int((status == "failed").sum())
    return {"n_pairs": len(ev), "n_genuine": len(ev) - n_imp, "n_impostors": n_imp,
            "n_identities": n_ids, "n_failed": n_failed, "failed": rule,
            "n_fits": len(split.fits), "n_left_out": int(lost.sum())}


def run_mitigation(inputs: Mapping[str, Any], out_dir: str | os.PathLike,
                   cfg: Mapping[str, Any], fairness: Mapping[str, Any], *,
                   methods: Sequence[str], partners: Sequence[str], fars: Sequence[float],
                   seed: int, model: str, protocol: str, ds: str,
                   source: tuple[str, str] | None = None,
                   provenance: Mapping[str, Any] | None = None, threads: int = 1,
                   unavailable: Mapping[str, str] | None = None,
                   failed: str = DEFAULT_RULE) -> pd.DataFrame:
    """Every output of one (model, protocol); returns the table. ``inputs``: ``scores``,
    ``embeddings`` (only where an embedding method runs), ``attributes`` (with groups),
    ``partners`` (paths, as ``partners``), and with a calibration ``source`` (dataset,
    benchmark) ``cal_scores``, ``cal_embeddings``, ``cal_partners``, ``cal_attributes``;
    ``threads``: worker processes of a large table's bootstrap
    (:mod:`facecast.mitigation.replicates`); ``unavailable``: methods that cannot run on
    this model, each a table row of NaN with its note (a BFW score column's embedding
    methods), logged; ``failed``: the rule for pairs without a feature
    (``evaluate.failed``)."""
    skip = dict(unavailable or {})
    methods = [m for m in methods if m not in skip]
    fused = sorted([model, *partners]) if any(m in FUSION_METHODS for m in methods) else []
    split = _split(inputs, cfg, model=model, partners=partners, ds=ds, protocol=protocol,
                   seed=seed, source=source, rule=check_rule(failed))
    split = _drop_unpartnered(split, fused)
    counts = check_sides(split, protocol)
    log.info("%s on %s: calibration %s; statuses %s", model, protocol, split.source,
             split.pairs["status"].value_counts().to_dict())
    im = _images(inputs, split, fairness, methods=methods, source=source, ds=ds)
    ev = split.evaluated
    scores, probs, results = fit_all(im, split, fused, _settings(cfg, methods, fused, seed))
    if ev["failed"].any():
        log.warning("%s", rule_text(failed, int(ev["failed"].sum())))
    ann = annotate(ev, inputs.get("attributes"), fairness)
    fmr = float(cfg.get("fmr", 1e-3))
    groups, point, reps = bootstrap(ann, scores, probs, fars=fars, fmr=fmr,
                                    fairness=fairness, n_boot=int(cfg.get("n_boot", 1000)),
                                    seed=seed + 3, workers=threads)
    n_imp = int((ann["label"] == 0).sum())
    notes = metric_notes(metric_names(fars, groups), n_impostors=n_imp, fars=fars, fmr=fmr,
                         groups=groups)
    n_ids = len(set(ev["identity_a"]) | set(ev["identity_b"]))
    table, diff = build_tables(point, reps, notes=notes, n_identities=n_ids,
                               confidence=float(cfg.get("confidence", 0.95)),
                               alpha=float(cfg.get("alpha", 0.05)),
                               counts=_counts(ev, n_imp, n_ids, split, failed))
    _log_missing(diff)
    for m, why in skip.items():
        log.warning("%s: %s - not computed on %s", m, why, model)
        for res in results:
            res.notes.append(f"{m}: {why}")
    table, diff = add_unavailable(table, diff, skip, metrics=list(point["raw"]),
                                  order=METHODS)
    fc = faircal_table(ann, scores, probs, fits=ev["fit"].to_numpy() if "fit" in ev
                       else np.full(len(ev), "all"), fprs=FAIRCAL_FPRS,
                       nbins=int(cfg.get("ece_bins", ECE_BINS)), order=list(scores))
    write_outputs(Path(out_dir), split=split, results=results, table=table, diff=diff,
                  cfg=cfg, counts=counts, model=model, protocol=protocol, ds=ds,
                  source=source, faircal=fc, rule=failed, scores=scores, probs=probs,
                  provenance={**dict(provenance or {}), "stage": "mitigation",
                              "model": model, "protocol": protocol})
    return table
