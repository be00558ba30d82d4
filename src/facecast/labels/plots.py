"""Figures of the label audit (kappa bars, F1 vs prevalence, phi, measurements, suspects)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from facecast.io.atomic import atomic_path
from facecast.report.figures import pyplot, save_figure

__all__ = ["f1_prevalence_plot", "kappa_plot", "measurement_plot", "phi_plot", "suspects_grid"]


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()


def kappa_plot(kappa: pd.DataFrame, path: str | os.PathLike) -> None:
    """Bar chart of Fleiss' kappa per attribute (invariant attributes dark)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(5, 0.35 * len(kappa) + 2), 3.5))
    k = kappa.sort_values("fleiss_kappa", ascending=False, na_position="last")
    vals = k["fleiss_kappa"].to_numpy(dtype=float)
    colors = ["#2b5d8a" if inv else "#9bb7d4" for inv in k["invariant"]]
    ax.bar(range(len(k)), np.nan_to_num(vals), color=colors)
    ax.set_xticks(range(len(k)), k["attribute"], rotation=60, ha="right", fontsize=8)
    for thr in (0.3, 0.5):
        ax.axhline(thr, color="grey", lw=0.8, ls="--")
    ax.set_ylabel("Fleiss' kappa (identities x images)")
    ax.set_title("Label consistency within identities (dark = declared invariant)")
    fig.tight_layout()
    save_figure(fig, path)


def f1_prevalence_plot(metrics: pd.DataFrame, path: str | os.PathLike) -> None:
    """F1, precision and recall of the main model source against prevalence rank."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    src = [s for s in metrics["source"].unique() if s != "baseline"]
    base = metrics[metrics["source"] == "baseline"].set_index("attribute")
    if not src or base.empty:
        _note(ax, "n/a: no model predictions to score")
    else:
        m = metrics[metrics["source"] == src[0]].set_index("attribute")
        order = base["prevalence"].sort_values().index
        x = np.arange(len(order))
        for col, mk in (("f1", "o-"), ("precision", "s--"), ("recall", "^--")):
            ax.plot(x, m[col].reindex(order).to_numpy(dtype=float), mk, label=col)
        ax.plot(x, base["all_positive_f1"].reindex(order).to_numpy(dtype=float), "k:",
                label="all-positive F1")
        ax.set_xticks(x, order, rotation=60, ha="right", fontsize=8)
        ax.set_xlabel("attribute, by prevalence rank")
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize=7)
        ax.set_title(f"{src[0]}: F1 / precision / recall vs prevalence")
    fig.tight_layout()
    save_figure(fig, path)


def phi_plot(phi_label: pd.DataFrame, phi_pred: pd.DataFrame | None,
             path: str | os.PathLike) -> None:
    """Heatmaps of the label phi matrix, the prediction phi matrix and their difference."""
    plt = pyplot()
    mats = [("labels", phi_label)]
    if phi_pred is not None:
        mats += [("predictions", phi_pred), ("pred - label", phi_pred - phi_label)]
    fig, axes = plt.subplots(1, len(mats), figsize=(4 * len(mats), 3.6), squeeze=False)
    for ax, (title, m) in zip(axes[0], mats, strict=True):
        im = ax.imshow(m.to_numpy(dtype=float), vmin=-1, vmax=1, cmap="RdBu_r")
        ax.set_xticks(range(len(m)), m.columns, rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(len(m)), m.index, fontsize=7)
        ax.set_title(f"phi: {title}", fontsize=9)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8)
    save_figure(fig, path)


def measurement_plot(features: pd.DataFrame | None, labels: pd.DataFrame,
                     path: str | os.PathLike, max_panels: int = 8) -> None:
    """Histograms of landmark measurements split by label: the ``max_panels`` (measure,
    attribute) pairs with the largest standardised mean difference."""
    plt = pyplot()
    meas = [] if features is None else [c for c in features.columns
                                        if c.startswith("m_") and
                                        pd.api.types.is_numeric_dtype(features[c])]
    if features is None or not meas or labels.empty:
        fig, ax = plt.subplots(figsize=(5, 2))
        _note(ax, "n/a: no landmark measurements (stage features off or empty)")
        save_figure(fig, path)
        return
    f = features.set_index("image_id").reindex(labels.index)
    effects = []  # |standardised mean difference| between label 1 and label 0
    for a in labels.columns:
        y = labels[a].to_numpy(dtype=float)
        for m in meas:
            x = f[m].to_numpy(dtype=float)
            x1, x0 = x[(y == 1) & np.isfinite(x)], x[(y == 0) & np.isfinite(x)]
            if x1.size >= 2 and x0.size >= 2:
                sd = np.sqrt((x1.var(ddof=1) + x0.var(ddof=1)) / 2)
                effects.append((abs(x1.mean() - x0.mean()) / sd if sd > 0 else 0.0, m, a))
    pairs = [(m, a) for _, m, a in sorted(effects, key=lambda t: -t[0])[:max_panels]]
    cols = 4
    rows = int(np.ceil(len(pairs) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3 * cols, 2.2 * rows), squeeze=False)
    for ax, (m, a) in zip(axes.ravel(), pairs, strict=False):
        x = f[m].to_numpy(dtype=float)
        y = labels[a].to_numpy(dtype=float)
        for v, col in ((0, "#9bb7d4"), (1, "#c0504d")):
            sel = np.isfinite(x) & (y == v)
            if sel.any():
                ax.hist(x[sel], bins=20, alpha=0.6, color=col, label=f"{a}={v}", density=True,
                        histtype="stepfilled")
        ax.set_title(f"{m} by {a}", fontsize=8)
        ax.legend(fontsize=6)
    for ax in axes.ravel()[len(pairs):]:
        ax.set_axis_off()
    fig.subplots_adjust(hspace=0.45, wspace=0.3, left=0.05, right=0.98, top=0.93, bottom=0.08)
    save_figure(fig, path)


def suspects_grid(top: pd.DataFrame, faces: Sequence[str], path: str | os.PathLike) -> None:
    """One row of thumbnails per attribute: its most suspect labels, captioned."""
    from facecast.fairness.hardpairs import TILE, load_tiles

    attrs = list(dict.fromkeys(top["attribute"]))
    width = max(int(top.groupby("attribute").size().max()) if len(top) else 1, 1)
    tiles = load_tiles(top["image_id"].tolist(), faces)
    cap = 24
    canvas = Image.new("RGB", (120 + width * TILE, max(len(attrs), 1) * (TILE + cap)), "white")
    draw = ImageDraw.Draw(canvas)
    if not attrs:
        draw.text((10, 10), "no suspects", fill="black")
    for r, a in enumerate(attrs):
        y0 = r * (TILE + cap)
        draw.text((4, y0 + TILE // 2), a, fill="black")
        for k, row in enumerate(top[top["attribute"] == a].itertuples()):
            x0 = 120 + k * TILE
            tile = tiles.get(row.image_id)
            if tile is not None:
                canvas.paste(tile, (x0, y0))
            else:
                draw.rectangle([x0, y0, x0 + TILE - 1, y0 + TILE - 1], outline="grey")
            draw.text((x0 + 2, y0 + TILE + 2), f"y={int(row.label)} s={row.score:.2f}",
                      fill="black")
    with atomic_path(Path(path)) as tmp:
        canvas.save(tmp, format="PNG")
