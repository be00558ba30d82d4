"""BFW (Balanced Faces in the Wild, Robinson et al., CVPRW 2020): the datatable as a dataset.

The release holds the images as ``<subgroup>/<nid>/<file>.jpg`` (``root``) and one pair
table, ``bfw-<version>-datatable.csv`` (``table``), with or without pandas' index column.
Its columns (BFW's ``0_prepare_datatable`` notebook, visionjo/facerec-bias-bfw): ``fold``
(1..5, no person in two folds), ``p1``, ``p2`` (image paths relative to the root),
``label`` (1 genuine, 0 impostor), ``id1``, ``id2`` (person ids), ``att1``, ``att2`` (the
subgroup folder, e.g. ``asian_females``), ``a1``, ``a2`` (subgroup abbreviation, ``AF``),
``g1``, ``g2`` (gender, ``F`` / ``M``), ``e1``, ``e2`` (ethnicity, ``A`` / ``B`` / ``I`` /
``W``) and one score column per model (``vgg16``, ``resnet50``, ``senet50``,
``sphereface``: higher = more alike).

Manifest rows (:func:`read_bfw`): one per distinct path of ``p1`` / ``p2``, identity from
``id1`` / ``id2``, labels ``label_bfw_subgroup`` (a), ``label_bfw_gender`` (g),
``label_bfw_ethnicity`` (e); the first row naming an image gives its values (rows that
disagree are counted in the log).

Pairs (:func:`bfw_pairs`): one row per CSV row, ``line`` its line in the file (the header
is line 1). A row without a path gets status ``no_path``, a label other than 0 / 1
``bad_label``, an empty or non-integer fold ``bad_fold``; each with a message naming the
line. Scores (:func:`parse_scores`): a cell that is empty or not a number is NaN with a
note (the evaluation gives that pair status ``bad_score``); nothing is dropped.

A score column whose genuine pairs score lower on average than its impostor pairs looks
like a distance (:func:`distance_warning`): the protocol's job warns, naming the
setting that negates it (``datasets.<ds>.scores: {col: {higher: different}}``).

The table is read with pyarrow (all text, score columns converted once): the full 920k-row
datatable in a few seconds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from facecast.config.fair_sets import BFW_COLUMNS
from facecast.datasets.manifest import DatasetError

log = logging.getLogger(__name__)

#: manifest label -> the datatable's column stem (``a`` -> ``a1`` / ``a2``)
LABELS = {"label_bfw_subgroup": "a", "label_bfw_gender": "g", "label_bfw_ethnicity": "e"}
#: pair statuses set here
NO_PATH, BAD_LABEL, BAD_FOLD = "no_path", "bad_label", "bad_fold"


def read_table(path: str | os.PathLike, scores: Sequence[str] = ()) -> pa.Table:
    """The datatable's :data:`BFW_COLUMNS` and ``scores`` columns, all as text (empty cells
    null); DatasetError naming the file and the columns it lacks."""
    import pyarrow.csv as pacsv

    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"BFW datatable {path} does not exist")
    wanted = list(BFW_COLUMNS) + [s for s in scores if s not in BFW_COLUMNS]
    try:
        table = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
            column_types={c: pa.string() for c in wanted}, strings_can_be_null=True))
    except (pa.ArrowInvalid, OSError) as exc:
        raise DatasetError(f"{path}: not a readable CSV ({exc})") from None
    missing = [c for c in wanted if c not in table.column_names]
    if missing:
        raise DatasetError(f"{path}: the BFW datatable has no column(s) {missing} "
                           f"(it has {table.column_names})")
    return table.select(wanted)


def _text(table: pa.Table, column: str) -> np.ndarray:
    """A text column as an object array with '' for nulls (stripped)."""
    col = pc.utf8_trim_whitespace(pc.fill_null(table.column(column), ""))
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)


def read_bfw(path: str | os.PathLike) -> pd.DataFrame:
    """Raw manifest rows of the datatable at ``path`` (module docstring): ``path``,
    ``identity`` and the ``label_bfw_*`` columns, one row per distinct image, in order of
    first appearance (p1 before p2 of a row)."""
    table = read_table(path)
    n = table.num_rows
    cols = {"path": np.concatenate([_text(table, "p1"), _text(table, "p2")]),
            "identity": np.concatenate([_text(table, "id1"), _text(table, "id2")])}
    for label, stem in LABELS.items():
        cols[label] = np.concatenate([_text(table, f"{stem}1"), _text(table, f"{stem}2")])
    both = pd.DataFrame(cols)
    # p1 of row k comes before p2 of row k, and row k before row k+1
    both["order"] = np.concatenate([2 * np.arange(n), 2 * np.arange(n) + 1])
    both = both[both["path"] != ""].sort_values("order", kind="stable")
    first = both.drop_duplicates("path")
    n_conflict = int((both.drop_duplicates(["path", "identity", *LABELS]).shape[0])
                     - first.shape[0])
    if n_conflict:
        log.warning("BFW %s: %d images appear with differing id / a / g / e values across "
                    "rows; the first row naming an image gives its values", path, n_conflict)
    raw = first.drop(columns=["order"]).reset_index(drop=True)
    for label in LABELS:
        raw[label] = raw[label].replace("", None)
    if raw.empty:
        raise DatasetError(f"{path}: no image path in columns p1 / p2")
    log.info("BFW %s: %d pairs, %d images", path, n, len(raw))
    return raw


def bfw_pairs(table: pa.Table) -> pd.DataFrame:
    """One row per datatable row (module docstring): ``line``, ``fold``, ``path_a``,
    ``path_b``, ``label``, ``status``, ``message``."""
    n = table.num_rows
    line = np.arange(2, n + 2)
    pa_, pb_ = _text(table, "p1"), _text(table, "p2")
    fold_txt, label_txt = _text(table, "fold"), _text(table, "label")
    label = np.full(n, -1, dtype=np.int8)
    label[label_txt == "1"] = 1
    label[label_txt == "0"] = 0
    fold = pd.to_numeric(pd.Series(fold_txt), errors="coerce")
    fold_ok = (fold.notna() & (fold == fold.round())).to_numpy()
    fold_name = np.where(fold_ok, fold.fillna(0).astype(np.int64).astype(str), "none")
    status = np.full(n, "ok", dtype=object)
    message = np.full(n, "", dtype=object)
    for bad, st, why in (
            ((pa_ == "") | (pb_ == ""), NO_PATH, "p1 or p2 is empty"),
            (label < 0, BAD_LABEL, "label is not 0 or 1"),
            (~fold_ok, BAD_FOLD, "fold is empty or not an integer")):
        hit = bad & (status == "ok")
        status[hit] = st
        message[hit] = [f"datatable line {k}: {why}" for k in line[hit]]
    return pd.DataFrame({"line": line, "fold": fold_name, "path_a": pa_, "path_b": pb_,
                         "label": label, "status": status, "message": message})


def parse_scores(table: pa.Table, column: str) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, notes)`` of one score column: NaN where a cell is empty or not a
    number, with the note saying which (``''`` elsewhere)."""
    col = table.column(column)
    try:
        values = pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False)
        bad_text = np.zeros(len(values), bool)
    except pa.ArrowInvalid:  # some cell is not a number: the slow, careful way
        text = pd.Series(col.to_numpy(zero_copy_only=False), dtype=object)
        values = pd.to_numeric(text, errors="coerce").to_numpy(np.float64)
        bad_text = (text.notna() & pd.isna(values)).to_numpy()
    values = np.array(values, dtype=np.float64)  # a writable copy
    notes = np.full(len(values), "", dtype=object)
    empty = np.isnan(values) & ~bad_text
    notes[empty] = f"{column}: score missing"
    notes[bad_text] = f"{column}: score is not a number"
    notes[np.isinf(values)] = f"{column}: score is not finite"
    values[np.isinf(values)] = np.nan
    return values, notes


def distance_warning(column: str, scores: np.ndarray, labels: np.ndarray, *,
                     flipped: bool = False) -> str:
    """'' unless the genuine pairs' mean score (label 1, finite scores) is below the
    impostor pairs' (label 0): then the warning, with both means and the setting that
    negates the column (or, for a column already negated, that it may not be a
    distance)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels)
    ok = np.isfinite(s)
    gen, imp = s[ok & (y == 1)], s[ok & (y == 0)]
    if not gen.size or not imp.size or gen.mean() >= imp.mean():
        return ""
    means = (f"genuine pairs' mean {gen.mean():.4g} < impostor pairs' mean "
             f"{imp.mean():.4g}")
    if flipped:
        return (f"score column {column!r}, negated (scores: {{{column}: {{higher: "
                f"different}}}}), still ranks impostors above genuine pairs ({means}); "
                "it may not be a distance: remove higher: different")
    return (f"score column {column!r} LOOKS LIKE A DISTANCE ({means}): facecast reads "
            "higher = more alike, so every rate of this model is inverted. If lower means "
            f"more alike, set datasets.<ds>.scores: {{{column}: {{higher: different}}}}")
