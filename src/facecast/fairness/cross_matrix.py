"""Cross-demographic impostor FMR matrices (NISTIR 8280's heatmaps).

For one attribute (the protected ``group``, one protected or legitimate attribute, an age
bin ...) with values v_1..v_k, and each global threshold t, cell (i, j) holds the FMR of
ALL impostor pairs whose images have values v_i and v_j (unordered: cell (i, j) and (j, i)
are the same pairs, so the matrix is symmetric), with the false-match count, the impostor
count and a binomial interval. Accept iff ``score >= t``. An empty cell is NaN with
``n_impostor = 0`` (shown as ``n/a (0 impostors)``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from facecast.fairness.threshold import binomial_interval
from facecast.report.figures import pyplot, save_figure

MATRIX_COLUMNS = ["attribute", "threshold_name", "threshold", "value_i", "value_j",
                  "n_impostor", "false_matches", "fmr", "fmr_lo", "fmr_hi", "fmr_text"]


def fmr_matrix(scores: np.ndarray, value_a: np.ndarray, value_b: np.ndarray,
               thresholds: Sequence[float], names: Sequence[str], *,
               order: Sequence[str] | None = None, attribute: str = "group",
               confidence: float = 0.95, method: str = "wilson") -> pd.DataFrame:
    """Long table of the impostor FMR matrix (both triangles; see the module docstring).

    ``scores``, ``value_a``, ``value_b`` describe impostor pairs only; pairs with a
    missing value or a NaN score are left out; a ``-inf`` score (a failed pair under
    ``evaluate.failed: nonmatch``) counts as a correct reject. ``names`` name the thresholds.
    """
    s = np.asarray(scores, dtype=np.float64)
    va = np.asarray(value_a, dtype=object)
    vb = np.asarray(value_b, dtype=object)
    # a failed pair (-inf under evaluate.failed: nonmatch) is an impostor comparison
    # that no threshold accepts: counted, never a false match
    ok = pd.notna(va) & pd.notna(vb) & ~np.isnan(s)
    va, vb, s = va[ok].astype(str), vb[ok].astype(str), s[ok]
    values = list(order) if order is not None else sorted(set(va) | set(vb))
    values += sorted((set(va) | set(vb)) - set(values))
    idx = {v: i for i, v in enumerate(values)}
    ia = np.array([idx[v] for v in va], dtype=np.int64)
    ib = np.array([idx[v] for v in vb], dtype=np.int64)
    lo_i, hi_i = np.minimum(ia, ib), np.maximum(ia, ib)
    k = len(values)
    cell = lo_i * max(k, 1) + hi_i
    n_cells = max(k * k, 1)
    n = np.bincount(cell, minlength=n_cells)
    rows = []
    for name, t in zip(names, thresholds, strict=True):
        fm = np.bincount(cell, weights=(s >= t).astype(np.float64), minlength=n_cells)
        for i in range(k):
            for j in range(k):
                c = min(i, j) * k + max(i, j)
                rows.append((attribute, name, float(t), values[i], values[j], int(n[c]),
                             int(fm[c])))
    out = pd.DataFrame(rows, columns=MATRIX_COLUMNS[:7])
    with np.errstate(invalid="ignore", divide="ignore"):
        out["fmr"] = out["false_matches"] / out["n_impostor"].where(out["n_impostor"] > 0)
    out["fmr_lo"], out["fmr_hi"] = binomial_interval(out["false_matches"], out["n_impostor"],
                                                     confidence, method)
    out["fmr_text"] = [f"{f}/{m}" if m else "n/a (0 impostors)"
                       for f, m in zip(out["false_matches"], out["n_impostor"], strict=True)]
    return out[MATRIX_COLUMNS]


def cross_matrices(ann: pd.DataFrame, attributes: Sequence[str],
                   thresholds: pd.DataFrame, orders: Mapping[str, Sequence[str]], *,
                   confidence: float = 0.95, method: str = "wilson") -> pd.DataFrame:
    """:func:`fmr_matrix` for every attribute (columns ``<attr>_a``/``<attr>_b`` of the
    annotated pairs; ``group`` uses ``group_a``/``group_b``) at every global threshold."""
    imp = ann[ann["label"] == 0]
    frames = []
    for attr in attributes:
        a, b = f"{attr}_a", f"{attr}_b"
        if a not in imp.columns:
            raise KeyError(f"no per-image values for attribute {attr!r}")
        frames.append(fmr_matrix(imp["score"].to_numpy(), imp[a].to_numpy(object),
                                 imp[b].to_numpy(object), thresholds["threshold"].tolist(),
                                 thresholds["name"].tolist(), order=orders.get(attr),
                                 attribute=attr, confidence=confidence, method=method))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=MATRIX_COLUMNS)


def plot_matrices(table: pd.DataFrame, path: str | os.PathLike, title: str = "") -> None:
    """Annotated heatmaps: one row per attribute, one column per threshold; each cell
    shows the FMR and ``false matches / impostors``."""
    plt = pyplot()
    attrs = list(dict.fromkeys(table["attribute"]))
    thrs = list(dict.fromkeys(table["threshold_name"]))
    if not attrs or not thrs:
        fig, ax = plt.subplots(figsize=(4, 2))
        ax.text(0.5, 0.5, "no impostor pairs with labels", ha="center")
        ax.axis("off")
        save_figure(fig, path)
        return
    sizes = [table.loc[table["attribute"] == a, "value_i"].nunique() for a in attrs]
    fig, axes = plt.subplots(len(attrs), len(thrs), squeeze=False,
                             figsize=(4.2 * len(thrs), sum(max(2.2, 0.75 * k + 1)
                                                           for k in sizes)),
                             gridspec_kw={"height_ratios": [max(k, 2) for k in sizes]},
                             constrained_layout=True)
    for r, attr in enumerate(attrs):
        for c, tname in enumerate(thrs):
            ax = axes[r, c]
            sub = table[(table["attribute"] == attr) & (table["threshold_name"] == tname)]
            vals = list(dict.fromkeys(sub["value_i"]))
            k = len(vals)
            mat = sub["fmr"].to_numpy(np.float64).reshape(k, k)
            txt = sub["fmr_text"].to_numpy(object).reshape(k, k)
            shown = np.where(np.isfinite(mat), mat, np.nan)
            im = ax.imshow(np.log10(np.maximum(shown, 1e-6)), cmap="viridis",
                           vmin=-6, vmax=0)
            for i in range(k):
                for j in range(k):
                    label = (f"{mat[i, j]:.2g}\n{txt[i, j]}" if np.isfinite(mat[i, j])
                             else "n/a")
                    ax.text(j, i, label, ha="center", va="center", fontsize=6,
                            color="white")
            ax.set_xticks(range(k), vals, rotation=45, ha="right", fontsize=7)
            ax.set_yticks(range(k), vals, fontsize=7)
            ax.set_title(f"{attr} @ {tname}", fontsize=8)
        fig.colorbar(im, ax=axes[r, -1], label="log10 FMR", shrink=0.8)
    fig.suptitle(title or "impostor FMR by demographic pair", fontsize=9)
    save_figure(fig, path, dpi=100)

