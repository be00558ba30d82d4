"""Figures of the covariate stage (all written through :func:`facecast.report.figures.save_figure`).

- ``tar_vs_covariate.png``: per covariate, TAR at the first FMR target along the covariate
  (both images at the value, other covariates at their median) with 90 % and 95 % bands,
  the binned estimate with its bootstrap interval, and a rug of the data.
- ``heatmaps.png``: per covariate, query x gallery grids of the posterior mean TAR and the
  width of its 95 % interval.
- ``score_bands.png``: scores against each covariate (pair mean), with the posterior
  predictive 10-90 % band of each class.
- ``checks.png``: held-out PIT histograms (flat if the model fits) and the ELBO curves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from facecast.covariates.mixture import mixture_quantile
from facecast.covariates.model import ClassFit
from facecast.covariates.pairs import PairSet
from facecast.report.figures import pyplot, save_figure

_COLORS = {"match": "tab:green", "nonmatch": "tab:red"}


def _rug(ax, values: np.ndarray, seed: int = 0) -> None:
    if len(values) > 3000:
        values = np.random.default_rng(seed).choice(values, 3000, replace=False)
    ax.plot(values, np.zeros_like(values), "|", color="k", alpha=0.2, ms=8,
            transform=ax.get_xaxis_transform())


def plot_tar(out: Path, surface: pd.DataFrame, binned: pd.DataFrame, ps: PairSet,
             covs: Sequence[str], fmr: float) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(covs), figsize=(5 * len(covs), 4), squeeze=False)
    for ax, c in zip(axes[0], covs, strict=True):
        s = surface[(surface["surface"] == "along") & (surface["covariate"] == c)
                    & (surface["metric"] == "tar") & (surface["fmr_target"] == fmr)]
        v = s["value_a"].to_numpy()
        ax.fill_between(v, s["q025"], s["q975"], color="tab:blue", alpha=0.15, label="95 %")
        ax.fill_between(v, s["q05"], s["q95"], color="tab:blue", alpha=0.3, label="90 %")
        ax.plot(v, s["mean"], color="tab:blue", label="model (posterior mean)")
        b = binned[(binned["covariate"] == c) & (binned["fmr_target"] == fmr)
                   & binned["tar"].notna()]
        if len(b):
            ax.errorbar(b["center"], b["tar"], yerr=[b["tar"] - b["tar_low"].fillna(b["tar"]),
                                                     b["tar_high"].fillna(b["tar"]) - b["tar"]],
                        fmt="o", color="tab:orange", capsize=3, label="binned + bootstrap 95 %")
        _rug(ax, 0.5 * (ps.pairs[f"{c}_a"] + ps.pairs[f"{c}_b"]).to_numpy())
        ax.set_xlabel(f"{c} (both images)")
        ax.set_ylabel(f"TAR @ FMR={fmr:g}")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    save_figure(fig, out / "tar_vs_covariate.png")


def plot_heatmaps(out: Path, surface: pd.DataFrame, covs: Sequence[str]) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(len(covs), 2, figsize=(9, 3.8 * len(covs)), squeeze=False)
    for row, c in zip(axes, covs, strict=True):
        s = surface[(surface["surface"] == "heatmap") & (surface["covariate"] == c)
                    & (surface["metric"] == "tar")]
        if s.empty:
            for ax in row:
                ax.text(0.5, 0.5, "no per-image covariates (per_image: false)", ha="center")
                ax.set_axis_off()
            continue
        va, vb = np.unique(s["value_a"]), np.unique(s["value_b"])
        piv = s.pivot_table(index="value_b", columns="value_a", values="mean")
        width = s.assign(w=s["q975"] - s["q025"]).pivot_table(index="value_b",
                                                               columns="value_a", values="w")
        ext = [va[0], va[-1], vb[0], vb[-1]]
        for ax, data, title, cmap in ((row[0], piv, "posterior mean TAR", "viridis"),
                                      (row[1], width, "95 % interval width", "magma")):
            im = ax.imshow(data.to_numpy(), origin="lower", extent=ext, aspect="auto", cmap=cmap)
            fig.colorbar(im, ax=ax)
            ax.set_xlabel(f"{c} (query, image a)")
            ax.set_ylabel(f"{c} (gallery, image b)")
            ax.set_title(f"{title} @ FMR={s['fmr_target'].iloc[0]:g}", fontsize=9)
    fig.tight_layout()
    save_figure(fig, out / "heatmaps.png")


def plot_score_bands(out: Path, ps: PairSet, covs: Sequence[str], fits: Mapping[str, ClassFit],
                     along: Mapping[str, np.ndarray], med: Mapping[str, float],
                     columns: Sequence[str], feats: Callable) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(covs), figsize=(5 * len(covs), 4), squeeze=False)
    rng = np.random.default_rng(0)
    for ax, c in zip(axes[0], covs, strict=True):
        pm = 0.5 * (ps.pairs[f"{c}_a"] + ps.pairs[f"{c}_b"]).to_numpy()
        for cls, lab in (("match", 1), ("nonmatch", 0)):
            idx = np.flatnonzero(ps.label == lab)
            if len(idx) > 2000:
                idx = rng.choice(idx, 2000, replace=False)
            ax.scatter(pm[idx], ps.y[idx], s=3, alpha=0.25, color=_COLORS[cls])
            grid = along[c]
            a = pd.DataFrame({k: np.full(len(grid), med[k]) for k in columns})
            b = a.copy()
            a[c], b[c] = grid, grid
            w, mu, sd = fits[cls].mixture_at(feats(a, b))          # (S, P, H)
            # the posterior predictive: one mixture over every draw's components
            flat = [np.moveaxis(arr, 0, 1).reshape(len(grid), -1) for arr in (w, mu, sd)]
            flat[0] = flat[0] / w.shape[0]
            lo = mixture_quantile(0.1, *flat)
            hi = mixture_quantile(0.9, *flat)
            ax.fill_between(grid, lo, hi, color=_COLORS[cls], alpha=0.25,
                            label=f"{cls} 80 % predictive")
        ax.set_xlabel(f"{c} (pair mean; band: both images at the value)")
        ax.set_ylabel("score")
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, out / "score_bands.png")


def plot_checks(out: Path, pits: Mapping[str, np.ndarray], infos: Mapping[str, dict]) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(2, len(pits), figsize=(5 * len(pits), 6.5), squeeze=False)
    for j, (cls, pit) in enumerate(pits.items()):
        ax = axes[0][j]
        ax.hist(pit, bins=20, range=(0, 1), color=_COLORS.get(cls, "gray"), alpha=0.7)
        ax.axhline(len(pit) / 20, color="k", ls="--", lw=1)
        ax.set_title(f"{cls}: held-out PIT (flat = calibrated)", fontsize=9)
        ax = axes[1][j]
        info = infos[cls]
        if "elbo_trace" in info:
            tr = np.asarray(info["elbo_trace"])
            ax.plot(np.linspace(0, info["steps"], len(tr)), tr)
            ax.set_xlabel("SVI step")
            ax.set_ylabel("-ELBO per pair")
            state = ("converged" if info["elbo_converged"] else
                     "settled within minibatch noise" if info.get("elbo_drift_within_noise")
                     else "NOT converged")
            ax.set_title(f"{cls}: {state}", fontsize=9)
        else:
            ax.text(0.5, 0.5, f"NUTS: max R-hat {info.get('r_hat_max', np.nan):.3f}\n"
                    f"min ESS {info.get('ess_min', np.nan):.0f}", ha="center", va="center")
            ax.set_axis_off()
    fig.tight_layout()
    save_figure(fig, out / "checks.png")


def plot_all(out: Path, surface, binned, ps, covs, fits, pits, infos, fmrs, along, med,
             columns, feats) -> None:
    """Write the four figures of the stage."""
    plot_tar(out, surface, binned, ps, covs, fmrs[0])
    plot_heatmaps(out, surface, covs)
    plot_score_bands(out, ps, covs, fits, along, med, columns, feats)
    plot_checks(out, pits, infos)
