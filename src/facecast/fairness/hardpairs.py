"""The hardest pairs of a model: lowest-scoring genuine and highest-scoring impostor pairs.

The grid shows each pair as two tiles side by side with its score and group. Tiles come
from the aligned crops of the faces shards (``crop_arcface``, else ``crop_facenet``) and,
for images without a crop, from the dataset image itself (path from the manifest,
resolved inside the dataset root); an image found nowhere is a grey tile marked
"missing".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as pads
from PIL import Image, ImageDraw

from facecast.faces.crops import decode_crop
from facecast.io.atomic import atomic_path

TILE = 112


def hardest_pairs(pairs: pd.DataFrame, k: int) -> pd.DataFrame:
    """The ``k`` lowest-scoring genuine and ``k`` highest-scoring impostor pairs.

    ``pairs`` holds valid rows (finite score, label 0/1). Ties are broken by image ids so
    the list is deterministic. Adds ``kind`` (``genuine``/``impostor``) and ``rank`` (1 =
    hardest).
    """
    keep = [c for c in ("image_a", "image_b", "identity_a", "identity_b", "label", "score",
                        "group", "combo") if c in pairs.columns]
    p = pairs[keep]
    gen = p[p["label"].astype(int) == 1].sort_values(
        ["score", "image_a", "image_b"], ascending=[True, True, True], kind="stable").head(k)
    imp = p[p["label"].astype(int) == 0].sort_values(
        ["score", "image_a", "image_b"], ascending=[False, True, True], kind="stable").head(k)
    gen = gen.assign(kind="genuine", rank=np.arange(1, len(gen) + 1))
    imp = imp.assign(kind="impostor", rank=np.arange(1, len(imp) + 1))
    cols = ["kind", "rank", *keep]
    return pd.concat([gen, imp], ignore_index=True)[cols]


def load_tiles(image_ids: Sequence[str], faces_paths: Sequence[str | os.PathLike] = (),
               manifest: pd.DataFrame | None = None,
               root: str | os.PathLike | None = None) -> dict[str, Image.Image]:
    """TILE x TILE RGB tiles for the given images (crop, else dataset image, else none)."""
    wanted = sorted(set(map(str, image_ids)))
    tiles: dict[str, Image.Image] = {}
    paths = [str(p) for p in faces_paths if Path(p).exists()]
    if paths and wanted:
        ds = pads.dataset(paths, format="parquet")
        cols = [c for c in ("image_id", "crop_arcface", "crop_facenet") if c in ds.schema.names]
        if "image_id" in cols and len(cols) > 1:
            table = ds.to_table(columns=cols, filter=pads.field("image_id").isin(wanted))
            for row in table.to_pylist():
                blob = row.get("crop_arcface") or row.get("crop_facenet")
                if not blob:
                    continue
                try:
                    tiles[row["image_id"]] = Image.fromarray(decode_crop(blob)).resize(
                        (TILE, TILE))
                except ValueError:  # a crop that does not decode: the dataset image, else
                    continue        # the grey "missing" tile
    if manifest is not None and root is not None:
        root = Path(root).resolve()
        where = manifest.set_index(manifest["image_id"].astype(str))["path"]
        for image_id in wanted:
            if image_id in tiles or image_id not in where.index:
                continue
            path = (root / str(where[image_id])).resolve()
            if not path.is_relative_to(root) or not path.is_file():
                continue
            try:
                with Image.open(path) as im:
                    tiles[image_id] = im.convert("RGB").resize((TILE, TILE))
            except OSError:
                continue
    return tiles


def _missing_tile() -> Image.Image:
    tile = Image.new("RGB", (TILE, TILE), (128, 128, 128))
    ImageDraw.Draw(tile).text((30, 50), "missing", fill=(255, 255, 255))
    return tile


def hard_pairs_grid(hard: pd.DataFrame, tiles: dict[str, Image.Image],
                    path: str | os.PathLike, columns: int = 4) -> None:
    """Write a PNG grid: genuine pairs first, then impostor pairs, each with a caption."""
    n = len(hard)
    columns = max(1, min(columns, n)) if n else 1
    rows = max(1, int(np.ceil(n / columns)))
    cell_w, cell_h = 2 * TILE + 8, TILE + 30
    sheet = Image.new("RGB", (columns * cell_w, rows * cell_h), (255, 255, 255))
    draw = ImageDraw.Draw(sheet)
    for i, row in enumerate(hard.itertuples(index=False)):
        x, y = (i % columns) * cell_w, (i // columns) * cell_h
        sheet.paste(tiles.get(str(row.image_a)) or _missing_tile(), (x, y))
        sheet.paste(tiles.get(str(row.image_b)) or _missing_tile(), (x + TILE, y))
        colour = (0, 110, 0) if row.kind == "genuine" else (170, 0, 0)
        group = getattr(row, "group", None)
        caption = f"{row.kind[:3]} #{row.rank} s={row.score:.3f} {group or ''}"
        draw.text((x + 2, y + TILE + 2), caption[:44], fill=colour)
    with atomic_path(path) as tmp:
        sheet.save(tmp, format="PNG")
