"""LFW view-2 ``pairs.txt`` (10 folds): a fixed verification protocol.

Format: a header ``<folds> <n>`` then, per fold, ``n`` matched lines ``name i j`` and
``n`` mismatched lines ``name1 i name2 j``. Image ``i`` of ``name`` is
``<name>/<name>_<iiii>.jpg``. Name tokens are percent-decoded
(:func:`facecast.io.list_paths.unescape_list_path`: ``%20`` is a space, ``%25`` a ``%``), the
rule facecast's exports follow for names a whitespace-separated line cannot hold.
Malformed lines raise :class:`DatasetError` naming file and
line; pairs whose images are not ``ok`` in the manifest are kept with a status.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from facecast.datasets.manifest import DatasetError
from facecast.io.list_paths import unescape_list_path
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.io.paths import portable_path


def lfw_image_path(name: str, index: int) -> str:
    return f"{name}/{name}_{index:04d}.jpg"


def _int(path: Path, lineno: int, text: str) -> int:
    try:
        return int(text)
    except ValueError as exc:
        raise DatasetError(f"{path}:{lineno}: expected an image number, got {text!r}") from exc


def read_lfw_pairs(path: str | os.PathLike) -> pd.DataFrame:
    """Parse pairs.txt into ``fold``, ``image_a``, ``image_b``, identities and ``label``."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"LFW pairs file {path} does not exist")
    lines = path.read_text().splitlines()
    if not lines:
        raise DatasetError(f"{path}: empty file")
    head = lines[0].split()
    if len(head) == 1:  # pairsDevTrain/Test style: one count, one block
        n_folds, per_class = 1, _int(path, 1, head[0])
    elif len(head) == 2:
        n_folds, per_class = _int(path, 1, head[0]), _int(path, 1, head[1])
    else:
        raise DatasetError(f"{path}:1: expected '<folds> <pairs per class>', got {lines[0]!r}")
    body = [(i, line) for i, line in enumerate(lines[1:], 2) if line.strip()]
    expected = n_folds * 2 * per_class
    if len(body) != expected:
        raise DatasetError(f"{path}: header promises {n_folds} folds x 2 x {per_class} = "
                           f"{expected} pairs, file has {len(body)}")
    rows = []
    for k, (lineno, line) in enumerate(body):
        fold, pos = divmod(k, 2 * per_class)
        parts = [unescape_list_path(t) for t in line.split()]
        if pos < per_class:
            if len(parts) != 3:
                raise DatasetError(f"{path}:{lineno}: matched pair needs 'name i j', got {line!r}")
            a_name = b_name = parts[0]
            a_idx, b_idx = _int(path, lineno, parts[1]), _int(path, lineno, parts[2])
            label = 1
        else:
            if len(parts) != 4:
                raise DatasetError(f"{path}:{lineno}: mismatched pair needs 'name1 i name2 j', "
                                   f"got {line!r}")
            a_name, b_name = parts[0], parts[2]
            a_idx, b_idx = _int(path, lineno, parts[1]), _int(path, lineno, parts[3])
            label = 0
        rows.append((str(fold), lfw_image_path(a_name, a_idx), lfw_image_path(b_name, b_idx),
                     a_name, b_name, label))
    return pd.DataFrame(rows, columns=["fold", "image_a", "image_b", "identity_a",
                                       "identity_b", "label"])


def attach_pair_status(pairs: pd.DataFrame, manifest: pd.DataFrame) -> pd.DataFrame:
    """Add ``status``/``message``: ``ok`` when both images are ``ok`` manifest rows."""
    status = manifest.set_index("image_id")["status"]
    out = pairs.copy()
    sa = out["image_a"].map(status).fillna("not_in_manifest")
    sb = out["image_b"].map(status).fillna("not_in_manifest")
    ok = (sa == "ok") & (sb == "ok")
    out["status"] = ["ok" if o else (a if a != "ok" else b) for o, a, b in zip(ok, sa, sb, strict=True)]
    out["message"] = ["" if o else f"image_a: {a}; image_b: {b}" for o, a, b in zip(ok, sa, sb, strict=True)]
    return out


def write_lfw_protocol(pairs_file: str | os.PathLike, manifest_path: str | os.PathLike,
                       out_path: str | os.PathLike, *,
                       provenance: dict[str, Any] | None = None) -> pd.DataFrame:
    """Parse ``pairs_file``, check it against the manifest, write the protocol Parquet."""
    if not pairs_file:
        raise DatasetError("no 'pairs' file configured for this dataset")
    pairs = attach_pair_status(read_lfw_pairs(pairs_file),
                               read_parquet(manifest_path, columns=["image_id", "status"]))
    prov = dict(provenance or {})
    prov.update({"stage": "protocol", "protocol": "lfw_pairs",
                 "source": portable_path(pairs_file)})
    write_parquet(pairs, out_path, provenance=prov)
    return pairs
