"""CelebA layout: ``img_align_celeba/`` or ``img_celeba/``, ``identity_CelebA.txt``,
``list_attr_celeba.txt`` (-1/1 labels) and ``list_eval_partition.txt`` (0/1/2).

The annotation files may sit in ``root`` or in ``root/Anno`` and ``root/Eval`` (the
official archive layout). Malformed lines raise :class:`DatasetError` naming file and line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from facecast.datasets.manifest import DatasetError

PARTITIONS = {"0": "train", "1": "val", "2": "test"}


def find_file(root: Path, name: str, subdirs: tuple[str, ...]) -> Path:
    """``root/name`` or ``root/<subdir>/name``, the first that is a file; DatasetError else."""
    for sub in ("", *subdirs):
        p = root / sub / name
        if p.is_file():
            return p
    raise DatasetError(f"CelebA file {name} not found in {root} (looked in {', '.join(('.',) + subdirs)})")


def _read_pairs(path: Path, what: str) -> dict[str, str]:
    """Two-column ``<file> <value>`` lines; errors name file and line."""
    out: dict[str, str] = {}
    with open(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 2:
                raise DatasetError(f"{path}:{lineno}: expected '<image> <{what}>', got {line.strip()!r}")
            out[parts[0]] = parts[1]
    return out


def read_celeba_attributes(path: Path) -> pd.DataFrame:
    """``list_attr_celeba.txt``: count line, header of 40 names, then -1/1 rows -> 0/1 int8."""
    with open(path) as fh:
        lines = fh.read().splitlines()
    if len(lines) < 2:
        raise DatasetError(f"{path}: too short to be list_attr_celeba.txt")
    try:
        declared = int(lines[0].strip())
    except ValueError as exc:
        raise DatasetError(f"{path}:1: expected the image count, got {lines[0]!r}") from exc
    names = lines[1].split()
    files, values = [], []
    for lineno, line in enumerate(lines[2:], 3):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != len(names) + 1:
            raise DatasetError(f"{path}:{lineno}: expected an image name and {len(names)} labels, "
                               f"got {len(parts)} fields")
        try:
            vals = [int(v) for v in parts[1:]]
        except ValueError as exc:
            raise DatasetError(f"{path}:{lineno}: labels must be -1 or 1: {exc}") from exc
        if any(v not in (-1, 1) for v in vals):
            raise DatasetError(f"{path}:{lineno}: labels must be -1 or 1")
        files.append(parts[0])
        values.append(vals)
    if declared != len(files):
        raise DatasetError(f"{path}:1: declares {declared} images but lists {len(files)}")
    arr = (np.asarray(values, dtype=np.int8).reshape(-1, len(names)) > 0).astype(np.int8)
    df = pd.DataFrame(arr, columns=[f"label_{n}" for n in names])
    df.insert(0, "file", files)
    return df


def read_celeba(root: str | Path, images_dir: str | None = None) -> pd.DataFrame:
    """Raw manifest rows for a CelebA tree (identity, split and the 40 labels)."""
    root = Path(root)
    if images_dir is None:
        for cand in ("img_align_celeba", "img_celeba"):
            if (root / cand).is_dir():
                images_dir = cand
                break
        else:
            raise DatasetError(f"no img_align_celeba/ or img_celeba/ folder in {root}")
    identities = _read_pairs(find_file(root, "identity_CelebA.txt", ("Anno",)), "identity")
    partition_file = find_file(root, "list_eval_partition.txt", ("Eval", "Anno"))
    partitions = _read_pairs(partition_file, "partition")
    bad = [k for k, v in partitions.items() if v not in PARTITIONS]
    if bad:
        raise DatasetError(f"{partition_file}: partition must be 0, 1 or 2 (image {bad[0]})")
    attrs = read_celeba_attributes(find_file(root, "list_attr_celeba.txt", ("Anno",)))
    df = pd.DataFrame({"file": list(identities), "identity": list(identities.values())})
    df["split"] = df["file"].map(lambda f: PARTITIONS.get(partitions.get(f, ""), "unknown"))
    df = df.merge(attrs, on="file", how="left")
    df.insert(0, "path", [f"{images_dir}/{f}" for f in df.pop("file")])
    return df
