"""What rule ``quality_edc`` calls: EDC of every quality measure for one model on one
protocol (see :mod:`facecast.quality.edc` for the definition).

Writes into ``results/{ds}/quality/{model}/{protocol}/``:

========================  =================================================================
``edc.parquet``           every EDC point: column, error_type (fnm | fm), group (all or a
                          protected group), discard fraction, error fraction, counts
``ranking.parquet/.csv``  per error type and group: pAUC to the discard limit, pAUC minus
                          the theoretical best, starting error, rank (1 = best), bootstrap
                          interval of the pAUC (group all)
``bands.parquet``         pointwise bootstrap bands of every EDC (group all) on a grid
``threshold.parquet``     the one fixed threshold tau and how it was set
``refit.parquet``         only with ``refit_threshold: true``: the NON-STANDARD variant
``edc_fnm.png``, ``edc_fm.png``: curves with shaded bands
========================  =================================================================
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from facecast.evaluate.bands import percentile_band, replicate_weights
from facecast.evaluate.metrics import far_resolvable, min_impostors
from facecast.fairness.annotate import labelled_pairs, read_scored_pairs, spec_columns
from facecast.fairness.assess import load_attributes
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_metadata, write_parquet
from facecast.quality.columns import RANDOM_CONTROL, orient, random_control, select_columns
from facecast.quality.edc import (
    edc_curve,
    edc_from_levels,
    errors,
    image_levels,
    pair_quality,
    pauc,
    refit_edc,
    theoretical_best,
    threshold_from_fmr,
    threshold_from_fnmr,
    weighted_edc_on_grid,
)
from facecast.report.figures import pyplot, save_figure
from facecast.report.html_tables import frame_html, write_html_page

log = logging.getLogger(__name__)
ERROR_TYPES = {"fnm": True, "fm": False}  # error type -> mated comparisons?


def _lower_better(attributes_path: str | os.PathLike) -> dict[str, bool]:
    """pyiqa's lower_better flags when the attribute table's provenance records them."""
    import json

    try:
        meta = read_metadata(attributes_path)
    except Exception:  # noqa: BLE001 - provenance is optional
        return {}
    for value in meta.values():
        if "pyiqa_lower_better" in value:
            try:
                found = _find_key(json.loads(value), "pyiqa_lower_better")
            except (ValueError, TypeError):
                continue
            if isinstance(found, dict):
                return {str(k): bool(v) for k, v in found.items()}
    return {}


def _find_key(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for v in obj.values():
            hit = _find_key(v, key)
            if hit is not None:
                return hit
    return None


def fixed_threshold(scores: np.ndarray, labels: np.ndarray, cfg: Mapping[str, Any]
                    ) -> dict[str, Any]:
    """The one threshold tau: ``threshold.mode`` fmr (policy FMR on all non-mated
    comparisons) or fnmr (starting FNMR error e0 on all mated comparisons)."""
    tcfg = dict(cfg.get("threshold") or {})
    mode = str(tcfg.get("mode", "fmr"))
    value = float(tcfg.get("value", 1e-3))
    y = np.asarray(labels).astype(bool)
    if mode == "fmr":
        tau = threshold_from_fmr(scores[~y], value)
        n = int((~y).sum())
    elif mode == "fnmr":
        tau = threshold_from_fnmr(scores[y], value)
        n = int(y.sum())
    else:
        raise ValueError(f"quality.threshold.mode must be fmr or fnmr, got {mode!r}")
    return {"mode": mode, "value": value, "threshold": tau, "n_basis": n,
            "resolvable": bool(far_resolvable(n, value)),
            "fmr_reached": float((scores[~y] >= tau).mean()) if (~y).any() else np.nan,
            "fnmr_reached": float((scores[y] < tau).mean()) if y.any() else np.nan}


@dataclass(frozen=True)
class _Comparisons:
    """The labelled comparisons every EDC is computed on (``ann``: finite score, label 0/1),
    their errors at tau and the settings every quality column shares."""

    ann: pd.DataFrame
    scores: np.ndarray
    mated: np.ndarray  # bool per comparison
    err: np.ndarray  # error at tau per comparison
    groups: np.ndarray  # protected group per comparison (None / "mixed" when none)
    group_names: list[str]
    how: str  # pair quality: min | mean | product
    limit: float  # discard limit of the pAUC
    grid: np.ndarray  # discard fractions of the bootstrap bands
    n_boot: int
    conf: float
    weights: list[np.ndarray]  # identity-clustered bootstrap replicate weights


def run_edc(scores_path: str | os.PathLike, attributes_path: str | os.PathLike,
            out_dir: str | os.PathLike, cfg: Mapping[str, Any],
            fairness_cfg: Mapping[str, Any], *, model: str, protocol: str, seed: int,
            provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Every EDC output for one model on one protocol; returns the ranking table."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prov = {**dict(provenance or {}), "stage": "quality", "model": model,
            "protocol": protocol}
    ann, attrs, chosen = _labelled_comparisons(scores_path, attributes_path, cfg, fairness_cfg)
    s = ann["score"].to_numpy(np.float64)
    y = ann["label"].to_numpy().astype(bool)
    thr = _fixed_threshold_logged(s, y, cfg)
    write_parquet(pd.DataFrame([thr]), out / "threshold.parquet", provenance=prov)
    comp = _comparisons(ann, s, y, thr, cfg, seed)
    by_image, columns = _quality_columns(attrs, chosen, cfg, seed)
    curves, ranks, bands, refits = [], [], [], []
    for col, direction in columns.items():
        q = _column_quality(by_image, col, direction, comp)
        c_curves, c_ranks, c_bands = _column_edcs(col, direction, q, comp)
        curves += c_curves
        ranks += c_ranks
        bands += c_bands
        if cfg.get("refit_threshold", False) and thr["mode"] == "fmr":
            refits.append(_refit_variant(col, q, comp, thr))
    edc = pd.concat(curves, ignore_index=True)
    ranking = _ranking(ranks, model, protocol, comp.how, thr)
    band_t = pd.concat(bands, ignore_index=True) if bands else pd.DataFrame(
        columns=["column", "error_type", "discard", "error", "error_lo", "error_hi", "n_boot"])
    _write_tables(out, prov, edc, ranking, band_t, refits, cfg)
    _write_ranking_html(out, ranking, thr, comp, model, protocol)
    for etype in ERROR_TYPES:
        plot_edc(edc, band_t, ranking, etype, out / f"edc_{etype}.png",
                 f"{model} on {protocol}: {etype.upper()}-EDC (tau = {thr['threshold']:.4g}, "
                 f"{thr['mode']} {thr['value']:g})", comp.limit, int(cfg.get("plot_top", 6)))
    return ranking


def run_bias(scores_path: str | os.PathLike, attributes_path: str | os.PathLike,
             out_dir: str | os.PathLike, cfg: Mapping[str, Any],
             fairness_cfg: Mapping[str, Any], *, model: str, protocol: str, seed: int,
             provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Quality bias per protected group and rejection by group for one model on one
    protocol (:mod:`facecast.quality.bias`), on the EDC's comparisons, columns and tau;
    returns the bias table."""
    from facecast.quality.bias import (
        bias_cfg,
        bias_table,
        image_table,
        rejection_table,
        write_bias_outputs,
    )

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prov = {**dict(provenance or {}), "stage": "quality", "model": model,
            "protocol": protocol, "analysis": "bias"}
    ann, attrs, chosen = _labelled_comparisons(scores_path, attributes_path, cfg, fairness_cfg)
    s = ann["score"].to_numpy(np.float64)
    y = ann["label"].to_numpy().astype(bool)
    thr = _fixed_threshold_logged(s, y, cfg)
    bcfg = bias_cfg(cfg)
    img, attributes = image_table(ann, attrs, list(chosen), fairness_cfg)
    conf = float(cfg.get("confidence", 0.95))
    bias = bias_table(img, attributes, chosen, int(bcfg["n_boot"]),
                      int(bcfg["min_identities"]), conf, int(seed))
    rejection = rejection_table(ann, errors(s, y, thr["threshold"]), img, attributes, chosen,
                                [float(q) for q in bcfg["reject"]],
                                int(bcfg["min_identities"]))
    write_bias_outputs(out, bias, rejection, prov, f"{model} on {protocol}: quality by "
                       "protected group", float(thr["threshold"]), fairness_cfg=fairness_cfg,
                       confidence=conf)
    return bias


def _labelled_comparisons(scores_path: str | os.PathLike, attributes_path: str | os.PathLike,
                          cfg: Mapping[str, Any], fairness_cfg: Mapping[str, Any]
                          ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """The scored pairs with their groups (``labelled_pairs``), only those with a finite
    score and a 0/1 label inside evaluate's test (held-out ``val`` pairs count nowhere, as
    in evaluate); the attribute rows of their identities; the chosen quality columns
    (column -> direction)."""
    pairs = read_scored_pairs(scores_path)
    available = pq.read_schema(attributes_path).names
    chosen = select_columns([c for c in available if c not in ("image_id", "identity")],
                            cfg, _lower_better(attributes_path))
    ids = pd.concat([pairs["identity_a"], pairs["identity_b"]]).unique()
    attrs = load_attributes(attributes_path, ids,
                            sorted(set(spec_columns(fairness_cfg)) | set(chosen)))
    ann, _ = labelled_pairs(pairs, attrs, fairness_cfg)
    ok = (np.isfinite(ann["score"].to_numpy(np.float64)) & ann["label"].isin([0, 1]).to_numpy()
          & (ann["status"].to_numpy(object) != "held_out"))
    return ann.loc[ok].reset_index(drop=True), attrs, chosen


def _fixed_threshold_logged(s: np.ndarray, y: np.ndarray, cfg: Mapping[str, Any]
                            ) -> dict[str, Any]:
    """:func:`fixed_threshold`, with a warning when the protocol cannot resolve it."""
    thr = fixed_threshold(s, y, cfg)
    if not thr["resolvable"]:
        log.warning("quality.threshold %s=%g needs >= %d comparisons, the protocol has %d: "
                    "tau sits beyond every score", thr["mode"], thr["value"],
                    min_impostors(thr["value"]), thr["n_basis"])
    return thr


def _comparisons(ann: pd.DataFrame, s: np.ndarray, y: np.ndarray, thr: Mapping[str, Any],
                 cfg: Mapping[str, Any], seed: int) -> _Comparisons:
    """Errors at tau, the protected groups and the shared settings; the bootstrap replicate
    weights (``n_boot``, identity-clustered, seeded) drawn once for every column."""
    err = errors(s, y, thr["threshold"])
    groups = ann["group"].to_numpy(object)
    n_boot = int(cfg.get("n_boot", 50))
    weights = list(replicate_weights(ann["identity_a"].to_numpy(), ann["identity_b"].to_numpy(),
                                     n_boot, int(seed))) if n_boot > 0 else []
    return _Comparisons(
        ann=ann, scores=s, mated=y, err=err, groups=groups,
        group_names=sorted({str(g) for g in groups if g is not None and g != "mixed"}),
        how=str(cfg.get("pair_quality", "min")), limit=float(cfg.get("discard_limit", 0.2)),
        grid=np.linspace(0.0, 1.0, int(cfg.get("band_points", 51))), n_boot=n_boot,
        conf=float(cfg.get("confidence", 0.95)), weights=weights)


def _quality_columns(attrs: pd.DataFrame, chosen: Mapping[str, str], cfg: Mapping[str, Any],
                     seed: int) -> tuple[pd.DataFrame, dict[str, str]]:
    """The attribute rows by ``image_id`` and the columns to assess (column -> direction),
    the seeded random control added last unless ``random_control`` is false."""
    by_image = attrs.set_index(attrs["image_id"].astype(str))
    columns = dict(chosen)
    if cfg.get("random_control", True):
        columns[RANDOM_CONTROL] = "higher"
        by_image[RANDOM_CONTROL] = random_control(by_image.index.to_numpy(), int(seed))
    return by_image, columns


@dataclass(frozen=True)
class _ColumnQuality:
    """One quality column on the comparisons: pair quality, where it is known and, for
    ``min`` pair quality, the pair's quality level (``levels`` of ``n_levels``)."""

    pair: np.ndarray
    has_q: np.ndarray
    levels: np.ndarray | None
    n_levels: int


def _column_quality(by_image: pd.DataFrame, col: str, direction: str,
                    comp: _Comparisons) -> _ColumnQuality:
    """Orient the column (higher = better), then pair it up; with ``min`` pair quality also
    as levels (a counting sort instead of a sort)."""
    qv = orient(by_image[col].to_numpy(np.float64), direction)
    qmap = pd.Series(qv, index=by_image.index)
    pq_ = pair_quality(qmap.reindex(comp.ann["image_a"]).to_numpy(),
                       qmap.reindex(comp.ann["image_b"]).to_numpy(), comp.how)
    pl, n_lv = None, 0
    if comp.how == "min":  # pair quality as a level: counting sort instead of a sort
        lv, n_lv = image_levels(qv)
        lmap = pd.Series(lv, index=by_image.index)
        pl = np.minimum(lmap.reindex(comp.ann["image_a"]).fillna(-1).to_numpy(np.int64),
                        lmap.reindex(comp.ann["image_b"]).fillna(-1).to_numpy(np.int64))
    return _ColumnQuality(pair=pq_, has_q=np.isfinite(pq_), levels=pl, n_levels=n_lv)


def _column_edcs(col: str, direction: str, q: _ColumnQuality, comp: _Comparisons
                 ) -> tuple[list[pd.DataFrame], list[dict[str, Any]], list[pd.DataFrame]]:
    """Every EDC of one column (error type x group all and each protected group): the
    curve points, one ranking row each (pAUC; bootstrap interval for group all) and the
    bootstrap bands of group all."""
    curves, ranks, bands = [], [], []
    y, groups = comp.mated, comp.groups
    for etype, mated in ERROR_TYPES.items():
        sel = q.has_q & (y == mated)
        for gname in ["all", *comp.group_names]:
            m = sel if gname == "all" else sel & (groups == gname)
            c = (edc_from_levels(q.levels[m], comp.err[m], q.n_levels) if comp.how == "min"
                 else edc_curve(q.pair[m], comp.err[m]))
            curves.append(pd.DataFrame({
                "column": col, "error_type": etype, "group": gname,
                "discard": c.discard, "error": c.error, "discard_count": c.counts,
                "kept_errors": c.kept_errors, "n_comparisons": c.n}))
            area = pauc(c.discard, c.error, comp.limit) if c.n else np.nan
            row = {"column": col, "direction": direction, "error_type": etype,
                   "group": gname, "n_comparisons": c.n,
                   "n_without_quality": int(((y == mated) & ~q.has_q &
                                             ((groups == gname) if gname != "all"
                                              else True)).sum()),
                   "start_error": c.start_error,
                   "start_errors": int(c.kept_errors[0]) if c.n else 0,
                   "pauc": area,
                   "pauc_minus_best": area - theoretical_best(c.start_error, comp.limit)
                   if c.n else np.nan,
                   "discard_limit": comp.limit}
            if gname == "all" and comp.weights and c.n:
                band, (lo, hi) = _bootstrap_band(col, etype, q, m, comp)
                bands.append(band)
                row["pauc_lo"], row["pauc_hi"] = lo, hi
            ranks.append(row)
    return curves, ranks, bands


def _bootstrap_band(col: str, etype: str, q: _ColumnQuality, m: np.ndarray,
                    comp: _Comparisons) -> tuple[pd.DataFrame, tuple[float, float]]:
    """The pointwise percentile band of the EDC of comparisons ``m`` on the discard grid
    (every replicate weight) and the percentile interval of its pAUC."""
    reps_e, reps_a = [], []
    for w in comp.weights:
        e_b, a_b = weighted_edc_on_grid(q.pair[m], comp.err[m], w[:, m], comp.grid, comp.limit)
        reps_e.append(e_b)
        reps_a.append(a_b)
    e_all = np.concatenate(reps_e)
    lo, hi = percentile_band(e_all, comp.conf)
    point, _ = weighted_edc_on_grid(q.pair[m], comp.err[m], np.ones((1, m.sum())),
                                    comp.grid, comp.limit)
    band = pd.DataFrame({"column": col, "error_type": etype, "discard": comp.grid,
                         "error": point[0], "error_lo": lo, "error_hi": hi,
                         "n_boot": comp.n_boot})
    alo, ahi = percentile_band(np.concatenate(reps_a)[:, None], comp.conf)
    return band, (float(alo[0]), float(ahi[0]))


def _refit_variant(col: str, q: _ColumnQuality, comp: _Comparisons,
                   thr: Mapping[str, Any]) -> pd.DataFrame:
    """The NON-STANDARD re-fitted-threshold FNMR curve of one column, up to the limit."""
    h = q.has_q
    d, f = refit_edc(q.pair[h], comp.scores[h], comp.mated[h], target_fmr=thr["value"],
                     steps=comp.grid[comp.grid <= comp.limit])
    return pd.DataFrame({"column": col, "discard": d, "fnmr": f,
                         "variant": "refit threshold (NOT the standard EDC)"})


def _ranking(ranks: list[dict[str, Any]], model: str, protocol: str, how: str,
             thr: Mapping[str, Any]) -> pd.DataFrame:
    """The ranking table: rank by pAUC per error type and group (1 = best) among curves
    with an error at 0 % discard (the others noted and warned about), sorted."""
    ranking = pd.DataFrame(ranks)
    # no error at 0 % discard: every curve is flat zero, a ranking would mean nothing
    ranking["rankable"] = ranking["start_errors"] > 0
    ranking["note"] = np.where(ranking["rankable"], "",
                               "n/a (" + ranking["start_errors"].astype(str) + " errors at tau)")
    ranking["rank"] = ranking["pauc"].where(ranking["rankable"]).groupby(
        [ranking["error_type"], ranking["group"]]).rank(method="min").astype("Int64")
    for (etype, gname), sub in ranking[~ranking["rankable"]].groupby(["error_type", "group"]):
        log.warning("%s-EDC, group %s: no errors at tau among %d comparisons - not ranked",
                    etype, gname, int(sub["n_comparisons"].max()))
    ranking.insert(0, "model", model)
    ranking.insert(1, "protocol", protocol)
    ranking["pair_quality"] = how
    ranking["threshold"] = thr["threshold"]
    return ranking.sort_values(["error_type", "group", "rank", "column"],
                               kind="stable", ignore_index=True)


def _write_tables(out: Path, prov: Mapping[str, Any], edc: pd.DataFrame, ranking: pd.DataFrame,
                  band_t: pd.DataFrame, refits: list[pd.DataFrame],
                  cfg: Mapping[str, Any]) -> None:
    """edc, ranking (+ CSV), bands and, with ``refit_threshold``, refit."""
    write_parquet(edc, out / "edc.parquet", provenance=prov)
    write_parquet(ranking, out / "ranking.parquet", provenance=prov)
    write_text(out / "ranking.csv", ranking.to_csv(index=False))
    write_parquet(band_t, out / "bands.parquet", provenance=prov)
    if cfg.get("refit_threshold", False):
        refit = pd.concat(refits, ignore_index=True) if refits else pd.DataFrame(
            columns=["column", "discard", "fnmr", "variant"])
        write_parquet(refit, out / "refit.parquet", provenance=prov)


def _write_ranking_html(out: Path, ranking: pd.DataFrame, thr: Mapping[str, Any],
                        comp: _Comparisons, model: str, protocol: str) -> None:
    """ranking.html: how tau was set, then one ranking table per error type and group."""
    shown = ["rank", "note", "column", "direction", "group", "pauc", "pauc_lo", "pauc_hi",
             "pauc_minus_best", "start_error", "start_errors", "n_comparisons",
             "n_without_quality"]
    body = [f"<p>EDC (ISO/IEC 29794-1:2024): threshold fixed once at {thr['mode']} "
            f"{thr['value']:g} (tau = {thr['threshold']:.6g}, FMR reached "
            f"{thr['fmr_reached']:.4g}, FNMR reached {thr['fnmr_reached']:.4g}"
            + ("" if thr["resolvable"] else f"; NOT resolvable with {thr['n_basis']} "
               "comparisons") + f"); pair quality = {comp.how}; pAUC to discard limit "
            f"{comp.limit:g} (lower is better; {RANDOM_CONTROL} is a seeded random control).</p>"]
    for etype in ERROR_TYPES:
        for gname, sub in ranking[ranking["error_type"] == etype].groupby("group", sort=False):
            body.append(frame_html(sub[[c for c in shown if c in sub.columns]],
                                   caption=f"{etype.upper()}-EDC ranking, group {gname}"))
    write_html_page(out / "ranking.html", f"EDC ranking: {model} on {protocol}", body)


def plot_edc(edc: pd.DataFrame, bands: pd.DataFrame, ranking: pd.DataFrame, etype: str,
             path: str | os.PathLike, title: str, limit: float, top: int) -> None:
    """EDC curves (group all) of the best ``top`` measures plus the random control, with
    shaded bootstrap bands; the discard limit marked."""
    rk = ranking[(ranking["error_type"] == etype) & (ranking["group"] == "all")]
    cols = rk.sort_values("rank")["column"].tolist()[:top]
    if RANDOM_CONTROL in set(rk["column"]) and RANDOM_CONTROL not in cols:
        cols.append(RANDOM_CONTROL)
    fig, axes = pyplot().subplots(1, 2, figsize=(11, 4.5), constrained_layout=True)
    for ax, right in zip(axes, (1.0, min(1.0, 2 * limit)), strict=True):
        for col in cols:
            sub = edc[(edc["column"] == col) & (edc["error_type"] == etype) &
                      (edc["group"] == "all")]
            p = float(rk.loc[rk["column"] == col, "pauc"].iloc[0])
            style = dict(color="black", ls="--") if col == RANDOM_CONTROL else {}
            line = ax.step(sub["discard"], sub["error"], where="post",
                           label=f"{col} (pAUC {p:.3g})", **style)[0]
            b = bands[(bands["column"] == col) & (bands["error_type"] == etype)]
            if len(b):
                ax.fill_between(b["discard"], b["error_lo"], b["error_hi"], step="post",
                                alpha=0.15, color=line.get_color())
        ax.axvline(limit, color="grey", lw=0.8, ls=":")
        ax.set_xlim(0, right)
        shown = edc[(edc["error_type"] == etype) & (edc["group"] == "all") &
                    edc["column"].isin(cols) & (edc["discard"] <= right)]["error"]
        top = float(np.nanmax(shown)) if len(shown) and np.isfinite(shown).any() else 1.0
        ax.set_ylim(0, max(top * 1.15, 1e-3))
        ax.set_xlabel("fraction of comparisons discarded (lowest pair quality first)")
        ax.set_ylabel("FNMR among kept" if etype == "fnm" else "FMR among kept")
        ax.grid(alpha=0.3)
    axes[1].set_title(f"zoom: discard <= {min(1.0, 2 * limit):g} (limit L = {limit:g})",
                      fontsize=8)
    axes[0].legend(fontsize=7)
    axes[0].set_title(title, fontsize=8)
    save_figure(fig, path)
