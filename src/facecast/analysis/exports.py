"""Exports of mined pairs: CAST ``.list`` files and an LFW-style ``pairs.txt``.

* ``<fold>.list`` (``0.list``..``9.list``): one pair per line, ``<path_a> <path_b>
  <label>`` with paths relative to the dataset root, genuine pairs first, as CAST's C11
  folders are laid out. ``val.list`` is laid out for CAST's evaluation, which cuts one
  list into 10 consecutive folds (``KFold(10, shuffle=False)``): ten blocks, each a tenth
  of the genuine pairs followed by a tenth of the impostor pairs (50 + 50 for C11's
  500 + 500), so every fold holds both classes.
* ``pairs.txt``: LFW view-2 layout: a header ``<folds> <n>``, then per fold ``n`` matched
  lines ``name i j`` and ``n`` mismatched lines ``name1 i name2 j`` (the ``val`` fold is
  not part of it). ``i`` is the image number: the ``NNNN`` of an LFW-named file
  ``<name>/<name>_NNNN.jpg``, otherwise the 1-based position of the image among its
  identity's images sorted by path (so the file is only meaningful together with the
  manifest it came from). LFW needs the same ``n`` for every fold and class; when mining
  fell short, or folds differ in size (``mining.mode: all``), the smallest count is used
  and the rest left out (logged): ``pairs.parquet`` and the ``.list`` files hold them all.

Both formats split lines on whitespace, so every path (``.list``) and identity name
(``pairs.txt``) goes through :func:`facecast.io.list_paths.escape_list_path`: ``%``, space,
tab, LF and CR become ``%25``, ``%20``, ``%09``, ``%0A``, ``%0D``; facecast's importers
reverse it. Paths without those characters are written unchanged (CAST's own layout). A
path that would still split after escaping (other Unicode whitespace such as a no-break
space U+00A0 or an ideographic space U+3000, which the readers' ``str.split`` also splits
on) or an empty one is refused with :class:`ExportError` naming the paths.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from facecast.io.atomic import write_text
from facecast.io.list_paths import escape_list_path

log = logging.getLogger(__name__)

_LFW_NAME = re.compile(r"^(?:.*/)?(?P<name>[^/]+)/(?P=name)_(?P<num>\d{4})\.[A-Za-z]+$")


def list_file_names(folds: list[str]) -> list[str]:
    """File names of the CAST ``.list`` export for ``folds``."""
    return [f"{f}.list" for f in folds]


class ExportError(ValueError):
    """A path or name cannot be written to a whitespace-separated pair list."""


def list_tokens(values: Mapping[str, str], what: str) -> dict[str, str]:
    """``key -> escaped token`` for every value; refuse values that would not read back."""
    out, bad = {}, []
    for key, value in values.items():
        token = escape_list_path(str(value))
        if len(token.split()) != 1:
            bad.append(str(value))
        out[key] = token
    if bad:
        bad.sort()
        shown = ", ".join(repr(b) for b in bad[:5])
        raise ExportError(
            f"{len(bad)} {what}(s) cannot be written to a whitespace-separated list even after "
            f"percent-encoding % space tab LF CR (facecast.io.list_paths): {shown}"
            f"{' ...' if len(bad) > 5 else ''}. They hold other Unicode whitespace (e.g. "
            "U+00A0, U+3000) or are empty; rename these files or leave them out of the pool.")
    return out


#: blocks of ``val.list`` (CAST evaluates one list as 10 consecutive folds)
VAL_BLOCKS = 10


def cast_val_order(labels: np.ndarray, blocks: int = VAL_BLOCKS) -> np.ndarray:
    """Row order of ``val.list``: ``blocks`` blocks of (genuine share, impostor share).

    The genuine rows (in their given order) are cut into ``blocks`` near-equal runs, the
    impostor rows likewise, and block ``k`` is genuine run ``k`` then impostor run ``k``.
    """
    labels = np.asarray(labels)
    gen = np.array_split(np.flatnonzero(labels == 1), blocks)
    imp = np.array_split(np.flatnonzero(labels != 1), blocks)
    return np.concatenate([np.r_[g, i] for g, i in zip(gen, imp, strict=True)]).astype(np.int64)


def write_cast_lists(pairs: pd.DataFrame, paths: Mapping[str, str], out_dir: str | os.PathLike,
                     folds: list[str]) -> list[Path]:
    """Write one CAST ``.list`` per fold; ``paths`` maps image_id -> path (escaped on write).

    Test folds: genuine first. ``val``: CAST's ten blocks (:func:`cast_val_order`).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = set(pairs["image_a"]) | set(pairs["image_b"])
    esc = list_tokens({iid: paths[iid] for iid in wanted}, "path")
    written = []
    for f in folds:
        sub = pairs[pairs["fold"] == f]
        sub = pd.concat([sub[sub["label"] == 1], sub[sub["label"] == 0]])
        if f == "val":
            sub = sub.iloc[cast_val_order(sub["label"].to_numpy())]
        lines = [f"{esc[a]} {esc[b]} {int(lab)}\n"
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
    names = list_tokens({str(x): str(x) for x in pd.unique(pd.concat(
        [pairs["identity_a"], pairs["identity_b"]]))}, "identity name")
    lines = [f"{len(folds)}\t{n}\n"]
    for f in folds:
        sub = pairs[pairs["fold"] == f]
        gen, imp = sub[sub["label"] == 1].head(n), sub[sub["label"] == 0].head(n)
        lines += [f"{names[str(ia)]}\t{numbers[a]}\t{numbers[b]}\n"
                  for a, b, ia in zip(gen["image_a"], gen["image_b"], gen["identity_a"],
                                      strict=True)]
        lines += [f"{names[str(ia)]}\t{numbers[a]}\t{names[str(ib)]}\t{numbers[b]}\n"
                  for a, b, ia, ib in zip(imp["image_a"], imp["image_b"], imp["identity_a"],
                                          imp["identity_b"], strict=True)]
    write_text(path, "".join(lines))
    return n
