"""The ``ofiq`` scorer: OFIQ's components (:mod:`facecast.attributes.ofiq`) for a faces
shard, from the stored facenet crops, the detection boxes and dlib's 68 landmarks.

Per row with a facenet crop: dlib's 68 points are fitted inside the detection box (mapped
into the crop) and mapped back to whole image pixels; a similarity to OFIQ's reference
points aligns the face (:data:`facecast.attributes.ofiq_measures.FRAME` px, warped from
the crop in one step); the pixel components come from the aligned face, the geometric ones
from the landmarks, the pose from the five points derived from them
(:func:`facecast.attributes.pose.head_pose`), SingleFacePresent from the faces shard's
``face_box_areas`` (``n_faces`` alone in shards written before that column). Every
row keeps a status: ``ok``, or ``landmark_error`` (the fit failed: message says why);
rows without a crop get the scorer's usual ``no_crop`` / faces status. The fit is
:func:`facecast.attributes.landmarks68.fit_rows`, the one the labels stage's features use:
rule ``attributes_ofiq`` writes it as their landmark shard (one fit per image for both).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from facecast.attributes import ofiq_landmarks as lm
from facecast.attributes.inputs import FaceBatch
from facecast.attributes.landmarks68 import LandmarkFit, facenet_margin, fit_rows
from facecast.attributes.ofiq import OFIQ_COMPONENTS, column, quality_value
from facecast.attributes.ofiq_measures import FRAME, align_face, pixel_natives
from facecast.attributes.pose import head_pose
from facecast.faces.align import FACENET_MARGIN, compose_affine

log = logging.getLogger("facecast.attributes")

_POSE = {"HeadPoseYaw": "yaw", "HeadPosePitch": "pitch", "HeadPoseRoll": "roll"}


def shard_context(faces_path: str | os.PathLike) -> tuple[dict[str, float],
                                                          dict[str, list | None], float]:
    """``{image_id: n_faces}`` and ``{image_id: face_box_areas}`` of a faces shard (empty
    when the shard lacks the column: shards written before facecast recorded the areas
    stay readable) and the facenet crop's margin (from the shard's provenance;
    facenet-pytorch's 14 where it is not recorded)."""
    names = pq.read_schema(faces_path).names
    n_faces: dict[str, float] = {}
    areas: dict[str, list | None] = {}
    cols = [c for c in ("n_faces", "face_box_areas") if c in names]
    if cols:
        t = pq.read_table(faces_path, columns=["image_id", *cols])
        ids = [str(i) for i in t.column("image_id").to_pylist()]
        if "n_faces" in cols:
            vals = t.column("n_faces").to_pandas().astype("float64").to_numpy()
            n_faces = dict(zip(ids, vals, strict=True))
        if "face_box_areas" in cols:
            areas = dict(zip(ids, t.column("face_box_areas").to_pylist(), strict=True))
    return n_faces, areas, facenet_margin(faces_path)


class OfiqScorer:
    """dlib's predictor, loaded once; scores :class:`FaceBatch` chunks of facenet crops."""

    def __init__(self) -> None:
        self.predictor = lm.load_predictor()
        self.n_faces: dict[str, float] = {}
        self.areas: dict[str, list | None] = {}
        self.margin = float(FACENET_MARGIN)
        #: the dlib fit of the last chunk scored (:meth:`landmarks`)
        self.last_fit: LandmarkFit | None = None

    def bind(self, faces_path: str | os.PathLike) -> None:
        """Read the shard's ``n_faces``, ``face_box_areas`` and facenet margin before its
        chunks are scored."""
        self.n_faces, self.areas, self.margin = shard_context(faces_path)

    def landmarks(self, batch: FaceBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Whole-pixel image landmarks (N, 68, 2), crop -> image matrices (N, 2, 3), and
        the fit's error message per row ('' when it worked; NaN points otherwise). The fit
        (:func:`facecast.attributes.landmarks68.fit_rows`) stays in :attr:`last_fit` for the
        landmark shard the labels stage's features read."""
        self.last_fit = fit = fit_rows(self.predictor, batch, self.margin)
        pts = np.full_like(fit.crop, np.nan)
        for i in np.flatnonzero(np.isfinite(fit.crop).all((1, 2))):
            pts[i] = lm.c_round(fit.crop[i] @ fit.to_img[i][:, :2].T + fit.to_img[i][:, 2])
        return pts, fit.to_img, fit.error

    def predict(self, batch: FaceBatch) -> tuple[dict[str, np.ndarray], np.ndarray,
                                                 np.ndarray]:
        """Every ``ofiq_*`` column (N,) for a chunk, a message per row, and which rows
        have a crop but no landmarks (status ``landmark_error``)."""
        n = len(batch)
        pts, to_img, err = self.landmarks(batch)
        fit = np.isfinite(pts).all((1, 2))
        natives = {c: np.full(n, np.nan) for c in OFIQ_COMPONENTS}
        notes = [[e] if e else [] for e in err]
        align = lm.alignment(pts, FRAME)
        aligned_pts = np.full_like(pts, np.nan)
        for i in np.flatnonzero(fit):
            aligned_pts[i] = lm.c_round(pts[i] @ align[i][:, :2].T + align[i][:, 2])
            face, footprint = align_face(batch.crops[i], compose_affine(align[i], to_img[i]))
            vals, note = pixel_natives(face, footprint, aligned_pts[i])
            for k, v in vals.items():
                natives[k][i] = v
            if note:
                notes[i].append(note)
        pose = head_pose(lm.five_points(pts))
        for comp, key in _POSE.items():
            natives[comp] = pose[key]
        natives.update(lm.geometry_natives(pts, aligned_pts, pose["yaw"], batch.image_width,
                                           batch.image_height))
        ids = batch.image_id.astype(str)
        f, f_msg = lm.single_face(np.array([self.n_faces.get(i, np.nan) for i in ids]),
                                  [self.areas.get(i) for i in ids])
        natives["SingleFacePresent"] = np.where(fit, f, np.nan)
        out: dict[str, np.ndarray] = {}
        for comp in OFIQ_COMPONENTS:
            v = np.where(fit, natives[comp], np.nan)
            out[column(comp)] = quality_value(comp, v)
            out[column(comp, True)] = v
        message = np.array(["; ".join([*nt, f_msg[i]] if fit[i] and f_msg[i] else nt)
                            for i, nt in enumerate(notes)], dtype=object)
        return out, message, batch.has_crop & ~fit


def provenance() -> dict[str, Any]:
    """What the scorer's output says about itself (``ofiq_source: facecast``)."""
    return {"ofiq_source": "facecast", "ofiq_landmarks": "dlib shape_predictor_68",
            "ofiq_frame": FRAME, "ofiq_conformant": False,
            "ofiq_reference": "BSI-OFIQ/OFIQ-Project measures and data/ofiq_config.jaxn"}
