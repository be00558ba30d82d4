"""Verification protocols: the pair lists an embedder is scored on.

Three sources, one shape (``fold``, ``image_a``, ``image_b``, ``identity_a``,
``identity_b``, ``label``, ``status``, ``message``; images are manifest ``image_id``\\ s):

* a mined benchmark's ``pairs.parquet`` (:mod:`facecast.analysis.mining`);
* an LFW view-2 ``pairs.txt`` (parsed at ingest into ``results/<ds>/protocols/pairs.parquet``);
* a folder of CAST ``.list`` files from elsewhere (``0.list``..``9.list``, ``val.list``;
  lines ``path_a path_b label``), imported with :func:`import_cast_lists`; the fold is the
  file's stem. Paths are taken relative to the dataset root (``strip_prefix`` removes a
  leading part first) and looked up in the manifest by path. Path tokens are decoded with
  :func:`facecast.io.list_paths.unescape_list_path` (``%20`` is a space, ``%25`` a ``%``).

Folds. When the source defines at least two test folds (``0.list``..``9.list``; an LFW
``pairs.txt`` with a ``10 300`` header) they are kept. When it defines one (CAST ships
only ``0.list`` + ``val.list`` per benchmark, genuine pairs first; a ``pairsDevTest.txt``),
cutting the file into consecutive blocks would give folds of one class, so
:func:`stratified_folds` deals the pairs over ``n_folds`` folds, stratified by label and
by identity, seeded. The protocol Parquet keeps the file each pair came from
(``source_fold``) and says in its provenance (key ``folds``) how the folds were formed.

Pairs whose images are missing from the manifest, or are not ``ok`` there, are kept with
that status; evaluation skips them and counts them. An import in which no pair resolves
(every pair names a path the manifest lacks) is an error naming the file, the first
unresolved paths and ``strip_prefix``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.datasets.lfw import read_lfw_pairs
from facecast.datasets.manifest import DatasetError
from facecast.evaluate.resolve import PROTOCOL_COLUMNS, attach_manifest, check_resolved
from facecast.io.list_paths import unescape_list_path
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.io.paths import portable_path

log = logging.getLogger(__name__)

#: fold names that are never test folds
HELD_OUT_FOLDS = ("val",)


def _fold_key(name: str) -> tuple[int, int | str]:
    return (0, int(name)) if name.isdigit() else (1, name)


def read_cast_lists(folder: str | os.PathLike) -> pd.DataFrame:
    """Parse every ``*.list`` in ``folder`` into ``fold``, ``path_a``, ``path_b``, ``label``,
    ``source`` (the list file). Path tokens are percent-decoded
    (:func:`facecast.io.list_paths.unescape_list_path`)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DatasetError(f"CAST list folder {folder} does not exist")
    files = sorted(folder.glob("*.list"), key=lambda p: _fold_key(p.stem))
    if not files:
        raise DatasetError(f"{folder}: no .list files")
    rows = []
    for f in files:
        for lineno, line in enumerate(f.read_text().splitlines(), 1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 3 or parts[2] not in ("0", "1"):
                raise DatasetError(f"{f}:{lineno}: expected 'path_a path_b 0|1', got {line!r}")
            rows.append((f.stem, unescape_list_path(parts[0]), unescape_list_path(parts[1]),
                         int(parts[2]), str(f)))
    return pd.DataFrame(rows, columns=["fold", "path_a", "path_b", "label", "source"])


def stratified_folds(labels: np.ndarray, identities: np.ndarray | None, n_folds: int,
                     seed: int) -> np.ndarray:
    """Fold names ``'0'..'n_folds-1'`` dealt round-robin, stratified by label and identity.

    Within each label (genuine, then impostor) the identities are put in a seeded random
    order, each identity's pairs in a seeded random order after one another, and the pairs
    are dealt to the folds in turn (the impostor class continues where the genuine class
    stopped). So every fold holds ``n/k`` genuine and ``n/k`` impostor pairs (+- 1) and
    each identity's pairs are spread over the folds as evenly as they can be. The same
    inputs and seed give the same folds.
    """
    y = np.asarray(labels).astype(np.int64)
    n = y.shape[0]
    ident = (np.asarray(identities).astype(str) if identities is not None
             else np.full(n, "", dtype=object))
    rng = np.random.default_rng(seed)
    out = np.empty(n, dtype=object)
    start = 0
    for cls in (1, 0):
        idx = np.flatnonzero(y == cls)
        if not idx.size:
            continue
        codes, uniq = pd.factorize(ident[idx], sort=True)
        id_rank = rng.permutation(len(uniq))[codes]        # seeded order of identities
        within = rng.random(idx.size)                         # seeded order inside one
        order = idx[np.lexsort((within, id_rank))]
        out[order] = ((start + np.arange(order.size)) % n_folds).astype(str)
        start = (start + order.size) % n_folds
    return out.astype(str)


def fold_range(names: list[str]) -> str:
    """``0..9`` for consecutive numbered folds, else the names joined by commas."""
    nums = sorted(int(f) for f in names if f.isdigit())
    if nums and nums == list(range(nums[0], nums[-1] + 1)) and len(nums) == len(names):
        return f"{nums[0]}..{nums[-1]}" if len(nums) > 1 else str(nums[0])
    return ", ".join(sorted(names, key=_fold_key))


def assign_folds(pairs: pd.DataFrame, *, n_folds: int, seed: int, unit: str = "file"
                 ) -> tuple[pd.DataFrame, str]:
    """Keep the source's folds when it defines two or more test folds, else stratify.

    ``pairs`` has ``fold``, ``label`` and optionally ``identity_a``. Returns the pairs (with
    ``source_fold``, the fold the source gave) and a note saying how the folds were formed,
    e.g. ``"from files 0..9"`` or ``"stratified by label and identity over 1 file (0),
    10 folds, seed 7"``. Held-out folds (``val``) are kept as they are.
    """
    out = pairs.copy()
    out["fold"] = out["fold"].astype(str)
    out["source_fold"] = out["fold"]
    test = ~out["fold"].isin(HELD_OUT_FOLDS)
    names = sorted(out.loc[test, "fold"].unique().tolist(), key=_fold_key)
    if len(names) >= 2 or not test.any():
        return out, f"from {unit}s {fold_range(names)}" if names else "no test folds"
    ident = out.loc[test, "identity_a"].astype(str).to_numpy() if "identity_a" in out else None
    if ident is not None and not (ident != "").any():
        ident = None
    by = "label and identity" if ident is not None else "label"
    out.loc[test, "fold"] = stratified_folds(out.loc[test, "label"].to_numpy(), ident,
                                             n_folds, seed)
    note = (f"stratified by {by} over 1 {unit} ({names[0]}), {n_folds} folds, seed {seed}")
    return out, note


def _finish_import(raw: pd.DataFrame, manifest_path: str | os.PathLike,
                   out_path: str | os.PathLike, *, fmt: str, source: str, strip_prefix: str,
                   unit: str, n_folds: int, seed: int,
                   provenance: Mapping[str, Any] | None) -> pd.DataFrame:
    manifest = read_parquet(manifest_path, columns=["image_id", "path", "identity", "status"])
    pairs = attach_manifest(raw, manifest, strip_prefix=strip_prefix)
    counts = check_resolved(raw, pairs, source=source, strip_prefix=strip_prefix)
    pairs, note = assign_folds(pairs.drop(columns=["source"], errors="ignore"),
                               n_folds=n_folds, seed=seed, unit=unit)
    log.info("import %s: %d pairs (%d unresolved); folds %s", source, counts["n_pairs"],
             counts["n_unresolved"], note)
    prov = dict(provenance or {})
    prov.update({"stage": "protocol", "protocol": fmt, "source": portable_path(source),
                 "folds": note,
                 "strip_prefix": strip_prefix, **counts})
    write_parquet(pairs, out_path, provenance=prov)
    return pairs


def import_cast_lists(folder: str | os.PathLike, manifest_path: str | os.PathLike,
                      out_path: str | os.PathLike, *, strip_prefix: str = "",
                      n_folds: int = 10, seed: int = 0,
                      provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Import a CAST ``.list`` folder as a protocol Parquet checked against the manifest.

    One numbered list file (CAST's ``0.list`` + ``val.list``) gets ``n_folds`` stratified
    folds seeded by ``seed`` (:func:`assign_folds`).
    """
    return _finish_import(read_cast_lists(folder), manifest_path, out_path, fmt="cast_lists",
                          source=str(folder), strip_prefix=strip_prefix, unit="file",
                          n_folds=n_folds, seed=seed, provenance=provenance)


def import_lfw_pairs(pairs_file: str | os.PathLike, manifest_path: str | os.PathLike,
                     out_path: str | os.PathLike, *, strip_prefix: str = "",
                     n_folds: int = 10, seed: int = 0,
                     provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Import an LFW ``pairs.txt`` (LFW file naming) as a protocol Parquet.

    A one-block file (``pairsDevTest.txt``, header ``1 300`` or ``500``) gets ``n_folds``
    stratified folds seeded by ``seed``.
    """
    raw = read_lfw_pairs(pairs_file).rename(columns={"image_a": "path_a", "image_b": "path_b"})
    raw["source"] = str(pairs_file)
    return _finish_import(raw, manifest_path, out_path, fmt="lfw_pairs", source=str(pairs_file),
                          strip_prefix=strip_prefix, unit="block", n_folds=n_folds, seed=seed,
                          provenance=provenance)


def import_protocol(spec: Mapping[str, Any], manifest_path: str | os.PathLike,
                    out_path: str | os.PathLike, *, n_folds: int = 10, seed: int = 0,
                    provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Import one configured protocol (``evaluate.imports.<name>``, or the protocol an
    ``insightface_bin`` dataset implies: :func:`facecast.evaluate.targets.protocol_spec`,
    whose ``layout`` / ``block`` keys pick a CC11 block).

    ``n_folds`` and ``seed`` (``evaluate.n_folds`` and the global seed) are used when the
    source defines a single fold (see the module docstring).
    """
    fmt = spec.get("format", "cast_lists")
    kw = {"strip_prefix": spec.get("strip_prefix", ""), "provenance": provenance,
          "n_folds": int(n_folds), "seed": int(seed)}
    if fmt == "cast_lists":
        return import_cast_lists(spec["path"], manifest_path, out_path, **kw)
    if fmt == "lfw_pairs":
        return import_lfw_pairs(spec["path"], manifest_path, out_path, **kw)
    if fmt == "insightface_bin":  # folds from the file's order, never re-dealt
        from facecast.evaluate.bin_protocol import import_insightface_bin

        return import_insightface_bin(spec["path"], manifest_path, out_path,
                                      layout=spec.get("layout") or "pairs",
                                      block=spec.get("block"), provenance=provenance)
    raise DatasetError(f"unknown protocol format {fmt!r} (cast_lists | lfw_pairs | "
                       "insightface_bin)")


def load_protocol(path: str | os.PathLike) -> pd.DataFrame:
    """Read a protocol or mined-pairs Parquet into :data:`PROTOCOL_COLUMNS` (+ extras kept)."""
    df = read_parquet(path)
    missing = [c for c in ("fold", "image_a", "image_b", "label") if c not in df]
    if missing:
        raise DatasetError(f"{path}: not a pair protocol (missing columns {missing})")
    if "status" not in df:
        df["status"] = "ok"
    if "message" not in df:
        df["message"] = ""
    for side in ("a", "b"):
        if f"identity_{side}" not in df:
            df[f"identity_{side}"] = ""
    df["fold"] = df["fold"].astype(str)
    df["label"] = df["label"].astype(np.int8)
    extra = [c for c in df.columns if c not in PROTOCOL_COLUMNS]
    return df[PROTOCOL_COLUMNS + extra]
