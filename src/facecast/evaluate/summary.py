"""Models x benchmarks summary tables, like CAST's Table 4 (accuracy mean +/- std and average)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from facecast.atomic import write_text
from facecast.parquet_io import read_parquet, write_parquet


def collect_metrics(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Concatenate per-(model, benchmark) metric rows."""
    frames = [read_parquet(p) for p in paths]
    if not frames:
        return pd.DataFrame(columns=["model", "benchmark"])
    return pd.concat(frames, ignore_index=True)


def wide_table(long: pd.DataFrame, value: str, benchmarks: Sequence[str],
               models: Sequence[str]) -> pd.DataFrame:
    """``value`` as a models x benchmarks table with an ``average`` column."""
    t = long.pivot(index="model", columns="benchmark", values=value)
    t = t.reindex(index=list(models), columns=list(benchmarks))
    t["average"] = t.mean(axis=1, skipna=False)  # a missing benchmark makes it undefined
    return t


def _fmt_pm(mean: float, std: float) -> str:
    if np.isnan(mean):
        return "–"
    return f"{100 * mean:.2f} ± {100 * std:.2f}"


def summary_markdown(long: pd.DataFrame, benchmarks: Sequence[str], models: Sequence[str],
                     fars: Sequence[float] = (1e-3, 1e-4)) -> str:
    """Markdown: accuracy (%, mean ± std over folds), then TAR@FAR, AUC and EER tables."""
    acc = wide_table(long, "accuracy", benchmarks, models)
    std = wide_table(long, "accuracy_std", benchmarks, models)
    cols = list(benchmarks) + ["average"]
    lines = ["# Verification summary", "",
             "10-fold accuracy (%, mean ± std over folds; best threshold on nine folds applied "
             "to the tenth). The average is over benchmarks (std: mean of the stds).", "",
             "| model | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for m in models:
        cells = [_fmt_pm(acc.loc[m, b], std.loc[m, b]) for b in cols]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    for title, value, scale in [(f"TAR at FAR={f:g} (%)",
                                 f"tar@far={f:.0e}".replace("e-0", "e-"), 100) for f in fars] + \
                               [("AUC (%)", "auc", 100), ("EER (%)", "eer", 100)]:
        if value not in long:
            continue
        t = wide_table(long, value, benchmarks, models)
        lines += ["", f"## {title}", "", "| model | " + " | ".join(cols) + " |",
                  "|---|" + "---|" * len(cols)]
        for m in models:
            lines.append(f"| {m} | " + " | ".join(
                "–" if np.isnan(t.loc[m, b]) else f"{scale * t.loc[m, b]:.2f}" for b in cols)
                + " |")
    return "\n".join(lines) + "\n"


def write_summary(metric_paths: Iterable[str | os.PathLike], out_parquet: str | os.PathLike,
                  out_md: str | os.PathLike, *, benchmarks: Sequence[str], models: Sequence[str],
                  fars: Sequence[float] = (1e-3, 1e-4),
                  provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Write the long metrics table (Parquet) and the Markdown summary; return the table."""
    long = collect_metrics(metric_paths)
    prov = dict(provenance or {})
    prov.update({"stage": "evaluate_summary"})
    write_parquet(long, out_parquet, provenance=prov)
    write_text(out_md, summary_markdown(long, benchmarks, models, fars))
    return long
