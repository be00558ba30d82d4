"""Find the attribute slices where a model errs most and group them into findings.

:func:`find_slices` is the whole analysis on in-memory tables; the stage and the CLI
(:mod:`facecast.slices.stage`) read and write files around it. Its steps, each a function:

1. the searched pairs and ONE global threshold (:func:`score_pairs`,
   :func:`global_threshold`);
2. the predicates (:func:`predicate_space`);
3. per error type (``slices.error_types``: FNMR over genuine pairs, FMR over impostor
   pairs): the lattice and the family table, the tests of the candidates
   (:mod:`facecast.slices.family`);
4. false-discovery control over the family of both error types together
   (:func:`control_fdr`);
5. per error type: ranks and findings (:func:`make_findings`,
   :mod:`facecast.slices.findings`);
6. the other error rate, notes and the 10-fold accuracy of the slices a user reads
   (:func:`annotate`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from facecast.analysis.filtering import DEFAULT_STATUSES, benchmark_pool
from facecast.evaluate.failures import DEFAULT_RULE, FAILED_SCORE, check_rule, failed_mask
from facecast.evaluate.folds import scored_folds
from facecast.evaluate.metrics import (
    equal_error_rate,
    far_resolvable,
    kfold_accuracy,
    min_impostors,
    roc_points,
)
from facecast.fairness.threshold import thresholds_at_fmr
from facecast.slices.bootstrap import bootstrap_rates
from facecast.slices.family import (
    PAIR_DEFAULTS,
    Family,
    Scored,
    Space,
    rank_family,
    search_family,
    test_family,
)
from facecast.slices.findings import Candidate, group_findings
from facecast.slices.predicates import build_predicates, slice_columns
from facecast.slices.testing import adjust

log = logging.getLogger(__name__)

#: the schema's defaults of the keys the search reads (tests/test_slices.py checks them)
DEFAULTS: dict[str, Any] = {
    "error_types": ["fnmr", "fmr"], "pair": PAIR_DEFAULTS, "max_depth": 2, "min_genuine": 32,
    "min_impostor": 32, "min_identities": 5, "alpha": 0.95, "n_boot": 1000,
    "confidence": 0.95, "fdr": 0.05, "fdr_method": "bh", "max_tested": 0,
    "finding_overlap": 0.5, "max_findings": 20, "report_top": 10, "threshold": {}}


@dataclass
class SliceSearch:
    """What :func:`find_slices` found: every slice (``table``), the findings, the counts
    (``info``), the predicates and the searched pairs."""

    table: pd.DataFrame
    findings: pd.DataFrame
    info: dict[str, Any]
    space: Space
    scored: Scored


def settings(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``cfg`` over :data:`DEFAULTS`."""
    return {**DEFAULTS, **dict(cfg)}


def global_threshold(scores: np.ndarray, labels: np.ndarray, cfg: Mapping[str, Any]
                     ) -> dict[str, Any]:
    """The one threshold over all pairs (accept iff ``score >= t``): ``threshold.policy``
    fmr (the lowest t with FMR <= ``threshold.value`` over every impostor pair) where the
    impostors resolve that FMR, else - or with policy eer - the EER threshold; ``why``
    says why the policy asked for was not used ('' when it was)."""
    tcfg = dict(cfg.get("threshold") or {})
    asked = str(tcfg.get("policy", "fmr"))
    value = float(tcfg.get("value", 1e-3))
    y = np.asarray(labels).astype(bool)
    if asked not in ("fmr", "eer"):
        raise ValueError(f"slices.threshold.policy must be fmr or eer, got {asked!r}")
    resolvable = bool(far_resolvable(int((~y).sum()), value))
    policy, why = asked, ""
    if asked == "fmr" and not resolvable:
        policy = "eer"
        why = (f"FMR {value:g} needs >= {min_impostors(value)} impostor pairs, the protocol "
               f"has {int((~y).sum())}: the EER threshold instead")
    if policy == "fmr":
        t = float(thresholds_at_fmr(scores[~y], [value])[0])
    else:
        t = float(equal_error_rate(*roc_points(scores, y.astype(int)))[1]) if (
            y.any() and (~y).any()) else float("nan")
    if not np.isfinite(t):
        why = "; ".join(w for w in (why, "no threshold: the protocol needs genuine and "
                                          "impostor pairs (every error rate is n/a)") if w)
    ok = np.isfinite(t)
    return {"policy": policy, "requested": asked, "value": value, "why": why,
            "threshold": t, "resolvable": resolvable, "n_genuine": int(y.sum()),
            "n_impostor": int((~y).sum()),
            "fnmr": float((scores[y] < t).mean()) if y.any() and ok else float("nan"),
            "fmr": float((scores[~y] >= t).mean()) if (~y).any() and ok else float("nan")}


def threshold_text(thr: Mapping[str, Any]) -> str:
    """The threshold in words: which policy, its value, and why when it fell back."""
    head = (f"FMR {thr['value']:g}" if thr["policy"] == "fmr" else "EER") + (
        f": t = {thr['threshold']:.6g}")
    return head + (f" ({thr['why']})" if thr.get("why") else "")


def slice_accuracy(pairs: pd.DataFrame, member: np.ndarray, folds: np.ndarray,
                   thresholds: str = "insightface") -> tuple[float, float, str]:
    """10-fold best-threshold accuracy (mean, std) of a slice's pairs, each in its fold of
    the whole protocol (``folds``: :func:`facecast.evaluate.folds.scored_folds`, ``""`` =
    outside the test), with a note when it cannot be computed (one label only, fewer than
    two folds)."""
    keep = np.asarray(member, bool) & (folds != "")
    sub, sub_folds = pairs.loc[keep], folds[keep]
    if sub["label"].nunique() < 2 or len(np.unique(sub_folds)) < 2:
        return float("nan"), float("nan"), "accuracy n/a (needs both labels in >= 2 folds)"
    acc = kfold_accuracy(sub["score"].to_numpy(), sub["label"].to_numpy(), sub_folds,
                         thresholds)
    return acc.mean, acc.std, ""


def score_pairs(pairs: pd.DataFrame, image_ids: pd.Index, cfg: Mapping[str, Any],
                accuracy: Mapping[str, Any]) -> tuple[Scored, dict[str, int]]:
    """The searched pairs - evaluate's test pairs (fold rule of
    :func:`facecast.evaluate.folds.scored_folds`) with a 0/1 label that the failure rule
    ``accuracy["failed"]`` counts (``evaluate.failed``: under ``nonmatch`` a pair without a
    feature at score ``-inf``, an error when genuine; under ``drop`` left out) - their
    errors at the one threshold, and the counts of pairs left out and without a feature."""
    rule = check_rule(str(accuracy.get("failed", DEFAULT_RULE)))
    folds = scored_folds(pairs, n_folds=int(accuracy.get("n_folds", 10)),
                         seed=int(accuracy.get("seed", 0)),
                         include_val=bool(accuracy.get("include_val", False)))
    in_test = folds != ""
    s = pd.to_numeric(pairs["score"], errors="coerce").to_numpy(np.float64).copy()
    lab = pd.to_numeric(pairs["label"], errors="coerce").to_numpy(np.float64)
    failed = failed_mask(pairs) & np.isin(lab, (0, 1))
    s[failed] = FAILED_SCORE
    ok = (np.isfinite(s) | (failed & (rule == "nonmatch"))) & np.isin(lab, (0, 1)) & in_test
    counts = {"n_pairs_dropped": int((~ok & in_test).sum()),
              "n_pairs_held_out": int((~in_test).sum()),
              "n_failed": int((failed & in_test).sum()), "failed": rule}
    y = lab[ok].astype(bool)
    kept = pairs.loc[ok].reset_index(drop=True).assign(score=s[ok], label=y.astype(int))
    thr = global_threshold(s[ok], y, cfg)
    err = np.where(y, s[ok] < thr["threshold"], s[ok] >= thr["threshold"])
    ia = image_ids.get_indexer(kept["image_a"].astype(str))
    ib = image_ids.get_indexer(kept["image_b"].astype(str))
    return Scored(kept, folds[ok], y, err, ia, ib, thr), counts


def predicate_space(attributes: pd.DataFrame, cfg: Mapping[str, Any],
                    statuses: tuple[str, ...]) -> Space:
    """The slice columns, their predicates over the benchmark pool and image masks."""
    attrs = attributes.reset_index(drop=True)
    columns = slice_columns(list(attrs.columns), cfg)
    n = len(attrs)
    status = (attrs["status"].astype(str).to_numpy() if "status" in attrs
              else np.full(n, statuses[0]))
    exclude = (attrs["exclude"].fillna(False).astype(bool).to_numpy() if "exclude" in attrs
               else np.zeros(n, bool))
    preds, masks = build_predicates(attrs, columns, benchmark_pool(status, exclude, statuses),
                                    cfg)
    col_of = np.array([columns.index(p.column) for p in preds], np.int64)
    return Space(columns, preds, masks, col_of)


def control_fdr(fams: list[Family], cfg: Mapping[str, Any]) -> float:
    """``q`` (BH/BY over the family of every error type; see
    :mod:`facecast.slices.family`) and ``significant`` (tested, ``q <= fdr``, a positive
    effect) of every row; returns the BH p cut-off (the largest significant p, 0 if
    none)."""
    m = sum(f.counts["family"] for f in fams)
    q = adjust(np.concatenate([f.table["p"].to_numpy() for f in fams]),
               str(cfg["fdr_method"]), n_tests=m)
    cutoff, start = 0.0, 0
    for f in fams:
        t = f.table
        t["q"] = q[start:start + len(t)]
        start += len(t)
        t["significant"] = t["tested"].to_numpy() & (t["q"].to_numpy() <= float(cfg["fdr"])) & (
            t["effect"].to_numpy() > 0)
        if t["significant"].any():
            cutoff = max(cutoff, float(t.loc[t["significant"], "p"].max()))
    return cutoff


def find_slices(pairs: pd.DataFrame, attributes: pd.DataFrame, cfg: Mapping[str, Any], *,
                seed: int, statuses: tuple[str, ...] = DEFAULT_STATUSES,
                accuracy: Mapping[str, Any] | None = None) -> SliceSearch:
    """Every slice of the family of each error type with its supports, errors, effect, p,
    q, rank and finding, and the findings.

    ``pairs``: ``image_a``, ``image_b``, ``identity_a``, ``identity_b``, ``label``,
    ``score`` (rows with a non-finite score or a label other than 0/1 are left out and
    counted; so are pairs outside evaluate's test, e.g. ``val``). ``attributes``:
    ``image_id`` + columns (``status``/``exclude`` select the pool as benchmarks do).
    ``accuracy``: the ``evaluate`` settings of the 10-fold accuracy (threshold grid, folds;
    :func:`facecast.evaluate.targets.job_config`), so a slice's accuracy is evaluate's rule.
    """
    cfg = settings(cfg)
    acc_cfg = dict(accuracy or {})
    attrs = attributes.reset_index(drop=True)
    scored, counts = score_pairs(pairs, pd.Index(attrs["image_id"].astype(str)), cfg,
                                 acc_cfg)
    space = predicate_space(attrs, cfg, tuple(statuses))
    fams = []
    for etype in cfg["error_types"]:
        t0 = time.perf_counter()
        fam = search_family(scored, space, etype, cfg)
        test_family(fam, scored, space, cfg)
        fam.counts["seconds"] = time.perf_counter() - t0
        fams.append(fam)
    cutoff = control_fdr(fams, cfg)
    unit = float(cfg["fdr"]) / max(sum(f.counts["family"] for f in fams), 1)
    found: list[pd.DataFrame] = []
    for k, fam in enumerate(fams):
        t0 = time.perf_counter()
        rank_family(fam)
        found.append(make_findings(fam, scored, space, cfg, (unit, cutoff),
                                   sum(len(f) for f in found), seed + k))
        fam.counts["seconds"] += time.perf_counter() - t0
    annotate(fams, found, scored, space, cfg, acc_cfg)
    table = pd.concat([f.table for f in fams], ignore_index=True) if fams else pd.DataFrame()
    findings = pd.concat(found, ignore_index=True) if found else pd.DataFrame()
    info = {"threshold": scored.threshold, "error_types": list(cfg["error_types"]),
            "pair": {f.etype: f.pair for f in fams}, "columns": space.columns,
            "n_predicates": len(space.preds), "n_pairs": int(len(scored.pairs)), **counts,
            "by_error": {f.etype: f.counts for f in fams},
            **{k: int(sum(f.counts[k] for f in fams))
               for k in ("evaluated", "pruned", "family", "tested", "significant",
                         "findings")},
            "fdr": float(cfg["fdr"]), "fdr_method": str(cfg["fdr_method"]),
            "bh_cutoff": cutoff, "n_boot": int(cfg["n_boot"]),
            "finding_overlap": float(cfg["finding_overlap"])}
    return SliceSearch(table, findings, info, space, scored)


def make_findings(fam: Family, scored: Scored, space: Space, cfg: Mapping[str, Any],
                  levels: tuple[float, float], start: int, seed: int) -> pd.DataFrame:
    """Group the significant slices of ``fam`` into findings (``finding`` of each row) and
    return the findings table (:data:`FINDING_COLUMNS`), representatives' error-rate
    intervals from the streamed identity bootstrap. ``levels``: ``fdr / m`` and the
    family's BH cut-off; ``start``: findings of earlier error types."""
    t = fam.table
    ranked = t.index[t["rank"].notna()][np.argsort(t.loc[t["rank"].notna(), "rank"]
                                                   .to_numpy(np.int64), kind="stable")]
    errors, depth, text = (t[c].to_numpy() for c in ("errors", "depth", "slice"))
    children = _children(fam.defs)
    cands = []
    for first in range(0, len(ranked), 256):
        rows = np.asarray(ranked[first:first + 256], np.int64)
        member = fam.members(space, rows)[0]
        for j, r in enumerate(rows):
            preds = frozenset(int(q) for q in fam.defs[r] if q >= 0)
            cands.append(Candidate(int(r), np.flatnonzero(member[:, j]), float(errors[r]),
                                   int(depth[r]), str(text[r]), preds,
                                   children.get(preds, 0)))
    g = group_findings(fam.design, cands, overlap=float(cfg["finding_overlap"]),
                       unit=levels[0], first=levels[1], fdr=float(cfg["fdr"]), start=start,
                       max_findings=int(cfg["max_findings"]),
                       alpha=float(cfg["alpha"]), confidence=float(cfg["confidence"]))
    t["finding"] = pd.array([g.finding.get(i, pd.NA) for i in range(len(t))], dtype="Int64")
    for row, why in g.notes.items():
        t.at[row, "note"] = why
    idx = {c.row: c.idx for c in cands}
    lo, hi = bootstrap_rates(fam.design, [idx[r] for r in g.reps], int(cfg["n_boot"]), seed,
                             float(cfg["confidence"]))
    rows = []
    rank = t["rank"].to_numpy(dtype=np.float64, na_value=np.inf)
    for k, rep in enumerate(g.reps):
        r = t.loc[rep]
        members = sorted(g.members[k + 1], key=lambda m: (rank[m], m))
        rows.append({"finding": k + 1, "error_type": fam.etype, "slice": r["slice"],
                     "definition": [dict(space.preds[p].filter) for p in fam.defs[rep]
                                    if p >= 0],
                     "columns": r["columns"], "size": int(r["size"]),
                     "n_identities": int(r["n_identities"]), "error_rate": r["error_rate"],
                     "error_lo": lo[k], "error_hi": hi[k], "rest_rate": r["rest_rate"],
                     "effect": r["effect"], "p": r["p"], "q": r["q"], "p_beyond": g.p_beyond[k],
                     "overlap_max": g.overlap_max[k],
                     "members": [str(text[m]) for m in members],
                     "n_members": len(members), "row": int(rep),
                     "pred_ids": [int(q) for q in fam.defs[rep] if q >= 0]})
    fam.counts["findings"] = len(rows)
    return pd.DataFrame(rows, columns=FINDING_COLUMNS)


#: columns of findings.parquet (and, internal: ``row``, the representative's row in its
#: error type's table, and ``pred_ids``, its predicates; neither is written)
FINDING_COLUMNS = ["finding", "error_type", "slice", "definition", "columns", "size",
                   "n_identities", "error_rate", "error_lo", "error_hi", "rest_rate",
                   "effect", "p", "q", "p_beyond", "overlap_max", "members", "n_members",
                   "row", "pred_ids"]


def _children(defs: np.ndarray) -> dict[frozenset[int], int]:
    """Per predicate set, how many slices of the family extend it by one predicate."""
    depth = (defs >= 0).sum(1)
    two = defs[depth == 2][:, :2]
    counts = np.bincount(two.ravel(), minlength=int(defs.max()) + 1 if defs.size else 0)
    out = {frozenset([int(p)]): int(c) for p, c in enumerate(counts) if c}
    for d in defs[depth == 3]:  # max_depth 3 only
        for drop in range(3):
            parent = frozenset(int(q) for k, q in enumerate(d) if k != drop)
            out[parent] = out.get(parent, 0) + 1
    return out


def annotate(fams: list[Family], found: list[pd.DataFrame], scored: Scored, space: Space,
             cfg: Mapping[str, Any], acc_cfg: Mapping[str, Any]) -> None:
    """The other error rates at the threshold and their resolvability, the definitions,
    the 10-fold accuracy of the findings and the ``report_top`` shown slices; each table
    sorted (rank, then p) and each findings table given its accuracy."""
    thr = scored.threshold
    for fam, fd in zip(fams, found, strict=True):
        t = fam.table
        with np.errstate(divide="ignore", invalid="ignore"):
            t["fnmr"] = np.where(t["n_genuine"] > 0, t["fnm"] / t["n_genuine"], np.nan)
            t["fmr"] = np.where(t["n_impostor"] > 0, t["fm"] / t["n_impostor"], np.nan)
        n_imp = t["n_impostor"].to_numpy()
        fmr_ok = far_resolvable(np.clip(n_imp, 0, None), thr["value"]) if (
            thr["policy"] == "fmr") else n_imp > 0
        t["fmr_resolvable"] = (n_imp >= 0) & fmr_ok
        why = (f"FMR n/a (fewer than 1/FMR = {min_impostors(thr['value'])} impostor pairs)"
               if thr["policy"] == "fmr" else "FMR n/a (no impostor pair)")
        _add_note(t, (n_imp >= 0) & ~fmr_ok, why)
        t["accuracy"], t["accuracy_std"] = np.nan, np.nan
        shown = [int(r) for r in fd["row"]] + shown_rows(t, int(cfg["report_top"]))
        for row in dict.fromkeys(shown):
            m = space.members(fam.defs[row], scored.ia, scored.ib, fam.pair)
            acc, sd, why_acc = slice_accuracy(scored.pairs, m, scored.folds,
                                              str(acc_cfg.get("thresholds", "insightface")))
            t.loc[row, ["accuracy", "accuracy_std"]] = acc, sd
            _add_note(t, np.arange(len(t)) == row, why_acc)
        fd["accuracy"] = t.loc[fd["row"].to_numpy(int), "accuracy"].to_numpy() if len(fd) \
            else np.zeros(0)
        filters = [dict(p.filter) for p in space.preds]
        t["definition"] = [[filters[q] for q in d if q >= 0] for d in fam.defs]
        t["pred_ids"] = [[int(q) for q in d if q >= 0] for d in fam.defs]
        fam.table = t.sort_values(["rank", "p", "score", "slice"],
                                  ascending=[True, True, False, True], na_position="last",
                                  kind="stable").reset_index(drop=True)
        del fd["row"]


def shown_rows(table: pd.DataFrame, top: int) -> list[int]:
    """The rows a report shows: the ``top`` best ranked, else the ``top`` lowest p tested."""
    ranked = table.index[table["rank"].notna()]
    if len(ranked):
        return [int(i) for i in table.loc[ranked, "rank"].sort_values().index[:top]]
    tested = table.index[table["tested"].to_numpy()]
    return [int(i) for i in table.loc[tested, "p"].sort_values(kind="stable").index[:top]]


def _add_note(table: pd.DataFrame, where: np.ndarray, text: str) -> None:
    """Append ``text`` to the note of the rows ``where`` ("; "-joined)."""
    if not text or not np.any(where):
        return
    old = table.loc[where, "note"].astype(str)
    table.loc[where, "note"] = np.where(old == "", text, old + "; " + text)
