"""ROC and DET plots (matplotlib, Agg backend)."""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from facecast.evaluate.metrics import det_points
from facecast.report.figures import pyplot, save_figure


def plot_roc(curves: Mapping[str, tuple[np.ndarray, np.ndarray]], path: str | os.PathLike,
             title: str) -> None:
    """TAR against FAR (log scale) for each labelled (far, tar) curve."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for label, (far, tar) in curves.items():
        keep = far > 0
        ax.plot(far[keep], tar[keep], label=label, lw=1.5)
    ax.set_xscale("log")
    ax.set_xlabel("false accept rate (FAR)")
    ax.set_ylabel("true accept rate (TAR)")
    ax.set_ylim(0, 1.01)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def plot_det(curves: Mapping[str, tuple[np.ndarray, np.ndarray]], path: str | os.PathLike,
             title: str) -> None:
    """Detection error trade-off: FRR against FAR on normal-deviate axes."""
    from scipy.special import ndtri

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4.5))
    for label, (far, tar) in curves.items():
        x, y = det_points(far, tar)
        ax.plot(x, y, label=label, lw=1.5)
    ticks = np.array([1e-4, 1e-3, 1e-2, 0.05, 0.2, 0.5, 0.8])
    ax.set_xticks(ndtri(ticks), [f"{t:g}" for t in ticks])
    ax.set_yticks(ndtri(ticks), [f"{t:g}" for t in ticks])
    ax.set_xlim(ndtri(1e-4), ndtri(0.8))
    ax.set_ylim(ndtri(1e-4), ndtri(0.8))
    ax.set_xlabel("false accept rate (FAR)")
    ax.set_ylabel("false reject rate (FRR)")
    ax.grid(True, alpha=0.3)
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
