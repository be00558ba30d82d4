"""The files of a comparison: differences and leaderboards as Parquet/CSV, the leaderboard
as Markdown and an HTML report, each saying which test and which Holm family produced the
verdicts."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.evaluate.failures import FAILED_RULES, rule_text
from facecast.io.atomic import write_text
from facecast.io.parquet_io import write_parquet
from facecast.report.html_tables import frame_html, markdown_html, write_html_page

#: the columns of differences.parquet the HTML report shows
SHOWN = ["benchmark", "model_a", "model_b", "metric", "value_a", "value_b", "difference",
         "ci_lo", "ci_hi", "p", "p_adjusted", "verdict", "n_pairs", "n_failed_a", "n_failed_b",
         "n_identities"]


def method_text(diff: pd.DataFrame, cfg: Mapping[str, Any]) -> str:
    """The test, the interval and the Holm family behind every verdict, as Markdown: one
    sentence, then one bullet per term."""
    n_boot = int(cfg.get("n_boot", 1000))
    alpha = float(cfg.get("alpha", 0.05))
    conf = float(cfg.get("confidence", 0.95))
    tested = int(np.isfinite(diff["p"].to_numpy(np.float64)).sum()) if len(diff) else 0
    rules = (sorted({str(r) for r in diff["failed"]} & set(FAILED_RULES))
             if "failed" in diff.columns else [])
    return "\n".join([
        "Paired on the same pairs.", "",
        f"- Test: identity-clustered paired bootstrap ({n_boot} replicates; a replicate "
        "draws identities with replacement and weights both models' pairs alike), Wald "
        "test on its standard error with Student's t on G - 1 degrees of freedom (G "
        f"identities); {100 * conf:g} % intervals d +- t se.",
        f"- Holm family: all {tested} tests of the differences table (every benchmark, "
        "model pair and metric with a test); the leaderboards use the same adjusted p.",
        f"- Significant: adjusted p <= {alpha:g}.",
        "- No test (n/a): a FAR the benchmark cannot resolve (fewer than 1/FAR impostor "
        "pairs), fewer than 3 identities, or a bootstrap without spread.",
        "- Rank = 1 + the number of models significantly better on 10-fold accuracy.",
        "- Pairs without a feature (n_failed_a, n_failed_b): "
        + (" ".join(rule_text(r) for r in rules) if rules else "no comparison made.")])


def leaderboard_markdown(board: pd.DataFrame, text: str) -> str:
    """``leaderboard.md``: per benchmark, rank, model, accuracy and the models it is
    significantly better / worse than, in words."""
    md = ["# Model comparisons", "", text, ""]
    for bench, sub in board.groupby("benchmark", sort=False):
        md += [f"## {bench}", "",
               "| rank | model | accuracy | significantly better than | significantly worse "
               "than | not tested against |", "|---|---|---|---|---|---|"]
        for r in sub.itertuples(index=False):
            acc = "n/a" if not np.isfinite(r.accuracy) else f"{100 * r.accuracy:.2f} %"
            md.append(f"| {r.rank} | {r.model} | {acc} | {r.better_than or '-'} | "
                      f"{r.worse_than or '-'} | {r.not_tested or '-'} |")
        md.append("")
    return "\n".join(md)


def write_outputs(out: Path, diff: pd.DataFrame, board: pd.DataFrame,
                  cfg: Mapping[str, Any], provenance: Mapping[str, Any]) -> None:
    """Write differences and leaderboard (Parquet, CSV), leaderboard.md and report.html
    into ``out`` (created)."""
    out.mkdir(parents=True, exist_ok=True)
    text = method_text(diff, cfg)
    prov = {**dict(provenance), "holm_family": "every test of differences.parquet",
            "test": "identity-clustered paired bootstrap, Wald t(G-1)"}
    write_parquet(diff, out / "differences.parquet", provenance=prov)
    write_text(out / "differences.csv", diff.to_csv(index=False))
    write_parquet(board, out / "leaderboard.parquet", provenance=prov)
    write_text(out / "leaderboard.csv", board.to_csv(index=False))
    write_text(out / "leaderboard.md", leaderboard_markdown(board, text))
    write_html_page(out / "report.html", "Model comparisons", [
        markdown_html(f"{text}\n- Differences are A - B: 10-fold accuracy, AUC, TAR at each "
                      f"FAR and FNMR at a shared FMR {float(cfg.get('fmr', 1e-3)):g} (each "
                      "model at its own threshold)."),
        frame_html(board, caption="leaderboards (rank = 1 + models significantly better)"),
        frame_html(diff[[c for c in SHOWN if c in diff.columns]], caption="differences")])
