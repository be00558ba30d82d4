"""Scores in the ChaLearn FairFace 2020 interchange format, in and out.

Predictions: CSV with header ``TEMPLATE_ID1,TEMPLATE_ID2,SCORE`` (higher = same person).
Pair file (ground truth): CSV with ``TEMPLATE_ID1,TEMPLATE_ID2`` and a label column
(``LABEL`` by default; 1 = same person, 0 = different). Template ids are facecast
``image_id`` values (paths relative to the dataset root). Pairs are matched as unordered
pairs, so a system may write either order.

Import keeps every row of the pair file: a pair without a prediction gets a NaN score and
``status = missing_score``; a duplicated prediction is an error (ambiguous); predictions for
pairs not in the pair file are reported in the log and dropped.

A pair without a feature (no face, decode error, no embedding) is written with the score
``-inf`` (under both values of ``evaluate.failed``: the file carries every comparison of
the test), and a ``-inf`` read back is such a pair (status ``no_feature``, score NaN), so
import(export(x)) counts it by the same failure rule
(:mod:`facecast.evaluate.failures`). Neither is a ``bad_score``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pandas as pd

from facecast.evaluate.folds import EVAL_FOLD
from facecast.io.atomic import write_text

log = logging.getLogger(__name__)

ID1, ID2, SCORE = "TEMPLATE_ID1", "TEMPLATE_ID2", "SCORE"


def _key(a: pd.Series, b: pd.Series) -> pd.Series:
    a = a.astype(str)
    b = b.astype(str)
    lo = a.where(a <= b, b)
    hi = b.where(a <= b, a)
    return lo + "\x1f" + hi


def read_interchange(predictions: str | os.PathLike, pairs: str | os.PathLike,
                     attributes: pd.DataFrame | None = None,
                     label_column: str = "LABEL") -> pd.DataFrame:
    """Scored pairs in facecast's evaluation layout from challenge CSV files.

    Returns ``image_a``, ``image_b``, ``identity_a``, ``identity_b`` (from ``attributes``'
    ``image_id``/``identity`` when given, else from an ``IDENTITY1``/``IDENTITY2`` column of
    the pair file, else the image id itself), ``label``, ``fold`` (``all``), ``score``,
    ``status``, ``message``.
    """
    pred = pd.read_csv(predictions, dtype={ID1: str, ID2: str})
    truth = pd.read_csv(pairs, dtype={ID1: str, ID2: str})
    for name, df, cols in (("predictions", pred, [ID1, ID2, SCORE]),
                           ("pair file", truth, [ID1, ID2, label_column])):
        missing = [c for c in cols if c not in df.columns]
        if missing:
            raise ValueError(f"{name} lacks column(s) {missing}; found {list(df.columns)}")
    pred_key = _key(pred[ID1], pred[ID2])
    dup = pred_key.duplicated(keep=False)
    if dup.any():
        raise ValueError(f"predictions hold {int(dup.sum())} rows for duplicated pairs, e.g. "
                         f"{pred.loc[dup, [ID1, ID2]].head(3).to_dict('records')}")
    score_of = pd.Series(pd.to_numeric(pred[SCORE], errors="coerce").to_numpy(np.float64),
                         index=pred_key.to_numpy())
    truth_key = _key(truth[ID1], truth[ID2])
    extra = ~pred_key.isin(truth_key)
    if extra.any():
        log.warning("%d predictions name pairs missing from the pair file; ignored",
                    int(extra.sum()))
    out = pd.DataFrame({"image_a": truth[ID1].astype(str).to_numpy(),
                        "image_b": truth[ID2].astype(str).to_numpy()})
    if attributes is not None:
        ident = attributes.set_index(attributes["image_id"].astype(str))["identity"].astype(str)
        out["identity_a"] = out["image_a"].map(ident).fillna(out["image_a"]).to_numpy(object)
        out["identity_b"] = out["image_b"].map(ident).fillna(out["image_b"]).to_numpy(object)
    elif {"IDENTITY1", "IDENTITY2"} <= set(truth.columns):
        out["identity_a"] = truth["IDENTITY1"].astype(str).to_numpy(object)
        out["identity_b"] = truth["IDENTITY2"].astype(str).to_numpy(object)
    else:
        out["identity_a"] = out["image_a"].to_numpy(object)
        out["identity_b"] = out["image_b"].to_numpy(object)
    out["label"] = pd.to_numeric(truth[label_column], errors="coerce").astype("Int64")
    out["fold"] = "all"
    score = truth_key.map(score_of).to_numpy(np.float64)
    has = truth_key.isin(pred_key).to_numpy()
    none = has & (score == -np.inf)  # the system had no feature for an image of the pair
    out["score"] = np.where(none, np.nan, score)
    out["status"] = np.where(none, "no_feature", np.where(has, "ok", "missing_score"))
    out["message"] = np.where(none, "score -inf: an image without a feature",
                              np.where(has, "", "no prediction for this pair"))
    return out


def write_interchange(pairs: pd.DataFrame, predictions: str | os.PathLike,
                      pair_file: str | os.PathLike | None = None,
                      label_column: str = "LABEL") -> None:
    """Write scored pairs as challenge CSVs (predictions, and the pair file with labels).

    Scores are written with full float precision (``repr``), so import(export(x)) == x;
    a pair without a feature (column ``failed``) as ``-inf``. Pairs outside evaluate's test
    (``eval_fold`` ``""``: a held-out ``val`` fold) are not written: the files carry the
    comparisons of the protocol's test.
    """
    if EVAL_FOLD in pairs.columns:
        pairs = pairs[pairs[EVAL_FOLD].astype(str).to_numpy() != ""]
    Path(predictions).parent.mkdir(parents=True, exist_ok=True)
    pred = pd.DataFrame({ID1: pairs["image_a"].astype(str).to_numpy(),
                         ID2: pairs["image_b"].astype(str).to_numpy(),
                         SCORE: np.where(pairs["failed"].to_numpy(bool), -np.inf,
                                         pairs["score"].to_numpy(np.float64))
                         if "failed" in pairs.columns
                         else pairs["score"].to_numpy(np.float64)})
    write_text(predictions, pred.to_csv(index=False, float_format="%.17g"))
    if pair_file is not None:
        truth = pd.DataFrame({ID1: pred[ID1], ID2: pred[ID2],
                              label_column: pairs["label"].to_numpy()})
        write_text(pair_file, truth.to_csv(index=False))
