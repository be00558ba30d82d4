"""Training subsets of a benchmark's pool (``export.train_subsets``; CAST README, "Subsample
Training Sets"): a set an arcface_torch user trains on directly.

Selection (:func:`select_training_subset`), deterministic from ``seed``:

1. the benchmark's subset (its filters applied, excluded rows never in it);
2. ``max_images_per_identity`` (0 = no cap): a seeded sample of that many images per
   identity;
3. ``min_images_per_identity``: identities with fewer images are dropped;
4. ``balance_by`` (a column; empty = no balancing): each identity belongs to one class, the
   most common value of the column over its images (ties: the smallest value; identities
   without a value are dropped and counted). Each class gets ``per_class`` images
   (``equal``: as many as the smallest class has), filled with whole identities in a
   seeded order; the last identity taken is cut to the images still needed when that
   leaves it at least ``min_images_per_identity`` images, else it is skipped. A class that
   cannot be filled exactly is reported (``shortfall``) and written with what it has.

Labels are renumbered ``0 .. C-1`` in the order of the identities' names.

Formats (:func:`write_training_subset`):

* ``recordio``: ``train.rec`` + ``train.idx`` + ``property`` in insightface's layout: header
  record 0 (``flag 2``, labels ``(a, b)``: images are records ``1 .. a-1``, identity
  records ``a .. b-1``), image records with the label in the header, grouped by label,
  identity records with labels ``(first image record, last + 1)``, ``property`` =
  ``<classes>,112,112``. Image bytes are copied byte for byte from the source (a file, a
  RecordIO record).
* ``list``: ``train.lst`` in im2rec's layout, ``<index>\\t<label>\\t<path>`` (paths
  relative to the dataset root).
* ``folder``: ``images/<label>/<k><ext>``, the files copied byte for byte (ImageFolder
  layout).

Every format also writes ``selection.parquet`` (``image_id``, ``path``, ``identity``,
``label``, ``class``) and ``report.json`` (counts per class, identities, shortfall).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm import tqdm

from facecast.datasets.recordio import pack, write_recordio
from facecast.io.atomic import write_text
from facecast.io.parquet_io import write_parquet

FORMATS = ("recordio", "list", "folder")
#: files each format writes besides ``selection.parquet`` and ``report.json``
FORMAT_FILES = {"recordio": ["train.rec", "train.idx", "property"], "list": ["train.lst"],
                "folder": ["images"]}


class TrainSubsetError(ValueError):
    """A training subset cannot be formed or written; the message says why."""


def _identity_class(values: pd.Series, identity: pd.Series) -> pd.Series:
    """Identity -> its most common value (ties: the smallest), identities without one out."""
    df = pd.DataFrame({"identity": identity.to_numpy(), "v": values.to_numpy()}).dropna()
    counts = df.groupby(["identity", "v"]).size().reset_index(name="n")
    counts = counts.sort_values(["identity", "n", "v"], ascending=[True, False, True],
                                kind="mergesort")
    return counts.drop_duplicates("identity").set_index("identity")["v"]


def _fill(sizes: pd.Series, quota: int, min_images: int, rng: np.random.Generator
          ) -> dict[str, int]:
    """Identity -> images taken: whole identities in seeded order until ``quota``."""
    out: dict[str, int] = {}
    left = quota
    for ident in sizes.index.to_numpy()[rng.permutation(len(sizes))]:
        if left == 0:
            break
        n = int(sizes[ident])
        if n <= left:
            out[ident], left = n, left - n
        elif left >= min_images:
            out[ident], left = left, 0
    return out


def select_training_subset(pool: pd.DataFrame, *, balance_by: str = "",
                           per_class: int | str = "equal", min_images_per_identity: int = 1,
                           max_images_per_identity: int = 0, seed: int | list[int] = 0
                           ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The images of a training subset of ``pool`` (``image_id``, ``identity``, and the
    ``balance_by`` column), with ``label`` (0..C-1) and ``class``; and the report.

    See the module docstring for the steps. Never returns an excluded row: ``pool`` is a
    benchmark subset, which holds none.
    """
    rng = np.random.default_rng(seed)
    df = pool.sample(frac=1.0, random_state=np.random.RandomState(rng.integers(2**31))) \
        if len(pool) else pool.copy()
    df = df.sort_values("identity", kind="mergesort")
    report: dict[str, Any] = {"n_pool": int(len(pool)),
                              "n_pool_identities": int(pool["identity"].nunique())}
    if max_images_per_identity:
        df = df[df.groupby("identity").cumcount() < max_images_per_identity]
    sizes = df.groupby("identity").size()
    df = df[df["identity"].map(sizes) >= min_images_per_identity]
    report["n_after_identity_limits"] = int(len(df))
    df = df.assign(**{"class": ""})
    if balance_by:
        if balance_by not in df:
            raise TrainSubsetError(f"balance_by column {balance_by!r} is not available")
        cls = _identity_class(df[balance_by], df["identity"])
        report["identities_without_class"] = int(df["identity"].nunique() - len(cls))
        df = df[df["identity"].isin(cls.index)]
        df["class"] = df["identity"].map(cls).astype(str)
        sizes = df.groupby("identity").size()
        by_class = {c: int(sizes[cls[cls.astype(str) == c].index.intersection(sizes.index)].sum())
                    for c in sorted(df["class"].unique())}
        quota = min(by_class.values()) if per_class == "equal" else int(per_class)
        taken: dict[str, int] = {}
        for c in sorted(by_class):
            ids = cls[cls.astype(str) == c].index.intersection(sizes.index)
            taken.update(_fill(sizes[sorted(ids)], quota, min_images_per_identity, rng))
        df = df[df["identity"].isin(taken)]
        df = df[df.groupby("identity").cumcount() < df["identity"].map(taken)]
        got = df.groupby("class").size()
        report["per_class_target"] = quota
        report["available_per_class"] = by_class
        report["shortfall"] = bool(any(int(got.get(c, 0)) != quota for c in by_class))
    else:
        report["shortfall"] = False
    names = sorted(df["identity"].unique())
    df = df.assign(label=df["identity"].map({n: k for k, n in enumerate(names)}).astype(np.int64))
    df = df.sort_values(["label", "image_id"], kind="mergesort").reset_index(drop=True)
    report.update({"n_images": int(len(df)), "n_identities": len(names),
                   "images_per_class": {str(k): int(v) for k, v in
                                        df.groupby("class").size().items()}})
    return df, report


def write_recordio_subset(sel: pd.DataFrame, fetch: Callable[[str], bytes],
                          out_dir: Path, *, size: tuple[int, int] = (112, 112)) -> None:
    """``train.rec`` + ``train.idx`` + ``property`` (insightface layout, module docstring)."""
    n, labels = len(sel), sel["label"].to_numpy()
    n_classes = int(labels.max()) + 1 if n else 0
    a = n + 1
    starts = np.searchsorted(labels, np.arange(n_classes + 1)) + 1

    def records():
        yield 0, pack([float(a), float(a + n_classes)], b"", 0, 0)
        for k, (path, lab) in enumerate(tqdm(zip(sel["path"], labels, strict=True), total=n,
                                             desc="train.rec", mininterval=10), start=1):
            yield k, pack(float(lab), fetch(path), k, 0)
        for c in range(n_classes):
            yield a + c, pack([float(starts[c]), float(starts[c + 1])], b"", a + c, 0)

    write_recordio(out_dir / "train.rec", out_dir / "train.idx", records())
    write_text(out_dir / "property", f"{n_classes},{size[0]},{size[1]}\n")


def write_training_subset(sel: pd.DataFrame, fmt: str, out_dir: str | os.PathLike,
                          fetch: Callable[[str], bytes] | None, report: Mapping[str, Any],
                          *, provenance: Mapping[str, Any] | None = None) -> None:
    """Write selection ``sel`` in format ``fmt`` into ``out_dir`` (+ selection, report)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if fmt not in FORMATS:
        raise TrainSubsetError(f"format {fmt!r}: one of {list(FORMATS)}")
    if fmt in ("recordio", "folder") and fetch is None:
        raise TrainSubsetError(f"format {fmt} copies images, but the dataset's images cannot "
                               "be read (a cast_arrays dataset needs its root)")
    if fmt == "recordio":
        write_recordio_subset(sel, fetch, out)
    elif fmt == "list":
        write_text(out / "train.lst", "".join(
            f"{k}\t{lab}\t{p}\n" for k, (lab, p) in enumerate(zip(sel["label"], sel["path"],
                                                                   strict=True))))
    else:
        dest, tmp = out / "images", out / ".images.tmp"
        for d in (dest, tmp):
            shutil.rmtree(d, ignore_errors=True)
        for k, (lab, p) in enumerate(zip(sel["label"], sel["path"], strict=True)):
            folder = tmp / str(lab)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{k}{Path(str(p).split('#')[0]).suffix or '.jpg'}").write_bytes(fetch(p))
        tmp.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, dest)                  # the folder appears complete, or not at all
    cols = ["image_id", "path", "identity", "label", "class"]
    write_parquet(sel[cols], out / "selection.parquet", provenance=provenance)
    write_text(out / "report.json", json.dumps(dict(report), indent=1, default=str) + "\n")


def file_fetcher(root: str | os.PathLike, containers: Mapping[str, Any] | None
                 ) -> Callable[[str], bytes]:
    """``path -> bytes`` of a dataset's images: a RecordIO / .bin locator by random access,
    or the file under ``root``; a missing image raises :class:`TrainSubsetError`."""
    from facecast.datasets.sources import fetch_bytes

    def fetch(path: str) -> bytes:
        if containers:
            data, status, msg = fetch_bytes(path, containers, root)
            if data is None:
                raise TrainSubsetError(f"{path}: {status}: {msg}")
            return data
        try:
            return (Path(root) / path).read_bytes()
        except OSError as exc:
            raise TrainSubsetError(f"{path}: cannot read the image under {root}: {exc}") \
                from exc

    return fetch
