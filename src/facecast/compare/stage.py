"""What rule ``compare`` calls: every pair of models on every benchmark of a dataset
(:mod:`facecast.compare.paired`), Holm-corrected across benchmarks, and leaderboards that
say "tie" where a difference is not significant.

Writes into ``results/{ds}/compare/``: ``differences.parquet/.csv`` (one row per
benchmark, model pair and metric), ``leaderboard.parquet/.csv`` (per benchmark, models by
10-fold accuracy with ``tie`` marks), ``leaderboard.md`` and ``report.html``.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from facecast.compare.paired import align, compare_pair, holm
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.report.html_tables import frame_html, write_html_page

log = logging.getLogger(__name__)


def leaderboard(values: Mapping[str, float], significant: Mapping[tuple[str, str], bool]
                ) -> pd.DataFrame:
    """Models by accuracy (best first); a model whose difference to the one above is not
    significant is a ``tie`` and shares its rank."""
    order = sorted(values, key=lambda m: (-np.nan_to_num(values[m], nan=-np.inf), m))
    rows, rank = [], 0
    for i, m in enumerate(order):
        prev = order[i - 1] if i else None
        sig = True if prev is None else significant.get(
            (prev, m), significant.get((m, prev), False))
        tie = prev is not None and not sig
        rank = rank if tie else i + 1
        rows.append({"model": m, "accuracy": values[m], "rank": rank,
                     "vs_above": "" if prev is None else ("tie" if tie else "better")})
    return pd.DataFrame(rows)


def run_compare(scores: Mapping[str, Mapping[str, str | os.PathLike]],
                out_dir: str | os.PathLike, cfg: Mapping[str, Any], *, fars: Sequence[float],
                seed: int, provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """``scores[benchmark][model]`` = scored pairs; writes every output, returns the
    differences table."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prov = {**dict(provenance or {}), "stage": "compare"}
    fmr = float(cfg.get("fmr", 1e-3))
    alpha = float(cfg.get("alpha", 0.05))
    n_boot = int(cfg.get("n_boot", 1000))
    rows, accs = [], {}
    jobs = [(bench, a, b) for bench, models in scores.items()
            for a, b in itertools.combinations(sorted(models), 2)]
    frames = {(bench, m): read_parquet(path) for bench, models in scores.items()
              for m, path in models.items()}
    for bench, a, b in tqdm(jobs, desc="model pairs", mininterval=5):
        paired = align(frames[(bench, a)], frames[(bench, b)])
        if len(paired.label) == 0 or len(np.unique(paired.label)) < 2:
            log.warning("%s: %s and %s share no scored pairs of both labels", bench, a, b)
            continue
        table, mc = compare_pair(paired, fars=fars, fmr=fmr, n_boot=n_boot, seed=seed,
                                 confidence=float(cfg.get("confidence", 0.95)))
        n_imp = int((paired.label == 0).sum())
        resolvable = n_imp * fmr >= 1 - 1e-9
        table.insert(0, "benchmark", bench)
        table.insert(1, "model_a", a)
        table.insert(2, "model_b", b)
        for k, v in mc.items():
            table[k] = v
        table["fmr_resolvable"] = resolvable
        rows.append(table)
        accs.setdefault(bench, {})[a] = float(table["value_a"].iat[0])
        accs.setdefault(bench, {})[b] = float(table["value_b"].iat[0])
    cols = ["benchmark", "model_a", "model_b", "metric", "value_a", "value_b", "difference",
            "lo", "hi", "p_boot", "n_boot", "mcnemar_a_only", "mcnemar_b_only", "mcnemar_p",
            "n_pairs", "fmr_resolvable"]
    diff = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=cols)
    # Holm across benchmarks, per model pair and metric (and for McNemar per model pair)
    diff["p_holm"] = np.nan
    diff["mcnemar_p_holm"] = np.nan
    for _, idx in diff.groupby(["model_a", "model_b", "metric"]).groups.items():
        diff.loc[idx, "p_holm"] = holm(diff.loc[idx, "p_boot"].to_numpy(np.float64))
    first = diff.drop_duplicates(["benchmark", "model_a", "model_b"])
    for _, sub in first.groupby(["model_a", "model_b"]):
        adj = holm(sub["mcnemar_p"].to_numpy(np.float64))
        for (bench, a, b), v in zip(sub[["benchmark", "model_a", "model_b"]].itertuples(
                index=False, name=None), adj, strict=True):
            m = (diff["benchmark"] == bench) & (diff["model_a"] == a) & (diff["model_b"] == b)
            diff.loc[m, "mcnemar_p_holm"] = v
    diff["significant"] = diff["p_holm"] <= alpha
    diff["verdict"] = np.where(~diff["significant"], "tie",
                               np.where(diff["difference"] > 0, "a better", "b better"))
    boards = []
    for bench, values in accs.items():
        sub = diff[(diff["benchmark"] == bench) & (diff["metric"] == "accuracy")]
        sig = {(r.model_a, r.model_b): bool(r.significant) for r in sub.itertuples()}
        boards.append(leaderboard(values, sig).assign(benchmark=bench))
    board = pd.concat(boards, ignore_index=True)[["benchmark", "rank", "model", "accuracy",
                                                  "vs_above"]] if boards else pd.DataFrame(
        columns=["benchmark", "rank", "model", "accuracy", "vs_above"])
    write_parquet(diff, out / "differences.parquet", provenance=prov)
    write_text(out / "differences.csv", diff.to_csv(index=False))
    write_parquet(board, out / "leaderboard.parquet", provenance=prov)
    write_text(out / "leaderboard.csv", board.to_csv(index=False))
    md = ["# Model comparisons", "",
          f"Paired on the same pairs; identity-clustered paired bootstrap ({n_boot} "
          f"replicates), Holm across benchmarks at {alpha:g}; `tie` = the difference to the "
          "model above is not significant.", ""]
    for bench, sub in board.groupby("benchmark", sort=False):
        md += [f"## {bench}", "", "| rank | model | accuracy | vs above |", "|---|---|---|---|"]
        md += [f"| {r.rank} | {r.model} | {100 * r.accuracy:.2f} % | {r.vs_above} |"
               for r in sub.itertuples()]
        md.append("")
    write_text(out / "leaderboard.md", "\n".join(md))
    shown = ["benchmark", "model_a", "model_b", "metric", "value_a", "value_b", "difference",
             "lo", "hi", "p_holm", "verdict", "mcnemar_a_only", "mcnemar_b_only",
             "mcnemar_p_holm", "n_pairs"]
    write_html_page(out / "report.html", "Model comparisons", [
        "<p>Differences A - B on the same pairs: 10-fold accuracy, AUC, TAR at each FAR "
        f"and FNMR at a shared FMR {fmr:g} (each model at its own threshold); "
        f"{int(100 * float(cfg.get('confidence', 0.95)))} % identity-clustered paired "
        "bootstrap intervals, two-sided bootstrap p, Holm across benchmarks; exact McNemar "
        "on the accept decisions at the shared FMR (Holm across benchmarks).</p>",
        frame_html(board, caption="leaderboards (tie = not significantly different from "
                                  "the model above)"),
        frame_html(diff[[c for c in shown if c in diff.columns]], caption="differences")])
    return diff
