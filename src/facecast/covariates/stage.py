"""Stage ``covariates``: fit the covariate-conditioned score model of one model x protocol.

Outputs in ``out_dir`` (``results/{ds}/covariates/{model}/{protocol}/``): ``fit.json``
(settings, pair counts, selection table, ELBO summary or R-hat/ESS, basis and
standardisation), ``posterior.parquet`` (every posterior draw of every site, long form),
``surface.parquet`` (metrics with intervals along each covariate and on query x gallery
grids), ``thresholds.parquet`` (t(x) lookup with quantiles and the conservative upper
bound), ``binned.parquet`` (the binned estimate with bootstrap intervals), ``population.parquet``
(expected performance over a covariate population) and the plots of
:mod:`facecast.covariates.plots`.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.covariates import plots
from facecast.covariates.derive import (
    binned_tar,
    conditional_metrics,
    population_metrics,
    summarise,
)
from facecast.covariates.model import SITES, ClassFit
from facecast.covariates.pairs import (
    PairSet,
    build_pairs,
    features_from_sides,
    parse_pair_feature,
)
from facecast.covariates.select import select_and_fit
from facecast.evaluate.failures import DEFAULT_RULE, check_rule, rule_text
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet

log = logging.getLogger(__name__)

COVARIATES_DEFAULTS: dict[str, Any] = {
    "covariates": [], "pair_features": [], "per_image": True, "components": [2],
    "grid": [4], "width": [1.0], "smoothness": {"weight": 1.0, "location": 0.5},
    "linear": False, "inference": "svi", "elbo": "meanfield", "guide": "normal", "steps": 2000, "batch_size": 1024, "lr": 0.02,
    "lr_final": 0.002, "draws": 200, "warmup": 200, "holdout": 0.2, "refit": True,
    "max_pairs": 0, "min_pairs": 50, "fmr_targets": [1e-2, 1e-3], "surface_points": 25,
    "heatmap_points": 15, "lookup_points": 5, "conservative_level": 0.95, "bins": 5,
    "n_boot": 200, "include_val": True, "population": {"table": "", "n": 1000},
    "device": "cpu",
}

OUTPUT_NAMES = ["fit.json", "posterior.parquet", "surface.parquet", "thresholds.parquet",
                "binned.parquet", "population.parquet", "surface.csv", "thresholds.csv",
                "tar_vs_covariate.png", "heatmaps.png", "score_bands.png", "checks.png"]


def _median_sides(pairs: pd.DataFrame, columns: list[str]) -> dict[str, float]:
    return {c: float(np.median(np.concatenate([pairs[f"{c}_a"], pairs[f"{c}_b"]])))
            for c in columns}


def _points(columns: list[str], medians: dict[str, float], a_vals: dict[str, np.ndarray],
            b_vals: dict[str, np.ndarray], n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    side_a = pd.DataFrame({c: np.full(n, medians[c]) for c in columns})
    side_b = side_a.copy()
    for c, v in a_vals.items():
        side_a[c] = v
    for c, v in b_vals.items():
        side_b[c] = v
    return side_a, side_b


def _summary_rows(base: pd.DataFrame, metrics: dict[str, np.ndarray], fmr: float
                  ) -> pd.DataFrame:
    frames = []
    for name, arr in metrics.items():
        s = summarise(arr)
        f = base.copy()
        f["fmr_target"], f["metric"] = fmr, name
        for k, v in s.items():
            f[k] = v
        frames.append(f)
    return pd.concat(frames, ignore_index=True)


def posterior_table(fits: Mapping[str, ClassFit]) -> pd.DataFrame:
    """Long-form draws: class, draw, site, index (flat), value."""
    frames = []
    for cls, fit in fits.items():
        for site in SITES:
            arr = fit.draws[site]
            s, m = arr.shape[0], int(np.prod(arr.shape[1:]))
            frames.append(pd.DataFrame({
                "class": cls, "draw": np.repeat(np.arange(s), m), "site": site,
                "index": np.tile(np.arange(m), s), "value": arr.reshape(s, m).ravel()}))
    return pd.concat(frames, ignore_index=True)


@dataclass(frozen=True)
class _Design:
    """The pairs and where the fits are evaluated: the covariates, the pair features, the
    columns both sides carry and their medians over both sides of every pair."""

    ps: PairSet
    covs: list[str]
    pfeat: list[str]
    per_image: bool
    columns: list[str]
    med: dict[str, float]

    def feats(self, a: pd.DataFrame, b: pd.DataFrame) -> np.ndarray:
        """Model features of the pairs whose sides are the rows of ``a`` and ``b``."""
        return features_from_sides(a, b, self.covs, self.pfeat, self.per_image)


def run_covariates(scores_path: str | os.PathLike, attributes_path: str | os.PathLike,
                   out_dir: str | os.PathLike, cfg: Mapping[str, Any], *, model: str,
                   protocol: str, seed: int, failed: str = DEFAULT_RULE,
                   provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Fit both classes, derive the surfaces and write every output; returns fit.json's dict.

    The fits learn from the scored pairs (a model of scores given covariates: its TARs are
    those of pairs with a feature). The binned estimate is an empirical rate and counts
    the pairs without a feature by the failure rule ``failed`` (``evaluate.failed``):
    under ``nonmatch`` below every threshold (a miss when genuine), under ``drop`` not."""
    cfg = {**COVARIATES_DEFAULTS, **cfg}
    check_rule(failed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    d = _design(scores_path, attributes_path, cfg)
    log.info("%s/%s: pairs %s", model, protocol, d.ps.counts)
    rng = np.random.default_rng(seed)
    fits, infos, pits, class_idx = _fit_classes(d.ps, cfg, rng, seed, model, protocol)
    match, nonmatch = fits["match"], fits["nonmatch"]
    fmrs = [float(f) for f in cfg["fmr_targets"]]
    surface, along_values = _surface(d, match, nonmatch, fmrs, cfg)
    thresholds = _threshold_lookup(d, match, nonmatch, fmrs, cfg)
    population = _population(d, match, nonmatch, fmrs, cfg, rng)
    binned = _binned(d, fmrs, cfg, seed, failed)
    prov = {**(provenance or {}), "stage": "covariates", "model": model, "protocol": protocol}
    _write_tables(out, prov, fits, surface, thresholds, binned, population)
    _log_fit_times(infos)
    fit = {"model": model, "protocol": protocol, "seed": int(seed),
           "settings": {k: cfg[k] for k in sorted(COVARIATES_DEFAULTS)},
           "features": d.ps.names, "pair_counts": d.ps.counts, "failed": failed,
           "failed_rule": rule_text(failed, d.ps.counts.get("failed", 0)),
           "class_pairs": {k: int(len(v)) for k, v in class_idx.items()},
           "classes": {cls: {**infos[cls], "basis": fits[cls].basis.to_dict()}
                       for cls in fits},
           "score_convention": "similarity: accept when score > t; FMR = P(non-match > t)"}
    write_text(out / "fit.json", json.dumps(fit, indent=1, sort_keys=True, default=float))
    plots.plot_all(out, surface, binned, d.ps, d.covs, fits, pits, infos, fmrs, along_values,
                   d.med, d.columns, d.feats)
    return fit


def _design(scores_path: str | os.PathLike, attributes_path: str | os.PathLike,
            cfg: Mapping[str, Any]) -> _Design:
    """Read the scored pairs and the attribute table; pair them up (:func:`build_pairs`)
    with the configured covariates and pair features."""
    covs = [str(c) for c in cfg["covariates"]]
    pfeat = [str(s) for s in cfg["pair_features"]]
    scores = read_parquet(scores_path)
    attributes = read_parquet(attributes_path)
    ps = build_pairs(scores, attributes, covs, pfeat, per_image=bool(cfg["per_image"]),
                     include_val=bool(cfg["include_val"]))
    columns = list(dict.fromkeys([*covs, *(parse_pair_feature(s)[1] for s in pfeat)]))
    return _Design(ps=ps, covs=covs, pfeat=pfeat, per_image=bool(cfg["per_image"]),
                   columns=columns, med=_median_sides(ps.pairs, columns))


def _fit_classes(ps: PairSet, cfg: Mapping[str, Any], rng: np.random.Generator, seed: int,
                 model: str, protocol: str) -> tuple[dict, dict, dict, dict]:
    """Fit the match class, then the non-match class (:func:`select_and_fit`, seed
    ``seed + 7 * label``), each on a seeded subsample of ``max_pairs`` when it has more;
    raises when a class has fewer than ``min_pairs``. Returns fits, infos, PITs and the
    pair indices used, each by class."""
    fits, infos, pits, class_idx = {}, {}, {}, {}
    for cls, lab in (("match", 1), ("nonmatch", 0)):
        idx = np.flatnonzero(ps.label == lab)
        if len(idx) < int(cfg["min_pairs"]):
            raise ValueError(f"covariates {model}/{protocol}: {len(idx)} {cls} pairs, fewer "
                             f"than covariates.min_pairs={cfg['min_pairs']}; use a denser "
                             "protocol (e.g. mining.mode: all)")
        if cfg["max_pairs"] and len(idx) > int(cfg["max_pairs"]):
            idx = np.sort(rng.choice(idx, int(cfg["max_pairs"]), replace=False))
            log.info("%s: a seeded subsample of %d of %d pairs (covariates.max_pairs)", cls,
                     len(idx), int((ps.label == lab).sum()))
        class_idx[cls] = idx
        fits[cls], infos[cls], pits[cls] = select_and_fit(ps.x[idx], ps.y[idx], cfg,
                                                          seed + 7 * lab, cls)
    return fits, infos, pits, class_idx


def _surface(d: _Design, match: ClassFit, nonmatch: ClassFit, fmrs: list[float],
             cfg: Mapping[str, Any]) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """The metrics along each covariate (both images at the value, the rest at the median;
    every FMR target) and, with per-image covariates, on a query x gallery heatmap grid
    (first FMR target). Returns the surface table and each covariate's grid."""
    ps = d.ps
    frames, along_values = [], {}
    for c in d.covs:
        vals = np.concatenate([ps.pairs[f"{c}_a"], ps.pairs[f"{c}_b"]])
        grid = np.linspace(*np.quantile(vals, [0.01, 0.99]), int(cfg["surface_points"]))
        along_values[c] = grid
        a, b = _points(d.columns, d.med, {c: grid}, {c: grid}, len(grid))
        pair_mean = 0.5 * (ps.pairs[f"{c}_a"] + ps.pairs[f"{c}_b"]).to_numpy()
        half = (grid[1] - grid[0]) / 2 if len(grid) > 1 else 1.0
        base = pd.DataFrame({"surface": "along", "covariate": c, "value_a": grid,
                             "value_b": grid, "n_pairs_near": [
                                 int(np.sum(np.abs(pair_mean - v) <= half)) for v in grid]})
        x = d.feats(a, b)
        for f in fmrs:
            frames.append(_summary_rows(base, conditional_metrics(match, nonmatch, x, f), f))
        if cfg["per_image"]:
            hv = np.linspace(grid[0], grid[-1], int(cfg["heatmap_points"]))
            qa, qb = (g.ravel() for g in np.meshgrid(hv, hv, indexing="ij"))
            a, b = _points(d.columns, d.med, {c: qa}, {c: qb}, len(qa))
            base = pd.DataFrame({"surface": "heatmap", "covariate": c, "value_a": qa,
                                 "value_b": qb, "n_pairs_near": -1})
            frames.append(_summary_rows(base, conditional_metrics(match, nonmatch,
                                                                  d.feats(a, b), fmrs[0]),
                                        fmrs[0]))
    return pd.concat(frames, ignore_index=True), along_values


def _threshold_lookup(d: _Design, match: ClassFit, nonmatch: ClassFit, fmrs: list[float],
                      cfg: Mapping[str, Any]) -> pd.DataFrame:
    """The t(x) lookup: threshold mean, quantiles and the conservative upper bound (plus the
    mean TAR) at every combination of ``lookup_points`` levels of every per-image covariate
    on both images, per FMR target."""
    lk = int(cfg["lookup_points"])
    levels = {c: np.quantile(np.concatenate([d.ps.pairs[f"{c}_a"], d.ps.pairs[f"{c}_b"]]),
                             np.linspace(0.05, 0.95, lk)) for c in d.covs}
    keys = [(c, side) for c in d.covs for side in ("a", "b")]
    combos = np.array(list(itertools.product(*[levels[c] for c, _ in keys])))
    a, b = _points(d.columns, d.med,
                   {c: combos[:, i] for i, (c, s) in enumerate(keys) if s == "a"},
                   {c: combos[:, i] for i, (c, s) in enumerate(keys) if s == "b"}, len(combos))
    xl = d.feats(a, b)
    level = float(cfg["conservative_level"])
    tframes = []
    for f in fmrs:
        m = conditional_metrics(match, nonmatch, xl, f)
        s = summarise(m["threshold"])
        t = pd.DataFrame({f"{c}_{side}": combos[:, i] for i, (c, side) in enumerate(keys)})
        t["fmr_target"] = f
        t["threshold_mean"], t["threshold_q05"] = s["mean"], s["q05"]
        t["threshold_q50"], t["threshold_q95"] = s["q50"], s["q95"]
        t["threshold_upper"] = np.quantile(m["threshold"], level, axis=0)
        t["tar_mean"] = m["tar"].mean(axis=0)
        tframes.append(t)
    return pd.concat(tframes, ignore_index=True)


def _population(d: _Design, match: ClassFit, nonmatch: ClassFit, fmrs: list[float],
                cfg: Mapping[str, Any], rng: np.random.Generator) -> pd.DataFrame:
    """Expected performance over a covariate population: ``population.table`` when given
    (raises when it lacks a column), else a seeded sample of ``population.n`` of the pairs
    (``rng``'s next draw)."""
    pop_cfg = cfg["population"] or {}
    if pop_cfg.get("table"):
        pop = read_parquet(pop_cfg["table"]) if str(pop_cfg["table"]).endswith(".parquet") \
            else pd.read_csv(pop_cfg["table"])
        missing = [f"{c}_{s}" for c in d.columns for s in "ab" if f"{c}_{s}" not in pop.columns]
        if missing:
            raise ValueError(f"covariates.population.table lacks columns {missing}")
        source = str(pop_cfg["table"])
    else:
        take = rng.choice(len(d.ps.pairs), min(int(pop_cfg.get("n", 1000)), len(d.ps.pairs)),
                          replace=False)
        pop, source = d.ps.pairs.iloc[np.sort(take)], "data"
    xp = d.feats(pd.DataFrame({c: pop[f"{c}_a"].to_numpy(float) for c in d.columns}),
                 pd.DataFrame({c: pop[f"{c}_b"].to_numpy(float) for c in d.columns}))
    prow = []
    for f in fmrs:
        pm = population_metrics(match, nonmatch, xp, f)
        for name, arr in pm.items():
            prow.append({"source": source, "n_points": len(xp), "fmr_target": f,
                         "metric": name, **{k: float(v) for k, v in summarise(arr).items()}})
    return pd.DataFrame(prow)


def _binned(d: _Design, fmrs: list[float], cfg: Mapping[str, Any], seed: int,
            rule: str = DEFAULT_RULE) -> pd.DataFrame:
    """The binned estimate, for comparison: TAR with bootstrap intervals in ``bins``
    quantile bins of the pair mean of each covariate, per FMR target (a bin's note is
    logged as a warning). Under ``nonmatch`` the pairs without a feature count, at a score
    below every real one (a finite floor, so that quantiles stay defined); ``n_failed``
    per bin."""
    ps = d.ps
    lost = ps.failed if rule == "nonmatch" and ps.failed is not None else ps.pairs.iloc[:0]
    floor = float(np.min(ps.y, initial=0.0)) - 1.0
    y = np.r_[ps.y, np.full(len(lost), floor)]
    label = np.r_[ps.label, lost["label"].to_numpy().astype(int)]
    brows = []
    for c in d.covs:
        pm = 0.5 * (ps.pairs[f"{c}_a"] + ps.pairs[f"{c}_b"]).to_numpy()
        edges = np.unique(np.quantile(pm, np.linspace(0, 1, int(cfg["bins"]) + 1)))
        pm = np.r_[pm, 0.5 * (lost[f"{c}_a"] + lost[f"{c}_b"]).to_numpy(float)]
        fails = np.r_[np.zeros(len(ps.y), bool), np.ones(len(lost), bool)]
        for f in fmrs:
            for r in binned_tar(y, label, pm, edges, f, int(cfg["n_boot"]), seed):
                if r["note"]:
                    log.warning("binned %s bin %d at FMR %g: %s", c, r["bin"], f, r["note"])
                inb = _in_bin(pm, edges, r["bin"])
                brows.append({"covariate": c, "fmr_target": f, **r,
                              "n_failed": int((inb & fails).sum()), "failed": rule})
    return pd.DataFrame(brows)


def _in_bin(values: np.ndarray, edges: np.ndarray, i: int) -> np.ndarray:
    """Bin ``i`` of :func:`facecast.covariates.derive.binned_tar` (the last one closed)."""
    last = i == len(edges) - 2
    return (values >= edges[i]) & ((values <= edges[i + 1]) if last else
                                   (values < edges[i + 1]))


def _write_tables(out: Path, prov: Mapping[str, Any], fits: Mapping[str, ClassFit],
                  surface: pd.DataFrame, thresholds: pd.DataFrame, binned: pd.DataFrame,
                  population: pd.DataFrame) -> None:
    """The Parquet outputs (posterior draws included) and the two CSVs (the ``along``
    surface, the threshold lookup)."""
    write_parquet(posterior_table(fits), out / "posterior.parquet", provenance=prov)
    write_parquet(surface, out / "surface.parquet", provenance=prov)
    write_parquet(thresholds, out / "thresholds.parquet", provenance=prov)
    write_parquet(binned, out / "binned.parquet", provenance=prov)
    write_parquet(population, out / "population.parquet", provenance=prov)
    write_text(out / "surface.csv", surface[surface["surface"] == "along"]
               .to_csv(index=False, float_format="%.6g"))
    write_text(out / "thresholds.csv", thresholds.to_csv(index=False, float_format="%.6g"))


def _log_fit_times(infos: Mapping[str, dict[str, Any]]) -> None:
    """Log each class's fit time and take every timing out of ``infos`` (in place), so
    fit.json holds no wall-clock figure."""
    for cls, info in infos.items():
        log.info("%s fit: %.1f s (ELBO criterion met after %s s)", cls, info.pop("seconds"),
                 info.pop("seconds_to_converge", None))
        for cand in info.get("candidates", []):
            cand.pop("seconds", None)
