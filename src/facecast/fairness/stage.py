"""What the fairness rules call: one model on one protocol, the leaderboard, CSV import,
and the demographics analyses beyond one threshold.

Entries (one per rule): :func:`run_fairness` (``fairness``; its outputs are listed in
:mod:`facecast.fairness.assess`, plus ``estimator_trust`` from
:mod:`facecast.fairness.estimator_trust`), :func:`run_leaderboard` (``fairness_leaderboard``),
:func:`import_scores` (``fairness_import``) and :func:`run_demographics` (``demographics``,
in :mod:`facecast.fairness.demographics`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from facecast.fairness.assess import OUTPUT_FILES, write_frame
from facecast.fairness.bfw_table import write_bfw_table
from facecast.fairness.demographics import run_demographics
from facecast.fairness.estimator_trust import run_fairness
from facecast.fairness.interchange import read_interchange
from facecast.fairness.leaderboard import COLUMNS as BOARD_COLUMNS
from facecast.fairness.leaderboard import rank_models, rule_text
from facecast.fairness.tables import most_discriminated_across_models, to_markdown
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.report.html_tables import write_markdown_html

log = logging.getLogger(__name__)

__all__ = ["OUTPUT_FILES", "import_scores", "run_demographics", "run_fairness",
           "run_leaderboard", "write_bfw_table"]


def run_leaderboard(summary_paths: Sequence[str | os.PathLike],
                    groups_paths: Sequence[str | os.PathLike], out_dir: str | os.PathLike,
                    protocol: str, provenance: Mapping[str, Any] | None = None,
                    baseline: str = "") -> pd.DataFrame:
    """Rank every model of a dataset on one protocol by the FairFace 2020 challenge's rule
    (:mod:`facecast.fairness.leaderboard`: only models above the ``baseline``'s accuracy,
    none whose fairness figures are n/a); write leaderboard and Table A8.

    Writes ``leaderboard.parquet/.csv/.md/.html`` and ``most_discriminated.parquet/.csv`` under
    ``out_dir`` (``results/{ds}/fairness/leaderboard/{protocol}/``).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prov = {**dict(provenance or {}), "stage": "fairness", "protocol": protocol}
    summaries = pd.concat([read_parquet(p) for p in summary_paths], ignore_index=True)
    absent = bool(baseline) and baseline not in set(summaries["model"].astype(str))
    if absent:
        log.warning("leaderboard %s: baseline %s has no summary on this protocol: no "
                    "accuracy bar", protocol, baseline)
    board = rank_models(summaries, "" if absent else baseline)
    group_frames = []
    for spath, gpath in zip(summary_paths, groups_paths, strict=True):
        model = str(read_parquet(spath)["model"].iloc[0])
        g = read_parquet(gpath)
        for sign, col in (("+", "mean_d_pos"), ("-", "mean_d_neg")):
            if col in g.columns:
                group_frames.append(pd.DataFrame({"model": model, "sign": sign,
                                                  "group": g["group"], "mean_d": g[col]}))
    groups = pd.concat(group_frames, ignore_index=True) if group_frames else pd.DataFrame(
        columns=["model", "sign", "group", "mean_d"])
    a8 = most_discriminated_across_models(groups)
    write_frame(board, out, "leaderboard", prov)
    write_frame(a8, out, "most_discriminated", prov)
    text = [f"# Fairness leaderboard: {protocol}", "",
            rule_text("" if absent else baseline), "",
            to_markdown(board.astype({"place": object}).fillna({"place": "no rank"}),
                        [c for c in BOARD_COLUMNS if c in board.columns]),
            "## How often each group is the most discriminated (Table A8, across models)",
            "", to_markdown(a8)]
    write_text(out / "leaderboard.md", "\n".join(text))
    write_markdown_html(out / "leaderboard.md", out / "leaderboard.html")  # for the report
    return board


def import_scores(predictions: str | os.PathLike, pairs: str | os.PathLike,
                  attributes_path: str | os.PathLike, out_path: str | os.PathLike, *,
                  label_column: str = "LABEL",
                  provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Challenge CSVs -> scored pairs Parquet in the evaluation layout (identities looked
    up in the attribute table)."""
    attrs = read_parquet(attributes_path, columns=["image_id", "identity"])
    scored = read_interchange(predictions, pairs, attrs, label_column=label_column)
    write_parquet(scored, out_path, provenance={**dict(provenance or {}),
                                                "stage": "fairness_import",
                                                "predictions": str(predictions)})
    return scored
