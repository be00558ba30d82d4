"""Learn every method on the calibration pairs, then transform the evaluated pairs.

:func:`learn_and_apply` is the one place that sees both sides, and it hands the evaluated
pairs' labels to nothing: what is learned (:attr:`Result.learned`) is a function of the
calibration pairs, the calibration images and the seed only (tests/test_mitigation.py
changes evaluated labels and checks that nothing learned moves).

Every method yields a score per evaluated pair and a probability (for the KS calibration
error): FairCal, its oracle and ``fusion_lr`` output probabilities; every other method's
score is mapped by a global beta calibration fitted on that method's calibration-pair
scores, as FairCal evaluates its baseline and FSN (bounds: a cosine's [-1, 1]; FSN and
group thresholds: FairCal's shifted bounds; cohort and fusion scores, which have none:
the calibration scores' range widened by 5 % on each side).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from facecast.mitigation.calibrate import BetaMap, beta_fit
from facecast.mitigation.clusters import (
    ClusterCal,
    assign,
    both_members,
    cluster_cap,
    clustercal_fit,
    clustercal_prob,
    either_members,
    fit_kmeans,
    fsn_fit,
    fsn_scores,
)
from facecast.mitigation.cohort import (
    COHORT_METHODS,
    choose_cohort,
    cohort_self_stats,
    image_stats,
    normalised_scores,
)
from facecast.mitigation.fusion import fusion_fit, group_shift_fit, group_shift_scores
from facecast.mitigation.targets import PROBABILITY_METHODS

__all__ = ["PARTS", "Images", "Result", "Settings", "Side", "finish", "learn_and_apply",
           "start"]

log = logging.getLogger(__name__)


@dataclass
class Images:
    """Every image of both sides: ids, unit embeddings, identity codes, protected-group
    codes (-1 = none) and the group names."""

    ids: np.ndarray
    emb: np.ndarray
    ident: np.ndarray
    group: np.ndarray
    groups: list[str]


@dataclass
class Side:
    """Pairs of one side as image indices, raw scores, 0/1 labels and, for fusion, the
    ``(n, models)`` scores of every fused model (this model's among them)."""

    ia: np.ndarray
    ib: np.ndarray
    score: np.ndarray
    label: np.ndarray
    partners: np.ndarray | None = None


@dataclass
class Settings:
    """What the methods read from the ``mitigation`` section."""

    methods: Sequence[str]
    fmr: float = 1e-3
    cohort_size: int = 1000
    top_k: int = 200
    clusters: int = 100
    seed: int = 0
    fusion_models: Sequence[str] = ()


@dataclass
class Result:
    """Per method, the evaluated pairs' scores and probabilities (and the calibration
    pairs' scores); what was learned (arrays and numbers, for the record and the leakage
    test); notes for the log and report; each image's k-means cluster per method
    (``codes``: ``fsn``, ``faircal``)."""

    scores: dict[str, np.ndarray] = field(default_factory=dict)
    probs: dict[str, np.ndarray] = field(default_factory=dict)
    cal_scores: dict[str, np.ndarray] = field(default_factory=dict)
    learned: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    codes: dict[str, np.ndarray] = field(default_factory=dict)


def _cohort_part(im: Images, ev: Side, cal: Side, st: Settings, res: Result) -> None:
    wanted = [m for m in COHORT_METHODS if m in st.methods]
    if not wanted:
        return
    cal_images = np.unique(np.concatenate([cal.ia, cal.ib]))
    pick = cal_images[choose_cohort(len(cal_images), st.cohort_size, st.seed + 1)]
    if len(pick) < st.cohort_size:
        res.notes.append(f"cohort: {len(pick)} calibration images, not cohort_size "
                         f"{st.cohort_size} (all of them)")
    top_k = min(st.top_k, len(pick))
    cohort, cohort_id = im.emb[pick], im.ident[pick]
    self_stats = cohort_self_stats(cohort, cohort_id)
    stats = image_stats(im.emb, im.ident, cohort, cohort_id, self_stats, top_k)
    res.learned["cohort"] = {"images": im.ids[pick], "top_k": top_k,
                             "mu": self_stats[0], "sd": self_stats[1]}
    for m in wanted:
        res.scores[m] = normalised_scores(m, ev.score, ev.ia, ev.ib, stats)
        res.cal_scores[m] = normalised_scores(m, cal.score, cal.ia, cal.ib, stats)


def _kmeans_part(im: Images, ev: Side, cal: Side, st: Settings, res: Result) -> None:
    """k-means of the calibration images, one per cluster count: FSN's count is capped by
    the calibration impostors (its thresholds need them), FairCal's only by the images;
    equal counts share one fit, as FairCal's code shares its saved k-means."""
    wanted = [m for m in ("fsn", "faircal") if m in st.methods]
    if not wanted:
        return
    cal_images = np.unique(np.concatenate([cal.ia, cal.ib]))
    n_imp = int((cal.label == 0).sum())
    fits: dict[int, dict[str, Any]] = {}
    res.learned["kmeans"] = {}
    for m in wanted:
        k, why = (cluster_cap(st.clusters, len(cal_images), n_imp, st.fmr) if m == "fsn"
                  else cluster_cap(st.clusters, len(cal_images)))
        if why:
            res.notes.append(f"k-means ({m}): {why}")
        if k not in fits:
            centres = fit_kmeans(im.emb[cal_images], k, st.seed + 2)
            fits[k] = {"k": k, "centres": centres, "codes": assign(im.emb, centres)}
        res.learned["kmeans"][m] = {"k": k, "centres": fits[k]["centres"]}
        res.codes[m] = fits[k]["codes"]


def _fsn_part(im: Images, ev: Side, cal: Side, st: Settings, res: Result) -> None:
    if "fsn" not in st.methods:
        return
    code, k = res.codes["fsn"], res.learned["kmeans"]["fsn"]["k"]
    fsn = fsn_fit(cal.score, cal.label, code[cal.ia], code[cal.ib], k, st.fmr)
    res.learned["fsn"] = fsn
    if (~fsn.resolvable).any():
        res.notes.append(f"fsn: {int((~fsn.resolvable).sum())} of {k} clusters have fewer "
                         "than 1/FMR calibration impostor pairs and keep the global threshold")
    res.scores["fsn"] = fsn_scores(fsn, ev.score, code[ev.ia], code[ev.ib])
    res.cal_scores["fsn"] = fsn_scores(fsn, cal.score, code[cal.ia], code[cal.ib])


def _faircal_part(im: Images, ev: Side, cal: Side, st: Settings, res: Result) -> None:
    if "faircal" not in st.methods:
        return
    code, k = res.codes["faircal"], res.learned["kmeans"]["faircal"]["k"]
    cc = clustercal_fit(cal.score, cal.label, either_members(code[cal.ia], code[cal.ib], k),
                        beta_fit(cal.score, cal.label))
    _note_maps("faircal", cc, res)
    res.learned["faircal"] = cc
    res.scores["faircal"] = clustercal_prob(cc, ev.score, code[ev.ia], code[ev.ib])


def _note_maps(name: str, cc: ClusterCal, res: Result) -> None:
    if (~cc.own_map).any():
        res.notes.append(f"{name}: {int((~cc.own_map).sum())} of {len(cc.own_map)} "
                         "clusters (groups) lack calibration pairs of both labels and use "
                         "the global map")


def _oracle_part(im: Images, ev: Side, cal: Side, st: Settings, res: Result) -> None:
    if "oracle_cal" not in st.methods:
        return
    members = both_members(im.group[cal.ia], im.group[cal.ib], len(im.groups))
    cc = clustercal_fit(cal.score, cal.label, members, beta_fit(cal.score, cal.label))
    _note_maps("oracle_cal", cc, res)
    res.learned["oracle_cal"] = cc
    res.scores["oracle_cal"] = clustercal_prob(cc, ev.score, im.group[ev.ia], im.group[ev.ib])


def _group_part(im: Images, ev: Side, cal: Side, st: Settings, res: Result) -> None:
    if "group_thresholds" not in st.methods:
        return
    gs = group_shift_fit(cal.score, cal.label, im.group[cal.ia], im.group[cal.ib],
                         im.groups, st.fmr)
    res.learned["group_thresholds"] = gs
    if (~gs.resolvable).any():
        bad = [g for g, ok in zip(gs.groups, gs.resolvable, strict=True) if not ok]
        res.notes.append(f"group_thresholds: groups {bad} have fewer than 1/FMR "
                         "calibration impostor pairs and keep the global threshold")
    res.scores["group_thresholds"] = group_shift_scores(gs, ev.score, im.group[ev.ia],
                                                        im.group[ev.ib])
    res.cal_scores["group_thresholds"] = group_shift_scores(
        gs, cal.score, im.group[cal.ia], im.group[cal.ib])


def _fusion_part(im: Images, ev: Side, cal: Side, st: Settings, res: Result) -> None:
    if not {"fusion", "fusion_lr"} & set(st.methods):
        return
    fu = fusion_fit(st.fusion_models, cal.partners, cal.label)
    res.learned["fusion"] = fu
    if "fusion" in st.methods:
        res.scores["fusion"] = fu.mean_z(ev.partners)
        res.cal_scores["fusion"] = fu.mean_z(cal.partners)
    if "fusion_lr" in st.methods:
        res.scores["fusion_lr"] = fu.probability(ev.partners)


def _ks_bounds(method: str, cal_score: np.ndarray, res: Result) -> tuple[float, float]:
    if method == "raw":
        return -1.0, 1.0
    if method in ("fsn", "group_thresholds"):
        return res.learned[method].bounds
    lo, hi = float(np.min(cal_score)), float(np.max(cal_score))
    pad = 0.05 * max(hi - lo, 1e-12)
    return lo - pad, hi + pad


def _probabilities(im: Images, ev: Side, cal: Side, st: Settings, res: Result) -> None:
    """Each method's probability on the evaluated pairs (module docstring)."""
    maps: dict[str, BetaMap] = {}
    for m, score in res.scores.items():
        if m in PROBABILITY_METHODS:
            res.probs[m] = score
            continue
        lo, hi = _ks_bounds(m, res.cal_scores[m], res)
        maps[m] = beta_fit(res.cal_scores[m], cal.label, lo, hi)
        res.probs[m] = maps[m](score)
    res.learned["ks_maps"] = maps


#: the steps of :func:`learn_and_apply`, in order, each ``(what, step)`` (timed one by one
#: in benchmarks/mitigation.py)
PARTS = (("znorm, tnorm, ztnorm, snorm, asnorm (one cohort)", _cohort_part),
         ("k-means (fsn, faircal)", _kmeans_part), ("fsn", _fsn_part),
         ("faircal", _faircal_part), ("oracle_cal", _oracle_part),
         ("group_thresholds", _group_part), ("fusion, fusion_lr", _fusion_part),
         ("probabilities for the KS error", _probabilities))


def start(ev: Side, cal: Side) -> Result:
    """A :class:`Result` holding the raw scores of both sides."""
    res = Result()
    res.scores["raw"] = np.asarray(ev.score, np.float64)
    res.cal_scores["raw"] = np.asarray(cal.score, np.float64)
    return res


def finish(res: Result, st: Settings) -> Result:
    """Scores and probabilities in ``st.methods`` order; notes logged."""
    res.scores = {m: res.scores[m] for m in st.methods if m in res.scores}
    res.probs = {m: res.probs[m] for m in st.methods if m in res.probs}
    for note in res.notes:
        log.info("%s", note)
    return res


def learn_and_apply(im: Images, ev: Side, cal: Side, st: Settings) -> Result:
    """Learn every method of ``st.methods`` on ``cal`` and score ``ev`` (module
    docstring); the scores and probabilities come back in ``st.methods`` order."""
    res = start(ev, cal)
    for _, step in PARTS:
        step(im, ev, cal, st, res)
    return finish(res, st)
