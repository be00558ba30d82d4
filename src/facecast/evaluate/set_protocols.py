"""The protocols of RFW and BFW datasets (rule ``set_protocol``), and BFW's score columns
as models without images (rule ``evaluate_scores``, :func:`given_scores`).

RFW (``kind: rfw``, :mod:`facecast.datasets.rfw`): one protocol per set, named as the set,
the lines of ``txts/<Set>/<Set>_pairs.txt`` in file order; its folds are insightface's ten
consecutive blocks (:func:`facecast.evaluate.metrics.default_folds`: 600 pairs each for
RFW's 6,000, exactly RFW's folds of 300 genuine + 300 impostor lines). As ``.bin`` files
(``bins``), each file's pairs with the same rule (what insightface's verification.py does).
Either way the file's structure (:func:`facecast.datasets.rfw.fold_structure`: RFW's
layout, or what differs) is logged when it is not RFW's and written to the fold note and
provenance ``structure``, for the RFW table. A pair naming ``<pid>_NNNN.jpg`` is the
manifest's image with that stem (a ``.png`` release).
Beside the sets, the protocol ``rfw`` holds every set's pairs (fold ``k`` = each set's fold
``k``): the protocol the later stages assess, where the sets are the groups.

BFW (``kind: bfw``, :mod:`facecast.datasets.bfw`): the protocol ``bfw``, every datatable
row in file order with its ``fold`` (1..5) and ``line``, and per score model two columns:
:func:`score_column` (the score, NaN where the cell is not a number) and
:func:`note_column` (why not). A column ``scores: {col: {higher: different}}`` marks as a
distance is negated (higher = more alike for every stage); a column whose genuine pairs
score lower on average than its impostors is warned about in the log
(:func:`facecast.datasets.bfw.distance_warning`); provenance ``negated_score_models`` and
``score_direction`` record both.

Every input line is a row: a malformed pairs line has status ``malformed``, a pair whose
image is not in the manifest ``not_in_manifest`` (or the image's own status), a BFW row
without a path ``no_path``, a bad label ``bad_label``, a bad fold ``bad_fold``; evaluation
counts them as skipped. A protocol in which no pair resolves against the manifest is an
error naming the file (:func:`facecast.evaluate.resolve.check_resolved`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.config.fair_sets import (
    BFW_PROTOCOL,
    RFW_ALL,
    flipped_columns,
    implied_protocols,
    rfw_sets,
    score_columns,
)
from facecast.datasets.bfw import bfw_pairs, distance_warning, parse_scores, read_table
from facecast.datasets.manifest import DatasetError
from facecast.datasets.rfw import (
    MALFORMED,
    RFW_FOLDS,
    SET_LABEL,
    STRUCTURE_MARK,
    fold_structure,
    match_disk_extensions,
    read_rfw_pairs,
    rfw_files,
)
from facecast.evaluate.bin_protocol import bin_pairs
from facecast.evaluate.metrics import default_folds
from facecast.evaluate.resolve import attach_manifest, check_resolved
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.io.paths import portable_path

log = logging.getLogger(__name__)


def score_column(model: str) -> str:
    """The protocol column of score model ``model``'s scores."""
    return f"given_score__{model}"


def note_column(model: str) -> str:
    """The protocol column saying why a score of ``model`` is missing ('' when it is not)."""
    return f"given_note__{model}"


def _manifest(manifest_path: str | os.PathLike) -> pd.DataFrame:
    return read_parquet(manifest_path, columns=["image_id", "path", "identity", "status"])


def _resolve(raw: pd.DataFrame, manifest: pd.DataFrame, source: str) -> pd.DataFrame:
    """Protocol rows of ``raw`` (``path_a``, ``path_b``, ``fold``, ``label``, optional
    ``status`` / ``message`` of the line itself) against the manifest; a line's own status
    comes first."""
    pairs = attach_manifest(raw, manifest)
    if "status" in raw:
        own = raw["status"].to_numpy() != "ok"
        pairs.loc[own, "status"] = raw.loc[own, "status"].to_numpy()
        pairs.loc[own, "message"] = raw.loc[own, "message"].to_numpy()
    check_resolved(raw, pairs, source=source, strip_prefix="")
    return pairs


def _rfw_set(spec: Mapping[str, Any], set_name: str, manifest: pd.DataFrame
             ) -> tuple[pd.DataFrame, str]:
    """The protocol of one RFW set (module docstring) and its pairs file's structure
    (:func:`facecast.datasets.rfw.fold_structure`, logged when it is not RFW's)."""
    if spec.get("bins"):
        path = Path(str(spec["bins"][set_name]))
        raw = bin_pairs(path, RFW_FOLDS)
        pairs = _resolve(raw, manifest, str(path))
        pairs["pair_index"] = raw["pair_index"].to_numpy()
    else:
        files = rfw_files(str(spec["root"]), set_name)
        path = files["pairs"]
        raw = read_rfw_pairs(path, set_name, files["images_dir"].name)
        raw["fold"] = default_folds(len(raw), RFW_FOLDS)
        for side in ("path_a", "path_b"):  # <pid>_NNNN.jpg: the image as on disk (.png)
            raw[side] = match_disk_extensions(raw[side], manifest["path"])
        pairs = _resolve(raw, manifest, str(path))
        bad = raw["status"].to_numpy() == MALFORMED
        pairs.loc[bad, ["identity_a", "identity_b"]] = ""
        pairs["line"] = raw["line"].to_numpy()
    regular, structure = fold_structure(raw["label"].to_numpy(), RFW_FOLDS)
    if not regular:
        log.warning("RFW %s (%s): %s", set_name, path, structure)
    return pairs, structure


def write_rfw_protocol(spec: Mapping[str, Any], name: str, manifest_path: str | os.PathLike,
                       out_path: str | os.PathLike, *,
                       provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Protocol ``name`` of an RFW dataset: one set's pairs, or :data:`RFW_ALL` (every
    set's, fold ``k`` = each set's fold ``k``); see the module docstring."""
    manifest = _manifest(manifest_path)
    sets = rfw_sets(spec) if name == RFW_ALL else [name]
    if any(s not in rfw_sets(spec) for s in sets):
        raise DatasetError(f"{name!r} is not a protocol of this RFW dataset "
                           f"({implied_protocols(spec)})")
    frames, structures = [], {}
    for s in sets:
        pairs, structures[s] = _rfw_set(spec, s, manifest)
        pairs[SET_LABEL] = s
        frames.append(pairs)
        log.info("RFW %s: %d pairs (%d not ok: %s)", s, len(pairs),
                 int((pairs["status"] != "ok").sum()),
                 pairs.loc[pairs["status"] != "ok", "status"].value_counts().to_dict())
    pairs = pd.concat(frames, ignore_index=True)
    bins = dict(spec.get("bins") or {})
    source = ("every set" if name == RFW_ALL else portable_path(bins[name]) if bins
              else portable_path(rfw_files(str(spec["root"]), name)["pairs"]))
    form = ".bin files" if bins else "the test release's txts/<Set>/<Set>_pairs.txt"
    note = (f"RFW from {form}: insightface verification.py's {RFW_FOLDS} consecutive "
            "blocks in file order" + (" of every set (fold k = each set's fold k)"
                                      if name == RFW_ALL else "") + "; " + STRUCTURE_MARK
            + "; ".join(f"{s}: {t}" if name == RFW_ALL else t for s, t in structures.items()))
    prov = {**dict(provenance or {}), "stage": "protocol", "protocol": "rfw", "set": name,
            "folds": note, "n_pairs": int(len(pairs)), "source": source,
            "structure": structures}
    write_parquet(pairs, out_path, provenance=prov)
    return pairs


def write_bfw_protocol(spec: Mapping[str, Any], manifest_path: str | os.PathLike,
                       out_path: str | os.PathLike, *,
                       provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """BFW's protocol :data:`BFW_PROTOCOL` with its score models' columns (module
    docstring)."""
    models = score_columns(spec)
    table = read_table(spec["table"], models)
    raw = bfw_pairs(table)
    pairs = _resolve(raw, _manifest(manifest_path), str(spec["table"]))
    pairs["line"] = raw["line"].to_numpy()
    flipped = [m for m in flipped_columns(spec) if m in models]
    directions = {}
    for m in models:
        values, notes = parse_scores(table, m)
        if m in flipped:  # a distance: negated, so that higher = more alike
            values = -values
        directions[m] = distance_warning(m, values, raw["label"].to_numpy(),
                                         flipped=m in flipped) or "ok"
        if directions[m] != "ok":
            log.warning("BFW %s: %s", m, directions[m])
        pairs[score_column(m)] = values
        pairs[note_column(m)] = notes
        if (notes != "").any():
            log.warning("BFW %s: %d rows have no usable score (%s); their pairs are skipped "
                        "for %s", m, int((notes != "").sum()),
                        pd.Series(notes[notes != ""]).value_counts().to_dict(), m)
    log.info("BFW: %d pairs, statuses %s; score models %s", len(pairs),
             pairs["status"].value_counts().to_dict(), models)
    prov = {**dict(provenance or {}), "stage": "protocol", "protocol": BFW_PROTOCOL,
            "folds": "BFW's own 5 folds (no person in two folds)", "score_models": models,
            "source": portable_path(spec["table"]), "n_pairs": int(len(pairs)),
            "negated_score_models": flipped, "score_direction": directions}
    write_parquet(pairs, out_path, provenance=prov)
    return pairs


def given_scores(protocol_path: str | os.PathLike, model: str) -> pd.DataFrame:
    """Score model ``model``'s scored pairs from a BFW protocol: every protocol row with
    ``score``; a pair that is ``ok`` but has no usable score gets status ``bad_score`` and
    the note as message (score NaN)."""
    import pyarrow.parquet as pq

    names = pq.read_schema(protocol_path).names
    if score_column(model) not in names:
        raise DatasetError(f"{protocol_path}: no scores of model {model!r} (score models: "
                           f"{[n.removeprefix('given_score__') for n in names if n.startswith('given_score__')]})")
    drop = {n for n in names if n.startswith(("given_score__", "given_note__"))}
    keep = [n for n in names if n not in drop] + [score_column(model), note_column(model)]
    df = read_parquet(protocol_path, columns=keep)
    score = np.array(df.pop(score_column(model)), dtype=np.float64)  # writable
    note = df.pop(note_column(model)).to_numpy(dtype=object)
    status = df["status"].to_numpy(dtype=object).copy()
    message = df["message"].to_numpy(dtype=object).copy()
    bad = (status == "ok") & np.isnan(score)
    status[bad] = "bad_score"
    where = (("datatable line " + df["line"].astype(str) + ": ").to_numpy(dtype=object)
             if "line" in df else "")
    message[bad] = (where + note)[bad]
    score[status != "ok"] = np.nan
    df["status"], df["message"], df["score"] = status.astype(str), message.astype(str), score
    df["fold"] = df["fold"].astype(str)
    df["label"] = df["label"].astype(np.int8)
    return df


