"""How biased are the estimators that group people? Their accuracy per true group on an
attribute benchmark (``kind: fairface`` / ``utkface``; Karkkainen and Joo, WACV 2021).

For every estimate the attribute table holds (:data:`facecast.attributes.estimates.
ESTIMATES`: ``age_gender``'s gender and age, the ``fairface`` head's gender, age and race,
a ``celeba40`` head's ``Male``) and for the face detector itself, per true group of each
``group_by`` (``all``, ``race``, ``gender``, ``age`` and their intersections
``race x gender`` ...):

- ``n``: the group's images (manifest status ``ok``: images whose labels or names are bad
  are not in any group; the report counts them by status), ``n_no_face``: those whose face
  was not detected (faces status other than ``ok`` / ``aligned_input`` /
  ``landmarks_given``; a ``fallback`` centre crop counts as not detected),
  ``n_no_estimate``: detected but the scorer wrote no value, ``n_scored`` the rest;
- ``accuracy`` = right / ``n_scored`` (the estimate's class against the truth: a
  probability is its argmax, P(male) >= 0.5 is male; an age in years is binned into
  FairFace's bins, :func:`facecast.datasets.fairface.age_bin`), its Wilson interval
  (``accuracy_lo``, ``accuracy_hi``) and Fisher's exact test against the rest of the
  dataset (``p``); for the detector rows ``accuracy`` is the share of faces found of
  ``n``;
- ``mae`` (age in years, where the truth has years: UTKFace), its bootstrap interval and
  Welch's test against the rest (``p_mae``);
- ``p_adjusted`` / ``p_mae_adjusted``: Holm over every test of the table together.

A figure with fewer than ``min_n`` images behind it reads n/a, with the reason in
``note``. UTKFace's five races are compared with the FairFace head's seven collapsed
(:data:`facecast.datasets.utkface.RACE_FROM_FAIRFACE`). :func:`estimator_tables` gives the
table and the confusion of every estimate per group, from one reading of the truth, the
groups and the estimates. Writing: :mod:`facecast.labels.estimators_report`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from facecast.attributes.estimates import DETECTED, GENDER_CLASSES, Estimate, estimates_in
from facecast.datasets.fairface import FAIRFACE_AGE_BINS, FAIRFACE_RACES, age_bin
from facecast.datasets.utkface import RACE_FROM_FAIRFACE, UTK_RACES
from facecast.fairness.threshold import binomial_interval
from facecast.labels.estimators_stats import (
    bootstrap_mean_interval,
    fisher_p,
    holm,
    row_seed,
    welch_p,
)

#: true dimensions of every group_by
GROUP_BYS: dict[str, tuple[str, ...]] = {
    "all": (), "race": ("race",), "gender": ("gender",), "age": ("age",),
    "race x gender": ("race", "gender"), "race x age": ("race", "age"),
    "gender x age": ("gender", "age")}
DETECTOR = "detector"
COLUMNS = ["estimator", "attribute", "group_by", "group", "n", "n_no_face", "n_no_estimate",
           "n_scored", "n_right", "accuracy", "accuracy_lo", "accuracy_hi", "p", "p_adjusted",
           "n_years", "mae", "mae_lo", "mae_hi", "p_mae", "p_mae_adjusted", "note"]


@dataclass(frozen=True)
class Settings:
    """The ``estimators`` config section."""

    min_n: int = 30
    n_boot: int = 1000
    confidence: float = 0.95
    group_by: tuple[str, ...] = tuple(GROUP_BYS)
    seed: int = 0

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], seed: int) -> Settings:
        """Settings from the section (schema defaults filled in) and the run's seed."""
        return cls(min_n=int(cfg.get("min_n", 30)), n_boot=int(cfg.get("n_boot", 1000)),
                   confidence=float(cfg.get("confidence", 0.95)),
                   group_by=tuple(cfg.get("group_by") or GROUP_BYS), seed=int(seed))


def truth_frame(attrs: pd.DataFrame, manifest: pd.DataFrame) -> pd.DataFrame:
    """The images that enter groups (manifest status ``ok``), in attribute-table order:
    ``race``, ``gender``, ``age`` (bin), ``age_years`` (NaN without years), ``detected``
    and the attribute table's columns."""
    ok = set(manifest.loc[manifest["status"].astype(str) == "ok", "image_id"].astype(str))
    df = attrs[attrs["image_id"].astype(str).isin(ok)].reset_index(drop=True)
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


def _counts(scored: dict[str, np.ndarray], member: np.ndarray) -> dict[str, int]:
    return {k: int(v[member].sum()) for k, v in scored.items()}


def _accuracy_cells(c: dict[str, int], tot: dict[str, int], s: Settings,
                    detector: bool) -> dict[str, Any]:
    """Accuracy, interval and test of one group (n/a below ``min_n``)."""
    n_trials = c["n"] if detector else c["n_scored"]
    rest = (tot["n"] - c["n"]) if detector else (tot["n_scored"] - c["n_scored"])
    out: dict[str, Any] = {"accuracy": np.nan, "accuracy_lo": np.nan, "accuracy_hi": np.nan,
                           "p": np.nan}
    notes = []
    what = "images" if detector else "scored faces"
    if n_trials < s.min_n:
        notes.append(f"accuracy: n/a ({n_trials} {what} < estimators.min_n {s.min_n})")
        return out | {"notes": notes}
    lo, hi = binomial_interval(np.array([c["n_right"]]), np.array([n_trials]), s.confidence)
    out.update(accuracy=c["n_right"] / n_trials, accuracy_lo=float(lo[0]),
               accuracy_hi=float(hi[0]))
    if rest == 0:
        notes.append("p: n/a (the whole dataset: no rest to compare)")
    elif rest < s.min_n:
        notes.append(f"p: n/a (the rest has {rest} {what} < estimators.min_n {s.min_n})")
    else:
        out["p"] = fisher_p(c["n_right"], n_trials, tot["n_right"] - c["n_right"], rest)
    return out | {"notes": notes}


def _mae_cells(err: np.ndarray, member: np.ndarray, s: Settings, key: str,
               why_not: str) -> dict[str, Any]:
    """MAE (years), its bootstrap interval and Welch's test of one group."""
    out: dict[str, Any] = {"n_years": 0, "mae": np.nan, "mae_lo": np.nan, "mae_hi": np.nan,
                           "p_mae": np.nan, "notes": []}
    if why_not:
        out["notes"].append(f"mae: n/a ({why_not})")
        return out
    have = np.isfinite(err)
    mine, rest = err[member & have], err[~member & have]
    out["n_years"] = int(mine.size)
    if mine.size < s.min_n:
        out["notes"].append(f"mae: n/a ({mine.size} scored faces with years < "
                            f"estimators.min_n {s.min_n})")
        return out
    lo, hi = bootstrap_mean_interval(mine, s.n_boot, s.confidence, row_seed(s.seed, key))
    out.update(mae=float(mine.mean()), mae_lo=lo, mae_hi=hi)
    if rest.size >= s.min_n:
        out["p_mae"] = welch_p(mine, rest)
    elif rest.size:
        out["notes"].append(f"p_mae: n/a (the rest has {rest.size} < estimators.min_n "
                            f"{s.min_n})")
    else:
        out["notes"].append("p_mae: n/a (no rest with years to compare)")
    return out


def estimate_rows(truth: pd.DataFrame, name: str, attribute: str, pred: np.ndarray | None,
                  years: np.ndarray | None, classes: Mapping[str, Sequence[str]],
                  labels: Mapping[str, np.ndarray], s: Settings,
                  mae_why_not: str = "") -> list[dict[str, Any]]:
    """The table rows of one estimate (``pred`` None: the detector rows; ``labels``: each
    group_by's :func:`group_labels`)."""
    detector = pred is None
    det = truth["detected"].to_numpy(bool)
    if detector:
        scored = det
        right = det
    else:
        scored = det & pd.notna(pred)
        right = scored & (pred == truth[attribute].to_numpy(dtype=object))
    arrays = {"n": np.ones(len(truth), bool), "n_no_face": ~det, "n_scored": scored,
              "n_right": right}
    tot = _counts(arrays, np.ones(len(truth), bool))
    err = (np.where(scored, np.abs(years - truth["age_years"].to_numpy(np.float64)), np.nan)
           if years is not None else None)
    rows = []
    for gb in s.group_by:
        lab = labels[gb]
        for g in group_order(lab, gb, classes):
            member = lab == g
            c = _counts(arrays, member)
            c["n_no_estimate"] = c["n"] - c["n_no_face"] - c["n_scored"]
            acc = _accuracy_cells(c, tot, s, detector)
            row = {"estimator": name, "attribute": attribute, "group_by": gb, "group": g, **c}
            notes = acc.pop("notes")
            row.update(acc)
            if err is not None or mae_why_not:
                mae = _mae_cells(err if err is not None else np.array([]), member, s,
                                 f"{name}|{attribute}|{gb}|{g}", mae_why_not)
                notes += mae.pop("notes")
                row.update(mae)
            row["note"] = "; ".join(notes)
            rows.append(row)
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
    the classes of each true dimension, each group_by's :func:`group_labels` and every
    estimate's :func:`predict`."""

    frame: pd.DataFrame
    classes: dict[str, tuple[str, ...]]
    labels: dict[str, np.ndarray]
    predictions: list[tuple[Estimate, np.ndarray, np.ndarray]]


def _truth(attrs: pd.DataFrame, manifest: pd.DataFrame, s: Settings) -> _Truth:
    truth = truth_frame(attrs, manifest)
    races, race_map = race_classes(truth)
    return _Truth(truth, {"race": races, "gender": GENDER_CLASSES, "age": FAIRFACE_AGE_BINS},
                  {gb: group_labels(truth, gb) for gb in s.group_by},
                  [(est, *predict(truth, est, race_map))
                   for est in estimates_in(list(attrs.columns))])


def estimator_tables(attrs: pd.DataFrame, manifest: pd.DataFrame, s: Settings
                     ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The estimator report's table (:data:`COLUMNS`; see the module docstring) and the
    confusion of every estimate per group (:func:`_confusion_table`)."""
    t = _truth(attrs, manifest, s)
    return _estimator_table(t, s), _confusion_table(t, s)


def _estimator_table(t: _Truth, s: Settings) -> pd.DataFrame:
    truth = t.frame
    rows = estimate_rows(truth, DETECTOR, "face", None, None, t.classes, t.labels, s)
    for est, pred, years in t.predictions:
        why = _years_why_not(truth, est)
        rows += estimate_rows(truth, est.estimator, est.attribute, pred,
                              years if est.kind == "years" and not why else None,
                              t.classes, t.labels, s, mae_why_not=why)
    table = pd.DataFrame(rows)
    for col in COLUMNS:
        if col not in table:
            table[col] = np.nan if col not in ("note",) else ""
    family = np.concatenate([table["p"].to_numpy(np.float64),
                             table["p_mae"].to_numpy(np.float64)])
    adjusted = holm(family)
    table["p_adjusted"] = adjusted[:len(table)]
    table["p_mae_adjusted"] = adjusted[len(table):]
    table["n_years"] = table["n_years"].fillna(0).astype(np.int64)
    return table[COLUMNS]


def _confusion_table(t: _Truth, s: Settings) -> pd.DataFrame:
    """Per estimate, group and true class: how the scored faces were classified
    (``count``, ``n_true``, ``rate`` = count / n_true with its Wilson interval; n/a below
    ``min_n`` true faces, said in ``note``)."""
    truth, classes, labels = t.frame, t.classes, t.labels
    det = truth["detected"].to_numpy(bool)
    frames = []
    for est, pred, _ in t.predictions:
        true = truth[est.attribute].to_numpy(dtype=object)
        scored = det & pd.notna(pred) & pd.notna(true)
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
