"""Stage ``features``: prominent facial features from dlib landmarks (results/{ds}/features/).

Per shard: the landmark shard of the attributes stage
(:mod:`facecast.attributes.landmarks68`): dlib's 68 points fitted once inside the MTCNN
box on the stored facenet crop, mapped back to image pixels, with shape measurements and
a PnP head pose. The ``ofiq`` scorer's job writes it from its own fit (rule
``attributes_ofiq``); where that scorer does not run, :func:`run_features_shard` (rule
``features_shard``) makes the same table. Every faces row is kept: ``status`` ok |
no_face (faces status not usable) | no_crop | landmark_error.

Merge (:func:`run_features_merge`): images pass the near-frontal filter (|yaw| <=
``max_yaw``, |pitch| <= ``max_pitch``; others keep their measures with ``frontal`` False
and are left out of what follows); per identity a normal-normal shrinkage estimate
(:func:`shrink`); percentiles and z-scores against a reference population (identities of
``reference`` split: all | train | test, recorded in every row); per-feature ICC(1)
reliability (:func:`icc1`); prominent labels at the ``low``/``high`` percentile cuts
("wide nose" / "narrow nose"), with firing rates per fairness group.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.attributes.landmarks68 import MEASURES
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.labels.html import write_html

__all__ = ["FEATURES_DEFAULTS", "PROMINENT_WORDS", "icc1", "percentile_of",
           "prominent_labels", "run_features_merge", "run_features_shard", "shrink"]

log = logging.getLogger(__name__)

#: measure -> (word below the low cut, word above the high cut); a measure not listed here
#: gets no prominent label
PROMINENT_WORDS: dict[str, tuple[str, str]] = {
    "nose_width": ("narrow nose", "wide nose"),
    "nose_height": ("short nose", "long nose"),
    "eye_distance": ("close-set eyes", "wide-set eyes"),
    "eye_area": ("small eyes", "big eyes"),
    "brow_arch": ("straight eyebrows", "arched eyebrows"),
    "mouth_width": ("small mouth", "wide mouth"),
    "lip_thickness": ("thin lips", "full lips"),
    "chin_flatness": ("pointed chin", "flat chin"),
    "face_aspect": ("round face", "long face"),
}

FEATURES_DEFAULTS: dict[str, Any] = {
    "enabled": False, "crop": "facenet", "max_yaw": 25.0, "max_pitch": 25.0,
    "reference": "all", "low": 0.10, "high": 0.90, "min_images": 1,
}


def merged_cfg(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """``features`` config over :data:`FEATURES_DEFAULTS`."""
    return FEATURES_DEFAULTS | dict(cfg or {})


def run_features_shard(faces_path: str | os.PathLike, out_path: str | os.PathLike, *,
                       provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The landmark shard of one faces shard (one output row per faces row) where the
    ``ofiq`` scorer does not fit the points
    (:func:`facecast.attributes.landmarks68.run_landmark_shard`)."""
    from facecast.attributes.landmarks68 import run_landmark_shard

    return run_landmark_shard(faces_path, out_path, provenance=dict(provenance or {})
                              | {"stage": "features"})


def shrink(values: np.ndarray, groups: np.ndarray) -> pd.DataFrame:
    """Normal-normal (empirical Bayes) shrinkage of per-group means toward the grand mean.

    Within-group variance s2 (pooled), between-group variance tau2 (method of moments,
    floored at 1e-12), prior mean mu (mean of group means). Group i with n_i values and
    mean m_i: B_i = tau2 / (tau2 + s2 / n_i), estimate = mu + B_i (m_i - mu). As n_i grows
    the estimate tends to m_i; with one image it is pulled furthest toward mu (all the way
    when tau2 -> 0). Returns one row per group: n, mean, estimate, weight, mu, tau2, s2.
    """
    df = pd.DataFrame({"g": np.asarray(groups), "x": np.asarray(values, dtype=float)}).dropna()
    agg = df.groupby("g", sort=True)["x"].agg(["size", "mean", "var"])
    n_i = agg["size"].to_numpy(dtype=float)
    m_i = agg["mean"].to_numpy()
    dof = float((n_i - 1).sum())
    s2 = float(np.nansum(agg["var"].to_numpy() * (n_i - 1)) / dof) if dof > 0 else 0.0
    mu = float(m_i.mean()) if m_i.size else np.nan
    tau2 = max(float(np.var(m_i, ddof=1)) - float(np.mean(s2 / n_i)), 1e-12) \
        if m_i.size > 1 else 1e-12
    b = tau2 / (tau2 + s2 / n_i) if s2 > 0 else np.ones_like(n_i)
    return pd.DataFrame({"group": agg.index, "n": n_i.astype(int), "mean": m_i,
                         "estimate": mu + b * (m_i - mu), "weight": b, "mu": mu,
                         "tau2": tau2, "s2": s2})


def icc1(values: np.ndarray, groups: np.ndarray) -> tuple[float, int]:
    """One-way random-effects ICC(1) with unequal group sizes; (icc, n_groups used).

    Groups with one value carry no within-group information and are left out; NaN when
    fewer than two groups remain.
    """
    df = pd.DataFrame({"g": np.asarray(groups), "x": np.asarray(values, dtype=float)}).dropna()
    sizes = df.groupby("g")["x"].transform("size")
    df = df[sizes >= 2]
    k = df["g"].nunique()
    if k < 2:
        return float("nan"), int(k)
    n_tot = len(df)
    agg = df.groupby("g")["x"].agg(["size", "mean"])
    grand = df["x"].mean()
    ssb = float((agg["size"] * (agg["mean"] - grand) ** 2).sum())
    ssw = float(((df["x"] - df.groupby("g")["x"].transform("mean")) ** 2).sum())
    msb, msw = ssb / (k - 1), ssw / (n_tot - k)
    n0 = (n_tot - float((agg["size"] ** 2).sum()) / n_tot) / (k - 1)
    den = msb + (n0 - 1) * msw
    return (float((msb - msw) / den) if den > 0 else float("nan")), int(k)


def percentile_of(values: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Mid-rank percentile (0..1) of each value within ``reference`` (NaN stays NaN)."""
    ref = np.sort(np.asarray(reference, dtype=float)[np.isfinite(reference)])
    v = np.asarray(values, dtype=float)
    if ref.size == 0:
        return np.full(v.shape, np.nan)
    lo = np.searchsorted(ref, v, side="left")
    hi = np.searchsorted(ref, v, side="right")
    return np.where(np.isfinite(v), (lo + hi) / (2.0 * ref.size), np.nan)


def prominent_labels(pct: pd.DataFrame, low: float, high: float) -> list[list[str]]:
    """Per row, the prominent-feature phrases whose percentile is <= low or >= high."""
    out: list[list[str]] = [[] for _ in range(len(pct))]
    for m, (lo_word, hi_word) in PROMINENT_WORDS.items():
        col = f"p_{m}"
        if col not in pct.columns:
            continue
        v = pct[col].to_numpy(dtype=float)
        for i in np.flatnonzero(v <= low):
            out[i].append(lo_word)
        for i in np.flatnonzero(v >= high):
            out[i].append(hi_word)
    return out


def run_features_merge(shards: Sequence[str | os.PathLike], attributes: str | os.PathLike,
                       out_dir: str | os.PathLike, cfg: Mapping[str, Any], *,
                       protected: Mapping[str, Any] | None = None,
                       provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Per-image and per-identity features, reliability and prominent-label rates."""
    c = merged_cfg(cfg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prov = dict(provenance or {}) | {"stage": "features_merge"}
    img, attrs = _frontal_images(shards, attributes, c)
    ref = str(c["reference"])
    if ref not in ("all", "train", "test"):
        raise ValueError(f"features.reference must be all, train or test, got {ref!r}")
    use = img[img["frontal"]]
    ref_ids = set(use["identity"]) if ref == "all" else set(use.loc[use["split"] == ref,
                                                                    "identity"])
    if not ref_ids:
        reason = f"n/a (the reference population {ref!r} has no near-frontal face)"
        log.warning("features: %s; every output says so", reason)
        return _write_empty(out, img, reason, prov)
    long, reliability = _identity_estimates(use, c)
    id_out, img_pct, n_ref = _against_reference(long, ref_ids, img)
    id_out["prominent"] = [", ".join(x) for x in prominent_labels(
        id_out, float(c["low"]), float(c["high"]))]
    id_out["reference"] = f"{ref} ({n_ref} identities)"
    img = pd.concat([img, img_pct], axis=1)
    img["prominent"] = [", ".join(x) for x in prominent_labels(img_pct, float(c["low"]),
                                                                float(c["high"]))]
    img["reference"] = f"{ref} ({n_ref} identities)"
    rates_df = _prominent_rates(attrs, id_out, protected)
    img_out = img.drop(columns=["split"])
    write_parquet(img_out, out / "images.parquet", provenance=prov | {"reference": ref})
    write_parquet(id_out, out / "identities.parquet", provenance=prov | {"reference": ref})
    reliability.to_csv(out / "reliability.csv", index=False, float_format="%.4f")
    rates_df.to_csv(out / "prominent_rates.csv", index=False, float_format="%.4f")
    summary = img["status"].value_counts().rename_axis("status").reset_index(name="n")
    summary.to_csv(out / "status.csv", index=False)
    write_html(out / "report.html", "Prominent facial features", [
        ("Reference population", f"{ref} ({n_ref} identities); near-frontal: |yaw| <= "
         f"{c['max_yaw']}, |pitch| <= {c['max_pitch']} degrees; cuts {c['low']} / {c['high']}"),
        ("Image status", summary), ("Reliability (ICC(1) across an identity's images)",
                                    reliability),
        ("Prominent-label firing rate per group (identities)", rates_df),
        ("Identities (first 30)", id_out.head(30))])
    log.info("features: %d images (%d frontal), %d identities, reference %s (%d)", len(img),
             int(img["frontal"].sum()), len(id_out), ref, n_ref)
    return {"n_images": len(img), "n_frontal": int(img["frontal"].sum()),
            "n_identities": len(id_out)}


def _frontal_images(shards: Sequence[str | os.PathLike], attributes: str | os.PathLike,
                    c: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every shard row with its identity and split (from the attribute table, also
    returned) and ``frontal`` (status ok, |yaw| <= ``max_yaw``, |pitch| <= ``max_pitch``);
    ok rows that are not frontal get status ``non_frontal``."""
    img = pd.concat([read_parquet(p) for p in shards], ignore_index=True)
    attrs = read_parquet(attributes)
    attrs["image_id"] = attrs["image_id"].astype(str)
    meta = attrs.set_index("image_id")[["identity", "split"]]
    img = img.join(meta, on="image_id")
    ok = img["status"] == "ok"
    img["frontal"] = ok & (img["pose_yaw"].abs() <= float(c["max_yaw"])) & \
        (img["pose_pitch"].abs() <= float(c["max_pitch"]))
    img.loc[ok & ~img["frontal"], "status"] = "non_frontal"
    return img, attrs


def _identity_estimates(use: pd.DataFrame, c: Mapping[str, Any]
                        ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per measure, each identity's shrinkage estimate (:func:`shrink`; identities with at
    least ``min_images`` frontal images; long form) and the measure's ICC(1) reliability."""
    ident_rows, rel_rows = [], []
    for m in MEASURES:
        col = f"m_{m}"
        sh = shrink(use[col].to_numpy(), use["identity"].to_numpy())
        sh = sh[sh["n"] >= int(c["min_images"])]
        sh = sh.rename(columns={"group": "identity"})
        sh["measure"] = m
        ident_rows.append(sh)
        icc, k = icc1(use[col].to_numpy(), use["identity"].to_numpy())
        rel_rows.append({"measure": m, "icc": icc, "n_identities": k,
                         "description": MEASURES[m],
                         "status": "ok" if np.isfinite(icc) else
                         f"n/a ({k} identities with >= 2 frontal images)"})
    return pd.concat(ident_rows, ignore_index=True), pd.DataFrame(rel_rows)


def _against_reference(long: pd.DataFrame, ref_ids: set[str], img: pd.DataFrame
                       ) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """Identity estimates (``s_``) with percentiles (``p_``) and z-scores (``z_``) against
    the reference identities; image percentiles (frontal images; returned) and z-scores
    (added to ``img`` in place). Returns the identity table, the image percentiles and the
    number of reference identities."""
    ident = long.pivot(index="identity", columns="measure", values="estimate")
    ident_n = long.groupby("identity")["n"].max()
    ref_table = ident.loc[ident.index.isin(ref_ids)]
    n_ref = len(ref_table)
    id_out = pd.DataFrame({"identity": ident.index, "n_frontal": ident_n.reindex(ident.index)
                           .to_numpy()})
    img_pct = pd.DataFrame(index=img.index)
    for m in MEASURES:
        refv = ref_table[m].to_numpy()
        mu, sd = float(np.nanmean(refv)), float(np.nanstd(refv, ddof=1)) if n_ref > 1 else np.nan
        id_out[f"s_{m}"] = ident[m].to_numpy()
        id_out[f"p_{m}"] = percentile_of(ident[m].to_numpy(), refv)
        id_out[f"z_{m}"] = (ident[m].to_numpy() - mu) / sd if sd and sd > 0 else np.nan
        v = img[f"m_{m}"].where(img["frontal"]).to_numpy(dtype=float)
        img_pct[f"p_{m}"] = percentile_of(v, refv)
        img[f"z_{m}"] = (v - mu) / sd if sd and sd > 0 else np.nan
    return id_out, img_pct, n_ref


def _prominent_rates(attrs: pd.DataFrame, id_out: pd.DataFrame,
                     protected: Mapping[str, Any] | None) -> pd.DataFrame:
    """Firing rate of each prominent phrase per fairness group (identity level; every
    ``fairness.protected`` grouping the table has, and their combination)."""
    from facecast.fairness.groups import image_labels, parse_specs

    specs = [s for s in parse_specs(protected or {}) if s.column in attrs.columns]
    rates = []
    if specs:
        g = image_labels(attrs, specs, [], sync="majority")
        g_id = g.groupby("identity").first()
        for s in [*[sp.name for sp in specs], "group"]:
            col = g_id[s].reindex(id_out["identity"]).to_numpy(dtype=object)
            for name in sorted({x for x in col if x is not None}):
                sel = col == name
                phrases = id_out.loc[sel, "prominent"]
                for lo_w, hi_w in PROMINENT_WORDS.values():
                    for w in (lo_w, hi_w):
                        fired = phrases.map(lambda t, w=w: w in t.split(", "))
                        rates.append({"grouping": s, "group": name, "label": w,
                                      "n_identities": int(sel.sum()),
                                      "rate": float(fired.mean()) if sel.any() else np.nan})
    return pd.DataFrame(rates, columns=["grouping", "group", "label", "n_identities", "rate"])


def _write_empty(out: Path, img: pd.DataFrame, reason: str,
                 prov: Mapping[str, Any]) -> dict[str, Any]:
    """Every features output when no face can be measured, each saying why."""
    img = img.drop(columns=["split"], errors="ignore").copy()
    img["reference"] = reason
    write_parquet(img, out / "images.parquet", provenance=prov)
    write_parquet(pd.DataFrame({"identity": pd.Series(dtype=str),
                                "prominent": pd.Series(dtype=str)}),
                  out / "identities.parquet", provenance=prov)
    status = pd.DataFrame({"status": [reason]})
    for name in ("reliability", "prominent_rates"):
        status.to_csv(out / f"{name}.csv", index=False)
    img["status"].value_counts().rename_axis("status").reset_index(name="n").to_csv(
        out / "status.csv", index=False)
    write_html(out / "report.html", "Prominent facial features", [("Status", reason)])
    return {"n_images": len(img), "n_frontal": 0, "n_identities": 0, "status": reason}
