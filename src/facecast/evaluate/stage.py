"""What the evaluate rules call: score one embedder on one protocol, write scores, metrics
and curves (:func:`evaluate_benchmark`, rule ``evaluate_benchmark``); import a protocol
(:func:`import_protocol`, rule ``import_protocol``); the models x benchmarks summary
(:func:`write_summary`, rule ``evaluate_summary``); a mined benchmark's pairs per fold as an
HTML table for the report (:func:`write_pair_stats_html`, rule ``pair_stats_html``); the
CC11 table of a ``layout: cc11`` dataset (:func:`write_cc11_table`, rule ``cc11_table``) and
the table of every ``.bin`` set (:func:`write_bin_suite`, rule ``bin_suite``); the eleven
block protocols of a CC11 ``.bin``, read once (:func:`import_cc11_blocks`, rule
``cc11_protocols``). What a
job's params hold is :func:`facecast.evaluate.targets.job_config`.

Outputs of :func:`evaluate_benchmark` for model ``M`` and benchmark ``B`` of dataset ``ds``:
``results/ds/eval/M/B.parquet`` (every protocol pair + ``score``, ``status``, ``message``),
and under ``results/ds/eval/M/B/``: ``metrics.parquet`` (one row),
``roc.parquet`` (FAR, TAR, FRR, threshold at every distinct score), ``roc.png``, ``det.png``.
Metrics use the pairs in the protocol's test folds (every fold but ``val`` unless
``include_val``) under the failure rule ``evaluate.failed``
(:mod:`facecast.evaluate.failures`): ``nonmatch`` (the default, ISO/IEC 19795-1's
generalized rates) keeps a pair without a feature (no face, decode error, no embedding)
as a non-match at score ``-inf``; ``drop`` leaves it out. The row counts them
(``n_failed``, ``n_failed_genuine``, ``n_failed_impostor``, ``failed_statuses``), says the
rule (``failed``) and counts the pairs left out of the rates (``n_skipped``,
``skipped_statuses``: rows that are no comparison - ``malformed``, ``bad_label``,
``bad_fold`` - and, under ``drop``, the failed pairs); the scores file keeps every pair
with its status and a NaN score.

Folds: facecast's one fold rule (:func:`facecast.evaluate.folds.evaluation_folds`): the
protocol's own folds when it has two or more test folds; else ``n_folds`` folds stratified
by label and identity over every test pair of the protocol, seeded by ``seed``, never
consecutive blocks. The metrics row says how (``folds``); the scores file keeps each pair's
fold (``eval_fold``, ``""`` outside the test), so ``compare`` and ``slices`` use the same.

TAR@FAR: a target FAR below ``1 / n_impostors`` cannot be resolved by the protocol (the
only FAR at or below it is 0); the row keeps the figure with ``resolvable@far=..`` False,
the log warns, and the summary tables print ``n/a (N impostors)`` instead of the number.

Decision convention (shared with :mod:`facecast.fairness.threshold`): a pair is accepted
as genuine iff ``score >= threshold``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.embed.read import load_embeddings
from facecast.evaluate.bin_protocol import import_cc11_blocks
from facecast.evaluate.bin_suite import write_bin_suite, write_cc11_table
from facecast.evaluate.failures import (
    DEFAULT_RULE,
    apply_failure_rule,
    check_rule,
    failed_mask,
    failure_counts,
    invalid_mask,
    rule_text,
    status_counts,
)
from facecast.evaluate.folds import EVAL_FOLD, accuracy_test_mask, evaluation_folds
from facecast.evaluate.metrics import min_impostors, roc_points, verification_metrics
from facecast.evaluate.plots import plot_det, plot_roc
from facecast.evaluate.protocols import import_protocol, load_protocol
from facecast.evaluate.rfw_table import write_rfw_table
from facecast.evaluate.scoring import score_pairs
from facecast.evaluate.set_protocols import given_scores, write_bfw_protocol, write_rfw_protocol
from facecast.evaluate.summary import write_summary
from facecast.io.parquet_io import read_provenance, write_parquet
from facecast.report.html_tables import write_tsv_html

__all__ = ["EVALUATE_DEFAULTS", "evaluate_benchmark", "evaluate_given_scores",
           "evaluation_outputs", "import_cc11_blocks", "import_protocol", "write_bfw_protocol",
           "write_bin_suite", "write_cc11_table", "write_pair_stats_html",
           "write_rfw_protocol", "write_rfw_table", "write_set_protocol", "write_summary"]

log = logging.getLogger(__name__)

EVALUATE_DEFAULTS: dict[str, Any] = {"fars": [1e-3, 1e-4], "thresholds": "insightface",
                                     "include_val": False, "n_folds": 10, "plots": True,
                                     "seed": 0, "failed": DEFAULT_RULE}

def evaluation_outputs(out_dir: str | os.PathLike) -> dict[str, Path]:
    """The per-(model, benchmark) files written beside the scores Parquet."""
    d = Path(out_dir)
    return {"metrics": d / "metrics.parquet", "roc": d / "roc.parquet",
            "roc_png": d / "roc.png", "det_png": d / "det.png"}


def evaluate_benchmark(protocol_path: str | os.PathLike, embed_paths: Iterable[str | os.PathLike],
                       scores_path: str | os.PathLike, out_dir: str | os.PathLike, *, model: str,
                       benchmark: str, cfg: Mapping[str, Any] | None = None,
                       provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Score ``model`` on one protocol and write scores, metrics, ROC table and plots."""
    pairs = load_protocol(protocol_path)
    pairs = pairs.drop(columns=[c for c in pairs.columns  # a BFW protocol's score models
                                if c.startswith(("given_score__", "given_note__"))])
    wanted = pd.unique(pd.concat([pairs["image_a"], pairs["image_b"]]).astype(str))
    ids, emb = load_embeddings(embed_paths, wanted)
    return write_evaluation(score_pairs(pairs, ids, emb), protocol_path, scores_path,
                            out_dir, model=model, benchmark=benchmark, cfg=cfg,
                            provenance=provenance)


def evaluate_given_scores(protocol_path: str | os.PathLike, scores_path: str | os.PathLike,
                          out_dir: str | os.PathLike, *, model: str, benchmark: str,
                          cfg: Mapping[str, Any] | None = None,
                          provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """:func:`evaluate_benchmark` for a score model of a BFW protocol: the scores come from
    the protocol's columns (:func:`facecast.evaluate.set_protocols.given_scores`), no
    embedding or image is read."""
    scored = given_scores(protocol_path, model)
    return write_evaluation(scored, protocol_path, scores_path, out_dir, model=model,
                            benchmark=benchmark, cfg=cfg,
                            provenance={**dict(provenance or {}), "scores": "given"})


def write_evaluation(scored: pd.DataFrame, protocol_path: str | os.PathLike,
                     scores_path: str | os.PathLike, out_dir: str | os.PathLike, *,
                     model: str, benchmark: str, cfg: Mapping[str, Any] | None = None,
                     provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Folds, the scores file, metrics, ROC table and plots of scored pairs (``score``,
    ``status``, ``message`` beside the protocol's columns); returns the metrics row."""
    cfg = {**EVALUATE_DEFAULTS, **(cfg or {})}
    folds, fold_note = evaluation_folds(scored, n_folds=int(cfg["n_folds"]),
                                        seed=int(cfg["seed"]),
                                        include_val=bool(cfg["include_val"]),
                                        note=read_provenance(protocol_path).get("folds"))
    scored[EVAL_FOLD] = folds
    prov = dict(provenance or {})
    prov.update({"stage": "evaluate", "model": model, "benchmark": benchmark,
                 "protocol": str(protocol_path), "folds": fold_note})
    write_parquet(scored, scores_path, provenance=prov)

    rule = check_rule(str(cfg.get("failed", DEFAULT_RULE)))
    in_test = accuracy_test_mask(scored, bool(cfg["include_val"]))
    test = scored[in_test]
    used = apply_failure_rule(test, rule)
    failed = failed_mask(test)
    invalid = invalid_mask(test)
    row: dict[str, Any] = {"model": model, "benchmark": benchmark,
                           "n_protocol_pairs": int(in_test.sum()),
                           "n_held_out": int((~in_test).sum()), "failed": rule,
                           **{k: v for k, v in failure_counts(
                               failed[~invalid], test.loc[~invalid, "label"]).items()
                              if k != "n_pairs"},
                           "failed_statuses": status_counts(test.loc[failed, "status"]),
                           "n_skipped": int(len(test) - len(used)),
                           "skipped_statuses": status_counts(
                               test.loc[invalid | (failed & (rule == "drop")), "status"])}
    outs = evaluation_outputs(out_dir)
    outs["metrics"].parent.mkdir(parents=True, exist_ok=True)
    labels = used["label"].to_numpy()
    if len(used) and 0 < labels.sum() < len(labels):
        row["folds"] = fold_note
        row.update(verification_metrics(used["score"].to_numpy(), labels,
                                        used[EVAL_FOLD].to_numpy(), fars=cfg["fars"],
                                        thresholds=cfg["thresholds"]))
        far, tar, thr = roc_points(used["score"].to_numpy(), labels)
        for key in [k for k in row if k.startswith("resolvable@far=")]:
            if not row[key]:
                log.warning("%s/%s: TAR@FAR=%s needs at least %d impostor pairs, the protocol "
                            "has %d; the figure is flagged unresolvable (%s False) and shown "
                            "as n/a", model, benchmark, key.split("=", 1)[1],
                            min_impostors(float(key.split("=", 1)[1])),
                            row["n_impostor"], key)
    else:
        log.warning("%s/%s: no scorable genuine and impostor pairs; metrics are NaN",
                    model, benchmark)
        row.update({"folds": "-", "n_pairs": int(len(used)), "accuracy": np.nan,
                    "accuracy_std": np.nan, "auc": np.nan, "eer": np.nan})
        far = tar = thr = np.zeros(0)
    if row["n_failed"]:
        log.warning("%s/%s: %d pair(s) without a feature (%s); %s", model, benchmark,
                    row["n_failed"], row["failed_statuses"], rule_text(rule))
    metrics = pd.DataFrame([row])
    write_parquet(metrics, outs["metrics"], provenance=prov)
    roc = pd.DataFrame({"far": far, "tar": tar, "frr": 1.0 - tar, "threshold": thr})
    write_parquet(roc, outs["roc"], provenance=prov)
    label = f"{model} (AUC {row['auc']:.3f})" if len(far) else model
    curves = {label: (far, tar)} if len(far) else {}
    plot_roc(curves, outs["roc_png"], f"ROC: {benchmark}")
    plot_det(curves, outs["det_png"], f"DET: {benchmark}")
    log.info("%s on %s: accuracy %.4f ± %.4f, AUC %.4f, %d pairs (%d without a feature, "
             "%d left out)", model, benchmark, row.get("accuracy", np.nan),
             row.get("accuracy_std", np.nan), row.get("auc", np.nan), row.get("n_pairs", 0),
             row["n_failed"], row["n_skipped"])
    return row


def write_set_protocol(spec: Mapping[str, Any], name: str, manifest_path: str | os.PathLike,
                       out_path: str | os.PathLike, *,
                       provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Protocol ``name`` of an RFW or BFW dataset (rule ``set_protocol``;
    :mod:`facecast.evaluate.set_protocols`)."""
    if spec["kind"] == "bfw":
        return write_bfw_protocol(spec, manifest_path, out_path, provenance=provenance)
    return write_rfw_protocol(spec, name, manifest_path, out_path, provenance=provenance)


def write_pair_stats_html(stats_path: str | os.PathLike, html_path: str | os.PathLike, *,
                          bench: str, ds: str) -> Path:
    """Benchmark ``bench``'s ``pair_stats.tsv`` (dataset ``ds``) as an HTML table."""
    return write_tsv_html(stats_path, html_path, f"Pairs per fold: {bench} ({ds})",
                          note="Genuine and impostor pairs, images, identities and reference "
                               "scores per fold of the mined benchmark (fold 'all': every "
                               "fold).")
