"""BFW's per-subgroup threshold tables (rule ``bfw_table``), laid out as Robinson et al.
(CVPRW 2020) lay them out: for each intended FMR, one global threshold for every subgroup
against each subgroup's own threshold; how far each subgroup's actual FMR deviates from
the intended one (``(FMR - intended) / intended``, in %); and BFW's TAR-at-FAR table -
one row per subgroup, one column per intended FMR, the TAR under the global threshold
above the TAR under the subgroup's own, and their unweighted mean over the subgroups
(``Avg.``, as BFW's table averages its rows).

The figures are the demographics section's (``group_thresholds.parquet`` of each model on
the protocol ``bfw``: :mod:`facecast.fairness.group_thresholds`); this module only lays
them out, one block per model: which pairs set the global threshold
(``demographics.global_pairs``; BFW's own code: the pairs within one subgroup), the
thresholds, the TAR table, the deviation under the global threshold and under the
subgroup's own, and where the protocol has folds both again cross-validated (thresholds
fitted on the other folds, so no figure is measured on its fitting data). A figure the
impostors cannot resolve (fewer than ``1 / FMR``: the subgroup's for its own threshold
and its deviations, the global set's for the global threshold) reads ``n/a (k
impostors)``; a TAR without genuine pairs ``n/a (0 genuine pairs)``.
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
COLUMNS = ["model", "target_fmr", "group", "global_pairs", "n_impostor", "n_genuine",
           "n_failed", "n_impostor_global", "resolvable", "global_threshold",
           "group_threshold", "fmr_global", "fmr_group", "deviation_global",
           "deviation_group", "tar_global", "tar_group", "deviation_global_cv",
           "deviation_group_cv", "tar_global_cv", "tar_group_cv"]
#: what each ``global_pairs`` rule fits the global threshold on (the page's words)
GLOBAL_WORDS = {"same_group": "the impostor pairs within one subgroup (a1 == a2), as BFW's "
                              "own code fits it",
                "all": "every impostor pair, pairs across subgroups too"}


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


def _tar(row: Any, target: float, key: str, cv: str) -> tuple[str, float]:
    """The cell of one TAR (text, value; NaN when n/a)."""
    n_imp = row["n_impostor_global"] if key == "global" else row["n_impostor"]
    if pd.notna(n_imp) and float(n_imp) * float(target) < 1:
        return f"n/a ({int(n_imp)} impostors)", np.nan
    if pd.notna(row["n_genuine"]) and int(row["n_genuine"]) == 0:
        return "n/a (0 genuine pairs)", np.nan
    v = row[f"tar_{key}{cv}"]
    return ("–", np.nan) if pd.isna(v) else (f"{v:.3f}", float(v))


def tar_block(sub: pd.DataFrame, groups: Sequence[str], cv: str = "") -> list[str]:
    """BFW's TAR-at-FAR table of one model: a row per subgroup and threshold (``global``
    above ``own``), a column per intended FMR, then ``Avg.`` (the unweighted mean over the
    subgroups; n/a when a subgroup's cell is)."""
    targets = list(dict.fromkeys(sub["target_fmr"]))
    lines = ["| subgroup | threshold | " + " | ".join(f"{t:g}" for t in targets) + " |",
             "|---|---|" + "---|" * len(targets)]
    by = sub.set_index(["group", "target_fmr"])
    values: dict[str, list[list[float]]] = {"global": [], "group": []}
    for g in groups:
        for key, word in (("global", "global"), ("group", "own")):
            cells = [_tar(by.loc[(g, t)], t, key, cv) if (g, t) in by.index else ("–", np.nan)
                     for t in targets]
            values[key].append([v for _, v in cells])
            lines.append(f"| {g} | {word} | " + " | ".join(c for c, _ in cells) + " |")
    for key, word in (("global", "global"), ("group", "own")):
        m = np.asarray(values[key], dtype=np.float64).reshape(-1, len(targets))
        cells = [f"{np.mean(col):.3f}" if col.size and np.isfinite(col).all()
                 else "n/a (a subgroup is n/a)" for col in m.T]
        lines.append(f"| Avg. | {word} | " + " | ".join(cells) + " |")
    return lines


def _threshold(value: float, n_impostor: float, target: float) -> str:
    """A threshold's cell: ``n/a (k impostors)`` when fewer than 1 / FMR impostors set it."""
    if pd.notna(n_impostor) and float(n_impostor) * float(target) < 1:
        return f"n/a ({int(n_impostor)} impostors)"
    return f"{value:.4f}" if np.isfinite(value) else "–"


def _model_lines(model: str, sub: pd.DataFrame) -> list[str]:
    """The section of one model (module docstring)."""
    groups = list(dict.fromkeys(sub["group"].astype(str)))
    rule = str(sub["global_pairs"].iloc[0]) if sub["global_pairs"].notna().any() else "all"
    n_glob = sub["n_impostor_global"].iloc[0]
    fitted = (f"{int(n_glob):,} impostor pairs" if pd.notna(n_glob) else "its impostors")
    lines = [f"## {model}", "",
             f"The global threshold is fitted on {GLOBAL_WORDS.get(rule, rule)} "
             f"(`demographics.global_pairs: {rule}`): {fitted}.", "",
             "### Thresholds (accept iff score >= threshold)", "",
             "| intended FMR | global | " + " | ".join(groups) + " |",
             "|---|---|" + "---|" * len(groups)]
    for target, rows in sub.groupby("target_fmr", sort=False):
        by = rows.set_index("group")
        own = [_threshold(by.loc[g, "group_threshold"], by.loc[g, "n_impostor"], target)
               if g in by.index else "–" for g in groups]
        glob = _threshold(rows["global_threshold"].iloc[0],
                          rows["n_impostor_global"].iloc[0], target)
        lines.append(f"| {target:g} | {glob} | " + " | ".join(own) + " |")
    lines += ["", "### TAR at the intended FMR: the global threshold (global) and the "
              "subgroup's own (own)", ""]
    lines += tar_block(sub, groups)
    for col, what in (("deviation_global", "under the global threshold"),
                      ("deviation_group", "under each subgroup's own threshold")):
        lines += ["", f"### Deviation (%) {what}", ""] + _block(sub, col, groups)
    if sub["deviation_group_cv"].notna().any():
        lines += ["", "### TAR at the intended FMR, cross-validated over the protocol's "
                  "folds", ""] + tar_block(sub, groups, "_cv")
        for col, what in (("deviation_global_cv", "under the global threshold"),
                          ("deviation_group_cv", "under each subgroup's own threshold")):
            lines += ["", f"### Deviation (%) {what}, cross-validated over the protocol's "
                      "folds", ""] + _block(sub, col, groups)
    return lines + [""]


def bfw_markdown(table: pd.DataFrame, ds: str) -> str:
    """One section per model: which pairs set the global threshold, the thresholds, BFW's
    TAR-at-FAR table, the deviation from the intended FMR under the global and under each
    subgroup's own threshold, and all of it cross-validated (module docstring)."""
    lines = [f"# BFW: per-subgroup thresholds ({ds})", "",
             "TAR: the share of a subgroup's genuine pairs accepted at the threshold set for "
             "the intended FMR, under one global threshold (above) and under the subgroup's "
             "own (below), as BFW's TAR-at-FAR table lists them; `Avg.` is their mean over "
             "the subgroups. Deviation from the intended FMR, `(FMR - intended) / intended` "
             "in %, of each subgroup's impostor pairs, as Robinson et al. (CVPRW 2020) "
             "report it; 0 = the intended FMR exactly. Cross-validated: each fold's pairs "
             "under thresholds fitted on the other folds. `n/a (k impostors)`: fewer than "
             "1 / FMR impostor pairs to set the threshold.", ""]
    for model, sub in table.groupby("model", sort=False):
        lines += _model_lines(str(model), sub)
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
