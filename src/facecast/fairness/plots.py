"""Plots of the fairness stage (matplotlib, Agg): rates per group vs threshold, FDR vs FMR."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from facecast.fairness.threshold import disparity_arrays
from facecast.report.figures import pyplot, save_figure


def plot_rates_vs_threshold(sweep: pd.DataFrame, thresholds: pd.DataFrame,
                            path: str | os.PathLike, title: str = "") -> None:
    """FMR (log) and FNMR per group against the threshold; global thresholds marked."""
    fig, axes = pyplot().subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for group, sub in sweep.groupby("group", sort=True):
        axes[0].plot(sub["threshold"], sub["fmr"], label=str(group))
        axes[1].plot(sub["threshold"], sub["fnmr"], label=str(group))
    for ax, name in zip(axes, ("FMR", "FNMR"), strict=True):
        for _, row in thresholds.iterrows():
            if np.isfinite(row["threshold"]):
                ax.axvline(row["threshold"], color="grey", lw=0.8, ls="--")
        ax.set_xlabel("threshold (accept if score >= threshold)")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
    axes[0].set_yscale("symlog", linthresh=1e-4)
    axes[0].set_ylim(bottom=0)
    axes[1].legend(fontsize=8)
    fig.suptitle(title or "error rates per protected group")
    save_figure(fig, path, dpi=110)


def plot_fdr_vs_fmr(sweep: pd.DataFrame, alpha: float, path: str | os.PathLike,
                    title: str = "") -> None:
    """FDR(t, alpha) and 1 - GARBE(t, alpha) against the global FMR at t."""
    wide_fmr = sweep.pivot(index="threshold_index", columns="group", values="fmr")
    wide_fnmr = sweep.pivot(index="threshold_index", columns="group", values="fnmr")
    gfmr = sweep.groupby("threshold_index")["global_fmr"].first().loc[wide_fmr.index]
    disp = disparity_arrays(wide_fmr.to_numpy(), wide_fnmr.to_numpy(), alpha)
    keep = gfmr.to_numpy() > 0
    fig, ax = pyplot().subplots(figsize=(6, 4), constrained_layout=True)
    ax.plot(gfmr.to_numpy()[keep], disp["fdr"][keep], label=f"FDR (alpha={alpha:g})")
    ax.plot(gfmr.to_numpy()[keep], 1 - disp["garbe"][keep], label="1 - GARBE")
    ax.set_xscale("log")
    ax.set_xlabel("global FMR")
    ax.set_ylabel("fairness (1 = fair)")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(title or "fairness vs operating point")
    save_figure(fig, path, dpi=110)
