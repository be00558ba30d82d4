"""Cross-fitting: every evaluated pair is scored by methods fitted on identities it does
not hold, and no pair is thrown away (``mitigation.calibration.folds``).

The identities are dealt into identity-disjoint folds; a fit excludes one fold (or two)
and learns on every scored pair among the other folds' identities (any protocol fold,
held-out ``val`` included); it scores the pairs whose identities sit in the folds it
excludes:

* ``protocol`` folds: the protocol's own folds (its ``fold`` column on evaluate's test
  pairs), where they are identity-disjoint - no identity in two folds, so every pair lies
  within one fold. BFW's five folds: five fits, each learning on four folds and scoring
  the fifth, as FairCal (Salvador et al., ICLR 2022) learns and tests; no pair is lost.
* ``K`` seeded folds: the protocol's identities (sorted, permuted with
  ``numpy.random.default_rng(seed)``) dealt round-robin into ``K`` folds. A pair within
  fold ``i`` is scored by the fit excluding ``i``; a pair whose identities sit in folds
  ``i`` and ``j`` by the fit excluding both (``i+j``): up to ``K + K (K - 1) / 2`` fits.

``mitigation.calibration.folds`` (:func:`fold_setting`): ``auto`` (default) = the
protocol's folds where they qualify (:func:`protocol_fold_map`), else the fraction split
(:func:`facecast.mitigation.split.split_by_fraction`); ``protocol``; an integer ``K >= 2``;
``1`` = the fraction split. A calibration source (``calibration.benchmark`` / ``.dataset``)
is one fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from facecast.evaluate.failures import DEFAULT_RULE
from facecast.mitigation.split import (
    Fit,
    Split,
    final_status,
    in_test,
    mark_failed,
    split_by_fraction,
    with_status,
)

__all__ = ["FOLD_SETTINGS", "choose_split", "fits_table", "fold_setting",
           "protocol_fold_map", "seeded_fold_map", "split_by_folds"]

#: the word settings of ``mitigation.calibration.folds`` (or an integer >= 1)
FOLD_SETTINGS = ("auto", "protocol")


def fold_setting(value: Any) -> str | int:
    """``auto``, ``protocol`` or an integer >= 1; else ``ValueError`` naming the key."""
    if isinstance(value, str) and value in FOLD_SETTINGS:
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 1:
        return int(value)
    raise ValueError(f"mitigation.calibration.folds must be 'auto', 'protocol' or an "
                     f"integer >= 1 (1 = the fraction split), got {value!r}")


def _fold_key(name: str) -> tuple[bool, int, str]:
    return (not name.isdigit(), len(name), name)


def protocol_fold_map(pairs: pd.DataFrame) -> tuple[dict[str, str] | None, str]:
    """``(identity -> fold, how)`` of the protocol's folds on evaluate's test pairs when
    they are identity-disjoint (two or more folds, no identity in two); else ``(None,
    why not)``."""
    if "fold" not in pairs.columns:
        return None, "the protocol has no fold column"
    test = pairs[in_test(pairs)]
    fold = test["fold"].astype(str)
    names = sorted(pd.unique(fold).tolist(), key=_fold_key)
    if len(names) < 2:
        return None, f"the protocol's test pairs lie in {len(names)} fold"
    who = pd.DataFrame({"identity": np.r_[test["identity_a"].astype(str).to_numpy(),
                                          test["identity_b"].astype(str).to_numpy()],
                        "fold": np.r_[fold.to_numpy(), fold.to_numpy()]})
    per = who.groupby("identity", sort=True)["fold"].nunique()
    shared = per[per > 1]
    if len(shared):
        ex = str(shared.index[0])
        where = sorted(who.loc[who["identity"] == ex, "fold"].unique(), key=_fold_key)
        return None, (f"the protocol's {len(names)} folds share identities ({len(shared)} "
                      f"of {len(per)}, e.g. {ex} in folds {', '.join(where[:3])})")
    first = who.drop_duplicates("identity")
    return dict(zip(first["identity"], first["fold"], strict=True)), \
        f"the protocol's {len(names)} identity-disjoint folds ({', '.join(names)})"


def seeded_fold_map(pairs: pd.DataFrame, k: int, seed: int) -> dict[str, str]:
    """identity -> fold ``1``..``k``: the protocol's identities (sorted, permuted with the
    seed) dealt round-robin."""
    ids = np.array(sorted(set(pairs["identity_a"].astype(str))
                          | set(pairs["identity_b"].astype(str))), dtype=object)
    perm = np.random.default_rng(int(seed)).permutation(len(ids))
    fold = np.empty(len(ids), dtype=object)
    fold[perm] = [str(1 + i % int(k)) for i in range(len(ids))]
    return dict(zip(ids.tolist(), fold.tolist(), strict=True))


def _fit_keys(fa: np.ndarray, fb: np.ndarray) -> np.ndarray:
    """The fit that scores each pair: its fold, or ``i+j`` for folds i and j."""
    lo = np.where([_fold_key(a) <= _fold_key(b) for a, b in zip(fa, fb, strict=True)],
                  fa, fb)
    hi = np.where(lo == fa, fb, fa)
    return np.where(fa == fb, fa, lo.astype(object) + "+" + hi.astype(object))


def split_by_folds(pairs: pd.DataFrame, fold_of: Mapping[str, str], how: str,
                   rule: str = DEFAULT_RULE) -> Split:
    """Cross-fitting over the identity folds ``fold_of`` (module docstring): every pair of
    evaluate's test is ``evaluated`` (its fit in column ``fit``), held-out pairs calibrate
    only; ``how`` describes the folds."""
    pairs = mark_failed(pairs)
    ia = pairs["identity_a"].astype(str).to_numpy()
    ib = pairs["identity_b"].astype(str).to_numpy()
    fa = np.array([fold_of.get(i, "") for i in ia], dtype=object)
    fb = np.array([fold_of.get(i, "") for i in ib], dtype=object)
    status = np.where(in_test(pairs), "evaluated", "held_out").astype(object)
    out = with_status(pairs, final_status(pairs, status, rule))
    out["fit"] = np.where(out["status"] == "evaluated", _fit_keys(fa, fb), "")
    usable = out["status"].isin(["evaluated", "held_out"]).to_numpy() & \
        ~out["failed"].to_numpy(bool)
    evaluated = out[out["status"] == "evaluated"]
    keys = sorted(pd.unique(evaluated["fit"]).tolist(),
                  key=lambda f: (f.count("+"), [_fold_key(x) for x in f.split("+")]))
    fits = []
    for key in keys:
        excluded = tuple(key.split("+"))
        learn = usable & ~np.isin(fa, excluded) & ~np.isin(fb, excluded)
        fits.append(Fit(key, excluded, out[learn].reset_index(drop=True),
                        np.flatnonzero(evaluated["fit"].to_numpy() == key)))
    calib = out[usable].reset_index(drop=True)
    ids = sorted(set(ia) | set(ib))
    return Split(out, ids, calib, f"cross-fitted over {how}: {len(fits)} fits, each "
                 "learning on the other folds' identities", fits,
                 "protocol" if how.startswith("the protocol") else "seeded")


def choose_split(pairs: pd.DataFrame, calibration: Mapping[str, Any], seed: int,
                 rule: str = DEFAULT_RULE) -> tuple[Split, str]:
    """The split ``mitigation.calibration`` asks for on the protocol's ``pairs`` (no
    calibration source) and a sentence on why; ``ValueError`` naming the key where the
    protocol's folds are asked for and do not qualify."""
    folds = fold_setting(calibration.get("folds", "auto"))
    frac = float(calibration.get("fraction", 0.5))
    if folds in FOLD_SETTINGS:
        fold_of, how = protocol_fold_map(pairs)
        if fold_of is not None:
            return split_by_folds(pairs, fold_of, how, rule), f"folds: {folds} - {how}"
        if folds == "protocol":
            raise ValueError(f"mitigation.calibration.folds: 'protocol' needs the "
                             f"protocol's folds to be identity-disjoint; {how}. Use an "
                             "integer (seeded identity folds) or 'auto'")
        return split_by_fraction(pairs, frac, seed, rule), (
            f"folds: auto - {how}: the fraction split")
    if folds == 1:
        return split_by_fraction(pairs, frac, seed, rule), "folds: 1 - the fraction split"
    fold_of = seeded_fold_map(pairs, folds, seed)
    how = f"{folds} seeded identity folds (seed {int(seed)})"
    return split_by_folds(pairs, fold_of, how, rule), f"folds: {folds} - {how}"


def fits_table(split: Split) -> pd.DataFrame:
    """One row per fit: ``fit``, ``excluded`` folds, calibration pairs and identities,
    ``n_evaluated`` (the pairs it scores) and ``n_left_out`` (the scored, labelled pairs
    it neither learns on nor scores: those touching its excluded folds that another fit
    scores, and with one fit the pairs used nowhere)."""
    ok = ~split.pairs["status"].isin(["bad_score", "bad_label", "invalid"]).to_numpy()
    rows = []
    for f in split.fits:
        cal = f.calibration
        n_ids = len(set(cal["identity_a"].astype(str)) | set(cal["identity_b"].astype(str)))
        rows.append({"fit": f.name, "excluded": "+".join(f.excluded) or "-",
                     "n_calibration": len(cal), "calibration_identities": n_ids,
                     "n_evaluated": len(f.rows),
                     "n_left_out": int(ok.sum()) - len(cal) - len(f.rows)})
    return pd.DataFrame(rows)
