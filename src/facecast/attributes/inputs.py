"""Read one faces shard into arrays the scorers work on (crops decoded once, batched)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from facecast.faces.crops import decode_crop, decode_error_text, encode_png

CROP_COLUMNS = {"arcface": "crop_arcface", "facenet": "crop_facenet"}
CROP_SIZES = {"arcface": 112, "facenet": 160}
FACE_COLUMNS = ["image_id", "status", "message", "image_width", "image_height", "det_score",
                "bbox", "landmarks"]


@dataclass
class FaceBatch:
    """One shard's faces: row order is the faces shard's (= the manifest's) order.

    ``crops`` holds a black image where ``has_crop`` is False; ``landmarks`` (N, 5, 2),
    ``bbox`` (N, 4) and the scalar columns are NaN where the faces stage has none.
    """

    image_id: np.ndarray
    status: np.ndarray
    message: np.ndarray
    crops: np.ndarray
    has_crop: np.ndarray
    crop_error: np.ndarray
    landmarks: np.ndarray
    bbox: np.ndarray
    det_score: np.ndarray
    image_width: np.ndarray
    image_height: np.ndarray

    def __len__(self) -> int:
        return len(self.image_id)


def _fixed(values: pd.Series, width: int) -> np.ndarray:
    out = np.full((len(values), width), np.nan)
    for i, v in enumerate(values.tolist()):
        if v is not None and len(v) == width:
            out[i] = np.asarray(v, dtype=np.float64)
    return out


def _float(df: pd.DataFrame, col: str) -> np.ndarray:
    if col not in df:
        return np.full(len(df), np.nan)
    return pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def _columns(path: str | os.PathLike, crop: str, with_crops: bool) -> list[str]:
    if crop not in CROP_COLUMNS:
        raise ValueError(f"unknown crop {crop!r}; expected one of {sorted(CROP_COLUMNS)}")
    names = set(pq.read_schema(path).names)
    if "image_id" not in names:
        raise ValueError(f"{path}: a faces shard needs an image_id column")
    cols = [c for c in FACE_COLUMNS if c in names]
    if with_crops:
        if CROP_COLUMNS[crop] not in names:
            raise ValueError(f"{path} has no {CROP_COLUMNS[crop]} column; enable the "
                             f"'{crop}' crop in the faces stage (faces.crops)")
        cols.append(CROP_COLUMNS[crop])
    return cols


def iter_faces(path: str | os.PathLike, crop: str = "arcface", *, chunk_rows: int = 1024,
               with_crops: bool = True) -> Iterator[FaceBatch]:
    """Stream a faces shard as :class:`FaceBatch` chunks of at most ``chunk_rows`` rows
    (so a 10k-image shard never holds all decoded crops at once)."""
    cols = _columns(path, crop, with_crops)
    pf = pq.ParquetFile(path, pre_buffer=False)
    if pf.metadata.num_rows == 0:
        yield faces_from_frame(pf.schema_arrow.empty_table().select(cols).to_pandas(),
                               crop, with_crops=with_crops)
        return
    for rb in pf.iter_batches(batch_size=max(1, int(chunk_rows)), columns=cols):
        yield faces_from_frame(rb.to_pandas(), crop, with_crops=with_crops)


def read_faces(path: str | os.PathLike, crop: str = "arcface", *,
               with_crops: bool = True) -> FaceBatch:
    """Read a whole faces shard into one :class:`FaceBatch`."""
    cols = _columns(path, crop, with_crops)
    return faces_from_frame(pq.read_table(path, columns=cols).to_pandas(), crop,
                            with_crops=with_crops)


def faces_from_frame(df: pd.DataFrame, crop: str = "arcface", *,
                     with_crops: bool = True) -> FaceBatch:
    """Arrays of a faces table; decode the ``crop`` ("arcface"/"facenet") of every row with
    the package's one crop decoder (:func:`facecast.faces.crops.decode_crop`).

    A crop that fails to decode or has the wrong size is reported in ``crop_error``
    (the row is kept; scorers give it NaN values).
    """
    n = len(df)
    size = CROP_SIZES[crop]
    crops = np.zeros((n, size, size, 3) if with_crops else (n, 1, 1, 3), np.uint8)
    has = np.zeros(n, bool)
    err = np.array([""] * n, dtype=object)
    if with_crops and CROP_COLUMNS[crop] in df:
        for i, blob in enumerate(df[CROP_COLUMNS[crop]].tolist()):
            if blob is None:
                continue
            try:
                arr = decode_crop(blob)
            except Exception as exc:  # corrupt bytes: keep the row, report why
                err[i] = f"{CROP_COLUMNS[crop]} does not decode: {decode_error_text(exc)}"
                continue
            if arr.shape != (size, size, 3):
                err[i] = f"{CROP_COLUMNS[crop]} is {arr.shape}, expected {(size, size, 3)}"
                continue
            crops[i], has[i] = arr, True
    status = (df["status"].astype(str).to_numpy(dtype=object) if "status" in df
              else np.array(["ok"] * n, dtype=object))
    message = (df["message"].fillna("").astype(str).to_numpy(dtype=object) if "message" in df
               else np.array([""] * n, dtype=object))
    landmarks = _fixed(df["landmarks"], 10) if "landmarks" in df else np.full((n, 10), np.nan)
    bbox = _fixed(df["bbox"], 4) if "bbox" in df else np.full((n, 4), np.nan)
    return FaceBatch(
        image_id=df["image_id"].astype(str).to_numpy(dtype=object),
        status=status, message=message, crops=crops, has_crop=has, crop_error=err,
        landmarks=landmarks.reshape(n, 5, 2), bbox=bbox,
        det_score=_float(df, "det_score"), image_width=_float(df, "image_width"),
        image_height=_float(df, "image_height"),
    )


def faces_table(image_ids: list[str], crops: np.ndarray | list, landmarks: np.ndarray,
                bbox: np.ndarray, *, image_size: tuple[int, int] = (256, 256),
                status: list[str] | None = None, det_score: np.ndarray | None = None,
                crop: str = "arcface") -> pd.DataFrame:
    """A table in the faces-shard contract (docs/CONTRACTS.md) from arrays: for tests,
    benchmarks and adapters that bring their own detections. A ``None`` crop stays null."""
    n = len(image_ids)
    status = status or ["ok"] * n
    blobs = [None if c is None else encode_png(np.asarray(c)) for c in crops]
    lm = np.asarray(landmarks, dtype=np.float32).reshape(n, 10)
    return pd.DataFrame({
        "image_id": list(image_ids), "status": status,
        "message": ["" if s == "ok" else s for s in status],
        "image_width": [image_size[0]] * n, "image_height": [image_size[1]] * n,
        "n_faces": [1] * n,
        "det_score": (np.ones(n) if det_score is None else np.asarray(det_score)).astype(
            np.float32),
        "bbox": [None if not np.isfinite(b).all() else b.astype(np.float32).tolist()
                 for b in np.asarray(bbox, dtype=np.float64).reshape(n, 4)],
        "landmarks": [None if not np.isfinite(row).all() else row.tolist() for row in lm],
        CROP_COLUMNS[crop]: blobs,
    })
