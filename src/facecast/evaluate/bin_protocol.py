"""insightface verification ``.bin`` files as pair protocols (``format: insightface_bin``).

Pair ``k`` of a ``.bin`` is images ``2k`` and ``2k+1`` with label ``issame[k]``. Its images
are a dataset of kind ``insightface_bin`` (manifest paths ``<bin name>#<index>``,
:mod:`facecast.datasets.insightface_bin`); this module writes the pairs as a protocol
Parquet against that manifest.

Folds are formed exactly as insightface's ``verification.py`` forms them
(``calculate_roc``: ``LFold(n_splits=10, shuffle=False)`` over the pairs in file order):
ten consecutive blocks, the first ``n % 10`` one pair longer (600 pairs each for LFW's
6,000). They are never re-dealt or stratified, so the 10-fold accuracy facecast reports
(best squared-L2 threshold on the grid ``0, 0.01, ..., 3.99`` chosen on the other nine
folds, mean and population std over the folds: :func:`facecast.evaluate.metrics.kfold_accuracy`)
is the figure insightface prints for the same embeddings.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from facecast.datasets.insightface_bin import load_bin
from facecast.evaluate.metrics import default_folds
from facecast.evaluate.resolve import attach_manifest, check_resolved
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.io.paths import portable_path

log = logging.getLogger(__name__)

#: insightface's verification.py always uses 10 folds
INSIGHTFACE_FOLDS = 10


def bin_pairs(path: str | os.PathLike, n_folds: int = INSIGHTFACE_FOLDS) -> pd.DataFrame:
    """``fold``, ``path_a``, ``path_b``, ``label`` of a .bin, in file order."""
    path = Path(path)
    _, issame = load_bin(path)
    n = len(issame)
    return pd.DataFrame({
        "fold": default_folds(n, n_folds),
        "path_a": [f"{path.name}#{2 * k}" for k in range(n)],
        "path_b": [f"{path.name}#{2 * k + 1}" for k in range(n)],
        "label": issame.astype("int8"),
    })


def import_insightface_bin(path: str | os.PathLike, manifest_path: str | os.PathLike,
                           out_path: str | os.PathLike, *,
                           provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Import a verification .bin as a protocol Parquet checked against the manifest.

    The manifest must be that of a dataset of kind ``insightface_bin`` built from a file
    of the same name; otherwise no pair resolves and the import fails naming the paths.
    """

    raw = bin_pairs(path)
    manifest = read_parquet(manifest_path, columns=["image_id", "path", "identity", "status"])
    pairs = attach_manifest(raw, manifest)
    counts = check_resolved(raw, pairs, source=str(path), strip_prefix="")
    note = (f"insightface verification.py folds: {INSIGHTFACE_FOLDS} consecutive blocks "
            f"of the file's {len(raw)} pairs")
    log.info("import %s: %d pairs (%d unresolved); %s", path, counts["n_pairs"],
             counts["n_unresolved"], note)
    prov = dict(provenance or {})
    prov.update({"stage": "protocol", "protocol": "insightface_bin", "source": portable_path(path),
                 "folds": note, **counts})
    write_parquet(pairs, out_path, provenance=prov)
    return pairs
