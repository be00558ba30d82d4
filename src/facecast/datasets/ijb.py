"""IJB-B / IJB-C in the layout insightface's ``recognition/_evaluation_/ijb`` scripts read.

``<root>/loose_crop/<name>.jpg`` are the images; ``<root>/meta/`` holds, for ``variant``
``ijbc`` or ``ijbb``:

* ``<variant>_face_tid_mid.txt``: ``<name> <template id> <media id>``, one line per image;
* ``<variant>_name_5pts_score.txt``: ``<name> x1 y1 ... x5 y5 <faceness score>``, the same
  images in the same order (left eye, right eye, nose, mouth left, mouth right, pixels of
  the loose crop);
* ``<variant>_template_pair_label.txt``: ``<template 1> <template 2> <label>``;
* optionally the 1:N protocol CSVs ``<variant>_1N_gallery_G1.csv``, ``_G2.csv`` and
  ``<variant>_1N_probe_mixed.csv`` (header ``TEMPLATE_ID,SUBJECT_ID,FILENAME,...``), in
  ``meta/`` or the root.

Every parse error raises :class:`DatasetError` naming the file and line. The image lines
become manifest rows (path ``loose_crop/<name>``) carrying their given landmarks and
faceness score (manifest columns ``given_landmarks``, ``given_score``), which the faces
stage aligns without a detector (status ``landmarks_given``). A template's membership is
read again by the templates stage (:func:`read_members`), keyed by the image path.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from facecast.datasets.manifest import DatasetError

IJB_VARIANTS = ("ijbc", "ijbb")
IMAGE_DIR = "loose_crop"
#: 1:N protocol files by role
ONE_N_FILES = {"G1": "{v}_1N_gallery_G1.csv", "G2": "{v}_1N_gallery_G2.csv",
               "probe": "{v}_1N_probe_mixed.csv"}


def meta_files(root: str | os.PathLike, variant: str) -> dict[str, Path]:
    """The 1:1 meta files of ``variant`` under ``root/meta`` (they may not exist)."""
    if variant not in IJB_VARIANTS:
        raise DatasetError(f"IJB variant must be one of {IJB_VARIANTS}, got {variant!r}")
    meta = Path(root) / "meta"
    return {"tid_mid": meta / f"{variant}_face_tid_mid.txt",
            "landmarks": meta / f"{variant}_name_5pts_score.txt",
            "pairs": meta / f"{variant}_template_pair_label.txt"}


def one_n_files(root: str | os.PathLike, variant: str) -> dict[str, Path]:
    """The 1:N protocol CSVs present (``G1``, ``G2``, ``probe``), looked for in ``meta/``
    then the root; empty unless all three are there."""
    found = {}
    for role, pattern in ONE_N_FILES.items():
        name = pattern.format(v=variant)
        for folder in (Path(root) / "meta", Path(root)):
            if (folder / name).is_file():
                found[role] = folder / name
                break
    return found if len(found) == len(ONE_N_FILES) else {}


def _lines(path: Path) -> list[tuple[int, list[str]]]:
    if not path.is_file():
        raise DatasetError(f"IJB meta file {path} does not exist")
    with open(path, encoding="utf-8") as fh:
        return [(no, line.split()) for no, line in enumerate(fh, 1) if line.strip()]


def _ints(path: Path, lineno: int, tokens: list[str], what: str) -> list[int]:
    try:
        return [int(t) for t in tokens]
    except ValueError as exc:
        raise DatasetError(f"{path}:{lineno}: {what} must be integers, got {tokens}") from exc


def read_tid_mid(path: str | os.PathLike) -> pd.DataFrame:
    """``name``, ``template_id``, ``media_id``, ``source_line`` of ``*_face_tid_mid.txt``."""
    path = Path(path)
    rows = []
    for no, tok in _lines(path):
        if len(tok) != 3:
            raise DatasetError(f"{path}:{no}: expected '<name> <template id> <media id>', "
                               f"got {len(tok)} fields")
        tid, mid = _ints(path, no, tok[1:], "template and media ids")
        rows.append((tok[0], tid, mid, no))
    if not rows:
        raise DatasetError(f"{path}: no image lines")
    return pd.DataFrame(rows, columns=["name", "template_id", "media_id", "source_line"])


def read_landmarks(path: str | os.PathLike) -> pd.DataFrame:
    """``name``, ``landmarks`` (list of 10 floats), ``faceness``, ``source_line`` of
    ``*_name_5pts_score.txt``; non-finite numbers are errors."""
    path = Path(path)
    names, values, lines = [], [], []
    for no, tok in _lines(path):
        if len(tok) != 12:
            raise DatasetError(f"{path}:{no}: expected '<name> x1 y1 ... x5 y5 <score>' "
                               f"(12 fields), got {len(tok)}")
        try:
            vals = np.array([float(t) for t in tok[1:]], np.float64)
        except ValueError as exc:
            raise DatasetError(f"{path}:{no}: landmarks and score must be numbers") from exc
        if not np.isfinite(vals).all():
            raise DatasetError(f"{path}:{no}: landmarks and score must be finite")
        names.append(tok[0])
        values.append(vals)
        lines.append(no)
    if not names:
        raise DatasetError(f"{path}: no image lines")
    arr = np.vstack(values)
    return pd.DataFrame({"name": names, "landmarks": list(arr[:, :10].astype(np.float32)),
                         "faceness": arr[:, 10], "source_line": lines})


def read_members(root: str | os.PathLike, variant: str) -> pd.DataFrame:
    """One row per image line: ``image_id`` (``loose_crop/<name>``), ``name``,
    ``template_id``, ``media_id``, ``landmarks``, ``faceness``, ``source_line``.

    The two meta files must list the same images in the same order, as insightface reads
    them by position; a line whose names differ is an error naming both files and lines.
    """
    files = meta_files(root, variant)
    tid = read_tid_mid(files["tid_mid"])
    lms = read_landmarks(files["landmarks"])
    if len(tid) != len(lms):
        raise DatasetError(f"{files['tid_mid']} has {len(tid)} image lines but "
                           f"{files['landmarks']} has {len(lms)}; they must list the same "
                           "images in the same order")
    bad = np.flatnonzero(tid["name"].to_numpy() != lms["name"].to_numpy())
    if len(bad):
        i = int(bad[0])
        raise DatasetError(
            f"{files['tid_mid']}:{tid['source_line'].iat[i]} names {tid['name'].iat[i]!r} but "
            f"{files['landmarks']}:{lms['source_line'].iat[i]} names {lms['name'].iat[i]!r} "
            f"({len(bad)} such lines); the files must be in the same order")
    out = tid.assign(landmarks=lms["landmarks"].to_numpy(), faceness=lms["faceness"].to_numpy())
    out.insert(0, "image_id", IMAGE_DIR + "/" + out["name"].astype(str))
    return out


def _line_of(path: Path, row: int) -> int:
    """The 1-based line number of data row ``row`` (blank lines skipped), read only for an
    error message."""
    with open(path, encoding="utf-8") as fh:
        k = -1
        for no, line in enumerate(fh, 1):
            if line.strip():
                k += 1
                if k == row:
                    return no
    return row + 1


def read_template_pairs(path: str | os.PathLike,
                        known_templates: np.ndarray | None = None) -> pd.DataFrame:
    """``template_a``, ``template_b``, ``label`` (int8) of ``*_template_pair_label.txt``.

    A label other than 0/1, or (with ``known_templates``) a template that no image line
    names, is an error naming file and line.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"IJB meta file {path} does not exist")
    try:  # the C parser: 15.7M lines in seconds
        arr = pd.read_csv(path, sep=r"\s+", header=None, dtype=np.int64,
                          skip_blank_lines=True).to_numpy()
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        arr = None
    if arr is None or arr.ndim != 2 or arr.shape[1] != 3:  # find the bad line for the message
        for no, tok in _lines(path):
            if len(tok) != 3:
                raise DatasetError(f"{path}:{no}: expected '<template 1> <template 2> "
                                   f"<label>', got {len(tok)} fields") from None
            _ints(path, no, tok, "template ids and label")
        raise DatasetError(f"{path}: cannot be read as three integer columns")
    bad = np.flatnonzero((arr[:, 2] != 0) & (arr[:, 2] != 1))
    if len(bad):
        raise DatasetError(f"{path}:{_line_of(path, int(bad[0]))}: label must be 0 or 1, "
                           f"got {arr[bad[0], 2]}")
    if known_templates is not None:
        unknown = ~(np.isin(arr[:, 0], known_templates) & np.isin(arr[:, 1], known_templates))
        if unknown.any():
            i = int(np.flatnonzero(unknown)[0])
            raise DatasetError(f"{path}:{_line_of(path, i)}: template {arr[i, 0]} or "
                               f"{arr[i, 1]} has no image in the face_tid_mid file "
                               f"({int(unknown.sum())} such pairs)")
    return pd.DataFrame({"template_a": arr[:, 0], "template_b": arr[:, 1],
                         "label": arr[:, 2].astype(np.int8)})


def read_one_n_csv(path: str | os.PathLike) -> pd.DataFrame:
    """``template_id``, ``subject_id`` (one row per template) of a 1:N protocol CSV.

    A template listed with two subjects is an error naming the file and line.
    """
    path = Path(path)
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except Exception as exc:  # pandas raises many types for malformed files
        raise DatasetError(f"cannot read IJB 1:N file {path}: {exc}") from exc
    cols = {c.strip().upper(): c for c in df.columns}
    if "TEMPLATE_ID" not in cols or "SUBJECT_ID" not in cols:
        raise DatasetError(f"{path}: needs TEMPLATE_ID and SUBJECT_ID columns, has "
                           f"{list(df.columns)}")
    t = df[cols["TEMPLATE_ID"]].str.strip()
    s = df[cols["SUBJECT_ID"]].str.strip()
    bad = ~t.str.fullmatch(r"-?\d+")
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise DatasetError(f"{path}:{i + 2}: TEMPLATE_ID {t.iat[i]!r} is not an integer")
    pairs = pd.DataFrame({"template_id": t.astype(np.int64), "subject_id": s,
                          "line": np.arange(len(df)) + 2})
    n_subj = pairs.groupby("template_id")["subject_id"].nunique()
    if (n_subj > 1).any():
        tid = int(n_subj.index[n_subj.to_numpy() > 1][0])
        lines = pairs.loc[pairs["template_id"] == tid, "line"].tolist()[:3]
        raise DatasetError(f"{path}: template {tid} has several subjects (lines {lines})")
    return (pairs.drop_duplicates("template_id")[["template_id", "subject_id"]]
            .reset_index(drop=True))


def template_subjects(root: str | os.PathLike, variant: str) -> dict[int, str]:
    """Template id -> subject id from the 1:N CSVs ({} without them)."""
    out: dict[int, str] = {}
    for path in one_n_files(root, variant).values():
        df = read_one_n_csv(path)
        out.update(zip(df["template_id"].tolist(), df["subject_id"].tolist(), strict=True))
    return out


def read_ijb(root: str | os.PathLike, variant: str) -> pd.DataFrame:
    """Raw manifest rows of an IJB release: one per image line, ``path``
    ``loose_crop/<name>``, ``identity`` (the subject from the 1:N CSVs, else
    ``template_<id>``), ``given_landmarks``, ``given_score`` and ``label_faceness``.

    A name listed on several lines becomes one ``duplicate`` manifest row per extra line
    (the templates stage still counts every line, with the first line's features).
    """
    members = read_members(root, variant)
    subjects = template_subjects(root, variant)
    tids = members["template_id"].to_numpy()
    identity = [subjects.get(int(t), f"template_{int(t)}") for t in tids]
    raw = pd.DataFrame({
        "path": members["image_id"].to_numpy(),
        "identity": identity,
        "given_landmarks": members["landmarks"].to_numpy(),
        "given_score": members["faceness"].to_numpy(np.float32),
        "label_faceness": members["faceness"].to_numpy(np.float64),
        "source_line": members["source_line"].to_numpy(),
    })
    raw.attrs["source"] = str(meta_files(root, variant)["tid_mid"])
    return raw
