"""C11 hard-pair mining: verification pairs whose reference score lies in a band.

From a benchmark subset (images with identities) and a reference model's L2-normalised
embeddings, :func:`mine_pairs` (``mode: band``, the default) draws genuine pairs (same
identity, different images) and impostor pairs (different identities) whose cosine
similarity lies in ``band`` until every fold (``0``..``n_folds-1`` plus ``val``) holds
``n_genuine`` + ``n_impostor`` pairs.

This module runs a mining: it samples the pool (:func:`pool_sample`), fixes the band,
runs the band search, assigns folds and builds the report. The parts live beside it:

* :mod:`facecast.analysis.mining_config`: :class:`MiningConfig`, :class:`MiningResult`,
  :class:`MiningShortfall`, :data:`PAIR_COLUMNS` (re-exported here);
* :mod:`facecast.analysis.mining_scores`: scoring candidate pairs, deciding band edges on
  exact scores, estimating a quantile band;
* :mod:`facecast.analysis.mining_search`: how genuine and impostor candidates are drawn
  and picked (deterministic from the seed; no repeated pair; ``max_image_uses`` cap).

The band is absolute (``band_mode: absolute``) or given as quantiles of the reference
model's impostor scores (``impostor_quantile``: estimated on ``quantile_sample`` uniformly
drawn impostor pairs of the subset) or genuine scores (``genuine_quantile``: all
within-identity pairs). When the subset cannot supply enough pairs (all candidates seen, or
``max_candidates`` impostor candidates scored), mining stops; ``on_shortfall: fail`` raises
:class:`MiningShortfall` with the report, ``write`` returns what was achieved (folds
filled evenly) and marks the report ``shortfall: true``.

``mode: all`` is the exhaustive protocol instead (every genuine pair, all or a seeded sample
of ``n_impostor`` impostor pairs in total, no band): :mod:`facecast.analysis.exhaustive`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd
import torch

from facecast.analysis.exhaustive import all_pairs
from facecast.analysis.mining_config import (
    PAIR_COLUMNS,
    MiningConfig,
    MiningResult,
    MiningShortfall,
    resolve_device,
)
from facecast.analysis.mining_scores import estimate_band, random_impostor_scores
from facecast.analysis.mining_search import PairSelector, mine_genuine, mine_impostors

__all__ = ["PAIR_COLUMNS", "MiningConfig", "MiningResult", "MiningShortfall", "mine_pairs",
           "pool_sample", "shortfall_message"]

log = logging.getLogger(__name__)


def pool_sample(identity: pd.Series | np.ndarray, max_images: int,
                rng: np.random.Generator) -> np.ndarray:
    """Mask of the images kept in a mining pool of at most about ``max_images``.

    Whole identities are kept, in a seeded random order, until ``max_images`` images are
    in (the last identity may overshoot), so genuine pairs keep every image of an
    identity. ``max_images`` 0, or a subset no larger, keeps everything.
    """
    identity = np.asarray(identity)
    if not max_images or len(identity) <= max_images:
        return np.ones(len(identity), bool)
    codes, uniques = pd.factorize(identity, sort=True)
    sizes = np.bincount(codes, minlength=len(uniques))
    order = rng.permutation(len(uniques))
    n_ids = int(np.searchsorted(np.cumsum(sizes[order]), max_images)) + 1
    chosen = np.zeros(len(uniques), bool)
    chosen[order[:n_ids]] = True
    return chosen[codes]


def _assign_folds(n: int, folds: list[str], per_fold: int) -> np.ndarray:
    if n == len(folds) * per_fold:
        idx = np.arange(n) // max(per_fold, 1)
    else:  # shortfall: spread what there is evenly
        idx = (np.arange(n) * len(folds)) // max(n, 1)
    return np.asarray(folds, dtype=object)[idx] if n else np.zeros(0, dtype=object)



def mine_pairs(emb: np.ndarray | torch.Tensor, identity: np.ndarray | pd.Categorical,
               image_ids: np.ndarray, cfg: MiningConfig, seed: int | list[int]) -> MiningResult:
    """Mine genuine and impostor pairs in the score band (see the module docstring).

    ``emb`` rows are L2-normalised embeddings of ``image_ids`` with ``identity`` labels
    (any array; a ``pandas.Categorical`` is factorised without touching the strings).
    Same inputs and seed give the same pairs. Raises :class:`MiningShortfall` when
    ``cfg.on_shortfall == 'fail'`` and the subset cannot supply the pairs.
    """
    rng = np.random.default_rng(seed)
    device = resolve_device(cfg.device)
    e = torch.as_tensor(np.asarray(emb, dtype=np.float32)) if not torch.is_tensor(emb) else emb
    e = e.to(device=device, dtype=torch.float32).contiguous()
    image_ids = np.asarray(image_ids)
    codes, labels = pd.factorize(identity, sort=True)   # fast for a Categorical
    labels = np.asarray(labels).astype(str)
    N = len(codes)
    if cfg.mode == "all":
        pairs, report = all_pairs(e, codes, labels, image_ids, cfg, rng)
        return MiningResult(pairs, report)
    folds = cfg.fold_names
    need_g, need_i = len(folds) * cfg.n_genuine, len(folds) * cfg.n_impostor

    imp_sample = random_impostor_scores(
        e, codes, cfg.quantile_sample if cfg.band_mode == "impostor_quantile" else 2048, rng)
    lo, hi, band_note = estimate_band(e, codes, cfg, imp_sample)
    if band_note and cfg.on_shortfall == "fail":
        raise MiningShortfall(f"mining: {band_note} ({N} images)",
                              {"shortfall": True, "band_note": band_note})
    p_est = float(((imp_sample >= lo) & (imp_sample <= hi)).mean()) if len(imp_sample) else 0.0

    sel = PairSelector(N, cfg.max_image_uses)
    gstats = mine_genuine(e, codes, lo, hi, need_g, cfg, sel, rng)
    n_gen, g_rejected_cap = sel.n, sel.rejected_cap
    istats = mine_impostors(e, codes, lo, hi, need_i, p_est, cfg, sel, rng)
    n_imp = sel.n - n_gen

    a, b, score = sel.picked()
    label = np.r_[np.ones(n_gen, np.int8), np.zeros(n_imp, np.int8)]
    fold = np.r_[_assign_folds(n_gen, folds, cfg.n_genuine),
                 _assign_folds(n_imp, folds, cfg.n_impostor)].astype(object)
    fold_rank = {f: k for k, f in enumerate(folds)}
    rank = np.asarray([fold_rank[f] for f in fold], np.int64)
    order = np.lexsort((1 - label, rank))                # fold by fold, genuine first
    a, b, score, label, fold = a[order], b[order], score[order], label[order], fold[order]
    pairs = pd.DataFrame({
        "image_a": image_ids[a].astype(str), "image_b": image_ids[b].astype(str),
        "identity_a": labels[codes[a]], "identity_b": labels[codes[b]],
        "label": label, "fold": fold.astype(str), "ref_score": score.astype(np.float32)},
        columns=PAIR_COLUMNS)

    rank = rank[order]
    per_fold = {lab: np.bincount(rank[label == lab], minlength=len(folds)) for lab in (0, 1)}
    uses = sel.uses
    n_cells = istats["cells_scored"]
    n_gen_candidates = gstats["candidates"]
    report = {
        "band_mode": cfg.band_mode, "band_config": list(cfg.band),
        "band": [lo, hi] if not band_note else [None, None], "band_note": band_note,
        "device": str(device),
        "pool": {"n_images": int(N), "n_identities": int(codes.max() + 1) if N else 0,
                 "n_identities_2plus": gstats["identities_with_pairs"]},
        "genuine": {"needed": need_g, "selected": n_gen,
                    "candidates": int(n_gen_candidates), "in_band": int(gstats["in_band"]),
                    "acceptance_rate": float(gstats["in_band"] / n_gen_candidates)
                    if n_gen_candidates else 0.0,
                    "identities_visited": gstats["identities_visited"],
                    "rejected_by_image_cap": int(g_rejected_cap)},
        "impostor": {"needed": need_i, "selected": n_imp, "candidates_scored": int(n_cells),
                     "in_band": int(istats["in_band_cells"]),
                     "acceptance_rate": float(istats["in_band_cells"] / n_cells) if n_cells else 0.0,
                     "estimated_acceptance_rate": p_est, "blocks": istats["blocks"],
                     "slice_size": istats["slice_size"], "all_candidates_seen": istats["exhausted"],
                     "candidate_budget_hit": istats["budget_hit"],
                     "second_pass": istats["second_pass"],
                     "rejected_by_image_cap": int(sel.rejected_cap - g_rejected_cap)},
        "max_image_uses": cfg.max_image_uses,
        "max_uses_observed": int(uses.max()) if N else 0,
        "images_used": int((uses > 0).sum()),
        "fold_counts": {f: {"genuine": int(per_fold[1][k]), "impostor": int(per_fold[0][k])}
                        for k, f in enumerate(folds)},
        "config": {k: v for k, v in asdict(cfg).items() if k != "extra"},
    }
    report["shortfall"] = n_gen < need_g or n_imp < need_i
    if report["shortfall"]:
        msg = shortfall_message(report)
        if cfg.on_shortfall == "fail":
            raise MiningShortfall(msg, report)
        log.warning("%s", msg)
    return MiningResult(pairs, report)


def shortfall_message(report: Mapping[str, Any]) -> str:
    """One readable paragraph: what was asked, what was achieved, and why it stopped."""
    g, i = report["genuine"], report["impostor"]
    lo, hi = (float("nan") if b is None else b for b in report["band"])
    why = []
    if g["selected"] < g["needed"]:
        why.append(f"genuine: {g['selected']}/{g['needed']} (of {g['candidates']} within-identity "
                   f"pairs {g['in_band']} are in band, acceptance {g['acceptance_rate']:.4f}; "
                   f"{g['rejected_by_image_cap']} refused by the image-use cap)")
    if i["selected"] < i["needed"]:
        cause = ("all candidate pairs were scored" if i["all_candidates_seen"] else
                 "the candidate budget (mining.max_candidates) ran out")
        why.append(f"impostor: {i['selected']}/{i['needed']} ({i['candidates_scored']} candidates "
                   f"scored, {i['in_band']} in band, acceptance {i['acceptance_rate']:.5f}; "
                   f"{cause})")
    pool = report["pool"]
    return (f"mining shortfall in band [{lo:.4f}, {hi:.4f}] ({report['band_mode']}) on a pool of "
            f"{pool['n_images']} images / {pool['n_identities']} identities: " + "; ".join(why)
            + ". Widen the band, lower n_genuine/n_impostor, raise max_image_uses, or set "
            "on_shortfall: write to keep what was achieved.")
