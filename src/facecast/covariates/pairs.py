"""Pairs for the covariate model: scored pairs joined to per-image covariates.

Each unordered pair counts once: (a, b) and (b, a), and repeats of either, are one pair
(the first occurrence is kept, so its image order decides which image is ``a``). The
feature vector of a pair is [covariates of image a, covariates of image b, pair features],
with pair features such as ``absdiff:label_age`` = |age_a - age_b|.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from facecast.evaluate.failures import failed_mask

log = logging.getLogger(__name__)

#: pair-feature kinds: name -> f(value_a, value_b)
PAIR_FEATURES = {
    "absdiff": lambda a, b: np.abs(a - b),
    "mean": lambda a, b: 0.5 * (a + b),
    "min": np.minimum,
    "max": np.maximum,
}


def parse_pair_feature(spec: str) -> tuple[str, str]:
    """``"absdiff:label_age"`` -> ("absdiff", "label_age"); raises ValueError when malformed."""
    kind, sep, column = str(spec).partition(":")
    if not sep or kind not in PAIR_FEATURES or not column:
        raise ValueError(f"pair feature {spec!r}: expected <kind>:<column> with kind one of "
                         f"{sorted(PAIR_FEATURES)}")
    return kind, column


def feature_names(covariates: Sequence[str], pair_features: Sequence[str],
                  per_image: bool = True) -> list[str]:
    """Names of the feature columns, in model order."""
    names = [f"{c}_a" for c in covariates] + [f"{c}_b" for c in covariates] if per_image else []
    return names + [str(s) for s in pair_features]


def features_from_sides(side_a: pd.DataFrame, side_b: pd.DataFrame, covariates: Sequence[str],
                        pair_features: Sequence[str], per_image: bool = True) -> np.ndarray:
    """Feature matrix (n, d) from per-image covariate columns of both images of each pair."""
    cols = []
    if per_image:
        cols += [side_a[c].to_numpy(float) for c in covariates]
        cols += [side_b[c].to_numpy(float) for c in covariates]
    for spec in pair_features:
        kind, column = parse_pair_feature(spec)
        cols.append(PAIR_FEATURES[kind](side_a[column].to_numpy(float),
                                        side_b[column].to_numpy(float)))
    return np.column_stack(cols) if cols else np.zeros((len(side_a), 0))


@dataclass
class PairSet:
    """Unique scored pairs with their features; ``counts`` says what was left out and why."""

    pairs: pd.DataFrame          # image_a, image_b, label, score + the per-image covariates
    x: np.ndarray                # (n, d) features
    y: np.ndarray                # (n,) scores
    label: np.ndarray            # (n,) 1 = match, 0 = non-match
    names: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    #: pairs without a feature (no face, decode error, no embedding) with complete
    #: covariates: ``image_a``, ``image_b``, ``label`` and the per-image covariates; no
    #: fit sees them, the empirical rates count them under ``evaluate.failed: nonmatch``
    failed: pd.DataFrame | None = None


def _canonical_key(a: pd.Series, b: pd.Series) -> pd.Series:
    a, b = a.astype(str), b.astype(str)
    lo = a.where(a <= b, b)
    hi = b.where(a <= b, a)
    return lo + "\x00" + hi


def build_pairs(scores: pd.DataFrame, attributes: pd.DataFrame, covariates: Sequence[str],
                pair_features: Sequence[str] = (), *, per_image: bool = True,
                include_val: bool = True) -> PairSet:
    """Unique, scored (status ok) pairs with complete covariates, and counts of the rest;
    the pairs without a feature (:func:`facecast.evaluate.failures.failed_mask`) with
    complete covariates go to :attr:`PairSet.failed` (counted in ``failed``).

    ``scores`` is an evaluation Parquet (image_a, image_b, label, score, status[, fold]);
    ``attributes`` has ``image_id`` and the covariate columns. Every input row is accounted
    for in ``counts``: duplicate (same unordered pair again), self_pair, not_ok (status),
    val_fold (when ``include_val`` is false), missing_covariate, used.
    """
    needed = list(dict.fromkeys([*covariates, *(parse_pair_feature(s)[1]
                                                for s in pair_features)]))
    missing = [c for c in needed if c not in attributes.columns]
    if missing:
        raise ValueError(f"covariate columns not in attributes.parquet: {missing}")
    for col in ("image_a", "image_b", "label", "score"):
        if col not in scores.columns:
            raise ValueError(f"scores table lacks column {col!r}")
    df = scores.reset_index(drop=True)
    counts = {"input": int(len(df))}
    failed = failed_mask(df)
    keep = np.ones(len(df), bool)
    if "status" in df.columns:
        bad = (df["status"].astype(str) != "ok").to_numpy() & ~failed
        counts["not_ok"] = int(bad.sum())
        keep &= ~bad
    if not include_val and "fold" in df.columns:
        val = (df["fold"].astype(str) == "val").to_numpy() & keep
        counts["val_fold"] = int(val.sum())
        keep &= ~val
    self_pair = (df["image_a"].astype(str) == df["image_b"].astype(str)).to_numpy() & keep
    counts["self_pair"] = int(self_pair.sum())
    keep &= ~self_pair
    key = _canonical_key(df["image_a"], df["image_b"])
    # later repeats (either order) of a pair that is kept so far
    first_kept = ~pd.Series(key[keep]).duplicated(keep="first").to_numpy()
    kept_idx = np.flatnonzero(keep)
    dup = np.zeros(len(df), bool)
    dup[kept_idx[~first_kept]] = True
    counts["duplicate"] = int(dup.sum())
    keep &= ~dup
    failed_rows = df[keep & failed].reset_index(drop=True)
    counts["failed"] = int((keep & failed).sum())
    df = df[keep & ~failed].reset_index(drop=True)
    attr = attributes.drop_duplicates("image_id").set_index(attributes["image_id"]
                                                            .drop_duplicates().astype(str))
    attr = attr[needed]
    side_a = attr.reindex(df["image_a"].astype(str)).reset_index(drop=True)
    side_b = attr.reindex(df["image_b"].astype(str)).reset_index(drop=True)
    x = features_from_sides(side_a, side_b, covariates, pair_features, per_image)
    y = df["score"].to_numpy(float)
    finite = np.isfinite(x).all(axis=1) & np.isfinite(y)
    counts["missing_covariate"] = int((~finite).sum())
    counts["used"] = int(finite.sum())
    if counts["missing_covariate"]:
        log.warning("%d pairs lack a covariate or score and are left out",
                    counts["missing_covariate"])
    out = df.loc[finite, ["image_a", "image_b", "label", "score"]].reset_index(drop=True)
    for c in needed:
        out[f"{c}_a"] = side_a.loc[finite, c].to_numpy(float)
        out[f"{c}_b"] = side_b.loc[finite, c].to_numpy(float)
    fa = attr.reindex(failed_rows["image_a"].astype(str)).reset_index(drop=True)
    fb = attr.reindex(failed_rows["image_b"].astype(str)).reset_index(drop=True)
    whole = (np.isfinite(fa.to_numpy(float)).all(axis=1)
             & np.isfinite(fb.to_numpy(float)).all(axis=1))
    lost = failed_rows.loc[whole, ["image_a", "image_b", "label"]].reset_index(drop=True)
    for c in needed:
        lost[f"{c}_a"] = fa.loc[whole, c].to_numpy(float)
        lost[f"{c}_b"] = fb.loc[whole, c].to_numpy(float)
    return PairSet(pairs=out, x=x[finite], y=y[finite],
                   label=out["label"].to_numpy().astype(int),
                   names=feature_names(covariates, pair_features, per_image), counts=counts,
                   failed=lost)
