"""insightface verification ``.bin`` files as pair protocols (``format: insightface_bin``).

Pair ``k`` of a ``.bin`` is images ``2k`` and ``2k+1`` with label ``issame[k]``. Its images
are a dataset of kind ``insightface_bin`` (manifest paths ``<bin name>#<index>``,
:mod:`facecast.datasets.insightface_bin`); this module writes the pairs as a protocol
Parquet against that manifest. A dataset of that kind implies its protocols
(:mod:`facecast.config.bin_sets`): the whole file (``layout: pairs``), or, for CAST's
``cc11.bin`` (``layout: cc11``), each of its eleven consecutive equal blocks, or each block
a facecast ``export.bins`` file's ``.json`` sidecar lists (``layout: blocks``).

Folds are formed as insightface's ``recognition/arcface_torch/eval/verification.py``
forms them in ``calculate_roc`` (scikit-learn's unshuffled 10-fold split over the pairs in
file order): ten consecutive blocks, the first ``n % 10`` one pair longer (600 pairs each
for LFW's 6,000). CAST's ``cc11.py`` cuts the file into eleven equal consecutive slices
first (slice ``i``: images ``i*m .. (i+1)*m - 1``, ``m`` the image count over eleven, and
the labels of the pairs they hold) and runs the same 10-fold evaluation inside each, so a
CC11 block's folds are ten consecutive runs of its own pairs. They are never re-dealt or
stratified, so the 10-fold accuracy facecast reports (best squared-L2 threshold on the
grid ``0, 0.01, ..., 3.99`` chosen on the other nine folds, mean and population std over
the folds: :func:`facecast.evaluate.metrics.kfold_accuracy`) is the figure insightface /
cc11.py prints for the same embeddings (compared with their recorded outputs in
``tests/test_bin_export.py`` and ``tests/test_insightface_bin.py``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.config.bin_sets import BIN_FOLDS, CC11_NAMES, LAYOUT_BLOCKS, sidecar_blocks
from facecast.datasets.insightface_bin import block_ranges, load_bin
from facecast.datasets.manifest import DatasetError
from facecast.evaluate.metrics import default_folds
from facecast.evaluate.resolve import attach_manifest, check_resolved
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.io.paths import portable_path

log = logging.getLogger(__name__)

#: insightface's verification.py always uses 10 folds
INSIGHTFACE_FOLDS = BIN_FOLDS


def block_name(layout: str, block: int | None, path: str | os.PathLike | None = None) -> str:
    """The sub-benchmark a block of ``layout`` is ('' for the whole file); a ``blocks``
    layout's names come from the ``.json`` sidecar of the ``.bin`` at ``path``."""
    if block is None:
        return ""
    if layout == "blocks" and path is not None:
        return sidecar_blocks(path)[block]["name"]
    return CC11_NAMES[block] if layout == "cc11" else ""


def bin_pairs(path: str | os.PathLike, n_folds: int = INSIGHTFACE_FOLDS, *,
              layout: str = "pairs", block: int | None = None,
              issame: np.ndarray | None = None) -> pd.DataFrame:
    """``fold``, ``path_a``, ``path_b``, ``label`` of a .bin (or of block ``block`` of its
    ``layout``), in file order, with a ``pair_index`` (the pair's index in the file).
    ``issame``: the file's labels when already loaded (else the file is read)."""
    path = Path(path)
    if issame is None:
        _, issame = load_bin(path)
    ranges = block_ranges(path, len(issame), layout)
    if block is None:
        first, n = 0, len(issame)
    elif not 0 <= block < len(ranges) or layout == "pairs":
        raise DatasetError(f"{path}: layout {layout} has no block {block} "
                           f"(0..{len(ranges) - 1})")
    else:
        _, first, n = ranges[block]
    ks = range(first, first + n)
    return pd.DataFrame({
        "fold": default_folds(n, n_folds),
        "path_a": [f"{path.name}#{2 * k}" for k in ks],
        "path_b": [f"{path.name}#{2 * k + 1}" for k in ks],
        "label": issame[first:first + n].astype("int8"),
        "pair_index": pd.array(list(ks), dtype="int64"),
    })


def _write_protocol(raw: pd.DataFrame, manifest: pd.DataFrame, path: Path,
                    out_path: str | os.PathLike, layout: str, block: int | None,
                    provenance: Mapping[str, Any] | None) -> pd.DataFrame:
    pairs = attach_manifest(raw, manifest)
    pairs["pair_index"] = raw["pair_index"].to_numpy()  # the pair's index in the file
    counts = check_resolved(raw, pairs, source=str(path), strip_prefix="")
    name = block_name(layout, block, path)
    where = "the file's pairs"
    if name:
        kind = "CC11 block" if layout == "cc11" else "block"
        n_blocks = LAYOUT_BLOCKS[layout] if layout == "cc11" else len(sidecar_blocks(path))
        where = (f"pairs {raw['pair_index'].iloc[0]}..{raw['pair_index'].iloc[-1]} of the "
                 f"file ({kind} {block + 1} of {n_blocks}, {name}, as cc11.py cuts it)")
    note = (f"insightface verification.py folds: {INSIGHTFACE_FOLDS} consecutive blocks "
            f"of {where}, {len(raw)} pairs")
    log.info("import %s%s: %d pairs (%d unresolved); %s", path, f" [{name}]" if name else "",
             counts["n_pairs"], counts["n_unresolved"], note)
    prov = dict(provenance or {})
    prov.update({"stage": "protocol", "protocol": "insightface_bin", "source": portable_path(path),
                 "layout": layout, "block": name, "folds": note, **counts})
    write_parquet(pairs, out_path, provenance=prov)
    return pairs


def _manifest(manifest_path: str | os.PathLike) -> pd.DataFrame:
    return read_parquet(manifest_path, columns=["image_id", "path", "identity", "status"])


def import_insightface_bin(path: str | os.PathLike, manifest_path: str | os.PathLike,
                           out_path: str | os.PathLike, *, layout: str = "pairs",
                           block: int | None = None,
                           provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Import a verification .bin (or one block of its ``layout``) as a protocol Parquet
    checked against the manifest.

    The manifest must be that of a dataset of kind ``insightface_bin`` built from a file
    of the same name; otherwise no pair resolves and the import fails naming the paths.
    """
    path = Path(path)
    raw = bin_pairs(path, layout=layout, block=block)
    return _write_protocol(raw, _manifest(manifest_path), path, out_path, layout, block,
                           provenance)


def import_cc11_blocks(path: str | os.PathLike, manifest_path: str | os.PathLike,
                       out_paths: Sequence[str | os.PathLike], *,
                       provenance: Mapping[str, Any] | None = None) -> list[pd.DataFrame]:
    """Every block of a ``layout: cc11`` .bin as its protocol Parquet (``out_paths`` in
    :data:`~facecast.config.bin_sets.CC11_NAMES` order), reading the file once (cc11.bin
    holds 220,000 images); each file is what :func:`import_insightface_bin` writes for its
    block."""
    path = Path(path)
    if len(out_paths) != len(CC11_NAMES):
        raise ValueError(f"a CC11 .bin has {len(CC11_NAMES)} blocks, got {len(out_paths)} "
                         "output paths")
    _, issame = load_bin(path)
    manifest = _manifest(manifest_path)
    return [_write_protocol(bin_pairs(path, layout="cc11", block=b, issame=issame), manifest,
                            path, out, "cc11", b, provenance)
            for b, out in enumerate(out_paths)]
