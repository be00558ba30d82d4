"""Dataset summary for the Snakemake report: image/identity counts and every status.

:func:`summarize_dataset` streams the manifest one row group (shard) at a time and the
faces shards one file at a time, so its memory is bounded by the number of identities,
not the number of images. It returns a tidy table (``table``, ``name``, ``count``,
``fraction``) that :func:`write_summary` saves as TSV and :func:`plot_summary` draws.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from facecast.io.atomic import write_text
from facecast.report.figures import fixed_grid_layout, pyplot, save_figure

SUMMARY_COLUMNS = ["table", "name", "count", "fraction"]


def _count_column(paths: Iterable[str | os.PathLike], column: str) -> Counter:
    counts: Counter = Counter()
    for path in paths:
        pf = pq.ParquetFile(path)
        for i in range(pf.num_row_groups):
            col = pf.read_row_group(i, columns=[column]).column(column)
            counts.update(col.to_pandas().fillna("<null>").astype(str).value_counts().to_dict())
    return counts


def _rows(table: str, counts: Counter | dict, total: int | None = None) -> list[dict]:
    total = sum(counts.values()) if total is None else total
    return [{"table": table, "name": str(name), "count": int(n),
             "fraction": (n / total) if total else 0.0}
            for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))]


def summarize_dataset(manifest: str | os.PathLike,
                      faces: Sequence[str | os.PathLike] = ()) -> pd.DataFrame:
    """Count images, identities, shards, splits and statuses of one dataset.

    Tables in the result (column ``table``): ``overview`` (images, identities, shards,
    excluded images, single-image identities, images per identity min/median/max),
    ``manifest_status``, ``split``, ``images_per_identity`` (how many identities have
    1, 2, ... images) and, when ``faces`` shard files are given, ``faces_status`` (one
    row per detection status, fractions of all images). Counts are exact; nothing is
    sampled.
    """
    pf = pq.ParquetFile(manifest)
    names = set(pf.schema_arrow.names)
    want = [c for c in ("identity", "status", "split", "shard", "exclude", "single_image")
            if c in names]
    status: Counter = Counter()
    split: Counter = Counter()
    identities: Counter = Counter()
    shards: set[str] = set()
    excluded = 0
    n_images = 0
    for i in range(pf.num_row_groups):
        df = pf.read_row_group(i, columns=want).to_pandas()
        n_images += len(df)
        status.update(df["status"].astype(str).value_counts().to_dict())
        if "split" in df:
            split.update(df["split"].fillna("<null>").astype(str).value_counts().to_dict())
        identities.update(df["identity"].fillna("<null>").astype(str).value_counts().to_dict())
        if "shard" in df:
            shards.update(df["shard"].astype(str).unique().tolist())
        if "exclude" in df:
            excluded += int(df["exclude"].fillna(False).astype(bool).sum())
    per_id = pd.Series(list(identities.values()), dtype="int64")
    overview = {
        "images": n_images,
        "identities": len(identities),
        "shards": len(shards),
        "excluded_images": excluded,
        "single_image_identities": int((per_id == 1).sum()),
        "images_per_identity_min": int(per_id.min()) if len(per_id) else 0,
        "images_per_identity_median": int(per_id.median()) if len(per_id) else 0,
        "images_per_identity_max": int(per_id.max()) if len(per_id) else 0,
    }
    denominators = {"excluded_images": n_images, "single_image_identities": len(identities)}
    rows = [{"table": "overview", "name": k, "count": v,
             "fraction": (v / denominators[k]) if denominators.get(k) else float("nan")}
            for k, v in overview.items()]
    rows += _rows("manifest_status", status)
    rows += _rows("split", split)
    hist = Counter(per_id.tolist())
    rows += [{"table": "images_per_identity", "name": str(k), "count": int(hist[k]),
              "fraction": hist[k] / len(per_id)} for k in sorted(hist)]
    if faces:
        faces_status = _count_column(faces, "status")
        n_faces_rows = sum(faces_status.values())
        if n_faces_rows != n_images:
            raise ValueError(f"faces shards hold {n_faces_rows} rows but the manifest "
                             f"{n_images}: every manifest row must reach the faces stage")
        rows += _rows("faces_status", faces_status, total=n_images)
    out = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    out["count"] = out["count"].astype("int64")
    out["fraction"] = out["fraction"].astype("float64").round(6)
    return out


def write_summary(summary: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write the summary as a tab-separated table (atomically: temp name, then rename)."""
    return write_text(path, summary.to_csv(sep="\t", index=False))


def plot_summary(summary: pd.DataFrame, path: str | os.PathLike, title: str = "") -> Path:
    """Draw the summary (statuses, splits, images per identity) to a PNG, deterministically."""
    plt = pyplot()

    panels = [("manifest_status", "manifest status"), ("faces_status", "detection status"),
              ("split", "split"), ("images_per_identity", "identities by image count")]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, (table, label) in zip(axes.ravel(), panels, strict=True):
        part = summary[summary["table"] == table]
        if part.empty:
            ax.text(0.5, 0.5, f"no {label}\n(stage not run)", ha="center", va="center")
            ax.set_axis_off()
            continue
        ax.bar(part["name"].astype(str), part["count"], color="#4c72b0")
        ax.set_title(label)
        ax.set_ylabel("images" if table != "images_per_identity" else "identities")
        ax.tick_params(axis="x", rotation=30)
    overview = summary[summary["table"] == "overview"].set_index("name")["count"]
    fig.suptitle(f"{title} — {overview.get('images', 0):,} images, "
                 f"{overview.get('identities', 0):,} identities, "
                 f"{overview.get('shards', 0):,} shards".strip(" —"))
    fig.tight_layout()
    return save_figure(fig, path, dpi=100)[0]


def dataset_summary(manifest: str | os.PathLike, faces: Sequence[str | os.PathLike],
                    table: str | os.PathLike, plot: str | os.PathLike,
                    title: str = "") -> pd.DataFrame:
    """Summarise a dataset and write its table (TSV) and plot (PNG); return the table."""
    summary = summarize_dataset(manifest, faces)
    write_summary(summary, table)
    plot_summary(summary, plot, title=title)
    return summary


def attribute_histograms(attributes: str | os.PathLike, bins: int = 40,
                         batch_size: int = 65_536) -> dict[str, tuple]:
    """Histogram (counts, edges, n, n_missing) of every float column of ``attributes``.

    Two streamed passes over the Parquet file (range, then counts), so memory does not
    grow with the number of rows. Only rows with ``status == "ok"`` count when the file
    has a status column; NaN values are counted as missing.
    """
    import numpy as np
    import pyarrow as pa

    # pre_buffer=False: with pyarrow's default (True) iter_batches buffers most of the
    # file (measured: 1.08 GB vs 0.20 GB for 2M rows x 48 float columns).
    pf = pq.ParquetFile(attributes, pre_buffer=False)
    schema = pf.schema_arrow
    cols = [f.name for f in schema if pa.types.is_floating(f.type)]
    has_status = "status" in schema.names

    def batches():
        for b in pf.iter_batches(batch_size=batch_size,
                                 columns=cols + (["status"] if has_status else [])):
            df = b.to_pandas()
            if has_status:
                df = df[df["status"].astype(str).isin(("ok", "aligned_input", "landmarks_given"))]
            yield df

    lo = {c: np.inf for c in cols}
    hi = {c: -np.inf for c in cols}
    for df in batches():
        for c in cols:
            v = df[c].to_numpy(np.float64)
            v = v[np.isfinite(v)]
            if len(v):
                lo[c], hi[c] = min(lo[c], v.min()), max(hi[c], v.max())
    out: dict[str, tuple] = {}
    edges = {c: np.linspace(lo[c], hi[c] if hi[c] > lo[c] else lo[c] + 1, bins + 1)
             for c in cols if np.isfinite(lo[c])}
    counts = {c: np.zeros(bins, np.int64) for c in edges}
    missing = dict.fromkeys(cols, 0)
    for df in batches():
        for c in cols:
            v = df[c].to_numpy(np.float64)
            ok = np.isfinite(v)
            missing[c] += int((~ok).sum())
            if c in edges:
                counts[c] += np.histogram(v[ok], bins=edges[c])[0]
    for c in cols:
        if c in edges:
            out[c] = (counts[c], edges[c], int(counts[c].sum()), missing[c])
        else:
            out[c] = (np.zeros(0, np.int64), np.zeros(0), 0, missing[c])
    return out


def plot_attribute_distributions(attributes: str | os.PathLike, path: str | os.PathLike,
                                 title: str = "", bins: int = 40) -> Path:
    """One small histogram per attribute column of ``attributes.parquet`` in a PNG grid."""
    import math

    plt = pyplot()

    hists = attribute_histograms(attributes, bins=bins)
    n = max(1, len(hists))
    ncol = min(6, n)
    nrow = math.ceil(n / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(2.6 * ncol, 2.0 * nrow), squeeze=False)
    for ax in axes.ravel():
        ax.set_axis_off()
    for ax, (name, (counts, edges, n_ok, n_missing)) in zip(axes.ravel(), hists.items(),
                                                           strict=False):
        ax.set_axis_on()
        if n_ok:
            ax.stairs(counts, edges, fill=True, color="#4c72b0")
        ax.set_title(f"{name}\nn={n_ok:,}" + (f", NaN {n_missing:,}" if n_missing else ""),
                     fontsize=7)
        ax.tick_params(labelsize=6)
    fixed_grid_layout(fig, nrow, ncol, title=title or "attribute distributions")
    return save_figure(fig, path, dpi=90)[0]
