"""Which attribute columns are quality measures, and which way each points.

EDC discards the lowest quality first, so every measure is oriented so that higher means
better: ``higher`` keeps the value, ``lower`` negates it, ``abs_lower`` takes ``-|v|``
(pose angles: frontal is best). Defaults: the native measures below, every ``iqa_*``
column (pyiqa's own ``lower_better`` flag when the attribute table's provenance records
it, else the known lower-better metrics), every ``embed_norm_*`` (higher), every OFIQ
quality value ``ofiq_<Component>`` (0-100, higher; not the ``_native`` columns). Config
``quality.directions`` overrides any of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from facecast.config.patterns import select_columns as pick_columns

DIRECTIONS = ("higher", "lower", "abs_lower")
#: how two images' qualities make a pair's (quality.pair_quality; facecast.quality.edc)
PAIR_QUALITY = ("min", "mean", "product")

#: native measures (facecast.attributes.native) that describe quality, and their direction
NATIVE_DIRECTIONS = {
    "sharpness_laplacian": "higher", "blur_effect": "lower", "luminance_mean": "higher",
    "luminance_var": "higher", "underexposure": "lower", "overexposure": "lower",
    "dynamic_range": "higher", "illumination_uniformity": "higher",
    "inter_eye_distance": "higher", "bbox_width": "higher", "bbox_height": "higher",
    "face_area_rel": "higher", "yaw": "abs_lower", "pitch": "abs_lower",
    "roll": "abs_lower", "det_score": "higher",
}
#: pyiqa metrics where a lower value means better quality (used when provenance is silent)
IQA_LOWER_BETTER = {"piqe", "brisque", "niqe", "ilniqe", "pi", "nrqm_lower"}

#: the seeded, uninformative control column added to every ranking
RANDOM_CONTROL = "random_control"


def default_direction(column: str, lower_better: Mapping[str, bool] | None = None
                      ) -> str | None:
    """The built-in direction of ``column`` (None if it is not a known quality measure)."""
    if column in NATIVE_DIRECTIONS:
        return NATIVE_DIRECTIONS[column]
    if column.startswith("embed_norm_"):
        return "higher"
    if column.startswith("ofiq_") and not column.endswith("_native"):
        return "higher"  # OFIQ's 0-100 quality values (the _native values point both ways)
    if column.startswith("iqa_"):
        metric = column[4:]
        for name, flag in (lower_better or {}).items():
            if name.replace("-", "_") == metric:
                return "lower" if flag else "higher"
        return "lower" if metric in IQA_LOWER_BETTER else "higher"
    return None


def select_columns(available: Sequence[str], cfg: Mapping[str, Any],
                   lower_better: Mapping[str, bool] | None = None) -> dict[str, str]:
    """Quality columns to rank -> direction.

    ``cfg.columns`` (fnmatch patterns; [] = every column with a default direction),
    minus ``cfg.exclude_columns``; ``cfg.directions`` sets or overrides directions. A
    listed name that matches no column is an error naming it.
    """
    avail = list(available)
    patterns = list(cfg.get("columns") or [])
    directions = dict(cfg.get("directions") or {})
    if patterns:
        chosen = pick_columns(avail, patterns, key="quality.columns", order="patterns",
                              show_available=True)
    else:
        chosen = [c for c in avail if default_direction(c, lower_better) or c in directions]
    chosen = pick_columns(chosen, exclude=list(cfg.get("exclude_columns") or []))
    out = {}
    for c in chosen:
        d = directions.get(c) or default_direction(c, lower_better) or "higher"
        if d not in DIRECTIONS:
            raise ValueError(f"quality.directions.{c}: {d!r} is not one of {DIRECTIONS}")
        out[c] = d
    return out


def orient(values: np.ndarray, direction: str) -> np.ndarray:
    """Values turned so that higher means better quality."""
    v = np.asarray(values, dtype=np.float64)
    if direction == "higher":
        return v
    if direction == "lower":
        return -v
    if direction == "abs_lower":
        return -np.abs(v)
    raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")


def random_control(image_ids: Sequence[str], seed: int) -> np.ndarray:
    """Uniform(0, 1) per image, seeded and independent of row order (sorted ids)."""
    ids = np.asarray(image_ids, dtype=object).astype(str)
    uniq, inv = np.unique(ids, return_inverse=True)
    return np.random.default_rng(seed).random(uniq.shape[0])[inv]
