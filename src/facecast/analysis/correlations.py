"""Attribute correlations, streamed over the attribute table's row groups.

Pearson correlation between every pair of numeric attribute columns, pairwise-complete
(a pair uses the rows where both columns have a value) with ``n`` per pair, as
``pandas.DataFrame.corr`` computes it. The table is never loaded whole: each batch adds its
sums to five p x p accumulators, computed with matrix products of the value matrix (missing
set to 0) and the validity mask (``N = M'M``, ``Sx = X'M``, ``Sxx = (X*X)'M``,
``Sxy = X'X``), in float64 after subtracting a per-column shift (the first batch's means),
so the combination over batches is exact up to float64 rounding and does not suffer
cancellation. Spearman is Pearson on ranks: each column is ranked once over its own
non-missing values (average ranks), which equals pandas' Spearman when no values are missing
(pandas re-ranks each pair's complete rows); it needs one column of ranks per attribute in
memory, so it is limited to ``spearman_max_rows`` rows.

Rows with ``status`` other than ``ok`` (or ``aligned_input``: pre-aligned input) are left out (their attributes are missing anyway).
A template attribute table (``analysis.level: template``,
:mod:`facecast.analysis.template_level`) is read the same way: its rows are templates, its
status ``ok`` or ``no_ok_image``.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from tqdm import tqdm

from facecast.analysis.ranks import average_ranks
from facecast.analysis.targets import correlation_outputs
from facecast.analysis.template_level import TEMPLATE_KEY_COLUMNS, table_level
from facecast.io.atomic import write_text
from facecast.io.parquet_io import write_parquet
from facecast.report.figures import pyplot, save_figure

log = logging.getLogger(__name__)

#: faces statuses whose rows count: ``aligned_input`` is pre-aligned input (detector none),
#: ``landmarks_given`` an IJB image aligned with its given landmarks
#: what a template-level Markdown table says about its rows
_TEMPLATE_NOTE = (" Rows are IJB templates (analysis.level: template): a template's "
                  "attributes are its images' mean (numeric) or majority (categorical); "
                  "templates without an ok image have no values.")
USABLE = pa.array(["ok", "aligned_input", "landmarks_given"])
NON_ATTRIBUTE_COLUMNS = {"image_id", "identity", "split", "exclude", "status", "message",
                         "shard", "path", "single_image"}


@dataclass
class CorrelationAccumulator:
    """Streaming pairwise-complete Pearson: feed batches with :meth:`update`."""

    names: list[str]
    shift: np.ndarray | None = None
    n: np.ndarray = field(init=False)
    sx: np.ndarray = field(init=False)
    sxx: np.ndarray = field(init=False)
    sxy: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        p = len(self.names)
        self.n, self.sx, self.sxx, self.sxy = (np.zeros((p, p)) for _ in range(4))

    def update(self, x: np.ndarray) -> None:
        """Add a batch (rows x columns, NaN = missing) to the sums."""
        x = np.asarray(x, dtype=np.float64)
        valid = ~np.isnan(x)
        if self.shift is None:
            with np.errstate(invalid="ignore"):
                cnt = valid.sum(0)
                self.shift = np.where(cnt > 0, np.nansum(x, 0) / np.maximum(cnt, 1), 0.0)
        m = valid.astype(np.float64)
        xc = np.where(valid, x - self.shift, 0.0)
        self.n += m.T @ m
        self.sx += xc.T @ m
        self.sxx += (xc * xc).T @ m
        self.sxy += xc.T @ xc

    def result(self, min_n: int = 2) -> tuple[np.ndarray, np.ndarray]:
        """(r, n): correlation matrix (NaN where undefined) and pairwise counts."""
        n = self.n
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_a = self.sx / n
            cov = self.sxy - self.sx * self.sx.T / n
            var_a = self.sxx - self.sx * mean_a
            var_b = var_a.T
            r = cov / np.sqrt(var_a * var_b)
        bad = (n < max(2, min_n)) | ~(var_a > 0) | ~(var_b > 0)
        r = np.where(bad, np.nan, np.clip(r, -1.0, 1.0))
        d = np.arange(len(self.names))
        r[d, d] = np.where(np.isnan(r[d, d]), np.nan, 1.0)
        return r, n.astype(np.int64)


def pearson_pairwise(x: np.ndarray | pd.DataFrame, min_n: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """In-memory pairwise-complete Pearson (r, n) of the columns of ``x``."""
    arr = x.to_numpy(dtype=np.float64) if isinstance(x, pd.DataFrame) else np.asarray(x, float)
    acc = CorrelationAccumulator([str(i) for i in range(arr.shape[1])])
    acc.update(arr)
    return acc.result(min_n)


def attribute_columns(schema: pa.Schema, include: Sequence[str] = (),
                      exclude: Sequence[str] = (), *, level: str = "image") -> list[str]:
    """Numeric attribute columns of an attribute table, in table order.

    ``include`` (if given) lists the columns to use; ``exclude`` holds fnmatch patterns.
    A ``level: template`` table's own columns (``n_images``, ...) are no attributes.
    """
    skip = NON_ATTRIBUTE_COLUMNS | (set(TEMPLATE_KEY_COLUMNS) if level == "template"
                                    else set())
    numeric = [f.name for f in schema
               if f.name not in skip
               and (pa.types.is_floating(f.type) or pa.types.is_integer(f.type)
                    or pa.types.is_boolean(f.type))]
    if include:
        unknown = [c for c in include if c not in numeric]
        if unknown:
            raise ValueError(f"correlation columns {unknown} are not numeric attribute columns; "
                             f"available: {numeric}")
        numeric = [c for c in numeric if c in set(include)]
    return [c for c in numeric if not any(fnmatch.fnmatchcase(c, p) for p in exclude)]


def _batches(path: str | os.PathLike, columns: list[str], batch_size: int
             ) -> Iterable[np.ndarray]:
    pf = pq.ParquetFile(path, pre_buffer=False)
    has_status = "status" in pf.schema_arrow.names
    read = columns + (["status"] if has_status else [])
    for batch in tqdm(pf.iter_batches(batch_size=batch_size, columns=read),
                      total=max(1, -(-pf.metadata.num_rows // batch_size)),
                      desc="correlations", mininterval=5):
        tbl = pa.Table.from_batches([batch])
        if has_status:
            tbl = tbl.filter(pc.is_in(tbl.column("status"), value_set=USABLE))
        yield np.column_stack([tbl.column(c).cast(pa.float64()).fill_null(np.nan)
                               .to_numpy(zero_copy_only=False) for c in columns]) \
            if tbl.num_rows else np.empty((0, len(columns)))


def stream_pearson(path: str | os.PathLike, columns: list[str], *, batch_size: int = 65_536,
                   min_n: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Pairwise-complete Pearson (r, n) of ``columns`` of a Parquet file, streamed."""
    acc = CorrelationAccumulator(list(columns))
    for x in _batches(path, columns, batch_size):
        if len(x):
            acc.update(x)
    return acc.result(min_n)


def column_ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks of the non-missing values (NaN stays NaN)."""
    out = np.full(values.shape, np.nan)
    ok = ~np.isnan(values)
    out[ok] = average_ranks(values[ok])
    return out


def stream_spearman(path: str | os.PathLike, columns: list[str], *, batch_size: int = 65_536,
                    min_n: int = 2, max_rows: int = 5_000_000) -> tuple[np.ndarray, np.ndarray]:
    """Spearman (r, n): Pearson of per-column ranks (see the module docstring)."""
    pf = pq.ParquetFile(path, pre_buffer=False)
    if pf.metadata.num_rows > max_rows:
        raise ValueError(f"Spearman needs per-column ranks in memory; {path} has "
                         f"{pf.metadata.num_rows} rows > correlations.spearman_max_rows="
                         f"{max_rows}. Raise the limit or use Pearson only.")
    x = np.concatenate([b for b in _batches(path, columns, batch_size)] or
                       [np.empty((0, len(columns)))])
    ranks = np.column_stack([column_ranks(x[:, j]) for j in range(x.shape[1])]) \
        if len(x) else x
    acc = CorrelationAccumulator(list(columns))
    for start in range(0, len(ranks), batch_size):
        acc.update(ranks[start:start + batch_size])
    return acc.result(min_n)


def ranked_pairs(r: np.ndarray, n: np.ndarray, names: Sequence[str],
                 min_abs_r: float | None = None) -> pd.DataFrame:
    """One row per unordered pair (``attr_a``, ``attr_b``, ``r``, ``n``), most negative first.

    ``min_abs_r`` keeps only pairs with ``|r| >= min_abs_r`` (undefined r dropped); without
    it every pair is listed, undefined ones last. Ties sort by the names.
    """
    i, j = np.triu_indices(len(names), k=1)
    df = pd.DataFrame({"attr_a": np.asarray(names, dtype=object)[i],
                       "attr_b": np.asarray(names, dtype=object)[j],
                       "r": r[i, j], "n": n[i, j].astype(np.int64)})
    if min_abs_r is not None:
        df = df[df["r"].abs() >= min_abs_r]
    df = df.sort_values(["r", "attr_a", "attr_b"], kind="mergesort", na_position="last")
    return df.reset_index(drop=True)


def cluster_order(r: np.ndarray) -> np.ndarray:
    """Column order from average-linkage clustering on ``1 - |r|`` (undefined r = 1)."""
    from scipy.cluster.hierarchy import leaves_list, linkage, optimal_leaf_ordering
    from scipy.spatial.distance import squareform

    p = len(r)
    if p < 3:
        return np.arange(p)
    d = 1.0 - np.abs(np.nan_to_num(r, nan=0.0))
    d = (d + d.T) / 2.0
    np.fill_diagonal(d, 0.0)
    cond = squareform(np.clip(d, 0.0, None), checks=False)
    z = linkage(cond, method="average")
    return leaves_list(optimal_leaf_ordering(z, cond))


def plot_heatmap(r: np.ndarray, names: Sequence[str], paths: Iterable[str | os.PathLike],
                 title: str, *, also: Sequence[tuple[np.ndarray, Iterable[str | os.PathLike],
                                                     str]] = ()) -> None:
    """Draw ``r`` (already ordered) as a diverging heatmap and save it to each path; each
    ``(matrix, paths, title)`` of ``also`` (same names and order) is drawn into the same
    figure afterwards (one layout pass for all: the tick labels are most of the cost)."""
    plt = pyplot()
    p = len(names)
    size = max(6.0, 0.28 * p + 2.5)
    fig, ax = plt.subplots(figsize=(size, size * 0.9))
    # "none": the SVG keeps the p x p cells as they are (not a resampled picture of them),
    # and the PNG is drawn as with "nearest"; about a second less per figure at p = 89
    im = ax.imshow(np.ma.masked_invalid(r), cmap="RdBu_r", vmin=-1, vmax=1,
                   interpolation="none")
    ax.set_xticks(range(p), names, rotation=90, fontsize=max(4, 9 - p // 15))
    ax.set_yticks(range(p), names, fontsize=max(4, 9 - p // 15))
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="r")
    fig.tight_layout()
    save_figure(fig, paths, dpi=120, close=False)
    for matrix, more_paths, more_title in also:
        im.set_data(np.ma.masked_invalid(matrix))
        ax.set_title(more_title)
        save_figure(fig, more_paths, dpi=120, close=False)
    plt.close(fig)


def markdown_table(df: pd.DataFrame, floatfmt: str = ".3f") -> str:
    """A GitHub Markdown table of ``df`` (floats formatted with ``floatfmt``)."""
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        cells = [format(v, floatfmt) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_correlations(attributes_path: str | os.PathLike, out_dir: str | os.PathLike,
                       cfg: Mapping[str, Any], *,
                       provenance: Mapping[str, Any] | None = None) -> dict[str, pd.DataFrame]:
    """Compute every configured method's matrix, pair tables and heatmaps into ``out_dir``.

    The level of the table (:func:`facecast.analysis.template_level.table_level`: an IJB
    template attribute table with ``analysis.level: template``) goes to every Parquet
    file's provenance (``level``) and the Markdown table's title. Returns the filtered
    pair table of each method.
    """
    schema = pq.read_schema(attributes_path)
    level = table_level(attributes_path)
    cols = attribute_columns(schema, cfg.get("columns", []), cfg.get("exclude_columns", []),
                             level=level)
    if len(cols) < 2:
        raise ValueError(f"{attributes_path}: fewer than two numeric attribute columns "
                         f"to correlate ({cols})")
    min_abs_r = float(cfg.get("min_abs_r", 0.30))
    min_n = int(cfg.get("min_n", 3))
    batch = int(cfg.get("batch_size", 65_536))
    results = {}
    for method in cfg.get("methods", ["pearson"]):
        if method == "pearson":
            r, n = stream_pearson(attributes_path, cols, batch_size=batch, min_n=min_n)
        elif method == "spearman":
            r, n = stream_spearman(attributes_path, cols, batch_size=batch, min_n=min_n,
                                   max_rows=int(cfg.get("spearman_max_rows", 5_000_000)))
        else:
            raise ValueError(f"unknown correlation method {method!r} (pearson | spearman)")
        out = correlation_outputs(out_dir, method)
        prov = dict(provenance or {})
        prov.update({"stage": "correlations", "method": method, "min_abs_r": min_abs_r,
                     "level": level})
        matrix = pd.DataFrame(r, columns=cols)
        matrix.insert(0, "attribute", cols)
        write_parquet(matrix, out["matrix"], provenance=prov)
        pairs = ranked_pairs(r, n, cols)
        filtered = ranked_pairs(r, n, cols, min_abs_r)
        write_parquet(pairs, out["pairs"], provenance=prov)
        write_parquet(filtered, out["filtered"], provenance=prov)
        write_text(out["pairs_tsv"], pairs.to_csv(sep="\t", index=False, float_format="%.6f"))
        write_text(out["filtered_tsv"],
                   filtered.to_csv(sep="\t", index=False, float_format="%.6f"))
        write_text(out["filtered_md"],
            f"# {method.capitalize()} correlations with |r| >= {min_abs_r:g}\n\n"
            f"{len(filtered)} of {len(pairs)} attribute pairs; most negative first."
            + (_TEMPLATE_NOTE if level == "template" else "") + "\n\n"
            + markdown_table(filtered))
        order = cluster_order(r)
        ro, names = r[np.ix_(order, order)], [cols[k] for k in order]
        thr = np.where(np.abs(ro) >= min_abs_r, ro, 0.0)
        plot_heatmap(ro, names, [out["heatmap_png"], out["heatmap_svg"]],
                     f"{method.capitalize()} r (clustered)",
                     also=[(thr, [out["thresholded_png"], out["thresholded_svg"]],
                            f"{method.capitalize()} r, |r| < {min_abs_r:g} set to 0")])
        log.info("%s: %d attributes, %d pairs, %d with |r| >= %g", method, len(cols),
                 len(pairs), len(filtered), min_abs_r)
        results[method] = filtered
    return results
