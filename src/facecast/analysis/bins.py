"""Mined benchmarks as insightface verification ``.bin`` files (``export.bins.<name>``).

One export is ``results/<ds>/bins/<name>.bin`` and two sidecars beside it:

* ``<name>.bin``: what insightface's ``load_bin``
  (``recognition/arcface_torch/eval/verification.py``; CAST's ``evaluation.load_bin``)
  reads: a pickle (protocol 4) of ``(bins, issame_list)``, ``bins`` a list of encoded images
  (two per pair, pair ``k`` = images ``2k`` and ``2k+1``), ``issame_list`` a list of
  bools. So arcface_torch's verification callback (``val_targets``) and CAST's ``cc11.py``
  use it unchanged. Written as a stream in bounded memory, atomically
  (:mod:`facecast.analysis.bin_writer`): the crops are never all in memory.
* ``<name>.pairs.parquet``: one row per pair index of the file: ``pair_index``, ``block``
  (the benchmark), ``image_a``, ``image_b``, ``identity_a``, ``identity_b``, ``label``,
  ``fold`` (the insightface fold, ``0``..``9``, within the block), ``benchmark_fold`` (the
  pair's fold in the benchmark's ``pairs.parquet``), ``status``, ``message``.
* ``<name>.json``: ``blocks`` (per block ``name``, ``source``, ``folds``, ``n_pairs``,
  ``n_genuine``, ``n_impostor``, ``first_pair``, ``first_image``, ``n_available``), the
  image size, encoding, pair order, seed, ``cc11_compatible`` / ``cc11_labels``
  (:func:`cc11_fit`), config hash and facecast version. facecast reads the file back with
  ``kind: insightface_bin, layout: blocks`` (one protocol per block, named after it;
  :mod:`facecast.datasets.insightface_bin`).

Images: the faces stage's ``crop_arcface`` (ArcFace 5-point alignment at 112 px; for a
pre-aligned dataset the input crop as the faces stage stored it): the very pixels the
evaluation embedded. ``encoding: png`` (default) writes the stored PNG bytes unchanged
(lossless); ``jpg`` re-encodes them at ``quality``. Only ``image_size: 112`` exists (the
crop the faces stage stores; a crop at another size would need the original images, and
insightface's ``load_bin`` resizes a crop of another size itself); the config check says so.

Pair order. insightface's ``calculate_roc`` cuts the pairs, in file order, into 10
consecutive folds (scikit-learn's unshuffled 10-fold split: the first ``n % 10`` folds one
pair longer); CAST's ``cc11.py`` first cuts the file into eleven equal consecutive slices
(a fixed count and fixed names) and evaluates each the same way. A block is one
benchmark's pairs (``folds: test``: every fold but ``val``; ``val``: the held-out fold, as
CAST's ``cc11_val.bin``), in the benchmark's fold order (genuine first inside each fold, as
its ``.list`` files), laid out as CAST's ``val.list`` files are (recorded in
``tests/data/reference/cc11/``): insightface fold ``k`` is a run of genuine pairs followed
by a run of impostor pairs, the genuine share of each fold in proportion to the fold's
size (:func:`bin_pair_order`). When the benchmark has ten equal test folds (band mining,
the default), insightface's fold ``k`` is exactly the benchmark's fold ``k``, so
insightface's 10-fold accuracy equals facecast's. Every fold of every block must hold
genuine and impostor pairs, else the export stops naming the block
(:func:`check_fold_classes`).

Several benchmarks: consecutive blocks in the order listed. ``cc11.py`` slices by one
size, so all blocks must be equal: without ``block_size`` unequal blocks stop the job with
an error naming each size; with it every block is a seeded sample of ``block_size`` pairs
of its benchmark keeping the genuine / impostor balance (:func:`sample_pairs`). Only an
export of eleven blocks is what ``cc11.py`` can read block by block; any other count is
marked ``cc11_compatible: false`` in the sidecar and said in the log.
"""

from __future__ import annotations

import io
import json
import logging
import os
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image

from facecast import __version__
from facecast.analysis.bin_checks import (
    CC11_BLOCKS,
    fold_class_gaps,
    fold_genuine_counts,
    rounded_share,
)
from facecast.analysis.bin_writer import PICKLE_PROTOCOL, CropSpill, write_bin_stream
from facecast.analysis.exports import ExportError
from facecast.config.bin_sets import BIN_FOLDS, CC11_LABELS, CC11_NAMES
from facecast.faces.crops import crop_format, decode_crop, encode_png
from facecast.io.atomic import write_text
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.io.paths import portable_path

log = logging.getLogger(__name__)

#: the crop size the faces stage stores (``crop_arcface``)
STORED_SIZE = 112
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
    proportional to the fold's size (:func:`~facecast.analysis.bin_checks.
    fold_genuine_counts`: cumulative rounding, so the shares sum exactly). When both
    classes split evenly over the folds this is the layout of CAST's ``val.list`` files
    (ten runs of 50 genuine then 50 impostor pairs; ``tests/data/reference/cc11/``).
    """
    labels = np.asarray(labels)
    gen, imp = np.flatnonzero(labels == 1), np.flatnonzero(labels != 1)
    n = len(labels)
    if n == 0:
        return np.zeros(0, np.int64)
    sizes = kfold_sizes(n, n_folds)
    g_counts = np.asarray(fold_genuine_counts(n, len(gen), n_folds), np.int64)
    g_edges, i_edges = np.r_[0, np.cumsum(g_counts)], np.r_[0, np.cumsum(sizes - g_counts)]
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
    n_gen = rounded_share(int(is_gen.sum()), size, len(pairs))
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
    check_fold_classes(out, name)
    return out


def encode_image(png: bytes, encoding: str, quality: int = 95) -> bytes:
    """The ``.bin`` bytes of a stored crop: unchanged for ``png`` (but a JPEG crop,
    ``faces.keep_jpeg``, as a PNG of its pixels), JPEG at ``quality`` for ``jpg`` (RGB,
    Pillow's encoder); the same bytes whichever way the faces stage stored the pixels."""
    if encoding not in ("png", "jpg"):
        raise ValueError(f"unknown .bin image encoding {encoding!r} (png | jpg)")
    if encoding == "png" and crop_format(png) != "jpeg":
        return bytes(png)
    pixels = decode_crop(png)
    if encoding == "png":
        return encode_png(pixels)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=int(quality))
    return buf.getvalue()


def missing_crops(rows: pd.DataFrame, spill: CropSpill, name: str,
                  size: int = STORED_SIZE) -> None:
    """BinExportError naming the pair images without a crop of ``size`` px in ``spill``
    (at most five, with their faces statuses)."""
    bad = {}
    for iid in pd.unique(pd.concat([rows["image_a"], rows["image_b"]]).astype(str)):
        if iid not in spill:
            bad[iid] = spill.status.get(iid, "not in the faces shards")
    if bad:
        shown = ", ".join(f"{i} ({s})" for i, s in list(bad.items())[:5])
        raise BinExportError(f"export.bins.{name}: {len(bad)} image(s) of the pairs have no "
                             f"{size} px aligned crop (crop_arcface) in the faces shards: "
                             f"{shown}{' ...' if len(bad) > 5 else ''}")


def pair_image_ids(rows: pd.DataFrame) -> Iterator[str]:
    """The image of each ``.bin`` position: pair ``k``'s ``image_a`` then ``image_b``."""
    for a, b in zip(rows["image_a"].astype(str), rows["image_b"].astype(str), strict=True):
        yield a
        yield b


def check_fold_classes(rows: pd.DataFrame, name: str) -> None:
    """BinExportError naming each block with an insightface fold that lacks genuine or
    impostor pairs: insightface's ``calculate_val`` divides by each fold's genuine and
    impostor counts (a ZeroDivisionError in arcface_torch's callback), and such a fold's
    accuracy measures one class only. A block's folds hold what :func:`bin_pair_order`
    lays out (:func:`~facecast.analysis.bin_checks.fold_class_gaps`, the rule the config
    check predicts with)."""
    gen = (rows["label"].astype(int) == 1).groupby(rows["block"], sort=False).agg(
        ["size", "sum"])
    parts = [f"block {block} ({', '.join(gaps)})" for block, (n, g) in gen.iterrows()
             if (gaps := fold_class_gaps(int(n), int(g)))]
    if not parts:
        return
    raise BinExportError(
        f"export.bins.{name}: {'; '.join(parts)}: every one of insightface's "
        f"{BIN_FOLDS} folds of a block needs genuine and impostor pairs (calculate_val "
        "divides by both counts); raise block_size or mine more pairs of the missing class")


def cc11_fit(blocks: Sequence[str], name: str) -> dict[str, Any]:
    """What CAST's ``cc11.py`` makes of an export with these ``blocks``: it cuts every
    ``.bin`` into :data:`CC11_BLOCKS` equal slices and prints its own names for them
    (``CC11_LABELS``), so only an export of eleven blocks is read block by block.
    Returns the sidecar keys ``cc11_compatible`` and ``cc11_labels`` (the name cc11.py
    prints for each block, or None) and logs a warning for any other block count."""
    if len(blocks) != CC11_BLOCKS:
        log.warning("export.bins.%s: %d block(s) (%s), not %d: CAST's cc11.py would cut the "
                    "file into %d equal slices named %s, across these blocks, so its table "
                    "would be mislabelled; the sidecar says cc11_compatible: false. Read it "
                    "with facecast (kind insightface_bin, layout blocks) or insightface's "
                    "verification.py", name, len(blocks), ", ".join(blocks), CC11_BLOCKS,
                    CC11_BLOCKS, ", ".join(CC11_LABELS))
        return {"cc11_compatible": False, "cc11_labels": None}
    labels = dict(zip(blocks, CC11_LABELS, strict=True))
    renamed = [f"{b} as {lab}" for b, lab, c in zip(blocks, CC11_LABELS, CC11_NAMES,
                                                   strict=True) if b != c]
    if renamed:
        log.warning("export.bins.%s: cc11.py prints its own names for the eleven blocks: %s",
                    name, "; ".join(renamed))
    return {"cc11_compatible": True, "cc11_labels": labels}


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
    spill_dir = out_bin.parent
    spill_dir.mkdir(parents=True, exist_ok=True)
    with CropSpill(spill_dir) as spill:
        spill.fill(faces_paths, pd.concat([rows["image_a"], rows["image_b"]]).astype(str),
                   lambda png: encode_image(png, encoding, quality))
        missing_crops(rows, spill, name, size)
        written = write_bin_stream(out_bin, pair_image_ids(rows),
                                   (rows["label"].astype(int) == 1).tolist(), spill.get)
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
            **cc11_fit([str(b) for b in sources], name),
            "n_unique_images": written["n_unique"], "n_bytes": written["n_bytes"],
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
