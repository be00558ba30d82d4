"""Find the attribute slices where a model errs most: candidates, one global threshold,
SliceLine-style enumeration, identity-clustered tests and false-discovery control.

:func:`find_slices` is the whole analysis on in-memory tables; the stage and the CLI
(:mod:`facecast.slices.stage`) read and write files around it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse
from tqdm import tqdm

from facecast.analysis.filtering import DEFAULT_STATUSES, benchmark_pool
from facecast.evaluate.metrics import equal_error_rate, kfold_accuracy, roc_points
from facecast.fairness.threshold import fmr_resolvable, thresholds_at_fmr
from facecast.slices.predicates import Predicate, build_predicates, select_columns
from facecast.slices.search import enumerate_slices, score, slice_image_mask
from facecast.slices.testing import adjust, clustered_test, make_units, replicate_weights

log = logging.getLogger(__name__)
TEST_BLOCK = 128


def global_threshold(scores: np.ndarray, labels: np.ndarray, cfg: Mapping[str, Any]
                     ) -> dict[str, Any]:
    """The one threshold over all pairs: ``threshold.policy`` fmr (lowest t with FMR <=
    ``threshold.value`` over every impostor pair) or eer. Accept iff ``score >= t``."""
    tcfg = dict(cfg.get("threshold") or {})
    policy = str(tcfg.get("policy", "fmr"))
    value = float(tcfg.get("value", 1e-3))
    y = np.asarray(labels).astype(bool)
    if policy == "fmr":
        t = float(thresholds_at_fmr(scores[~y], [value])[0])
        resolvable = bool(fmr_resolvable(int((~y).sum()), value))
    elif policy == "eer":
        _, t = equal_error_rate(*roc_points(scores, y.astype(int)))
        resolvable = bool(y.any() and (~y).any())
    else:
        raise ValueError(f"slices.threshold.policy must be fmr or eer, got {policy!r}")
    return {"policy": policy, "value": value if policy == "fmr" else float("nan"),
            "threshold": t, "resolvable": resolvable, "n_genuine": int(y.sum()),
            "n_impostor": int((~y).sum()),
            "fnmr": float((scores[y] < t).mean()) if y.any() else float("nan"),
            "fmr": float((scores[~y] >= t).mean()) if (~y).any() else float("nan")}


def _folds(pairs: pd.DataFrame) -> np.ndarray:
    """Protocol folds (``val`` left out) where given, else 10 folds dealt per label."""
    if "fold" in pairs.columns:
        return pairs["fold"].astype(str).to_numpy()
    y = pairs["label"].to_numpy()
    out = np.empty(len(y), dtype=object)
    for lab in (0, 1):
        idx = np.flatnonzero(y == lab)
        out[idx] = (np.arange(len(idx)) % 10).astype(str)
    return out


def slice_accuracy(pairs: pd.DataFrame, member: np.ndarray) -> tuple[float, float, str]:
    """10-fold best-threshold accuracy (mean, std) of a slice's pairs, with a note when it
    cannot be computed (one label only, fewer than two folds)."""
    sub = pairs.loc[member]
    folds = _folds(sub)
    keep = folds != "val"
    sub, folds = sub.loc[keep], folds[keep]
    if sub["label"].nunique() < 2 or len(np.unique(folds)) < 2:
        return float("nan"), float("nan"), "accuracy n/a (needs both labels in >= 2 folds)"
    acc = kfold_accuracy(sub["score"].to_numpy(), sub["label"].to_numpy(), folds)
    return acc.mean, acc.std, ""


def _text(preds: list[Predicate], definition: np.ndarray) -> str:
    return " and ".join(preds[p].text for p in definition if p >= 0)


def find_slices(pairs: pd.DataFrame, attributes: pd.DataFrame, cfg: Mapping[str, Any], *,
                seed: int, statuses: tuple[str, ...] = DEFAULT_STATUSES
                ) -> tuple[pd.DataFrame, dict[str, Any], list[Predicate], np.ndarray]:
    """Every slice of the family with its supports, errors, effect, p, q and rank.

    ``pairs``: ``image_a``, ``image_b``, ``identity_a``, ``identity_b``, ``label``,
    ``score`` (rows with a non-finite score or a label other than 0/1 are left out and
    counted). ``attributes``: ``image_id`` + columns (``status``/``exclude`` select the
    pool as benchmarks do). Returns ``(table, info, predicates, image masks)``; ``info``
    holds the threshold, the counts of slices evaluated / pruned / tested and the columns.
    """
    cfg = dict(cfg)
    score_ = pd.to_numeric(pairs["score"], errors="coerce").to_numpy(np.float64)
    label = pd.to_numeric(pairs["label"], errors="coerce").to_numpy(np.float64)
    ok = np.isfinite(score_) & np.isin(label, (0, 1))
    dropped = int((~ok).sum())
    pairs = pairs.loc[ok].reset_index(drop=True)
    s, y = score_[ok], label[ok].astype(bool)
    pairs = pairs.assign(score=s, label=y.astype(int))
    thr = global_threshold(s, y, cfg)
    t = thr["threshold"]
    err_all = np.where(y, s < t, s >= t)

    attrs = attributes.reset_index(drop=True)
    columns = select_columns([c for c in attrs.columns], cfg)
    status = attrs["status"].astype(str).to_numpy() if "status" in attrs else np.full(
        len(attrs), statuses[0])
    exclude = attrs["exclude"].fillna(False).astype(bool).to_numpy() if "exclude" in attrs \
        else np.zeros(len(attrs), bool)
    pool = benchmark_pool(status, exclude, statuses)
    preds, masks = build_predicates(attrs, columns, pool, cfg)
    col_of = np.array([columns.index(p.column) for p in preds], np.int64)
    index = pd.Index(attrs["image_id"].astype(str))
    ia = index.get_indexer(pairs["image_a"].astype(str))
    ib = index.get_indexer(pairs["image_b"].astype(str))

    etype = str(cfg.get("error", "fnmr"))
    rel = y if etype == "fnmr" else ~y
    min_rel = int(cfg.get("min_genuine" if etype == "fnmr" else "min_impostor", 32))
    min_other = int(cfg.get("min_impostor" if etype == "fnmr" else "min_genuine", 32))
    min_ids = int(cfg.get("min_identities", 5))
    alpha = float(cfg.get("alpha", 0.95))
    lat = enumerate_slices(masks, col_of, ia[rel], ib[rel], err_all[rel],
                           max_depth=int(cfg.get("max_depth", 2)), min_support=min_rel,
                           alpha=alpha)
    n_rel = int(rel.sum())
    mean_err = float(err_all[rel].mean()) if n_rel else float("nan")
    sc = score(lat.errors, lat.size, n_rel, mean_err, alpha) if n_rel else np.full(
        len(lat.size), np.nan)
    family = np.flatnonzero(lat.size >= min_rel)
    table = pd.DataFrame({
        "depth": lat.depth[family], "size": lat.size[family].astype(np.int64),
        "errors": lat.errors[family].astype(np.int64),
        "error_rate": lat.errors[family] / np.maximum(lat.size[family], 1),
        "score": sc[family]})
    defs = lat.defs[family]
    table.insert(0, "slice", [_text(preds, d) for d in defs])
    table.insert(1, "columns", [" & ".join(preds[p].column for p in d if p >= 0) for d in defs])
    # candidates for testing: a positive score (the slice errs more than average, by
    # SliceLine's size-aware measure), best first
    order = np.argsort(-np.nan_to_num(table["score"].to_numpy(), nan=-np.inf), kind="stable")
    cand = [int(i) for i in order[table["score"].to_numpy()[order] > 0]]
    max_tested = int(cfg.get("max_tested", 0))
    capped = max(0, len(cand) - max_tested) if max_tested else 0
    if max_tested:
        cand = cand[:max_tested]
    nrow = len(table)
    for c in ("n_genuine", "n_impostor", "n_identities", "fnm", "fm"):
        table[c] = np.full(nrow, -1, np.int64)  # -1: not computed (slice not a candidate)
    ids_all = pd.unique(np.concatenate([pairs["identity_a"].astype(str).to_numpy(),
                                        pairs["identity_b"].astype(str).to_numpy()]))
    ida_rel = pairs["identity_a"].astype(str).to_numpy()[rel]
    idb_rel = pairs["identity_b"].astype(str).to_numpy()[rel]
    codes, _ = pd.factorize(np.concatenate([ida_rel, idb_rel]))
    n_rel_rows = len(ida_rel)
    id_ind = sparse.csr_matrix(
        (np.ones(2 * n_rel_rows, np.float32),
         (codes, np.concatenate([np.arange(n_rel_rows)] * 2))),
        shape=(int(codes.max()) + 1 if len(codes) else 0, n_rel_rows))
    units = make_units(ida_rel, idb_rel, ids_all)
    weights = replicate_weights(units, int(cfg.get("n_boot", 1000)), seed) if cand else []
    tested = np.zeros(nrow, bool)
    note = np.full(nrow, "", dtype=object)
    res_cols = {k: np.full(nrow, np.nan) for k in ("z", "error_lo", "error_hi")}
    # effect against the rest for every slice of the family, from the lattice's counts
    n_err = float(err_all[rel].sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        res_cols["rest_rate"] = ((n_err - table["errors"].to_numpy())
                                 / (n_rel - table["size"].to_numpy()))
    res_cols["effect"] = table["error_rate"].to_numpy() - res_cols["rest_rate"]
    p = np.ones(nrow)
    n_boot = int(cfg.get("n_boot", 1000))
    conf = float(cfg.get("confidence", 0.95))
    for start in tqdm(range(0, len(cand), TEST_BLOCK), desc="testing slices",
                      unit="block", mininterval=5, disable=len(cand) <= TEST_BLOCK):
        block = cand[start:start + TEST_BLOCK]
        mem = np.zeros((len(pairs), len(block)), bool)
        for j, row in enumerate(block):
            mem[:, j] = slice_members(masks, defs[row], ia, ib)
        table.loc[block, "n_genuine"] = mem[y].sum(0)
        table.loc[block, "n_impostor"] = mem[~y].sum(0)
        table.loc[block, "fnm"] = mem[y & err_all].sum(0)
        table.loc[block, "fm"] = mem[~y & err_all].sum(0)
        n_ids = np.asarray(((id_ind @ mem[rel].astype(np.float32)) > 0).sum(0)).ravel()
        table.loc[block, "n_identities"] = n_ids
        other = table.loc[block, "n_impostor" if etype == "fnmr" else "n_genuine"].to_numpy()
        enough = (other >= min_other) & (n_ids >= min_ids)
        for j, row in enumerate(block):
            if not enough[j]:
                note[row] = (f"not tested: {other[j]} "
                             f"{'impostor' if etype == 'fnmr' else 'genuine'} pairs "
                             f"(min {min_other}), {n_ids[j]} identities (min {min_ids})")
        sel = np.flatnonzero(enough)
        if len(sel) == 0:
            continue
        rows = [block[j] for j in sel]
        res = clustered_test(units, weights, mem[rel][:, sel], err_all[rel],
                             confidence=conf, n_identities=n_ids[sel])
        tested[rows] = True
        p[rows] = res.p
        res_cols["z"][rows] = res.z
        res_cols["error_lo"][rows] = res.rate_lo
        res_cols["error_hi"][rows] = res.rate_hi
    in_cand = np.zeros(nrow, bool)
    in_cand[cand] = True
    note[~tested & ~in_cand & (note == "")] = "not tested: score <= 0 (no worse than average)"
    if capped:
        log.warning("slices.max_tested: %d positive-score slices beyond the first %d were "
                    "not tested (p = 1)", capped, max_tested)
    for k, v in res_cols.items():
        table[k] = v
    table["p"] = p
    method = str(cfg.get("fdr_method", "bh"))
    table["q"] = adjust(p, method)
    fdr = float(cfg.get("fdr", 0.05))
    table["tested"] = tested
    table["significant"] = tested & (table["q"].to_numpy() <= fdr) & (
        table["effect"].to_numpy() > 0)
    _mark_redundant(table, defs)
    rankable = table["significant"] & ~table["redundant"]
    table["rank"] = pd.array([pd.NA] * nrow, dtype="Int64")
    top = table.loc[rankable].sort_values(["score", "slice"], ascending=[False, True],
                                          kind="stable").index
    table.loc[top, "rank"] = np.arange(1, len(top) + 1)
    # the other error rate at the same threshold, and its resolvability
    with np.errstate(divide="ignore", invalid="ignore"):
        table["fnmr"] = np.where(table["n_genuine"] > 0,
                                 table["fnm"] / table["n_genuine"], np.nan)
        table["fmr"] = np.where(table["n_impostor"] > 0,
                                table["fm"] / table["n_impostor"], np.nan)
    n_imp = table["n_impostor"].to_numpy()
    if thr["policy"] == "fmr":
        resolvable = (n_imp >= 0) & fmr_resolvable(np.clip(n_imp, 0, None), thr["value"])
    else:
        resolvable = n_imp > 0
    table["fmr_resolvable"] = resolvable
    for i in np.flatnonzero((n_imp >= 0) & ~resolvable):
        why = (f"FMR n/a ({n_imp[i]} impostor pairs: fewer than 1/FMR = "
               f"{1 / thr['value']:g})" if thr["policy"] == "fmr"
               else "FMR n/a (no impostor pair)")
        note[i] = f"{note[i]}; {why}" if note[i] else why
    table["note"] = note.astype(str)
    table["accuracy"] = np.nan
    table["accuracy_std"] = np.nan
    shown = list(top[: int(cfg.get("report_top", 10))]) or list(
        table.index[tested][np.argsort(table.loc[tested, "p"].to_numpy(), kind="stable")][
            : int(cfg.get("report_top", 10))])
    for row in shown:
        acc, sd, why = slice_accuracy(pairs, slice_members(masks, defs[row], ia, ib))
        table.loc[row, ["accuracy", "accuracy_std"]] = acc, sd
        if why:
            table.loc[row, "note"] = "; ".join(x for x in (table.loc[row, "note"], why) if x)
    table.insert(2, "error_type", etype)
    table["definition"] = [[dict(preds[q].filter) for q in d if q >= 0] for d in defs]
    table["pred_ids"] = [[int(q) for q in d if q >= 0] for d in defs]
    table = table.sort_values(["rank", "p", "score", "slice"], ascending=[True, True, False,
                                                                         True],
                              na_position="last", kind="stable").reset_index(drop=True)
    info = {"threshold": thr, "error_type": etype, "columns": columns,
            "n_predicates": len(preds), "n_pairs": int(len(pairs)),
            "n_pairs_dropped": dropped, "n_relevant": n_rel, "mean_error": mean_err,
            "evaluated": int(lat.counts.get("evaluated", len(lat.size))),
            "pruned": int(lat.counts.get("pruned", 0)), "family": int(nrow),
            "tested": int(tested.sum()), "significant": int(table["significant"].sum()),
            "fdr": fdr, "fdr_method": method, "n_boot": n_boot,
            "not_tested_cap": capped, "ia": ia, "ib": ib}
    return table, info, preds, masks


def slice_members(masks: np.ndarray, definition: Any, ia: np.ndarray, ib: np.ndarray
                  ) -> np.ndarray:
    """Which pairs (image indices ``ia``, ``ib``; -1 = not in the table) lie in a slice."""
    img = np.append(slice_image_mask(masks, [int(p) for p in definition]), False)
    return img[ia] & img[ib]


def _mark_redundant(table: pd.DataFrame, defs: np.ndarray) -> None:
    """``redundant``: a slice no worse (error rate) than one of its significant parents
    (the same conjunction less one predicate); ``redundant_of`` names that parent."""
    key = {tuple(sorted(int(p) for p in d if p >= 0)): i for i, d in enumerate(defs)}
    sig = table["significant"].to_numpy()
    rate = table["error_rate"].to_numpy()
    red = np.zeros(len(table), bool)
    of = np.full(len(table), "", dtype=object)
    for i, d in enumerate(defs):
        items = tuple(sorted(int(p) for p in d if p >= 0))
        if len(items) < 2:
            continue
        for drop in range(len(items)):
            parent = key.get(items[:drop] + items[drop + 1:])
            if parent is not None and sig[parent] and rate[i] <= rate[parent]:
                red[i] = True
                of[i] = table["slice"].iat[parent]
                break
    table["redundant"] = red
    table["redundant_of"] = of
