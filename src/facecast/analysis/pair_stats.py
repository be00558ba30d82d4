"""Statistics of a mined benchmark's pairs, for people: a per-fold table and a score plot.

:func:`pair_statistics` counts, per fold and over all folds, the genuine and impostor
pairs, the distinct images and identities behind them and the reference model's scores;
:func:`plot_pair_scores` draws the score histograms of both labels with the band.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from facecast.report.figures import pyplot, save_figure

STAT_COLUMNS = ["fold", "genuine", "impostor", "images", "identities", "max_image_uses",
                "genuine_score_mean", "genuine_score_min", "genuine_score_max",
                "impostor_score_mean", "impostor_score_min", "impostor_score_max"]


def _fold_row(fold: str, p: pd.DataFrame) -> dict:
    images = pd.concat([p["image_a"], p["image_b"]])
    row = {"fold": fold, "genuine": int((p["label"] == 1).sum()),
           "impostor": int((p["label"] == 0).sum()), "images": int(images.nunique()),
           "identities": int(pd.concat([p["identity_a"], p["identity_b"]]).nunique()),
           "max_image_uses": int(images.value_counts().max()) if len(images) else 0}
    for name, label in (("genuine", 1), ("impostor", 0)):
        s = p.loc[p["label"] == label, "ref_score"].to_numpy(np.float64)
        row[f"{name}_score_mean"] = float(s.mean()) if len(s) else np.nan
        row[f"{name}_score_min"] = float(s.min()) if len(s) else np.nan
        row[f"{name}_score_max"] = float(s.max()) if len(s) else np.nan
    return row


def pair_statistics(pairs: pd.DataFrame, folds: Sequence[str]) -> pd.DataFrame:
    """One row per fold (in ``folds`` order, empty folds included) plus ``all``."""
    rows = [_fold_row(f, pairs[pairs["fold"] == f]) for f in folds]
    rows.append(_fold_row("all", pairs))
    return pd.DataFrame(rows, columns=STAT_COLUMNS)


def plot_pair_scores(pairs: pd.DataFrame, band: Sequence[float | None],
                     path: str | os.PathLike, title: str) -> Path:
    """Histograms of the reference scores of genuine and impostor pairs, band marked."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    scores = pairs["ref_score"].to_numpy(np.float64)
    lo, hi = (float(b) if b is not None else np.nan for b in band)
    observed = (scores.min(), scores.max()) if len(scores) else ()
    ends = [v for v in (lo, hi, *observed) if np.isfinite(v)] or [0.0, 1.0]
    edges = np.linspace(min(ends), max(max(ends), min(ends) + 1e-3), 41)
    for label, name, colour in ((1, "genuine", "#4c72b0"), (0, "impostor", "#dd8452")):
        s = pairs.loc[pairs["label"] == label, "ref_score"].to_numpy(np.float64)
        ax.hist(s, bins=edges, alpha=0.6, color=colour, label=f"{name} ({len(s):,})")
    for b in (lo, hi):
        if np.isfinite(b):
            ax.axvline(b, color="black", lw=0.8, ls="--")
    ax.set_xlabel("reference model cosine similarity")
    ax.set_ylabel("pairs")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path, dpi=100)[0]
