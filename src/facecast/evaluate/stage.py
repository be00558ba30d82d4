"""Stage ``evaluate``: score one embedder on one protocol, write scores, metrics and curves.

Outputs of :func:`evaluate_benchmark` for model ``M`` and benchmark ``B`` of dataset ``ds``:
``results/ds/eval/M/B.parquet`` (every protocol pair + ``score``, ``status``, ``message``),
and under ``results/ds/eval/M/B/``: ``metrics.parquet`` (one row),
``roc.parquet`` (FAR, TAR, FRR, threshold at every distinct score), ``roc.png``, ``det.png``.
Metrics use the pairs with status ``ok`` in the protocol's test folds (every fold but
``val`` unless ``include_val``); the others are counted (``n_skipped``), never dropped from
the scores file.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.evaluate.metrics import roc_points, verification_metrics
from facecast.evaluate.plots import plot_det, plot_roc
from facecast.evaluate.protocols import load_protocol
from facecast.evaluate.scoring import load_embeddings, score_pairs
from facecast.parquet_io import write_parquet

log = logging.getLogger(__name__)

EVALUATE_DEFAULTS: dict[str, Any] = {"fars": [1e-3, 1e-4], "thresholds": "insightface",
                                     "include_val": False, "n_folds": 10, "plots": True}


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
    cfg = {**EVALUATE_DEFAULTS, **(cfg or {})}
    pairs = load_protocol(protocol_path)
    wanted = pd.unique(pd.concat([pairs["image_a"], pairs["image_b"]]).astype(str))
    ids, emb = load_embeddings(embed_paths, wanted)
    scored = score_pairs(pairs, ids, emb)
    prov = dict(provenance or {})
    prov.update({"stage": "evaluate", "model": model, "benchmark": benchmark,
                 "protocol": str(protocol_path)})
    write_parquet(scored, scores_path, provenance=prov)

    in_test = np.ones(len(scored), bool) if cfg["include_val"] else \
        (scored["fold"].astype(str) != "val").to_numpy()
    ok = in_test & (scored["status"] == "ok").to_numpy()
    used = scored[ok]
    row: dict[str, Any] = {"model": model, "benchmark": benchmark,
                           "n_protocol_pairs": int(in_test.sum()),
                           "n_skipped": int(in_test.sum() - ok.sum())}
    statuses = scored.loc[in_test & ~ok, "status"].value_counts().to_dict()
    row["skipped_statuses"] = ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items()))
    outs = evaluation_outputs(out_dir)
    outs["metrics"].parent.mkdir(parents=True, exist_ok=True)
    labels = used["label"].to_numpy()
    if len(used) and 0 < labels.sum() < len(labels):
        n_folds = used["fold"].nunique()
        folds = used["fold"].to_numpy() if n_folds >= 2 else None
        row.update(verification_metrics(used["score"].to_numpy(), labels, folds,
                                        fars=cfg["fars"], thresholds=cfg["thresholds"],
                                        n_folds=int(cfg["n_folds"])))
        far, tar, thr = roc_points(used["score"].to_numpy(), labels)
    else:
        log.warning("%s/%s: no scorable genuine and impostor pairs; metrics are NaN",
                    model, benchmark)
        row.update({"n_pairs": int(len(used)), "accuracy": np.nan, "accuracy_std": np.nan,
                    "auc": np.nan, "eer": np.nan})
        far = tar = thr = np.zeros(0)
    metrics = pd.DataFrame([row])
    write_parquet(metrics, outs["metrics"], provenance=prov)
    roc = pd.DataFrame({"far": far, "tar": tar, "frr": 1.0 - tar, "threshold": thr})
    write_parquet(roc, outs["roc"], provenance=prov)
    label = f"{model} (AUC {row['auc']:.3f})" if len(far) else model
    curves = {label: (far, tar)} if len(far) else {}
    plot_roc(curves, outs["roc_png"], f"ROC: {benchmark}")
    plot_det(curves, outs["det_png"], f"DET: {benchmark}")
    log.info("%s on %s: accuracy %.4f ± %.4f, AUC %.4f, %d pairs (%d skipped)", model,
             benchmark, row.get("accuracy", np.nan), row.get("accuracy_std", np.nan),
             row.get("auc", np.nan), row.get("n_pairs", 0), row["n_skipped"])
    return row
