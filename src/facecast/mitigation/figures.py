"""The Pareto figure: 10-fold accuracy against Bias+ and Bias- (the FairFace 2020 bias),
one point per method with its identity-clustered intervals on both axes; methods no other
method beats on both (higher accuracy, lower bias) are drawn filled. Without fairness
groups the x axis is the KS calibration error instead."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from facecast.report.figures import pyplot, save_figure

__all__ = ["pareto_front", "plot_pareto"]


def pareto_front(acc: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Whether each point is undominated: no other point has accuracy >= and bias <=,
    one of them strictly (NaN points are never on the front)."""
    ok = np.isfinite(acc) & np.isfinite(bias)
    out = np.zeros(len(acc), bool)
    for i in np.flatnonzero(ok):
        better = ok & (acc >= acc[i]) & (bias <= bias[i]) & ((acc > acc[i]) | (bias < bias[i]))
        out[i] = not better.any()
    return out


def _err(table: pd.DataFrame, k: str, scale: float = 1.0) -> np.ndarray:
    v = table[k].to_numpy(np.float64) * scale
    lo = table[f"{k}_lo"].to_numpy(np.float64) * scale
    hi = table[f"{k}_hi"].to_numpy(np.float64) * scale
    e = np.vstack([np.clip(v - lo, 0, None), np.clip(hi - v, 0, None)])
    return np.where(np.isfinite(e), e, 0.0)


def plot_pareto(table: pd.DataFrame, path: str | os.PathLike, title: str) -> None:
    """Write the figure of the module docstring to ``path``."""
    plt = pyplot()
    has_bias = np.isfinite(table["bias_pos"].to_numpy(np.float64)).any()
    xs = [("bias_pos", "Bias+"), ("bias_neg", "Bias-")] if has_bias else [("ks", "KS")]
    fig, axes = plt.subplots(1, len(xs), figsize=(5.2 * len(xs), 4.2), squeeze=False,
                             constrained_layout=True)
    acc = table["accuracy"].to_numpy(np.float64) * 100
    for ax, (k, name) in zip(axes[0], xs, strict=True):
        x = table[k].to_numpy(np.float64)
        front = pareto_front(acc, x)
        for i, m in enumerate(table["method"]):
            if not (np.isfinite(x[i]) and np.isfinite(acc[i])):
                continue
            colour = "black" if m == "raw" else f"C{i % 10}"
            ax.errorbar(x[i], acc[i], xerr=_err(table, k)[:, i:i + 1],
                        yerr=_err(table, "accuracy", 100)[:, i:i + 1], fmt="o",
                        mfc=colour if front[i] else "white", color=colour, capsize=2)
            ax.annotate(m, (x[i], acc[i]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
        ax.set_xlabel(f"{name} (lower is fairer)")
        ax.set_ylabel("10-fold accuracy %")
        ax.grid(alpha=0.3)
    fig.suptitle(title + " (filled: no method better on both)", fontsize=9)
    save_figure(fig, path, dpi=100)
