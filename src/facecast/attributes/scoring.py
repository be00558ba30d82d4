"""One scorer on one faces shard -> ``results/{ds}/attributes/{scorer}/{shard}.parquet``
(rule ``attributes_score`` calls it through :func:`facecast.attributes.stage.score_shard`).

Every faces row becomes one output row: ``image_id``, ``status`` (``ok``; the faces
status where there is no crop; ``crop_error`` where a crop does not decode), ``message``,
and one float64 column per attribute (NaN unless computed). Column descriptions go to
the footer (``facecast.attribute_columns``, JSON) so the merged table can document itself.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from facecast.attributes import COLUMNS_KEY
from facecast.attributes.align import ARCFACE_TEMPLATE_112, landmarks_in_arcface_crop
from facecast.attributes.inputs import FaceBatch, iter_faces
from facecast.attributes.landmarks68 import without_crops
from facecast.io.parquet_io import write_parquet

log = logging.getLogger("facecast.attributes")



def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when available else ``cpu``; other values pass through."""
    if device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError(f"attributes.device is {device!r} but torch sees no CUDA "
                               "device on this host; set attributes.device: auto or cpu")
    return device


def crop_landmarks(batch: FaceBatch, crop_size: int = 112) -> np.ndarray:
    """Landmarks in ArcFace-crop pixels; the template itself where the faces stage has none
    (e.g. ``fallback`` centre crops of pre-aligned datasets)."""
    lm = landmarks_in_arcface_crop(batch.landmarks, crop_size)
    bad = ~np.isfinite(lm).all((1, 2))
    lm[bad] = ARCFACE_TEMPLATE_112 * (crop_size / 112.0)
    return lm


def read_embed_norms(paths: Mapping[str, str | os.PathLike], image_ids: np.ndarray,
                     ) -> dict[str, np.ndarray]:
    """``{model: (N,) raw embedding norm}`` aligned to ``image_ids`` (NaN where absent)."""
    out = {}
    index = pd.Index(image_ids)
    for model, path in paths.items():
        t = pq.read_table(path, columns=["image_id", "norm"]).to_pandas()
        s = pd.Series(pd.to_numeric(t["norm"], errors="coerce").to_numpy(np.float64),
                      index=t["image_id"].astype(str))
        s = s[~s.index.duplicated()]
        out[model] = s.reindex(index).to_numpy(np.float64, na_value=np.nan)
    return out


class _Runner:
    """Builds the model for a scorer once and scores FaceBatch chunks."""

    def __init__(self, scorer: str, cfg: Mapping[str, Any], weights: str | None,
                 threads: int) -> None:
        self.scorer = scorer
        self.cfg = cfg
        #: (failed rows, message per row) of the last chunk, for scorers that report them
        self.notes: tuple[np.ndarray, np.ndarray] | None = None
        # native and ofiq measures are numpy on the CPU: no torch import (~3 CPU s)
        self.device = ("cpu" if scorer in ("native", "ofiq")
                       else resolve_device(str(cfg.get("device", "auto"))))
        self.batch_size = int(cfg.get("batch_size", 64))
        self.crop = str(cfg.get("crop", "arcface"))
        self.descriptions: dict[str, str] = {}
        self.provenance: dict[str, Any] = {"scorer": scorer, "device": self.device}
        if scorer == "native":
            from facecast.attributes.native import NATIVE_COLUMNS

            self.descriptions = dict(NATIVE_COLUMNS)
        elif scorer == "ofiq":
            from facecast.attributes.ofiq import descriptions
            from facecast.attributes.ofiq_scorer import OfiqScorer, provenance

            self.model = OfiqScorer()
            self.crop = "facenet"  # dlib's 68 points need the chin: the box plus margin
            self.descriptions = descriptions("facecast")
            self.provenance.update(provenance())
        elif scorer == "pyiqa":
            from facecast.attributes.iqa import IQAScorer, column_name

            metrics = list(cfg.get("pyiqa", {}).get("metrics", []))
            self.model = IQAScorer(metrics, device=self.device)
            self.descriptions = {column_name(m): f"pyiqa {m} (lower is better: "
                                 f"{bool(self.model.models[m].lower_better)})" for m in metrics}
            self.provenance.update(self.model.provenance())
        elif scorer == "age_gender":
            from facecast.attributes.age_gender import AGE_COLUMNS, AgeGenderModel

            self.model = AgeGenderModel(threads=threads)
            self.descriptions = dict(AGE_COLUMNS)
            self.crop = "arcface"
            self.provenance.update(self.model.provenance())
        elif scorer == "fairface":
            from facecast.attributes.heads import FAIRFACE_COLUMNS, FairFaceHead

            self.model = FairFaceHead(weights or None, device=self.device)
            self.descriptions = {c: "FairFace ResNet-34 probability (softmax within race, "
                                 "gender and age groups)" for c in FAIRFACE_COLUMNS}
            self.crop = "arcface"
            self.provenance.update(self.model.provenance())
        elif scorer == "celeba40":
            from facecast.attributes.heads import MultiLabelHead

            if not weights:
                raise ValueError("celeba40 needs a checkpoint path")
            self.model = MultiLabelHead(weights, device=self.device)
            self.descriptions = {c: "P(attribute) from the multi-label ResNet-18 head "
                                 f"{Path(weights).name}" for c in self.model.columns}
            self.crop = self.model.crop
            self.provenance.update(self.model.provenance())
        else:
            raise ValueError(f"unknown scorer {scorer!r}")

    def score(self, batch: FaceBatch, embed_paths: Mapping[str, str]) -> dict[str, np.ndarray]:
        n, ok = len(batch), batch.has_crop
        if self.scorer == "native":
            from facecast.attributes.native import native_scores

            norms = read_embed_norms(embed_paths, batch.image_id) if embed_paths else {}
            out = native_scores(batch, norms)
            if np.any(np.asarray(batch.status).astype(str) == "aligned_input"):
                from facecast.attributes.native import TEMPLATE_COLUMNS, TEMPLATE_NOTE

                for c in TEMPLATE_COLUMNS:  # pre-aligned input: geometry is the template's
                    if TEMPLATE_NOTE not in self.descriptions.get(c, ""):
                        self.descriptions[c] = f"{self.descriptions.get(c, c)}{TEMPLATE_NOTE}"
            for m in norms:
                self.descriptions[f"embed_norm_{m}"] = (f"raw norm of the {m} embedding "
                                                        "before L2 normalisation")
            return out
        if self.scorer == "ofiq":
            cols, message, failed = self.model.predict(batch)
            self.notes = (failed, message)
            return cols
        if self.scorer == "pyiqa":
            part = self.model.predict(batch.crops[ok], self.batch_size)
        elif self.scorer in ("age_gender", "fairface"):
            lm = crop_landmarks(batch)[ok]
            part = self.model.predict(batch.crops[ok], lm, self.batch_size)
        else:
            part = self.model.predict(batch.crops[ok], self.batch_size)
        out = {}
        for key, vals in part.items():
            col = np.full(n, np.nan)
            col[ok] = vals
            out[key] = col
        return out


def row_status(batch: FaceBatch) -> tuple[np.ndarray, np.ndarray]:
    """Per-row scorer status and message (see module doc)."""
    status = np.where(batch.has_crop, "ok", batch.status).astype(object)
    message = np.where(batch.has_crop, "", batch.message).astype(object)
    no_crop = ~batch.has_crop & (batch.crop_error == "")
    plain_ok = no_crop & np.isin(batch.status, ["ok", "fallback", "aligned_input", "landmarks_given"])
    status[plain_ok] = "no_crop"
    message[plain_ok] = "the faces stage stored no crop for this row"
    bad = batch.crop_error != ""
    status[bad] = "crop_error"
    message[bad] = batch.crop_error[bad]
    return status, message


def with_notes(status: np.ndarray, message: np.ndarray, failed: np.ndarray,
               notes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows a scorer could not score become ``landmark_error``; its notes join the
    message of every scored row."""
    status = np.where(failed, "landmark_error", status).astype(object)
    message = np.array(["; ".join(p for p in (m, n) if p) for m, n in
                        zip(message, notes, strict=True)], dtype=object)
    return status, message


def score_shard(scorer: str, faces_path: str | os.PathLike, out_path: str | os.PathLike,
                cfg: Mapping[str, Any], *, embed_paths: Mapping[str, str] | None = None,
                weights: str | None = None, threads: int = 1,
                provenance: Mapping[str, Any] | None = None,
                ofiq_csv: str | None = None, ofiq_map: str | None = None,
                landmarks_out: str | os.PathLike | None = None) -> pd.DataFrame:
    """Run ``scorer`` over a faces shard and write its attribute shard; returns the table.

    ``cfg`` is the ``attributes`` config section; ``embed_paths`` maps embedder names to
    this shard's embed Parquet (native scorer); ``weights`` is the checkpoint of the
    fairface / celeba40 heads; ``ofiq_csv`` / ``ofiq_map``: the real OFIQ's CSV and
    inputs map of this shard (scorer ofiq with ``attributes.ofiq.models_dir``);
    ``landmarks_out``: where the ``ofiq`` scorer also writes its dlib fit as the landmark
    shard the labels stage's features read (:mod:`facecast.attributes.landmarks68`; rule
    ``attributes_ofiq``). Model files are checked before any row is read.
    """
    if scorer == "ofiq" and ofiq_csv:
        if landmarks_out:
            raise ValueError("the real OFIQ fits no dlib landmarks: no landmark shard")
        return _score_real_ofiq(faces_path, out_path, cfg, ofiq_csv, ofiq_map, provenance)
    runner = _Runner(scorer, cfg, weights, threads)
    if scorer == "ofiq":
        runner.model.bind(faces_path)
    elif landmarks_out:
        raise ValueError(f"only the ofiq scorer fits landmarks, not {scorer!r}")
    fitted: tuple[list, list] = ([], [])
    chunk_rows = int(cfg.get("chunk_rows", 1024))
    parts: list[pd.DataFrame] = []
    n_rows = pq.ParquetFile(faces_path).metadata.num_rows
    with tqdm(total=n_rows, desc=f"attributes/{scorer}", unit="img", mininterval=5) as bar:
        for batch in iter_faces(faces_path, runner.crop, chunk_rows=chunk_rows):
            status, message = row_status(batch)
            cols = runner.score(batch, embed_paths or {})
            if landmarks_out:
                fitted[0].append(without_crops(batch))  # the pixels are not kept
                fitted[1].append(runner.model.last_fit)
            if runner.notes is not None:
                status, message = with_notes(status, message, *runner.notes)
            frame = pd.DataFrame({"image_id": batch.image_id.astype(str), "status": status,
                                  "message": message})
            for key, vals in cols.items():
                frame[key] = np.asarray(vals, dtype=np.float64)
            parts.append(frame)
            bar.update(len(batch))
    table = pd.concat(parts, ignore_index=True)
    prov = dict(provenance or {}) | {"stage": "attributes", **runner.provenance}
    if landmarks_out:
        from facecast.attributes.landmarks68 import landmark_table, write_landmark_shard

        write_landmark_shard(landmark_table(*fitted), landmarks_out, prov)
    return _write_shard(table, out_path, scorer, runner.descriptions, prov)


def _score_real_ofiq(faces_path: str | os.PathLike, out_path: str | os.PathLike,
                     cfg: Mapping[str, Any], csv_path: str, map_path: str | None,
                     provenance: Mapping[str, Any] | None) -> pd.DataFrame:
    """The ofiq scorer's shard from the real OFIQ's CSV (:mod:`facecast.attributes.ofiq_real`)
    on the faces shard's rows; a row the faces stage could not use keeps its status."""
    from facecast.attributes.ofiq import descriptions
    from facecast.attributes.ofiq_real import models_dir, real_ofiq_columns
    from facecast.attributes.ofiq_real import provenance as real_provenance

    if not map_path:
        raise ValueError("the real OFIQ's CSV needs its inputs map (ofiq_map)")
    faces = pq.read_table(faces_path, columns=["image_id", "status", "message"]).to_pandas()
    ids = faces["image_id"].astype(str).to_numpy()
    cols, status, message = real_ofiq_columns(ids, csv_path, map_path)
    table = pd.DataFrame({"image_id": ids, "status": status, "message": message})
    for key, vals in cols.items():
        table[key] = vals
    prov = dict(provenance or {}) | {"stage": "attributes", "scorer": "ofiq", "device": "cpu",
                                     **real_provenance(models_dir(cfg))}
    return _write_shard(table, out_path, "ofiq", descriptions("ofiq"), prov)


def _write_shard(table: pd.DataFrame, out_path: str | os.PathLike, scorer: str,
                 descriptions: Mapping[str, str], prov: Mapping[str, Any]) -> pd.DataFrame:
    """Write an attribute shard (string ids/status/message, float64 attributes, column
    descriptions in the footer); returns ``table``."""
    fields = [pa.field("image_id", pa.string()), pa.field("status", pa.string()),
              pa.field("message", pa.string())]
    fields += [pa.field(c, pa.float64()) for c in table.columns[3:]]
    meta = {COLUMNS_KEY: json.dumps({c: descriptions.get(c, "") for c in table.columns[3:]}),
            "facecast.scorer": scorer}
    write_parquet(table, out_path, provenance=dict(prov), schema=pa.schema(fields),
                  metadata=meta)
    log.info("%s: %d rows (%d scored), columns %s", scorer, len(table),
             int((table["status"] == "ok").sum()), list(table.columns[3:]))
    return table
