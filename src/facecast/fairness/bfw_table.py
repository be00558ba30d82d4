"""BFW's per-subgroup threshold table (rule ``bfw_table``), laid out as Robinson et al.
(CVPRW 2020) lay it out: for each intended FMR, one global threshold for every subgroup
against each subgroup's own threshold, and how far each subgroup's actual FMR deviates
from the intended one (``(FMR - intended) / intended``, in %).

The figures are the demographics section's (``group_thresholds.parquet`` of each model on
the protocol ``bfw``: :mod:`facecast.fairness.group_thresholds`); this module only lays
them out, one block per model: the thresholds, the deviation under the global threshold
and under the subgroup's own (cross-validated where the protocol has folds: thresholds
fitted on the other folds, so the own threshold's deviation is not measured on its fitting
data). An intended FMR the subgroup's impostors cannot resolve (fewer than ``1 / FMR``)
reads ``n/a (k impostors)``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.report.html_tables import write_markdown_html

#: columns of the long table (one row per model, intended FMR and subgroup)
COLUMNS = ["model", "target_fmr", "group", "n_impostor", "resolvable", "global_threshold",
           "group_threshold", "fmr_global", "fmr_group", "deviation_global",
           "deviation_group", "deviation_global_cv", "deviation_group_cv"]


def bfw_table(paths: Mapping[str, str | os.PathLike]) -> pd.DataFrame:
    """The long table (:data:`COLUMNS`) of ``model -> group_thresholds.parquet``."""
    frames = []
    for model, path in paths.items():
        g = read_parquet(path)
        g.insert(0, "model", model)
        for c in COLUMNS:
            if c not in g:
                g[c] = np.nan
        frames.append(g[COLUMNS])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def _dev(row: Any, col: str) -> str:
    if not bool(row["resolvable"]):
        return f"n/a ({int(row['n_impostor'])} impostors)"
    v = row[col]
    return "–" if pd.isna(v) else f"{100 * v:+.1f}"


def _block(sub: pd.DataFrame, col: str, groups: Sequence[str]) -> list[str]:
    lines = ["| intended FMR | " + " | ".join(groups) + " |", "|---|" + "---|" * len(groups)]
    for target, rows in sub.groupby("target_fmr", sort=False):
        by = rows.set_index("group")
        cells = [_dev(by.loc[g], col) if g in by.index else "–" for g in groups]
        lines.append(f"| {target:g} | " + " | ".join(cells) + " |")
    return lines


def bfw_markdown(table: pd.DataFrame, ds: str) -> str:
    """One section per model: thresholds, then the deviation from the intended FMR under
    the global and under each subgroup's own threshold (module docstring)."""
    lines = [f"# BFW: per-subgroup thresholds ({ds})", "",
             "Deviation from the intended FMR, `(FMR - intended) / intended` in %, of each "
             "subgroup's impostor pairs: under one global threshold (set on every impostor "
             "pair) and under the subgroup's own threshold (set on its impostors), as Robinson "
             "et al. (CVPRW 2020) report it. 0 = the intended FMR exactly. `n/a (k "
             "impostors)`: the subgroup has fewer than 1 / FMR impostor pairs.", ""]
    for model, sub in table.groupby("model", sort=False):
        groups = list(dict.fromkeys(sub["group"].astype(str)))
        lines += [f"## {model}", "", "### Thresholds (accept iff score >= threshold)", "",
                  "| intended FMR | global | " + " | ".join(groups) + " |",
                  "|---|---|" + "---|" * len(groups)]
        for target, rows in sub.groupby("target_fmr", sort=False):
            by = rows.set_index("group")
            own = [f"{by.loc[g, 'group_threshold']:.4f}" if g in by.index
                   and np.isfinite(by.loc[g, "group_threshold"]) else "–" for g in groups]
            lines.append(f"| {target:g} | {rows['global_threshold'].iloc[0]:.4f} | "
                         + " | ".join(own) + " |")
        lines += ["", "### Deviation (%) under the global threshold", ""]
        lines += _block(sub, "deviation_global", groups)
        lines += ["", "### Deviation (%) under each subgroup's own threshold", ""]
        lines += _block(sub, "deviation_group", groups)
        if sub["deviation_group_cv"].notna().any():
            lines += ["", "### Deviation (%) under each subgroup's own threshold, "
                      "cross-validated over the protocol's folds", ""]
            lines += _block(sub, "deviation_group_cv", groups)
        lines.append("")
    return "\n".join(lines) + "\n"


def write_bfw_table(paths: Mapping[str, str | os.PathLike], out_parquet: str | os.PathLike,
                    out_md: str | os.PathLike, out_html: str | os.PathLike, *, ds: str = "",
                    provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Write the table as Parquet, Markdown and its HTML twin (for the report)."""
    table = bfw_table(paths)
    write_parquet(table, out_parquet, provenance={**dict(provenance or {}),
                                                  "stage": "bfw_table"})
    write_text(out_md, bfw_markdown(table, ds))
    write_markdown_html(out_md, out_html)
    return table
