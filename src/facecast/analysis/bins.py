"""Mined benchmarks as insightface verification ``.bin`` files (``export.bins.<name>``).

One export is ``results/<ds>/bins/<name>.bin`` and two sidecars beside it:

* ``<name>.bin``: exactly what insightface's ``load_bin`` reads
  (``recognition/arcface_torch/eval/verification.py``; CAST's ``evaluation.load_bin``):
  a pickle (protocol 4) of ``(bins, issame_list)``, ``bins`` a list of encoded images (two
  per pair, pair ``k`` = images ``2k`` and ``2k+1``), ``issame_list`` a list of bools. So
  arcface_torch's verification callback (``val_targets``) and CAST's ``cc11.py`` use it
  unchanged. Written atomically (:func:`facecast.io.atomic.atomic_path`).
* ``<name>.pairs.parquet``: one row per pair index of the file: ``pair_index``, ``block``
  (the benchmark), ``image_a``, ``image_b``, ``identity_a``, ``identity_b``, ``label``,
  ``fold`` (the insightface fold, ``0``..``9``, within the block), ``benchmark_fold`` (the
  pair's fold in the benchmark's ``pairs.parquet``), ``status``, ``message``.
* ``<name>.json``: ``blocks`` (per block ``name``, ``source``, ``folds``, ``n_pairs``,
  ``n_genuine``, ``n_impostor``, ``first_pair``, ``first_image``, ``n_available``), the
  image size, encoding, pair order, seed, config hash and facecast version. facecast reads
  the file back with ``kind: insightface_bin, layout: blocks`` (one protocol per block,
  named after it; :mod:`facecast.datasets.insightface_bin`).

Images: the faces stage's ``crop_arcface`` (ArcFace 5-point alignment at 112 px; for a
pre-aligned dataset the input crop as the faces stage stored it): the very pixels the
evaluation embedded. ``encoding: png`` (default) writes the stored PNG bytes unchanged
(lossless); ``jpg`` re-encodes them at ``quality``. Only ``image_size: 112`` exists (the
crop the faces stage stores; a crop at another size would need the original images, and
insightface's ``load_bin`` resizes a crop of another size itself); the config check says so.

Pair order. insightface's ``calculate_roc`` cuts the pairs, in file order, into 10
consecutive folds (``KFold(n_splits=10, shuffle=False)``: the first ``n % 10`` folds one
pair longer); CAST's ``cc11.py`` first cuts the file into equal consecutive blocks
(``sub_benchmark_size = int(dataset.shape[0]/sub_benchmarks)``) and evaluates each the same
way. A block is one benchmark's pairs (``folds: test``: every fold but ``val``; ``val``:
the held-out fold, as CAST's ``cc11_val.bin``), in the benchmark's fold order (genuine
first inside each fold, as its ``.list`` files), laid out as CAST's ``val.list``
(:func:`facecast.analysis.exports.cast_val_order`): insightface fold ``k`` is a run of
genuine pairs followed by a run of impostor pairs, the genuine share of each fold in
proportion to the fold's size (:func:`bin_pair_order`). When the benchmark has ten equal
test folds (band mining, the default), insightface's fold ``k`` is exactly the benchmark's
fold ``k``, so insightface's 10-fold accuracy equals facecast's.

Several benchmarks: consecutive blocks in the order listed. ``cc11.py`` slices by one
size, so all blocks must be equal: without ``block_size`` unequal blocks stop the job with
an error naming each size; with it every block is a seeded sample of ``block_size`` pairs
of its benchmark keeping the genuine / impostor balance (:func:`sample_pairs`).
"""

from __future__ import annotations

import io
import json
import logging
import os
import pickle
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.dataset as pads
from PIL import Image

from facecast import __version__
from facecast.analysis.exports import ExportError
from facecast.io.atomic import atomic_path, write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.io.paths import portable_path

log = logging.getLogger(__name__)

#: insightface's verification.py and CAST's cc11.py: 10 consecutive folds per block
BIN_FOLDS = 10
#: the crop size the faces stage stores (``crop_arcface``)
STORED_SIZE = 112
#: pickle protocol of the written file (Python 3.4+; CAST writes its .bin files with 4)
PICKLE_PROTOCOL = 4
PAIR_ORDER = ("insightface folds: KFold(10, shuffle=False) over each block; fold k = a run "
              "of genuine then a run of impostor pairs (CAST val.list layout), the "
              "benchmark's folds in order")


class BinExportError(ExportError):
    """A benchmark cannot be written to the asked ``.bin`` (sizes, missing crops)."""


def kfold_sizes(n: int, n_folds: int = BIN_FOLDS) -> np.ndarray:
    """Fold sizes of sklearn's ``KFold(n_folds, shuffle=False)`` over ``n`` items: the
    first ``n % n_folds`` folds one longer."""
    sizes = np.full(n_folds, n // n_folds, np.int64)
    sizes[: n % n_folds] += 1
    return sizes


def kfold_labels(n: int, n_folds: int = BIN_FOLDS) -> np.ndarray:
    """The KFold fold (``'0'``..``'9'``) of each of ``n`` consecutive items."""
    return np.repeat(np.arange(n_folds), kfold_sizes(n, n_folds)).astype(str)


def bin_pair_order(labels: np.ndarray, n_folds: int = BIN_FOLDS) -> np.ndarray:
    """Row order of one block: insightface fold ``k`` (a KFold run of the file order) is a
    run of genuine rows then a run of impostor rows, each class in its given order.

    Fold ``k`` takes ``g_k`` genuine rows, ``g_k`` the rounded share of the genuine rows
    proportional to the fold's size (cumulative rounding, so the shares sum exactly).
    When both classes split evenly over the folds this is
    :func:`facecast.analysis.exports.cast_val_order` (CAST's ``val.list``).
    """
    labels = np.asarray(labels)
    gen, imp = np.flatnonzero(labels == 1), np.flatnonzero(labels != 1)
    n = len(labels)
    if n == 0:
        return np.zeros(0, np.int64)
    sizes = kfold_sizes(n, n_folds)
    cum = np.floor(len(gen) * np.cumsum(sizes) / n + 0.5).astype(np.int64)
    g_counts = np.diff(np.r_[0, cum])
    g_edges, i_edges = np.r_[0, cum], np.r_[0, np.cumsum(sizes - g_counts)]
    parts = [np.r_[gen[g_edges[k]:g_edges[k + 1]], imp[i_edges[k]:i_edges[k + 1]]]
             for k in range(n_folds)]
    return np.concatenate(parts).astype(np.int64)


def _fold_key(fold: str) -> tuple[int, int | str]:
    return (0, int(fold)) if fold.isdigit() else (1, fold)


def benchmark_pairs(pairs: pd.DataFrame, folds: str) -> pd.DataFrame:
    """A benchmark's pairs of ``folds`` (``test``: all but ``val``; ``val``), in fold order
    (numeric), genuine first inside each fold, each class in file order."""
    fold = pairs["fold"].astype(str)
    keep = fold == "val" if folds == "val" else fold != "val"
    sub = pairs[keep.to_numpy()].copy()
    sub["_fold"] = sub["fold"].astype(str).map(_fold_key)
    sub["_gen"] = (sub["label"].astype(int) != 1).astype(int)
    sub["_row"] = np.arange(len(sub))
    sub = sub.sort_values(["_fold", "_gen", "_row"], kind="mergesort")
    return sub.drop(columns=["_fold", "_gen", "_row"]).reset_index(drop=True)


def sample_pairs(pairs: pd.DataFrame, size: int, seed: Sequence[int], name: str
                 ) -> pd.DataFrame:
    """A seeded sample of ``size`` rows keeping the genuine share (rounded), rows kept in
    their order; BinExportError naming the benchmark when it holds fewer."""
    if size > len(pairs):
        raise BinExportError(f"block_size {size} is larger than benchmark {name!r} "
                             f"({len(pairs)} pairs); lower block_size to at most the "
                             "smallest benchmark")
    if size == len(pairs):
        return pairs.reset_index(drop=True)
    rng = np.random.default_rng(list(seed))
    is_gen = pairs["label"].astype(int).to_numpy() == 1
    n_gen = int(np.floor(size * is_gen.sum() / len(pairs) + 0.5))
    pick = [rng.choice(np.flatnonzero(cls), k, replace=False)
            for cls, k in ((is_gen, n_gen), (~is_gen, size - n_gen))]
    return pairs.iloc[np.sort(np.concatenate(pick))].reset_index(drop=True)


def order_block(pairs: pd.DataFrame, block: str) -> pd.DataFrame:
    """One block's rows in ``.bin`` order with ``block``, ``fold`` (insightface's) and
    ``benchmark_fold`` (:func:`bin_pair_order`)."""
    out = pairs.iloc[bin_pair_order(pairs["label"].astype(int).to_numpy())]
    out = out.rename(columns={"fold": "benchmark_fold"}).reset_index(drop=True)
    out["benchmark_fold"] = out["benchmark_fold"].astype(str)
    out.insert(0, "block", block)
    out["fold"] = kfold_labels(len(out))
    return out


def build_blocks(sources: Mapping[str, pd.DataFrame], *, folds: str = "test",
                 block_size: int | None = None, seed: Sequence[int] = (0,),
                 name: str = "") -> pd.DataFrame:
    """Every block in ``.bin`` order (``sources``: benchmark -> its ``pairs.parquet``, in
    the export's order), with ``pair_index``; BinExportError when a block is empty or,
    without ``block_size``, the blocks differ in size (naming each size)."""
    blocks = {b: benchmark_pairs(p, folds) for b, p in sources.items()}
    empty = [b for b, p in blocks.items() if p.empty]
    if empty:
        raise BinExportError(f"export.bins.{name}: benchmark(s) {', '.join(empty)} have no "
                             f"{folds} pairs")
    sizes = {b: len(p) for b, p in blocks.items()}
    if block_size is None and len(set(sizes.values())) > 1:
        listing = ", ".join(f"{b} {n} pairs" for b, n in sizes.items())
        raise BinExportError(
            f"export.bins.{name}: blocks differ in size ({listing}); cc11.py slices a "
            "multi-block .bin into equal blocks, so set export.bins."
            f"{name}.block_size (at most {min(sizes.values())}) to write a seeded sample "
            "of that many pairs of each benchmark")
    parts = []
    for b, p in blocks.items():
        if block_size is not None:
            p = sample_pairs(p, int(block_size), [*seed, zlib.crc32(b.encode())], b)
        parts.append(order_block(p, b))
    out = pd.concat(parts, ignore_index=True)
    out.insert(0, "pair_index", np.arange(len(out), dtype=np.int64))
    return out


def read_crops(faces_paths: Sequence[str | os.PathLike], image_ids: Sequence[str],
               column: str = "crop_arcface") -> dict[str, tuple[bytes | None, str]]:
    """image_id -> (stored crop bytes or None, faces status) for ``image_ids``, read from
    the faces shards (only the rows asked for)."""
    wanted = sorted(set(map(str, image_ids)))
    if not wanted or not faces_paths:
        return {}
    ds = pads.dataset([str(p) for p in faces_paths], format="parquet")
    table = ds.to_table(columns=["image_id", "status", column],
                        filter=pads.field("image_id").isin(wanted))
    return {i: (c, s) for i, s, c in zip(table.column("image_id").to_pylist(),
                                          table.column("status").to_pylist(),
                                          table.column(column).to_pylist(), strict=True)}


def encode_image(png: bytes, encoding: str, quality: int = 95) -> bytes:
    """The ``.bin`` bytes of a stored PNG crop: unchanged for ``png``, JPEG at
    ``quality`` for ``jpg`` (RGB, Pillow's encoder)."""
    if encoding == "png":
        return bytes(png)
    if encoding != "jpg":
        raise ValueError(f"unknown .bin image encoding {encoding!r} (png | jpg)")
    with Image.open(io.BytesIO(png)) as im:
        buf = io.BytesIO()
        im.convert("RGB").save(buf, format="JPEG", quality=int(quality))
    return buf.getvalue()


def pair_images(rows: pd.DataFrame, crops: Mapping[str, tuple[bytes | None, str]],
                encoding: str, quality: int, name: str, size: int = STORED_SIZE
                ) -> list[bytes]:
    """The encoded images of ``rows`` (two per pair, in order); BinExportError naming the
    images without a crop of ``size`` px and their faces statuses."""
    bad = {}
    for iid in pd.unique(pd.concat([rows["image_a"], rows["image_b"]])):
        blob, status = crops.get(str(iid), (None, "not in the faces shards"))
        if blob is None:
            bad[str(iid)] = status
    if bad:
        shown = ", ".join(f"{i} ({s})" for i, s in list(bad.items())[:5])
        raise BinExportError(f"export.bins.{name}: {len(bad)} image(s) of the pairs have no "
                             f"{size} px aligned crop (crop_arcface) in the faces shards: "
                             f"{shown}{' ...' if len(bad) > 5 else ''}")
    cache: dict[str, bytes] = {}
    out = []
    for a, b in zip(rows["image_a"].astype(str), rows["image_b"].astype(str), strict=True):
        for iid in (a, b):
            if iid not in cache:
                cache[iid] = encode_image(crops[iid][0], encoding, quality)
            out.append(cache[iid])
    return out


def write_bin(path: str | os.PathLike, images: Sequence[bytes], issame: Sequence[bool]
              ) -> Path:
    """Write ``(bins, issame_list)`` as insightface's ``load_bin`` reads it, atomically."""
    if len(images) != 2 * len(issame):
        raise ValueError(f"{len(images)} images for {len(issame)} pairs")
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        pickle.dump(([bytes(b) for b in images], [bool(s) for s in issame]), fh,
                    protocol=PICKLE_PROTOCOL)
    return Path(path)


def block_table(rows: pd.DataFrame, sources: Mapping[str, str], folds: str,
                available: Mapping[str, int]) -> list[dict[str, Any]]:
    """The ``blocks`` entries of the ``.json`` sidecar, in file order."""
    out = []
    for b in pd.unique(rows["block"]):
        part = rows[rows["block"] == b]
        first = int(part["pair_index"].iloc[0])
        n_gen = int((part["label"].astype(int) == 1).sum())
        out.append({"name": str(b), "source": sources[b], "folds": folds,
                    "n_pairs": len(part), "n_genuine": n_gen, "n_impostor": len(part) - n_gen,
                    "first_pair": first, "first_image": 2 * first,
                    "n_available": int(available[b])})
    return out


def export_bin(sources: Mapping[str, str | os.PathLike],
               faces_paths: Sequence[str | os.PathLike], out_bin: str | os.PathLike, *,
               name: str, cfg: Mapping[str, Any], seed: int,
               provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Export ``export.bins.<name>`` (= ``cfg``): ``sources`` maps each benchmark, in
    order, to its ``pairs.parquet``; writes ``out_bin`` and its sidecars (module
    docstring) and returns the ``.json`` sidecar's content."""
    out_bin = Path(out_bin)
    folds = str(cfg.get("folds", "test"))
    encoding, quality = str(cfg.get("encoding", "png")), int(cfg.get("quality", 95))
    size = int(cfg.get("image_size", STORED_SIZE))
    if size != STORED_SIZE:
        raise BinExportError(f"export.bins.{name}.image_size: only {STORED_SIZE} (the stored "
                             f"crop) can be written, got {size}")
    bsize = cfg.get("block_size")
    seq = [int(cfg["seed"] if cfg.get("seed") is not None else seed), zlib.crc32(name.encode())]
    frames = {b: read_parquet(p) for b, p in sources.items()}
    rows = build_blocks(frames, folds=folds, block_size=None if bsize is None else int(bsize),
                        seed=seq, name=name)
    crops = read_crops(faces_paths, pd.concat([rows["image_a"], rows["image_b"]]).tolist())
    images = pair_images(rows, crops, encoding, quality, name, size)
    write_bin(out_bin, images, (rows["label"].astype(int) == 1).tolist())
    rows["status"], rows["message"] = "ok", ""
    keep = ["pair_index", "block", "image_a", "image_b", "identity_a", "identity_b", "label",
            "fold", "benchmark_fold", "status", "message"]
    available = {b: len(benchmark_pairs(f, folds)) for b, f in frames.items()}
    meta = {"format": "insightface verification .bin: pickle of (bins, issame_list)",
            "name": name, "layout": "blocks" if len(sources) > 1 else "pairs",
            "blocks": block_table(rows, {b: portable_path(p) for b, p in sources.items()},
                                  folds, available),
            "n_pairs": len(rows), "image_size": size, "encoding": encoding,
            "quality": quality if encoding == "jpg" else None,
            "block_size": None if bsize is None else int(bsize), "seed": seq,
            "pair_order": PAIR_ORDER, "pickle_protocol": PICKLE_PROTOCOL,
            "config_hash": (provenance or {}).get("config_hash"),
            "facecast_version": __version__}
    prov = {**(provenance or {}), "stage": "export_bin", "name": name,
            "bin": out_bin.name, "blocks": [b["name"] for b in meta["blocks"]]}
    write_parquet(rows[[c for c in keep if c in rows.columns]],
                  sidecar_path(out_bin, ".pairs.parquet"), provenance=prov)
    write_text(sidecar_path(out_bin, ".json"), json.dumps(meta, indent=1) + "\n")
    log.info("%s: %d pairs in %d block(s) (%s), %s", out_bin, len(rows), len(meta["blocks"]),
             ", ".join(f"{b['name']} {b['n_pairs']}" for b in meta["blocks"]), encoding)
    return meta


def sidecar_path(bin_path: str | os.PathLike, suffix: str) -> Path:
    """``<name><suffix>`` beside ``<name>.bin`` (``.json``, ``.pairs.parquet``)."""
    p = Path(bin_path)
    return p.with_name(p.stem + suffix)
