"""Quality bias per protected group (rule ``quality_bias``): is quality itself biased, and
does a quality-based rejection threshold reject one group more?

On the images of one model's protocol (those in a labelled comparison), for every quality
column (native, pyiqa, ofiq, embedding norms; the EDC's selection) and every protected
group (``fairness.protected``: the joined ``group`` and each protected attribute):

* ``bias``: median and IQR (raw values) per group, and the standardised difference of the
  group to the rest, ``(mean_g - mean_rest) / sqrt((var_g + var_rest) / 2)`` on values
  oriented higher = better (so < 0: the group's quality is LOWER), with an
  identity-clustered bootstrap percentile interval (identities resampled with replacement,
  one multinomial draw per replicate shared by every measure) and a two-sided p-value of
  ``d / SE`` with the bootstrap's standard error (a normal approximation: a percentile
  p-value of a few hundred replicates is too coarse for a false-discovery control over
  hundreds of rows), Benjamini-Hochberg adjusted over the whole table; ``significant`` at
  1 - confidence. A group (or its rest) with fewer than ``bias.min_identities`` identities
  gets no number: ``status`` ``too_few_identities``, ``text`` ``n/a (k identities)`` and
  a log line; a measure without spread: ``no_variation``, ``n/a (no variation)``.
* ``rejection``: discarding the lowest ``q`` of the images by each measure (ties at the
  cut are kept, so the share actually discarded is reported), the share of each group's
  images discarded, and each group's FNMR at the one global threshold (the EDC's tau)
  before and after: does rejection trade one group's errors for its exclusion?
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import ndtr

from facecast.fairness.groups import image_labels, parse_specs
from facecast.io.atomic import write_text
from facecast.io.parquet_io import write_parquet
from facecast.quality.columns import orient
from facecast.quality.verdict import verdict_html
from facecast.report.figures import pyplot, save_figure
from facecast.report.html_tables import frame_html, markdown_html, write_html_page

log = logging.getLogger(__name__)

BIAS_DEFAULTS = {"enabled": True, "n_boot": 200, "min_identities": 5,
                 "reject": [0.05, 0.1, 0.2]}
#: columns of bias.parquet, in order
BIAS_COLUMNS = ["measure", "direction", "attribute", "group", "n_images", "n_identities",
                "median", "iqr", "rest_median", "difference", "ci_lo", "ci_hi", "p_value",
                "p_adjusted", "significant", "status", "text"]


def bh_adjust(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (NaN stays NaN, out of the family)."""
    p = np.asarray(p, np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    m = int(ok.sum())
    if m == 0:
        return out
    order = np.argsort(p[ok], kind="stable")
    ranked = p[ok][order] * m / np.arange(1, m + 1)
    q = np.minimum(np.minimum.accumulate(ranked[::-1])[::-1], 1.0)
    adj = np.empty(m)
    adj[order] = q
    out[ok] = adj
    return out


def bias_cfg(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``quality.bias`` over :data:`BIAS_DEFAULTS`."""
    return BIAS_DEFAULTS | dict(cfg.get("bias") or {})


def image_table(ann: pd.DataFrame, attrs: pd.DataFrame, columns: Sequence[str],
                fairness_cfg: Mapping[str, Any]) -> tuple[pd.DataFrame, list[str]]:
    """One row per image of the comparisons: identity, every protected attribute, the
    joined ``group`` and the quality columns; and the attribute names (``group`` first)."""
    protected = parse_specs(fairness_cfg.get("protected"))
    labels = image_labels(attrs, protected, [], sync=fairness_cfg.get("sync", "majority"))
    used = pd.unique(np.concatenate([ann["image_a"].to_numpy(str),
                                     ann["image_b"].to_numpy(str)]))
    img = labels.reindex(used)
    values = (attrs.assign(image_id=attrs["image_id"].astype(str))
              .drop_duplicates("image_id").set_index("image_id"))
    for c in columns:
        img[c] = pd.to_numeric(values[c], errors="coerce").reindex(used).to_numpy(np.float64)
    img = img[img["identity"].notna()]
    return img, ["group", *[s.name for s in protected]]


def _moments(w: np.ndarray, n: np.ndarray, s1: np.ndarray, s2: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean and variance per replicate from per-identity counts and sums."""
    with np.errstate(invalid="ignore", divide="ignore"):
        cnt = w @ n
        mean = (w @ s1) / cnt
        return mean, np.maximum((w @ s2) / cnt - mean ** 2, 0.0)


def std_difference(w: np.ndarray, sums_g: tuple, sums_r: tuple) -> np.ndarray:
    """Standardised difference group - rest for each row of identity weights ``w``."""
    mg, vg = _moments(w, *sums_g)
    mr, vr = _moments(w, *sums_r)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (mg - mr) / np.sqrt((vg + vr) / 2.0)


def _sums(codes: np.ndarray, k: int, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per-identity image count, sum and sum of squares of ``x``."""
    return (np.bincount(codes, minlength=k).astype(np.float64),
            np.bincount(codes, x, minlength=k), np.bincount(codes, x * x, minlength=k))


def _group_row(x: np.ndarray, raw: np.ndarray, ident: np.ndarray, member: np.ndarray,
               weights: np.ndarray, k: int, min_ids: int, conf: float) -> dict[str, Any]:
    """One bias row: sizes, median/IQR, difference, interval, bootstrap p-value."""
    n_id_g = len(np.unique(ident[member]))
    n_id_r = len(np.unique(ident[~member]))
    row: dict[str, Any] = {"n_images": int(member.sum()), "n_identities": n_id_g}
    if member.any():
        q1, med, q3 = np.percentile(raw[member], [25, 50, 75])
        row.update(median=med, iqr=q3 - q1)
    if (~member).any():
        row["rest_median"] = float(np.median(raw[~member]))
    if min(n_id_g, n_id_r) < min_ids:
        fewest = min(n_id_g, n_id_r)
        return row | {"status": "too_few_identities", "text": f"n/a ({fewest} identities)"}
    sg = _sums(ident[member], k, x[member])
    sr = _sums(ident[~member], k, x[~member])
    d = float(std_difference(np.ones((1, k)), sg, sr)[0])
    if not np.isfinite(d):  # no spread in the group nor the rest: a ratio of zeros
        return row | {"status": "no_variation", "text": "n/a (no variation)"}
    reps = std_difference(weights, sg, sr) if len(weights) else np.zeros(0)
    reps = reps[np.isfinite(reps)]
    row.update(difference=d, status="ok", text=f"{d:+.2f}")
    if len(reps) >= 2:
        a = (1 - conf) / 2
        se = float(np.std(reps, ddof=1))
        row.update(ci_lo=float(np.quantile(reps, a)), ci_hi=float(np.quantile(reps, 1 - a)),
                   p_value=float(2 * ndtr(-abs(d) / se)) if se > 0 else float(d == 0))
        row["text"] += f" [{row['ci_lo']:+.2f}, {row['ci_hi']:+.2f}]"
    return row


def bias_table(img: pd.DataFrame, attributes: Sequence[str], columns: Mapping[str, str],
               n_boot: int, min_ids: int, conf: float, seed: int) -> pd.DataFrame:
    """Every (measure, attribute, group) row of ``bias.parquet`` (see the module doc)."""
    codes, ids = pd.factorize(img["identity"].astype(str))
    k = len(ids)
    rng = np.random.default_rng(seed)
    weights = (rng.multinomial(k, np.full(k, 1.0 / k), size=n_boot).astype(np.float64)
               if n_boot > 0 and k else np.zeros((0, k)))
    rows = []
    for col, direction in columns.items():
        raw = img[col].to_numpy(np.float64)
        have = np.isfinite(raw)
        x = orient(raw, direction)[have]
        for attr in attributes:
            lab = img[attr].to_numpy(object)[have]
            for g in [v for v in pd.unique(img[attr].dropna())]:
                member = lab == g
                row = _group_row(x, raw[have], codes[have], member, weights, k, min_ids, conf)
                if row["status"] != "ok":
                    log.info("quality bias %s, %s=%s: %s", col, attr, g, row["text"])
                rows.append({"measure": col, "direction": direction, "attribute": attr,
                             "group": str(g)} | row)
    table = pd.DataFrame(rows).reindex(columns=BIAS_COLUMNS)
    table["p_adjusted"] = bh_adjust(table["p_value"].to_numpy(np.float64))
    table["significant"] = (table["p_adjusted"] <= 1 - conf).fillna(False).astype(bool)
    return table


def _pair_members(ann: pd.DataFrame, attr: str, value: str) -> np.ndarray:
    """Comparisons of ``value``: both images in it (``group``: the pair's shared group)."""
    if attr == "group":
        return (ann["group"] == value).to_numpy()
    return ((ann[f"{attr}_a"] == value) & (ann[f"{attr}_b"] == value)).to_numpy()


def _cells(ann: pd.DataFrame, img: pd.DataFrame, attributes: Sequence[str]
           ) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
    """``(attribute, group, image mask, comparison mask)`` of ``all`` and every group."""
    cells = [("all", "all", np.ones(len(img), bool), np.ones(len(ann), bool))]
    for attr in attributes:
        for g in pd.unique(img[attr].dropna()):
            cells.append((attr, str(g), (img[attr] == g).to_numpy(),
                          _pair_members(ann, attr, str(g))))
    return cells


def rejection_table(ann: pd.DataFrame, err: np.ndarray, img: pd.DataFrame,
                    attributes: Sequence[str], columns: Mapping[str, str],
                    fractions: Sequence[float], min_ids: int) -> pd.DataFrame:
    """Share of each group discarded and its FNMR before / after discarding the lowest
    ``q`` of the images by each measure (mated comparisons, errors ``err`` at tau)."""
    mated = ann["label"].to_numpy() == 1
    ia, ib = ann["image_a"].to_numpy(str), ann["image_b"].to_numpy(str)
    cells = _cells(ann, img, attributes)
    ident = img["identity"].to_numpy(object)
    rows = []
    for col, direction in columns.items():
        q = pd.Series(orient(img[col].to_numpy(np.float64), direction), index=img.index)
        have = np.isfinite(q.to_numpy())
        qa, qb = q.reindex(ia).to_numpy(), q.reindex(ib).to_numpy()
        judged = mated & np.isfinite(qa) & np.isfinite(qb)
        srt = np.sort(q.to_numpy()[have])
        for frac in fractions:
            # at most floor(q n) images lie below the value at that position
            cut = srt[min(int(np.floor(frac * len(srt))), len(srt) - 1)] if len(srt) else 0.0
            gone = q.to_numpy()[have] < cut
            kept = judged & (qa >= cut) & (qb >= cut)
            for attr, g, im_all, pm in cells:
                im = im_all[have]
                n_ids = len(pd.unique(ident[have][im]))
                rows.append(_rejection_row(col, frac, attr, g, im, gone, judged & pm, kept,
                                           err, n_ids, min_ids))
    return pd.DataFrame(rows)


def _rejection_row(col: str, frac: float, attr: str, g: str, im: np.ndarray,
                   gone: np.ndarray, pm: np.ndarray, kept: np.ndarray, err: np.ndarray,
                   n_ids: int, min_ids: int) -> dict[str, Any]:
    """One rejection row; no rates for a group with fewer than ``min_ids`` identities."""
    n_before, n_after = int(pm.sum()), int((pm & kept).sum())
    row = {"measure": col, "reject": frac, "attribute": attr, "group": g,
           "n_images": int(im.sum()), "n_identities": int(n_ids),
           "discarded_share": float(gone[im].mean()) if im.any() else np.nan,
           "n_mated_before": n_before, "n_mated_after": n_after,
           "fnmr_before": float(err[pm].mean()) if n_before else np.nan,
           "fnmr_after": float(err[pm & kept].mean()) if n_after else np.nan,
           "status": "ok", "text": ""}
    if n_ids < min_ids:
        row.update(discarded_share=np.nan, fnmr_before=np.nan, fnmr_after=np.nan,
                   status="too_few_identities", text=f"n/a ({n_ids} identities)")
    return row


def lower_summary(bias: pd.DataFrame, attribute: str = "group", top: int = 3) -> list[str]:
    """One short sentence per group: how many measures it is significantly lower / higher
    on, the ``top`` lowest named (the rest are in the table)."""
    out = []
    sub = bias[(bias["attribute"] == attribute) & (bias["status"] == "ok")]
    for g, rows in sub.groupby("group", sort=True):
        sig = rows[rows["significant"]].sort_values("difference")
        low, high = sig[sig["difference"] < 0], sig[sig["difference"] > 0]
        parts = [f"{g}: significantly LOWER quality than the rest on {len(low)} measure(s)"]
        if len(low):
            parts.append(": " + ", ".join(f"{r.measure} ({r.text})"
                                          for r in low.head(top).itertuples()))
            if len(low) > top:
                parts.append(f" and {len(low) - top} more")
        parts.append(f"; significantly higher on {len(high)}")
        out.append("".join(parts) + ".")
    return out


def plot_bias(bias: pd.DataFrame, path: str | os.PathLike, title: str) -> None:
    """Forest plot: each measure's standardised difference per group (attribute
    ``group``) with its interval; filled markers are significant after BH."""
    sub = bias[(bias["attribute"] == "group") & (bias["status"] == "ok")]
    measures = list(dict.fromkeys(bias["measure"]))
    fig, ax = pyplot().subplots(figsize=(8, 1.5 + 0.22 * max(len(measures), 1)),
                                constrained_layout=True)
    groups = sorted(sub["group"].unique())
    for j, g in enumerate(groups):
        rows = sub[sub["group"] == g].set_index("measure").reindex(measures)
        y = np.arange(len(measures)) + (j - (len(groups) - 1) / 2) * 0.15
        ax.errorbar(rows["difference"], y, xerr=[rows["difference"] - rows["ci_lo"],
                                                 rows["ci_hi"] - rows["difference"]],
                    fmt="none", alpha=0.5, color=f"C{j}")
        sig = rows["significant"].fillna(False).to_numpy(bool)
        ax.scatter(rows["difference"][sig], y[sig], color=f"C{j}", label=g, s=14)
        ax.scatter(rows["difference"][~sig], y[~sig], facecolors="none",
                   edgecolors=f"C{j}", s=14)
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_yticks(np.arange(len(measures)), measures, fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("standardised difference to the rest (< 0: lower quality)")
    ax.set_title(title, fontsize=8)
    if groups:
        ax.legend(fontsize=7)
    save_figure(fig, path)


def write_bias_outputs(out: Path, bias: pd.DataFrame, rejection: pd.DataFrame,
                       prov: Mapping[str, Any], title: str, tau: float, *,
                       fairness_cfg: Mapping[str, Any] | None = None,
                       confidence: float = 0.95) -> None:
    """bias.parquet/.csv, rejection.parquet/.csv, bias.png and bias.html (the generated
    verdict of :mod:`facecast.quality.verdict`, the summary, the figure, the tables)."""
    write_parquet(bias, out / "bias.parquet", provenance=dict(prov))
    write_text(out / "bias.csv", bias.to_csv(index=False))
    write_parquet(rejection, out / "rejection.parquet", provenance=dict(prov))
    write_text(out / "rejection.csv", rejection.to_csv(index=False))
    plot_bias(bias, out / "bias.png", title)
    summary = lower_summary(bias)
    body = [verdict_html(bias, rejection, tau, fairness_cfg, confidence),
            markdown_html("\n".join([
                "Quality bias per protected group: standardised difference of each group to "
                "the rest on values oriented higher = better (< 0: the group's quality is "
                "lower), identity-clustered bootstrap intervals, Benjamini-Hochberg over the "
                "table.", "", *(f"- {s}" for s in summary)])),
            '<p><img src="bias.png" alt="quality by group"></p>',
            frame_html(bias, caption="bias per measure and group"),
            markdown_html("Rejection: the lowest q of the images by each measure discarded; "
                          f"FNMR at the one global threshold tau = {tau:.6g} before and "
                          "after."),
            frame_html(rejection, caption="rejection by group")]
    write_html_page(out / "bias.html", title, body)
    for line in summary:
        log.info("quality bias: %s", line)
