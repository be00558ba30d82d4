"""Exports of mined pairs: CAST ``.list`` files and an LFW-style ``pairs.txt``.

* ``<fold>.list`` (``0.list``..``9.list``, ``val.list``): one pair per line,
  ``<path_a> <path_b> <label>`` with paths relative to the dataset root, genuine pairs
  first, as CAST's C11 folders are laid out.
* ``pairs.txt``: LFW view-2 layout: a header ``<folds> <n>``, then per fold ``n`` matched
  lines ``name i j`` and ``n`` mismatched lines ``name1 i name2 j`` (the ``val`` fold is
  not part of it). ``i`` is the image number: the ``NNNN`` of an LFW-named file
  ``<name>/<name>_NNNN.jpg``, otherwise the 1-based position of the image among its
  identity's images sorted by path (so the file is only meaningful together with the
  manifest it came from). LFW needs the same ``n`` for every fold and class; when mining
  fell short the smallest count is used and the rest left out (logged).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from facecast.atomic import write_text

log = logging.getLogger(__name__)

_LFW_NAME = re.compile(r"^(?:.*/)?(?P<name>[^/]+)/(?P=name)_(?P<num>\d{4})\.[A-Za-z]+$")


def list_file_names(folds: list[str]) -> list[str]:
    """File names of the CAST ``.list`` export for ``folds``."""
    return [f"{f}.list" for f in folds]


def write_cast_lists(pairs: pd.DataFrame, paths: Mapping[str, str], out_dir: str | os.PathLike,
                     folds: list[str]) -> list[Path]:
    """Write one CAST ``.list`` per fold (genuine first); ``paths`` maps image_id -> path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for f in folds:
        sub = pairs[pairs["fold"] == f]
        sub = pd.concat([sub[sub["label"] == 1], sub[sub["label"] == 0]])
        lines = [f"{paths[a]} {paths[b]} {int(lab)}\n"
                 for a, b, lab in zip(sub["image_a"], sub["image_b"], sub["label"], strict=True)]
        written.append(write_text(out_dir / f"{f}.list", "".join(lines)))
    return written


def image_numbers(manifest: pd.DataFrame) -> dict[str, int]:
    """image_id -> LFW image number (file number, or 1-based position within the identity)."""
    m = manifest[["image_id", "path", "identity"]].sort_values(["identity", "path"],
                                                               kind="mergesort")
    pos = m.groupby("identity", sort=False).cumcount() + 1
    out = {}
    for iid, path, k in zip(m["image_id"], m["path"], pos, strict=True):
        hit = _LFW_NAME.match(path)
        out[iid] = int(hit.group("num")) if hit else int(k)
    return out


def write_lfw_pairs(pairs: pd.DataFrame, numbers: Mapping[str, int], path: str | os.PathLike,
                    folds: list[str]) -> int:
    """Write an LFW view-2 style ``pairs.txt`` for ``folds``; returns pairs per class per fold."""
    counts = [min(int(((pairs.fold == f) & (pairs.label == 1)).sum()),
                  int(((pairs.fold == f) & (pairs.label == 0)).sum())) for f in folds]
    n = min(counts) if counts else 0
    if any(c != n for c in counts) or any(
            ((pairs.fold == f) & (pairs.label == lab)).sum() != n for f in folds for lab in (0, 1)):
        log.warning("pairs.txt: folds hold unequal counts; writing %d pairs per class per fold", n)
    lines = [f"{len(folds)}\t{n}\n"]
    for f in folds:
        sub = pairs[pairs["fold"] == f]
        gen, imp = sub[sub["label"] == 1].head(n), sub[sub["label"] == 0].head(n)
        lines += [f"{ia}\t{numbers[a]}\t{numbers[b]}\n"
                  for a, b, ia in zip(gen["image_a"], gen["image_b"], gen["identity_a"],
                                      strict=True)]
        lines += [f"{ia}\t{numbers[a]}\t{ib}\t{numbers[b]}\n"
                  for a, b, ia, ib in zip(imp["image_a"], imp["image_b"], imp["identity_a"],
                                          imp["identity_b"], strict=True)]
    write_text(path, "".join(lines))
    return n
