"""One error type's slices: the lattice over its relevant pairs, the family table, the
tests of the candidates and the ranks (:func:`search_family`, :func:`test_family`).

The Benjamini-Hochberg family of a run is, over every searched error type, each slice
of the lattice (conjunctions of up to ``max_depth`` predicates of different columns)
that was evaluated and has at least ``min_genuine`` (FNMR) / ``min_impostor`` (FMR)
relevant pairs, plus each conjunction the bounds pruned before its support was known
although every one of its predicates has that support (``pruned_supported``, counted
with p = 1; :mod:`facecast.slices.search`). Per error type its size is

    S1 + C - U

with S1 the predicates that have the minimum support, C the conjunctions of depth
2..max_depth of such predicates (of different columns), and U the conjunctions of C that
the search evaluated and found below the minimum. S1 and C follow from the attributes
and the labels alone; U does not: which conjunctions are evaluated is decided by
SliceLine's score bounds, which read the errors at the threshold (a parent with no error
or a bound <= 0 prunes its children; with no error at all nothing deeper is evaluated
and U = 0). So the family depends on the errors, through the pruning only, and lies
between the slices whose own support reaches the minimum (the errors prune nothing that
counts) and S1 + C (they prune everything they can); pruning never removes a slice
whose support reaches the minimum. Only candidates (a positive SliceLine score, enough
pairs of the other label and identities) get a real p; every other member keeps p = 1.
Raising p-values or adding members with p = 1 only raises BH's q-values, so the
correction is at least as strict as BH over the slices that reach the support with
their own p-values. The candidates and the pruning are chosen with the same errors the
tests read, so the run's level is checked on nulls (tests/test_slices_null.py,
benchmarks/slices_null.py), not derived.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from facecast.slices.predicates import Predicate, pair_members, slice_image_mask
from facecast.slices.search import enumerate_slices, score
from facecast.slices.testing import Design

log = logging.getLogger(__name__)

#: membership cells (pairs x slices) per block of tested slices
BLOCK_CELLS = 1 << 24
#: ``slices.pair`` defaults: genuine pairs fail when either image is poor (pair quality is
#: the worse image's, as EDC takes it; identity-level attributes are the same on both
#: images); demographic FMR differentials live in same-group impostor pairs (NIST IR 8280)
PAIR_DEFAULTS = {"fnmr": "either", "fmr": "both"}
#: per error type: its relevant label, the minimum-support key, the other label's key
ERRORS = {"fnmr": (True, "min_genuine", "min_impostor", "genuine", "impostor"),
          "fmr": (False, "min_impostor", "min_genuine", "impostor", "genuine")}


@dataclass
class Scored:
    """The searched pairs (evaluate's test pairs with a 0/1 label that the failure rule
    counts; a pair without a feature at score ``-inf`` under ``nonmatch``):
    table, folds, labels, errors at the one threshold, image indices (-1 = not in the
    attribute table)."""

    pairs: pd.DataFrame
    folds: np.ndarray
    label: np.ndarray
    error: np.ndarray
    ia: np.ndarray
    ib: np.ndarray
    threshold: dict[str, Any]


@dataclass
class Space:
    """The predicates, their image masks and columns."""

    columns: list[str]
    preds: list[Predicate]
    masks: np.ndarray
    col_of: np.ndarray

    def text(self, definition: np.ndarray) -> str:
        return " and ".join(self.preds[p].text for p in definition if p >= 0)

    def members(self, definition: np.ndarray, ia: np.ndarray, ib: np.ndarray, pair: str
                ) -> np.ndarray:
        """The pairs ``(ia, ib)`` in the slice ``definition``."""
        return pair_members(slice_image_mask(self.masks, definition), ia, ib, pair)


def pair_rule(cfg: Mapping[str, Any], etype: str) -> str:
    """``slices.pair`` of error type ``etype`` (a mapping per error type, or one rule for
    both): ``both`` or ``either``."""
    rule = cfg.get("pair", PAIR_DEFAULTS)
    if isinstance(rule, str):
        return rule
    return str({**PAIR_DEFAULTS, **dict(rule)}[etype])


@dataclass
class Family:
    """One error type's family: its pair rule, rows (``table``), their predicate
    ``defs``, the relevant pairs (``rel`` over the searched pairs, ``design`` for the
    tests) and ``counts`` (lattice, family size, tests)."""

    etype: str
    pair: str
    rel: np.ndarray
    design: Design
    table: pd.DataFrame
    defs: np.ndarray
    counts: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rel_ab: tuple[np.ndarray, np.ndarray] = (np.zeros(0, int), np.zeros(0, int))
        self.other_ab: tuple[np.ndarray, np.ndarray] = (np.zeros(0, int), np.zeros(0, int))
        self.other_err = np.zeros(0, bool)

    def attach(self, scored: Scored) -> None:
        """Image indices of the relevant pairs (design order) and of the other label's."""
        order = self.design.order
        self.rel_ab = (scored.ia[self.rel][order], scored.ib[self.rel][order])
        self.other_ab = (scored.ia[~self.rel], scored.ib[~self.rel])
        self.other_err = scored.error[~self.rel]

    def members(self, space: Space, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Membership ``(pairs, len(rows))`` of the slices ``rows`` over the relevant pairs
        (design order) and over the other label's pairs."""
        img = np.stack([slice_image_mask(space.masks, self.defs[r]) for r in rows], 1)
        return (pair_members(img, *self.rel_ab, self.pair),
                pair_members(img, *self.other_ab, self.pair))


def search_family(scored: Scored, space: Space, etype: str, cfg: Mapping[str, Any]
                  ) -> Family:
    """The lattice of ``etype`` over its relevant pairs and its family table (supports,
    errors, score, the effect against the rest from the counts)."""
    relevant, min_key = ERRORS[etype][0], ERRORS[etype][1]
    rel = scored.label == relevant
    min_rel = int(cfg[min_key])
    err = scored.error[rel]
    lat = enumerate_slices(space.masks, space.col_of, scored.ia[rel], scored.ib[rel], err,
                           max_depth=int(cfg["max_depth"]), min_support=min_rel,
                           alpha=float(cfg["alpha"]), pair=pair_rule(cfg, etype))
    n_rel = int(rel.sum())
    mean_err = float(err.mean()) if n_rel else float("nan")
    keep = np.flatnonzero(lat.size >= min_rel)
    size, errors = lat.size[keep], lat.errors[keep]
    defs = lat.defs[keep]
    with np.errstate(divide="ignore", invalid="ignore"):
        rest = (err.sum() - errors) / (n_rel - size)
        rate = errors / np.maximum(size, 1)
    table = pd.DataFrame({
        "slice": [space.text(d) for d in defs],
        "columns": [" & ".join(space.preds[p].column for p in d if p >= 0) for d in defs],
        "error_type": etype, "depth": lat.depth[keep], "size": size.astype(np.int64),
        "errors": errors.astype(np.int64), "error_rate": rate,
        "score": score(errors, size, n_rel, mean_err, float(cfg["alpha"])) if n_rel
        else np.full(len(keep), np.nan), "rest_rate": rest, "effect": rate - rest})
    counts = {"n_relevant": n_rel, "mean_error": mean_err,
              "evaluated": int(lat.counts["evaluated"]), "pruned": int(lat.counts["pruned"]),
              "pruned_supported": int(lat.counts["pruned_supported"]),
              "family": int(len(keep) + lat.counts["pruned_supported"])}
    design = Design(scored.pairs["identity_a"].to_numpy()[rel],
                    scored.pairs["identity_b"].to_numpy()[rel], err)
    fam = Family(etype, pair_rule(cfg, etype), rel, design, table, defs, counts)
    fam.attach(scored)
    return fam


def candidates(fam: Family, cfg: Mapping[str, Any]) -> tuple[list[int], int]:
    """Rows to test: a positive SliceLine score, best first (at most ``max_tested``), and
    how many positive-score rows the cap left untested."""
    sc = fam.table["score"].to_numpy()
    order = np.argsort(-np.nan_to_num(sc, nan=-np.inf), kind="stable")
    cand = [int(i) for i in order[sc[order] > 0]]
    cap = int(cfg.get("max_tested", 0))
    if cap and len(cand) > cap:
        return cand[:cap], len(cand) - cap
    return cand, 0


def test_family(fam: Family, scored: Scored, space: Space, cfg: Mapping[str, Any]) -> None:
    """Supports of both labels, identities, the clustered test and the interval of every
    candidate, in blocks of slices; the other rows keep p = 1 with a note saying why."""
    t = fam.table
    nrow = len(t)
    cols = {c: np.full(nrow, -1, np.int64) for c in ("n_genuine", "n_impostor",
                                                       "n_identities", "fnm", "fm")}
    res = {c: np.full(nrow, np.nan) for c in ("z", "error_lo", "error_hi")}
    p, tested = np.ones(nrow), np.zeros(nrow, bool)
    note = np.full(nrow, "not tested: score <= 0 (no worse than average)", dtype=object)
    cand, capped = candidates(fam, cfg)
    if capped:
        note[np.asarray(candidates(fam, {})[0][len(cand):], int)] = (
            "not tested: beyond slices.max_tested")
        log.warning("slices.max_tested: %d positive-score %s slices beyond the first %d "
                    "were not tested (p = 1)", capped, fam.etype, len(cand))
    _, _, other_key, _, other_word = ERRORS[fam.etype]
    min_other, min_ids = int(cfg[other_key]), int(cfg["min_identities"])
    block = int(max(1, min(128, BLOCK_CELLS // max(len(scored.pairs), 1))))
    own = ("n_genuine", "fnm") if fam.etype == "fnmr" else ("n_impostor", "fm")
    theirs = ("n_impostor", "fm") if fam.etype == "fnmr" else ("n_genuine", "fnm")
    for start in tqdm(range(0, len(cand), block), desc=f"testing {fam.etype} slices",
                      unit="block", mininterval=5, disable=len(cand) < 200 * block):
        rows = np.asarray(cand[start:start + block])
        m, m_other = fam.members(space, rows)
        cols[own[0]][rows], cols[own[1]][rows] = t["size"].to_numpy()[rows], t[
            "errors"].to_numpy()[rows]
        cols[theirs[0]][rows] = _count(m_other)
        cols[theirs[1]][rows] = _count(m_other[fam.other_err])
        r = fam.design.test(m, None, float(cfg["confidence"]))
        cols["n_identities"][rows] = r.n_ids
        other = cols["n_impostor" if fam.etype == "fnmr" else "n_genuine"][rows]
        ok = (other >= min_other) & (r.n_ids >= min_ids)
        for j in np.flatnonzero(~ok):
            note[rows[j]] = (f"not tested: {other[j]} {other_word} pairs (min {min_other}), "
                             f"{r.n_ids[j]} identities (min {min_ids})")
        done = rows[ok]
        tested[done], p[done], note[done] = True, r.p[ok], ""
        for c, v in (("z", r.z), ("error_lo", r.rate_lo), ("error_hi", r.rate_hi)):
            res[c][done] = v[ok]
    for c, v in {**cols, **res}.items():
        t[c] = v
    t["p"], t["tested"], t["note"] = p, tested, note
    fam.counts.update(candidates=len(cand), tested=int(tested.sum()), not_tested_cap=capped)


def _count(m: np.ndarray) -> np.ndarray:
    """Members per column of a boolean matrix."""
    return np.add.reduce(m.view(np.uint8), axis=0, dtype=np.int64)


def rank_family(fam: Family) -> None:
    """``rank`` (Int64, 1 = best) of the significant rows: SliceLine score, the simplest
    first at equal score, then by text."""
    t = fam.table
    sig = t.index[t["significant"].to_numpy()]
    order = t.loc[sig].assign(_neg=-t.loc[sig, "score"]).sort_values(
        ["_neg", "depth", "slice"], kind="stable").index
    t["rank"] = pd.array([pd.NA] * len(t), dtype="Int64")
    t.loc[order, "rank"] = np.arange(1, len(order) + 1)
    fam.counts["significant"] = int(len(order))
