"""Folder-per-identity layout (LFW, WebFace, VGGFace2): ``root/<identity>/<file>``."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from facecast.manifest import DatasetError

DEFAULT_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".gif")


def read_folder(root: str | os.PathLike, extensions: Iterable[str] | None = None) -> pd.DataFrame:
    """One row per image file under ``root``, identity = its top-level folder.

    Images directly in ``root`` (not in an identity folder) are kept with status
    ``no_identity``; files with other extensions are not images and are not listed.
    Order is sorted by path, so shards are deterministic.
    """
    root = Path(root)
    exts = tuple(e.lower() for e in (extensions or DEFAULT_EXTENSIONS))
    rows: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = Path(dirpath).relative_to(root)
        for name in sorted(filenames):
            if not name.lower().endswith(exts) or name.startswith("."):
                continue
            rel = (rel_dir / name).as_posix()
            identity = rel_dir.parts[0] if rel_dir.parts else ""
            rows.append((rel, identity))
    if not rows:
        raise DatasetError(f"no image files ({', '.join(exts)}) found under {root}")
    rows.sort()
    df = pd.DataFrame(rows, columns=["path", "identity"])
    df["status"] = ["ok" if i else "no_identity" for i in df["identity"]]
    df["message"] = ["" if i else "image is not inside an identity folder" for i in df["identity"]]
    return df
