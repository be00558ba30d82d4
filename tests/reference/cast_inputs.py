"""The hostile CAST-format arrays the CAST filter records are made on (our code).

:mod:`cast_recorder` runs CAST's ``FilterClass`` on them and
``tests/test_cast_filters_reference.py`` runs facecast on the same arrays, rebuilt from the
seed and row count each record names (:data:`CASES`). Everything here is a function of
``(n, seed)`` only: same numbers, same bytes, on every machine.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

#: the columns of ``columns.csv``, in order
COLUMNS = ["quality", "yaw", "age", "gender", "other"]
#: the row count of every case but ``large``
N = 4000
#: rows of the ``large`` case: above order_stats' sample threshold (a bracketed sort)
N_LARGE = 300_000

#: filter tuples hostile to every shortcut (see :func:`hostile_columns`)
HOSTILE = [
    [["quality", "abs", 0.1, 0.7]],                       # values on both float32 bounds
    [["quality", 0.7]],                                   # class = float32(0.7)
    [["yaw", "abs", 12.3, 19.9], ["gender", 1]],          # bounds on values, NaN in both
    [["quality", "rank", 10, 90]],                        # a tie cut at each end
    [["quality", "rank", 33.3, 66.7], ["age", "rank", 5, 95]],
    [["yaw", "rank", 70, 100]],                           # reaches into the NaN rows
    [["yaw", "rank", 90, 100], ["quality", "rank", 0, 100]],  # NaN rows only, then all
    [["age", "abs", 20, 40], ["age", 30]],                # int bounds; +-inf rows
    [["age", "rank", 0, 0], ["other", "rank", 50, 100]],  # hi 0: all but the last row
]


def _case(n: int, seed: int, tuples: list, train_set: str | None = "WebFace12M",
          argsort: str = "default") -> dict[str, Any]:
    return {"n": n, "seed": seed, "tuples": tuples, "train_set": train_set,
            "argsort": argsort}


#: record name -> how its inputs are built and how CAST ran: ``n`` rows of
#: :func:`hostile_columns` with ``seed``, CAST's ``tuples``, its ``train_set``
#: (``WebFace12M``: the exclusion mask of the first tenth of the rows, read from
#: ``./data/webface12m_idxs.npy`` as CAST reads it; None: no exclusion) and ``argsort``
#: (``default``: numpy's default kind, as CAST; ``stable``: ``kind="stable"``)
CASES: dict[str, dict[str, Any]] = {
    **{f"hostile_{i}": _case(N, len(json.dumps(t)), t) for i, t in enumerate(HOSTILE)},
    "nan_kept": _case(N, 1, [["quality", "rank", 10, 90]]),
    "large": _case(N_LARGE, 7, [["quality", "rank", 20, 80], ["yaw", "rank", 60, 100],
                                ["age", "abs", 20, 60.5]]),
    "nan_rows": _case(N, 3, [["yaw", "rank", 70, 100]]),
    "nan_drop": _case(N, 4, [["quality", "rank", 10, 90], ["age", "abs", 20, 60]]),
    "ties_all_rows": _case(N, 5, [["quality", "rank", 10, 90]], train_set=None),
    "ties_stable": _case(N, 5, [["quality", "rank", 10, 90]], argsort="stable"),
}
#: cases whose record holds a digest of the selected rows instead of the rows
DIGEST_CASES = ("large",)


def hostile_columns(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(attributes, paths, exclude)``: ``n`` rows in CAST's format, hostile to every
    shortcut.

    * ``quality``: a score in 0.1 steps (11 float32 values: tied runs at every cut; the
      float32 images of 0.1 and 0.7 on the abs / class bounds of :data:`HOSTILE`);
    * ``yaw``: degrees in 0.1 steps, about a quarter NaN (a rank range reaching 100 % ends
      among them), the float32 images of 12.3 (rounded up) and 19.9 (rounded down);
    * ``age``: whole years with +-inf in six rows;
    * ``gender``: 0 / 1, a few NaN (unfiltered in most cases);
    * ``other``: never filtered by an abs or class tuple, with NaN.

    Paths ``id<k>/<j>.jpg`` are unique; ``exclude`` marks the first tenth of the rows
    (CAST's ``train_set``)."""
    rng = np.random.default_rng(seed)
    yaw = np.round(rng.uniform(-20, 20, n), 1)
    yaw[rng.random(n) < 0.25] = np.nan
    yaw[:4] = [12.3, 19.9, 12.3, 19.9]
    age = rng.integers(15, 80, n).astype(np.float64)
    age[rng.choice(n, 6, replace=False)] = [np.inf, np.inf, -np.inf, np.inf, -np.inf, np.inf]
    gender = rng.integers(0, 2, n).astype(np.float64)
    gender[rng.random(n) < 0.01] = np.nan
    other = rng.random(n)
    other[rng.random(n) < 0.02] = np.nan
    quality = rng.integers(0, 11, n) / 10
    attrs = np.c_[quality, yaw, age, gender, other].astype(np.float32)
    paths = np.array([f"id{i // 4:06d}/{i % 4}.jpg" for i in range(n)])
    return attrs, paths, np.arange(n) < n // 10


def hostile_arrays(d: Path, n: int, seed: int = 0) -> dict[str, Any]:
    """Write :func:`hostile_columns` to ``d`` as CAST ships its arrays (``attrArr.npy``,
    ``paths.npy``, ``columns.csv``), the exclusion as facecast's ``mask.npy`` and as
    CAST's ``data/webface12m_idxs.npy``; return the ``cast_arrays`` dataset block."""
    attrs, paths, exclude = hostile_columns(n, seed)
    d = Path(d)
    (d / "data").mkdir(parents=True, exist_ok=True)
    np.save(d / "attrArr.npy", attrs)
    np.save(d / "paths.npy", paths)
    np.save(d / "mask.npy", exclude)
    np.save(d / "data" / "webface12m_idxs.npy", exclude)
    (d / "columns.csv").write_text(",".join(COLUMNS) + "\n")
    return {"kind": "cast_arrays", "attributes": str(d / "attrArr.npy"),
            "paths": str(d / "paths.npy"), "columns": str(d / "columns.csv"),
            "exclude_mask": str(d / "mask.npy"), "shard_size": 1 << 16}


def cut_tie_rows(attrs: np.ndarray, tuples: list) -> np.ndarray:
    """Rows whose value, in the column of some rank tuple, is tied across a cut of that
    tuple's slice ``sorted[round(N*lo/100) : round(N*hi/100) - 1]`` (NaN rows count as one
    tied value, sorted last): which of them a slice keeps is numpy's default argsort's
    choice, which depends on the NumPy version and the CPU's sort kernel. Every other
    row's selection is a function of the values alone. Found from ``np.sort`` (values
    only, the same everywhere)."""
    n = len(attrs)
    tied = np.zeros(n, bool)
    for t in tuples:
        if len(t) != 4 or t[1] != "rank":
            continue
        col = attrs[:, COLUMNS.index(t[0])]
        s = np.sort(col)
        start, stop, _ = slice(round(n * t[2] / 100), round(n * t[3] / 100) - 1).indices(n)
        if stop <= start:
            continue
        for inner, outer in ((start, start - 1), (stop - 1, stop)):
            if not 0 <= outer < n:
                continue
            a, b = s[inner], s[outer]
            if np.isnan(a) and np.isnan(b):
                tied |= np.isnan(col)
            elif a == b:
                tied |= col == a
    return tied


def rows_digest(mask: np.ndarray) -> dict[str, Any]:
    """The selected rows of ``mask`` as a record keeps a large selection: their count, the
    sha256 of the rows as little-endian int64 and the first and last row (None if none)."""
    rows = np.flatnonzero(mask).astype("<i8")
    return {"n": int(len(rows)), "sha256": hashlib.sha256(rows.tobytes()).hexdigest(),
            "first": int(rows[0]) if len(rows) else None,
            "last": int(rows[-1]) if len(rows) else None}


def inputs_digest(n: int, seed: int) -> str:
    """sha256 of :func:`hostile_columns` ``(n, seed)`` (attribute, path and exclusion
    bytes, in that order): a record names it, so a test knows it rebuilt the same arrays."""
    h = hashlib.sha256()
    for a in hostile_columns(n, seed):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def mask_hex(mask: np.ndarray) -> str:
    """A row mask as a record keeps it: ``np.packbits`` (big-endian bits), hex."""
    return np.packbits(np.asarray(mask, bool)).tobytes().hex()


def mask_from_hex(text: str, n: int) -> np.ndarray:
    """The ``n``-row mask :func:`mask_hex` wrote."""
    return np.unpackbits(np.frombuffer(bytes.fromhex(text), np.uint8))[:n].astype(bool)
