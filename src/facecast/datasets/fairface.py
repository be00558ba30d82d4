"""FairFace (Karkkainen and Joo, WACV 2021) as its release lays it out.

```
root/train/1.jpg ...            images (face crops, padding 0.25 or 1.25)
root/val/1.jpg ...
root/fairface_label_train.csv   file,age,gender,race,service_test
root/fairface_label_val.csv
```

``file`` is the image path relative to the root (``train/1.jpg``); ``age`` one of
FairFace's nine bins (:data:`FAIRFACE_AGE_BINS`, the top one spelled ``more than 70``),
``gender`` ``Male`` / ``Female``, ``race`` one of its seven classes (:data:`FAIRFACE_RACES`,
spelled as in the label files: ``Latino_Hispanic`` with an underscore, ``East Asian`` with
a space), ``service_test`` ``True`` / ``False`` (the balanced subset the paper's
commercial-API test used). The spellings are those of the released label CSVs (the
repository joojs/fairface holds only a README pointing to them).

Rows: ``path`` = ``file``, ``identity`` = the path (FairFace has no identities: each image
stands alone and nothing verifies it), ``split`` = the label file's (``train`` / ``val``),
``label_race``, ``label_gender`` (as spelled), ``label_male`` (1.0 / 0.0),
``label_age_bin`` (the bin as spelled) and ``label_service_test`` (1.0 / 0.0). A row whose
value is not one of FairFace's gets status ``bad_label`` and a message naming file, line,
column and value; a row with an extra field, or too few, gets ``bad_row`` naming file and
line (:func:`facecast.datasets.csv_rows.read_csv_rows`: one malformed row costs that row,
and a trailing comma on every line shifts nothing). Their images are not processed; every
other row is kept. Each row carries ``source_file`` / ``source_line``, so a status the
manifest gives later (a missing image, a path twice) names the line too. A missing label file or a header without FairFace's columns raises
:class:`DatasetError`.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.datasets.csv_rows import read_csv_rows
from facecast.datasets.manifest import DatasetError

FAIRFACE_RACES = ("White", "Black", "Latino_Hispanic", "East Asian", "Southeast Asian",
                  "Indian", "Middle Eastern")
FAIRFACE_GENDERS = ("Male", "Female")
FAIRFACE_AGE_BINS = ("0-2", "3-9", "10-19", "20-29", "30-39", "40-49", "50-59", "60-69",
                     "more than 70")
#: lower edges (years) of every bin but the first: age a is in bin i = #edges <= a
AGE_BIN_EDGES = (3, 10, 20, 30, 40, 50, 60, 70)
LABEL_FILES = {"train": "fairface_label_train.csv", "val": "fairface_label_val.csv"}
HEADER = ("file", "age", "gender", "race", "service_test")
#: the manifest label columns of a FairFace dataset
LABEL_COLUMNS = ("label_age_bin", "label_gender", "label_male", "label_race",
                 "label_service_test")
_BOOLS = {"True": 1.0, "False": 0.0}


def age_bin(years: Iterable[float] | np.ndarray) -> np.ndarray:
    """FairFace's bin of each age in years (object array; None where the age is NaN).

    Bins are right-open: ``[0, 3)`` is ``0-2``, ``[3, 10)`` is ``3-9``, ..., ``[70, inf)``
    is ``more than 70``; so an estimated age of 2.7 years is ``0-2`` and 69.9 is ``60-69``.
    """
    v = np.asarray(list(years) if not isinstance(years, np.ndarray) else years,
                   dtype=np.float64)
    idx = np.searchsorted(np.asarray(AGE_BIN_EDGES, np.float64), v, side="right")
    out = np.asarray(FAIRFACE_AGE_BINS, dtype=object)[np.minimum(idx, len(FAIRFACE_AGE_BINS) - 1)]
    out[~np.isfinite(v)] = None
    return out


def label_files(root: str | os.PathLike, splits: Iterable[str] | None = None) -> dict[str, Path]:
    """The label file of each wanted split (``splits`` None: those present of train, val)."""
    root = Path(root)
    wanted = list(splits) if splits else [s for s in LABEL_FILES
                                          if (root / LABEL_FILES[s]).is_file()]
    unknown = [s for s in wanted if s not in LABEL_FILES]
    if unknown:
        raise DatasetError(f"FairFace splits are {list(LABEL_FILES)}, got {unknown}")
    if not wanted:
        raise DatasetError(f"no FairFace label file ({', '.join(LABEL_FILES.values())}) in "
                           f"{root}; point root at the folder holding them and train/, val/")
    return {s: root / LABEL_FILES[s] for s in wanted}


def header_problem(path: Path) -> str | None:
    """Why ``path`` is not a FairFace label file (its first line), or None."""
    if not path.is_file():
        return f"label file {path} does not exist"
    try:
        with open(path, encoding="utf-8-sig") as fh:
            head = [c.strip() for c in fh.readline().rstrip("\r\n").split(",")]
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read {path}: {exc}"
    missing = [c for c in HEADER if c not in head]
    if missing:
        return f"{path}: header lacks FairFace's column(s) {missing} (it has {head})"
    return None


def _bad(values: pd.Series, allowed: Iterable[str], column: str, where: np.ndarray
         ) -> np.ndarray:
    """Messages for the rows of ``values`` not in ``allowed`` ('' for the good ones)."""
    allowed = list(allowed)
    bad = ~values.isin(allowed).to_numpy()
    msg = np.full(len(values), "", dtype=object)
    shown = ", ".join(allowed)
    for i in np.flatnonzero(bad):
        msg[i] = f"{where[i]}: {column} {values.iloc[i]!r} is not one of FairFace's ({shown})"
    return msg


def _read_split(split: str, path: Path) -> pd.DataFrame:
    """Raw rows of one label file (see the module docstring)."""
    problem = header_problem(path)
    if problem:
        raise DatasetError(problem)
    try:
        read = read_csv_rows(path)
    except (OSError, UnicodeDecodeError, csv.Error, ValueError) as exc:
        raise DatasetError(f"cannot read FairFace label file {path}: {exc}") from exc
    df = read.frame
    where = np.array([f"{path.name}:{n}" for n in read.line], dtype=object)
    checks = [_bad(df["age"], FAIRFACE_AGE_BINS, "age", where),
              _bad(df["gender"], FAIRFACE_GENDERS, "gender", where),
              _bad(df["race"], FAIRFACE_RACES, "race", where),
              _bad(df["service_test"], _BOOLS, "service_test", where)]
    message = np.array(["; ".join(m for m in parts if m) for parts in zip(*checks, strict=True)],
                       dtype=object)
    status = np.where(message == "", "ok", "bad_label").astype(object)
    bad_row = read.bad != ""
    status[bad_row], message[bad_row] = "bad_row", read.bad[bad_row]

    def valid(column: str, allowed: Iterable[str]) -> np.ndarray:
        return df[column].where(df[column].isin(list(allowed)) & ~bad_row).to_numpy(object)

    return pd.DataFrame({
        "path": df["file"].to_numpy(dtype=object),
        "identity": df["file"].to_numpy(dtype=object),
        "split": split,
        "status": status,
        "message": message,
        "label_age_bin": valid("age", FAIRFACE_AGE_BINS),
        "label_gender": valid("gender", FAIRFACE_GENDERS),
        "label_male": df["gender"].map({"Male": 1.0, "Female": 0.0}).where(~bad_row)
        .to_numpy(np.float64),
        "label_race": valid("race", FAIRFACE_RACES),
        "label_service_test": df["service_test"].map(_BOOLS).where(~bad_row)
        .to_numpy(np.float64),
        "source_file": path.name, "source_line": read.line,
    })


def read_fairface(root: str | os.PathLike, splits: Iterable[str] | None = None) -> pd.DataFrame:
    """Raw manifest rows of a FairFace release (train then val, each in file order)."""
    frames = [_read_split(split, path) for split, path in label_files(root, splits).items()]
    return pd.concat(frames, ignore_index=True)


def layout_errors(key: str, spec: Mapping[str, Any]) -> list[str]:
    """Config errors of a ``kind: fairface`` block (its root exists): the label files of
    its ``splits`` exist and have FairFace's header; reads one line of each."""
    root = Path(str(spec["root"]))
    try:
        files = label_files(root, spec.get("splits"))
    except DatasetError as exc:
        return [f"{key}.{'splits' if spec.get('splits') else 'root'}: {exc}"]
    return [f"{key}.root: {p}" for p in map(header_problem, files.values()) if p]
