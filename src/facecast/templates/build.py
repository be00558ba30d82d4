"""From image lines and image features to templates: which images count, pooled features
and the templates table (pure; the stage reads the files and writes the results).

Every image line of ``*_face_tid_mid.txt`` is accounted for: a line whose image has no
feature (the faces or embed stage gave it a status other than ok) is dropped from its
template and counted in ``n_dropped``; a template left with no image has status
``no_features`` and no feature, and the pairs naming it are kept unscored with that
status (the reference cannot meet this case: it needs every image).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from facecast.templates.pooling import Pooled, image_features, pool_templates

#: defaults of the ``templates`` config section (workflow/schemas/config.schema.yaml)
TEMPLATE_DEFAULTS: dict[str, Any] = {
    "norm_score": True, "detector_score": True, "media_pooling": True,
    "fars": [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1], "block_templates": 1024,
    "precision": "float64", "readout": "insightface", "ranks": [1, 5, 10],
    "fpir_targets": [0.01, 0.1], "failed": "nonmatch",
}


def settings(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """The section with its defaults filled in."""
    return {**TEMPLATE_DEFAULTS, **{k: v for k, v in dict(cfg or {}).items()
                                    if k in TEMPLATE_DEFAULTS}}


def build_templates(members: pd.DataFrame, feature_ids: np.ndarray, raw: np.ndarray,
                    cfg: Mapping[str, Any], subjects: Mapping[int, str] | None = None
                    ) -> tuple[pd.DataFrame, Pooled]:
    """The templates table and the pooled features.

    ``members``: one row per image line (``image_id``, ``template_id``, ``media_id``,
    ``faceness``; :func:`facecast.datasets.ijb.read_members`); ``feature_ids`` / ``raw``:
    the images that have a raw feature. Table columns: ``template_id``, ``subject``
    (from the 1:N CSVs, else empty), ``n_images`` and ``n_media`` (as listed),
    ``n_dropped`` (lines without a feature), ``status`` (``ok`` / ``no_features``).
    """
    cfg = settings(cfg)
    pos = pd.Index(feature_ids).get_indexer(members["image_id"].to_numpy())
    have = pos >= 0
    tids = members["template_id"].to_numpy(np.int64)
    mids = members["media_id"].to_numpy(np.int64)
    feats = image_features(raw[pos[have]], members["faceness"].to_numpy()[have],
                           norm_score=bool(cfg["norm_score"]),
                           detector_score=bool(cfg["detector_score"]))
    pooled = pool_templates(feats, tids[have], mids[have],
                            media_pooling=bool(cfg["media_pooling"]))
    listed = pd.DataFrame({"template_id": tids, "media_id": mids, "have": have})
    g = listed.groupby("template_id", sort=True)
    table = pd.DataFrame({
        "template_id": g.size().index.to_numpy(np.int64),
        "n_images": g.size().to_numpy(np.int64),
        "n_media": g["media_id"].nunique().to_numpy(np.int64),
        "n_dropped": (g.size() - g["have"].sum()).to_numpy(np.int64),
    })
    subjects = subjects or {}
    table.insert(1, "subject", [subjects.get(int(t), "") for t in table["template_id"]])
    ok = np.isin(table["template_id"].to_numpy(), pooled.template_ids)
    table["status"] = np.where(ok, "ok", "no_features")
    return table, pooled
