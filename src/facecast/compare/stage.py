"""What rule ``compare`` and ``facecast compare`` call: every pair of models on every
benchmark (:mod:`facecast.compare.paired`), Holm-corrected across every test the table
reports, and leaderboards that rank a model by how many models are significantly better.

Writes into the output folder (``results/{ds}/compare/`` in the pipeline):
``differences.parquet/.csv`` (one row per benchmark, model pair and metric),
``leaderboard.parquet/.csv`` (per benchmark, models by 10-fold accuracy),
``leaderboard.md`` and ``report.html`` (:mod:`facecast.compare.report`).
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

from facecast.compare.paired import align, compare_pair, lower_is_better, read_scores
from facecast.compare.report import write_outputs
from facecast.evaluate.failures import DEFAULT_RULE
from facecast.labels.estimators_stats import holm

log = logging.getLogger(__name__)

#: the columns of differences.parquet, in order (the first thirteen are the contract)
COLUMNS = ["benchmark", "model_a", "model_b", "metric", "value_a", "value_b", "difference",
           "ci_lo", "ci_hi", "test", "p", "p_adjusted", "verdict", "significant", "note",
           "n_boot", "n_pairs", "n_impostors", "n_identities", "fmr_resolvable",
           "n_failed_a", "n_failed_b", "failed"]
#: the metric the leaderboards rank by
BOARD_METRIC = "accuracy"
#: benchmark name of a scores file without a ``benchmark`` column
ONE_BENCHMARK = "pairs"
NOT_SIGNIFICANT = "not significant"


def verdicts(diff: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """Holm across every row with a p (the family: all benchmarks, model pairs and metrics
    of the table) -> ``p_adjusted``; ``significant`` = ``p_adjusted <= alpha``;
    ``verdict`` names the better model (``<model> better``; for FNMR the lower one), says
    ``not significant``, or repeats the row's ``n/a (...)`` note."""
    diff = diff.copy()
    diff["p_adjusted"] = holm(diff["p"].to_numpy(np.float64))
    diff["significant"] = (diff["p_adjusted"] <= alpha).to_numpy(bool)
    diff["verdict"] = [
        note if note else (f"{a if (d > 0) != lower_is_better(m) else b} better" if sig
                           else NOT_SIGNIFICANT)
        for note, sig, d, m, a, b in zip(diff["note"], diff["significant"], diff["difference"],
                                         diff["metric"], diff["model_a"], diff["model_b"],
                                         strict=True)]
    return diff.reindex(columns=COLUMNS)


def leaderboard(values: Mapping[str, float], wins: set[tuple[str, str]],
                untested: set[tuple[str, str]] = frozenset(), metric: str = BOARD_METRIC
                ) -> pd.DataFrame:
    """One benchmark's models, best first: ``rank`` = 1 + the number of models
    significantly better (so A > C with A ~ B ~ C ranks A and B 1st and C 2nd);
    ``better_than`` / ``worse_than`` name the models it is significantly better / worse
    than, ``not_tested`` those it could not be tested against. ``wins``: (winner, loser)
    pairs; ``untested``: model pairs without a test (either order)."""
    rows = []
    for m in values:
        losers = sorted((lo for w, lo in wins if w == m), key=lambda x: (-values[x], x))
        winners = sorted((w for w, lo in wins if lo == m), key=lambda x: (-values[x], x))
        open_ = sorted({b if a == m else a for a, b in untested if m in (a, b)})
        rows.append({"rank": 1 + len(winners), "model": m, metric: values[m],
                     "better_than": ", ".join(losers), "worse_than": ", ".join(winners),
                     "not_tested": ", ".join(open_)})
    board = pd.DataFrame(rows, columns=["rank", "model", metric, "better_than", "worse_than",
                                        "not_tested"])
    key = board[metric].astype(float).fillna(-np.inf)
    return board.assign(_k=-key).sort_values(["rank", "_k", "model"]).drop(columns="_k"
                                                                          ).reset_index(drop=True)


def leaderboards(diff: pd.DataFrame, metric: str = BOARD_METRIC) -> pd.DataFrame:
    """:func:`leaderboard` of every benchmark from the ``metric`` rows of ``diff``."""
    boards = []
    for bench, sub in diff[diff["metric"] == metric].groupby("benchmark", sort=False):
        values: dict[str, float] = {}
        wins, untested = set(), set()
        for r in sub.itertuples(index=False):
            values[r.model_a], values[r.model_b] = float(r.value_a), float(r.value_b)
            if r.note:
                untested.add((r.model_a, r.model_b))
            elif r.significant:
                a_wins = (r.difference > 0) != lower_is_better(metric)
                wins.add((r.model_a, r.model_b) if a_wins else (r.model_b, r.model_a))
        boards.append(leaderboard(values, wins, untested, metric).assign(benchmark=bench))
    cols = ["benchmark", "rank", "model", metric, "better_than", "worse_than", "not_tested"]
    return pd.concat(boards, ignore_index=True)[cols] if boards else pd.DataFrame(columns=cols)


def _compare_one(bench: str, a: str, b: str, fa: pd.DataFrame, fb: pd.DataFrame,
                 cfg: Mapping[str, Any], *, fars: Sequence[float], seed: int,
                 accuracy: Mapping[str, Any] | None) -> pd.DataFrame | None:
    """The rows of one benchmark and model pair; None (logged) without common pairs."""
    paired = align(fa, fb, accuracy)
    if len(paired.label) == 0 or len(np.unique(paired.label)) < 2:
        log.warning("%s: %s and %s share no scored pairs of both labels", bench, a, b)
        return None
    table, counts = compare_pair(
        paired, fars=fars, fmr=float(cfg.get("fmr", 1e-3)), n_boot=int(cfg.get("n_boot", 1000)),
        seed=seed, confidence=float(cfg.get("confidence", 0.95)),
        thresholds=str((accuracy or {}).get("thresholds", "insightface")))
    table = table.assign(benchmark=bench, model_a=a, model_b=b, **counts,
                         failed=str((accuracy or {}).get("failed", DEFAULT_RULE)))
    na = table[table["note"] != ""]
    if len(na):
        log.warning("%s, %s vs %s: no test for %s", bench, a, b, "; ".join(
            f"{m} {n}" for m, n in zip(na["metric"], na["note"], strict=True)))
    return table


def run_compare(scores: Mapping[str, Mapping[str, str | os.PathLike | pd.DataFrame]],
                out_dir: str | os.PathLike, cfg: Mapping[str, Any], *, fars: Sequence[float],
                seed: int, accuracy: Mapping[str, Any] | None = None,
                provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """``scores[benchmark][model]`` = scored pairs (a path, read by :func:`read_scores`, or
    a frame with its columns); writes every output
    and returns the differences table (:data:`COLUMNS`). ``cfg``: the ``compare`` section
    (``fmr``, ``n_boot``, ``confidence``, ``alpha``). ``accuracy``: the ``evaluate``
    settings of the 10-fold accuracy (:func:`facecast.evaluate.targets.job_config`), so
    its figures equal evaluate's."""
    frames = {(bench, m): path if isinstance(path, pd.DataFrame) else read_scores(path)
              for bench, models in scores.items() for m, path in models.items()}
    jobs = [(bench, a, b) for bench, models in scores.items()
            for a, b in itertools.combinations(sorted(models), 2)]
    rows = [t for bench, a, b in tqdm(jobs, desc="model pairs", mininterval=5)
            if (t := _compare_one(bench, a, b, frames[(bench, a)], frames[(bench, b)], cfg,
                                  fars=fars, seed=seed, accuracy=accuracy)) is not None]
    diff = (pd.concat(rows, ignore_index=True) if rows else
            pd.DataFrame({c: pd.Series(dtype=float if c in ("value_a", "value_b",
                                                            "difference", "p") else object)
                          for c in ["benchmark", "model_a", "model_b", "metric", "value_a",
                                    "value_b", "difference", "p", "note"]}))
    diff = verdicts(diff, float(cfg.get("alpha", 0.05)))
    board = leaderboards(diff)
    write_outputs(Path(out_dir), diff, board, cfg, provenance={
        **dict(provenance or {}), "stage": "compare"})
    return diff


def split_benchmarks(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """A scores file's pairs per value of its ``benchmark`` column (one benchmark,
    :data:`ONE_BENCHMARK`, without one)."""
    if "benchmark" not in frame.columns:
        return {ONE_BENCHMARK: frame}
    return {str(b): sub.reset_index(drop=True)
            for b, sub in frame.groupby(frame["benchmark"].astype(str), sort=True)}


def compare_files(named: Mapping[str, str | os.PathLike], out_dir: str | os.PathLike,
                  cfg: Mapping[str, Any], *, fars: Sequence[float], seed: int = 0,
                  accuracy: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """``facecast compare``: any score files, ``model name -> path``; each benchmark of
    the files (their ``benchmark`` column) is compared where two or more models scored it.
    Raises ``ValueError`` with fewer than two models or no benchmark two of them share."""
    if len(named) < 2:
        raise ValueError("compare needs two or more score files (NAME=PATH)")
    scores: dict[str, dict[str, pd.DataFrame]] = {}
    for model, path in named.items():
        if not Path(path).exists():
            raise FileNotFoundError(f"no such score file: {path} ({model})")
        for bench, sub in split_benchmarks(read_scores(path)).items():
            scores.setdefault(bench, {})[model] = sub
    alone = sorted(b for b, m in scores.items() if len(m) < 2)
    if alone:
        log.warning("benchmark(s) %s scored by one model only: not compared", alone)
    scores = {b: m for b, m in scores.items() if len(m) >= 2}
    if not scores:
        raise ValueError("no benchmark is scored by two or more of the files")
    return run_compare(scores, out_dir, cfg, fars=fars, seed=seed, accuracy=accuracy,
                       provenance={"command": "facecast compare",
                                   "scores": {m: str(p) for m, p in named.items()}})
