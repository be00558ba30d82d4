"""The ground truth of the synthetic dataset: its label columns, identity names, one row
per image, the train/test split and the truth table (``truth.parquet``, written last).

The three label tuples are literal so :mod:`facecast.datasets.checks` reads them from the
source without importing this module.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.datasets.label_noise import plant_label_noise
from facecast.datasets.synthetic.sampling import (
    SPLIT_STREAM,
    IdentityTraits,
    ImageCovariates,
    stream_rng,
)
from facecast.io.parquet_io import write_parquet

__all__ = [
    "GROUP_LABELS",
    "IDENTITY_LABELS",
    "IMAGE_LABELS",
    "identity_labels",
    "identity_name",
    "image_path",
    "image_row",
    "train_identities",
    "truth_table",
    "write_truth",
]

#: label columns (``label_<name>``) drawn per identity, per image, and derived group flags;
#: literal, so the config checks read them without importing this module
IDENTITY_LABELS = ("skin_tone", "male", "age", "eye_spacing", "nose_width", "mouth_width",
                   "face_aspect", "hair_grey", "wrinkles", "beard", "hair_long", "bald")
IMAGE_LABELS = ("yaw", "roll", "scale", "blur", "noise", "illumination", "light_direction",
                "jpeg_quality", "glasses", "hat", "smile")
GROUP_LABELS = ("dark_skin", "low_contrast_group")


def identity_name(index: int) -> str:
    """Folder / identity name of identity number ``index`` (``id00017``)."""
    return f"id{index:05d}"


def image_path(name: str, k: int) -> str:
    """Path of image ``k`` of identity ``name``, relative to the dataset root."""
    return f"images/{name}/{k}.jpg"


def identity_labels(traits: IdentityTraits) -> dict[str, float]:
    """The ``label_*`` ground truth of one identity: its traits, then its group flags."""
    tdict = asdict(traits)
    labels = {f"label_{k}": float(tdict[k]) for k in IDENTITY_LABELS}
    for g in GROUP_LABELS:
        labels[f"label_{g}"] = float(getattr(traits, g))
    return labels


def image_row(name: str, k: int, labels: dict[str, float],
              cov: ImageCovariates) -> dict[str, Any]:
    """The truth-table row of image ``k`` of identity ``name``: ``path``, ``identity``,
    the identity's ``labels`` (:func:`identity_labels`) and the image's covariates."""
    cdict = asdict(cov)
    row: dict[str, Any] = {"path": image_path(name, k), "identity": name}
    row.update(labels)
    row.update({f"label_{c}": float(cdict[c]) for c in IMAGE_LABELS})
    return row


def train_identities(seed: int, n_identities: int) -> set[int]:
    """Indices of the ``n_identities // 4`` train identities (a seeded permutation)."""
    n_train = n_identities // 4
    perm = stream_rng(seed, SPLIT_STREAM).permutation(n_identities)
    return {int(i) for i in perm[:n_train]}


def truth_table(rows: list[dict[str, Any]], *, seed: int, n_identities: int,
                label_noise: dict | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The truth table of ``rows`` (:func:`image_row`, ordered by identity then image).

    Adds ``split`` (``train``/``test``) and ``exclude`` (True for train identities) as
    columns 3 and 4, casts every ``label_*`` to float64 and plants the annotation noise
    of ``label_noise`` (:func:`facecast.datasets.label_noise.plant_label_noise`). Returns
    (table, what was planted; empty without noise).
    """
    table = pd.DataFrame(rows)
    train = train_identities(seed, n_identities)
    is_train = np.array([int(n[2:]) in train for n in table["identity"]], dtype=bool)
    table.insert(2, "split", np.where(is_train, "train", "test"))
    table.insert(3, "exclude", is_train)
    labels = [c for c in table.columns if c.startswith("label_")]
    table[labels] = table[labels].astype("float64")
    return plant_label_noise(table, label_noise, int(seed))


def write_truth(rows: list[dict[str, Any]], out_dir: Path, *, seed: int, n_identities: int,
                images_per_identity: int, image_size: int, label_noise: dict | None = None,
                provenance: dict | None = None) -> pd.DataFrame:
    """Build the :func:`truth_table` of ``rows`` and write it to ``out_dir/truth.parquet``.

    The provenance is ``provenance`` plus the generator's stage, seed and sizes (and the
    label-noise spec and what was planted, when there is any). Returns the table.
    """
    table, planted = truth_table(rows, seed=seed, n_identities=n_identities,
                                 label_noise=label_noise)
    prov = dict(provenance or {})
    if planted:
        prov["label_noise"] = {"spec": dict(label_noise or {}), "planted": planted}
    prov.update({"stage": "synthetic_dataset", "generator_seed": int(seed),
                 "n_identities": int(n_identities),
                 "images_per_identity": int(images_per_identity),
                 "image_size": int(image_size)})
    write_parquet(table, Path(out_dir) / "truth.parquet", provenance=prov)
    return table
