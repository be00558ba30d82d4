"""How biased are the estimators that group people? Their accuracy per true group on an
attribute benchmark (``kind: fairface`` / ``utkface``; Karkkainen and Joo, WACV 2021).

For every estimate the attribute table holds (:data:`facecast.attributes.estimates.
ESTIMATES`: ``age_gender``'s gender and age, the ``fairface`` head's gender, age and race,
a ``celeba40`` head's ``Male``; imported classifiers passed as ``extra``) and for the face
detector itself, per true group of each ``group_by`` (``all``, ``race``, ``gender``,
``age`` and their intersections ``race x gender`` ...):

- which images: manifest status ``ok`` (images whose labels or names are bad are in no
  group; the report counts them by status) and, for FairFace, the splits of
  ``estimators.fairface_splits`` (default ``val``; the other splits are counted by split).
  An estimator's own training images (:data:`facecast.attributes.estimates.TRAINED_ON`,
  or ``estimators.imports.<name>.trained_on``) are left out of its figures and counted in ``n_train_excluded``;
- ``n``: the group's images in the estimate's figures, ``n_no_face``: those whose face
  was not detected (faces status other than ``ok`` / ``aligned_input`` /
  ``landmarks_given``; a ``fallback`` centre crop counts as not detected; an estimate that
  needs no detection, such as an imported classifier's, has none), ``n_no_estimate``:
  detected but without a value, ``n_scored`` the rest;
- ``accuracy`` = right / ``n_scored`` (the estimate's class against the truth: a
  probability is its argmax, P(male) >= 0.5 is male; an age in years is binned into
  FairFace's bins, :func:`facecast.datasets.fairface.age_bin`) with its Wilson interval;
  ``accuracy_all`` = right / ``n`` (a missed face or a missing value is wrong) with its
  interval; for the detector rows ``accuracy`` is the share of faces found of ``n`` (an
  upper bound: the benchmarks' images were themselves cut out by a detector);
- ``accuracy_std`` / ``mae_std``: directly standardised to the dataset's age mix over
  FairFace's age bins (:mod:`facecast.labels.estimators_strata`; n/a for a grouping by
  age);
- ``p``: the Cochran-Mantel-Haenszel test of the group against the rest, stratified by age
  (race, gender and their intersections; a race x age cell is thereby tested within its
  bin) or by race x gender (age), named in ``stratified_by``; ``p_raw``: Fisher's exact
  test on the pooled rows;
- ``mae`` (age in years, where the truth has years: UTKFace), its bootstrap interval,
  ``p_mae``: a permutation test within the same strata, ``p_mae_raw``: Welch's test;
- ``p_adjusted`` / ``p_mae_adjusted``: Holm over every stratified test of the estimate
  (one ``family`` per estimator and attribute).

A figure with fewer than ``min_n`` images behind it reads n/a, with the reason in
``note``. UTKFace's five races are compared with the FairFace head's seven collapsed
(:data:`facecast.datasets.utkface.RACE_FROM_FAIRFACE`). :func:`estimator_tables` gives the
table and the confusion of every estimate per group, from one reading of the truth, the
groups and the estimates. Rows: :mod:`facecast.labels.estimators_rows`; writing:
:mod:`facecast.labels.estimators_report`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from facecast.attributes.estimates import (
    DETECTED,
    GENDER_CLASSES,
    TRAINED_ON,
    Estimate,
    estimates_in,
    trained_splits,
)
from facecast.datasets.fairface import FAIRFACE_AGE_BINS, FAIRFACE_RACES, age_bin
from facecast.datasets.utkface import RACE_FROM_FAIRFACE, UTK_RACES
from facecast.fairness.threshold import binomial_interval
from facecast.labels.estimators_rows import (
    STRATA,
    Grouping,
    Outcome,
    Settings,
    accuracy_block,
    mae_block,
    permutation_tests,
)
from facecast.labels.estimators_stats import holm
from facecast.labels.estimators_strata import codes

#: true dimensions of every group_by
GROUP_BYS: dict[str, tuple[str, ...]] = {
    "all": (), "race": ("race",), "gender": ("gender",), "age": ("age",),
    "race x gender": ("race", "gender"), "race x age": ("race", "age"),
    "gender x age": ("gender", "age")}
DETECTOR = "detector"
COLUMNS = ["estimator", "attribute", "group_by", "group", "n", "n_train_excluded",
           "n_no_face", "n_no_estimate", "n_scored", "n_right", "accuracy", "accuracy_lo",
           "accuracy_hi", "accuracy_all", "accuracy_all_lo", "accuracy_all_hi",
           "accuracy_std", "stratified_by", "p_raw", "p", "p_adjusted", "n_years", "mae",
           "mae_lo", "mae_hi", "mae_std", "p_mae_raw", "p_mae", "p_mae_adjusted", "family",
           "note"]
#: said on every detector row
DETECTOR_NOTE = ("detector: an upper bound (FairFace and UTKFace images were themselves cut "
                 "out by a face detector)")
__all__ = ["COLUMNS", "DETECTOR", "GROUP_BYS", "TRAINED_ON", "Settings", "estimator_tables",
           "truth_frame"]


def split_column(attrs: pd.DataFrame, manifest: pd.DataFrame) -> pd.Series:
    """Each attribute row's split (the attribute table's, else the manifest's, else
    ``all``)."""
    if "split" in attrs:
        return attrs["split"].astype(str)
    if "split" in manifest:
        return attrs["image_id"].astype(str).map(
            manifest.set_index(manifest["image_id"].astype(str))["split"].astype(str)
        ).fillna("all")
    return pd.Series("all", index=attrs.index)


def truth_frame(attrs: pd.DataFrame, manifest: pd.DataFrame,
                splits: Collection[str] | None = None) -> pd.DataFrame:
    """The images that enter groups (manifest status ``ok``; of the ``splits`` when given),
    in attribute-table order: ``race``, ``gender``, ``age`` (bin), ``age_years`` (NaN
    without years), ``detected``, ``split`` and the attribute table's columns."""
    ok = set(manifest.loc[manifest["status"].astype(str) == "ok", "image_id"].astype(str))
    split = split_column(attrs, manifest)
    keep = attrs["image_id"].astype(str).isin(ok) & (split.isin(list(splits))
                                                     if splits else True)
    df = attrs[keep.to_numpy()].reset_index(drop=True)
    for col in ("label_race", "label_gender", "label_age_bin"):
        if col not in df:
            raise KeyError(f"the attribute table lacks {col}: the estimator report needs a "
                           "dataset of kind fairface or utkface")
    out = df.copy()
    out["race"] = df["label_race"].astype(object)
    out["gender"] = df["label_gender"].astype(object)
    out["age"] = df["label_age_bin"].astype(object)
    out["age_years"] = (pd.to_numeric(df["label_age"], errors="coerce") if "label_age" in df
                        else np.nan)
    out["detected"] = df["status"].astype(str).isin(DETECTED).to_numpy()
    out["split"] = split[keep.to_numpy()].to_numpy()
    return out


def race_classes(truth: pd.DataFrame) -> tuple[tuple[str, ...], dict[str, str] | None]:
    """The dataset's race classes and the map from FairFace's seven onto them (None when
    they are FairFace's own)."""
    seen = set(truth["race"].dropna().astype(str))
    if seen <= set(FAIRFACE_RACES):
        return FAIRFACE_RACES, None
    if seen <= set(UTK_RACES):
        return UTK_RACES, dict(RACE_FROM_FAIRFACE)
    raise ValueError(f"race labels {sorted(seen - set(FAIRFACE_RACES))} are neither "
                     "FairFace's nor UTKFace's classes")


def predict(attrs: pd.DataFrame, est: Estimate,
            race_map: Mapping[str, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(class, years)`` per row: the estimate's class (object, None where it has no
    value) and, for an age in years, the years (else NaN)."""
    n = len(attrs)
    years = np.full(n, np.nan)
    if est.kind == "probability":
        p = pd.to_numeric(attrs[est.columns[0]], errors="coerce").to_numpy(np.float64)
        cls = np.where(p >= 0.5, est.classes[1], est.classes[0]).astype(object)
        cls[~np.isfinite(p)] = None
    elif est.kind == "argmax":
        m = attrs[list(est.columns)].apply(pd.to_numeric, errors="coerce").to_numpy(np.float64)
        good = np.isfinite(m).all(axis=1)
        idx = np.argmax(np.where(np.isfinite(m), m, -np.inf), axis=1)
        cls = np.asarray(est.classes, dtype=object)[idx]
        cls[~good] = None
    elif est.kind == "years":
        years = pd.to_numeric(attrs[est.columns[0]], errors="coerce").to_numpy(np.float64)
        cls = age_bin(years)
    elif est.kind == "label":  # the class itself, already in the dataset's spelling
        col = attrs[est.columns[0]].astype(object)
        cls = col.where(col.isin(list(est.classes)), None).to_numpy(dtype=object)
        return cls, years
    else:
        raise ValueError(f"unknown estimate kind {est.kind!r}")
    if est.attribute == "race" and race_map:
        mapped = pd.Series(cls, dtype=object).map(race_map)
        cls = mapped.to_numpy(dtype=object)
        cls[mapped.isna().to_numpy()] = None
    return cls, years


def group_labels(truth: pd.DataFrame, group_by: str) -> np.ndarray:
    """Each image's group under ``group_by`` (``Black / Female``; None where a value is
    missing). Joined once per distinct combination, not per image."""
    dims = GROUP_BYS[group_by]
    if not dims:
        return np.full(len(truth), "all", dtype=object)
    codes, uniques = zip(*(pd.factorize(truth[d], use_na_sentinel=True) for d in dims),
                         strict=True)
    known = np.logical_and.reduce([c >= 0 for c in codes])
    shape = tuple(max(len(u), 1) for u in uniques)
    flat = np.full(len(truth), -1, dtype=np.int64)
    flat[known] = np.ravel_multi_index(tuple(c[known] for c in codes), shape)
    out = np.full(len(truth), None, dtype=object)
    for f in np.unique(flat[known]):
        idx = np.unravel_index(f, shape)
        out[flat == f] = " / ".join(str(u[i]) for u, i in zip(uniques, idx, strict=True))
    return out


def group_order(labels: np.ndarray, group_by: str, classes: Mapping[str, Sequence[str]]
                ) -> list[str]:
    """The groups of ``group_by`` present in ``labels``, in class order (races, genders,
    bins as listed)."""
    dims = GROUP_BYS[group_by]
    if not dims:
        return ["all"]
    present = set(pd.unique(labels[pd.notna(labels)]))
    combos: list[list[str]] = [[]]
    for d in dims:
        combos = [c + [v] for c in combos for v in classes[d]]
    return [g for g in (" / ".join(c) for c in combos) if g in present]


def groupings(truth: pd.DataFrame, labels: Mapping[str, np.ndarray],
              classes: Mapping[str, Sequence[str]], group_by: Sequence[str]
              ) -> dict[str, Grouping]:
    """Each group_by's :class:`Grouping`: group codes in class order and the strata of its
    tests (:data:`facecast.labels.estimators_rows.STRATA`)."""
    out = {}
    for gb in group_by:
        names = group_order(labels[gb], gb, classes)
        code = pd.Series(labels[gb], dtype=object).map(
            {g: i for i, g in enumerate(names)}).fillna(-1).to_numpy(np.int64)
        dims = STRATA.get(gb, ())
        stratum, size = (codes(*(truth[d].to_numpy(dtype=object) for d in dims)) if dims
                         else (np.zeros(len(truth), np.int64), 1))
        out[gb] = Grouping(gb, code, names, stratum, size, " x ".join(dims),
                           "age" in GROUP_BYS[gb])
    return out


def outcome(truth: pd.DataFrame, attribute: str, pred: np.ndarray | None,
            years: np.ndarray | None, excluded_splits: Collection[str] = (),
            needs_detection: bool = True) -> Outcome:
    """What an estimate did on every row (``pred`` None: the detector)."""
    excluded = truth["split"].isin(list(excluded_splits)).to_numpy() if excluded_splits \
        else np.zeros(len(truth), bool)
    use = ~excluded
    found = truth["detected"].to_numpy(bool) if needs_detection else np.ones(len(truth), bool)
    if pred is None:
        return Outcome(use, excluded, found, found, found, None)
    scored = found & pd.notna(pred)
    right = scored & (pred == truth[attribute].to_numpy(dtype=object))
    err = (np.where(scored, np.abs(years - truth["age_years"].to_numpy(np.float64)), np.nan)
           if years is not None else None)
    return Outcome(use, excluded, found, scored, right, err)


def estimate_rows(name: str, attribute: str, o: Outcome, groups: Mapping[str, Grouping],
                  age: np.ndarray, s: Settings, mae_why_not: str = "") -> list[dict[str, Any]]:
    """The table rows of one estimate (``o``: :func:`outcome`; ``age``: each row's age-bin
    code in FairFace's bins, the standardisation's strata)."""
    rows = []
    key = f"{name}|{attribute}"
    tests = permutation_tests(o, list(groups.values()), s, key) if o.err is not None else {}
    for g in groups.values():
        acc = accuracy_block(o, g, age, FAIRFACE_AGE_BINS, s, name == DETECTOR)
        mae = (mae_block(o, g, age, FAIRFACE_AGE_BINS, s, key, tests)
               if o.err is not None else
               [{"note_list": [f"mae: n/a ({mae_why_not})"]}] * len(acc) if mae_why_not
               else [{"note_list": []}] * len(acc))
        for a, m in zip(acc, mae, strict=True):
            notes = a.pop("note_list") + m["note_list"]
            if name == DETECTOR:
                notes.append(DETECTOR_NOTE)
            rows.append({"estimator": name, "attribute": attribute, **a,
                         **{k: v for k, v in m.items() if k != "note_list"},
                         "note": "; ".join(n for n in notes if n)})
    return rows


def _years_why_not(truth: pd.DataFrame, est: Estimate) -> str:
    """Why an age estimate has no MAE here ('' when it has one)."""
    if est.attribute != "age":
        return ""
    if est.kind != "years":
        return "the estimate is an age bin, not years"
    if not np.isfinite(truth["age_years"].to_numpy(np.float64)).any():
        return "the truth is an age bin (FairFace), not years"
    return ""


@dataclass(frozen=True)
class _Truth:
    """What both tables read, computed once: the images in groups (:func:`truth_frame`),
    the classes of each true dimension, each group_by's :func:`group_labels` and
    :func:`groupings`, each row's age-bin code, and every estimate's :func:`predict` with
    its :func:`outcome`."""

    frame: pd.DataFrame
    classes: dict[str, tuple[str, ...]]
    labels: dict[str, np.ndarray]
    groups: dict[str, Grouping]
    age: np.ndarray
    predictions: list[tuple[Estimate, np.ndarray, np.ndarray, Outcome]]


def _truth(attrs: pd.DataFrame, manifest: pd.DataFrame, s: Settings, kind: str,
           extra: Sequence[Estimate], detection_free: Collection[str]) -> _Truth:
    truth = truth_frame(attrs, manifest, s.fairface_splits if kind == "fairface" else None)
    races, race_map = race_classes(truth)
    classes = {"race": races, "gender": GENDER_CLASSES, "age": FAIRFACE_AGE_BINS}
    labels = {gb: group_labels(truth, gb) for gb in s.group_by}
    age = pd.Series(truth["age"], dtype=object).map(
        {b: i for i, b in enumerate(FAIRFACE_AGE_BINS)}).fillna(-1).to_numpy(np.int64)
    preds = []
    for est in [*estimates_in(list(attrs.columns)), *extra]:
        pred, years = predict(truth, est, race_map)
        why = _years_why_not(truth, est)
        preds.append((est, pred, years, outcome(
            truth, est.attribute, pred, years if est.kind == "years" and not why else None,
            trained_splits(est.estimator, kind, s.trained_on),
            est.estimator not in detection_free)))
    return _Truth(truth, classes, labels, groupings(truth, labels, classes, s.group_by), age,
                  preds)


def estimator_tables(attrs: pd.DataFrame, manifest: pd.DataFrame, s: Settings,
                     kind: str = "", extra: Sequence[Estimate] = (),
                     detection_free: Collection[str] | None = None
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The estimator report's table (:data:`COLUMNS`; see the module docstring) and the
    confusion of every estimate per group (:func:`_confusion_table`).

    ``kind``: the dataset's kind (``fairface`` / ``utkface``: which training splits to
    leave out, which splits to report); ``extra``: estimates beyond the built-in ones
    (imported classifiers: their columns in ``attrs``); ``detection_free``: the estimators
    that need no detected face (default: those of ``extra``)."""
    free = {e.estimator for e in extra} if detection_free is None else set(detection_free)
    t = _truth(attrs, manifest, s, kind, extra, free)
    return _estimator_table(t, s), _confusion_table(t, s)


def _estimator_table(t: _Truth, s: Settings) -> pd.DataFrame:
    truth = t.frame
    rows = estimate_rows(DETECTOR, "face", outcome(truth, "face", None, None), t.groups,
                         t.age, s)
    for est, _, _, o in t.predictions:
        rows += estimate_rows(est.estimator, est.attribute, o, t.groups, t.age, s,
                              mae_why_not=_years_why_not(truth, est))
    table = pd.DataFrame(rows)
    for col in COLUMNS:
        if col not in table:
            table[col] = np.nan if col not in ("note", "stratified_by") else ""
    table["family"] = table["estimator"] + " / " + table["attribute"]
    table["p_adjusted"] = np.nan
    table["p_mae_adjusted"] = np.nan
    for _, idx in table.groupby("family", sort=False).groups.items():
        fam = np.concatenate([table.loc[idx, "p"].to_numpy(np.float64),
                              table.loc[idx, "p_mae"].to_numpy(np.float64)])
        adjusted = holm(fam)
        table.loc[idx, "p_adjusted"] = adjusted[:len(idx)]
        table.loc[idx, "p_mae_adjusted"] = adjusted[len(idx):]
    table["n_years"] = table["n_years"].fillna(0).astype(np.int64)
    return table[COLUMNS]


def _confusion_table(t: _Truth, s: Settings) -> pd.DataFrame:
    """Per estimate, group and true class: how the scored faces (not the estimator's
    training images) were classified
    (``count``, ``n_true``, ``rate`` = count / n_true with its Wilson interval; n/a below
    ``min_n`` true faces, said in ``note``)."""
    truth, classes, labels = t.frame, t.classes, t.labels
    frames = []
    for est, pred, _, o in t.predictions:
        true = truth[est.attribute].to_numpy(dtype=object)
        scored = o.use & o.scored & pd.notna(true)
        long = pd.DataFrame({
            "group_by": np.repeat(np.asarray(s.group_by, dtype=object), scored.sum()),
            "group": np.concatenate([labels[gb][scored] for gb in s.group_by]),
            "true": np.tile(true[scored], len(s.group_by)),
            "predicted": np.tile(pred[scored], len(s.group_by))})
        if long.empty:
            continue
        counts = long.groupby(["group_by", "group", "true", "predicted"]).size()
        n_true = long.groupby(["group_by", "group", "true"]).size()
        cls = classes[est.attribute]
        grid = pd.MultiIndex.from_tuples(
            [(gb, g, t, p) for gb in s.group_by for g in group_order(labels[gb], gb, classes)
             for t in cls if (gb, g, t) in n_true.index for p in cls],
            names=["group_by", "group", "true", "predicted"])
        out = counts.reindex(grid, fill_value=0).rename("count").reset_index()
        out["n_true"] = n_true.reindex(pd.MultiIndex.from_frame(
            out[["group_by", "group", "true"]])).to_numpy()
        out.insert(0, "attribute", est.attribute)
        out.insert(0, "estimator", est.estimator)
        frames.append(out)
    if not frames:
        return pd.DataFrame(columns=["estimator", "attribute", "group_by", "group", "true",
                                     "predicted", "count", "n_true", "rate", "rate_lo",
                                     "rate_hi", "note"])
    conf = pd.concat(frames, ignore_index=True)
    small = conf["n_true"].to_numpy() < s.min_n
    lo, hi = binomial_interval(conf["count"].to_numpy(), conf["n_true"].to_numpy(),
                               s.confidence)
    conf["rate"] = np.where(small, np.nan, conf["count"] / conf["n_true"])
    conf["rate_lo"] = np.where(small, np.nan, lo)
    conf["rate_hi"] = np.where(small, np.nan, hi)
    conf["note"] = np.where(small, [f"n/a ({k} true faces < estimators.min_n {s.min_n})"
                                    for k in conf["n_true"]], "")
    return conf
