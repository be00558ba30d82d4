"""What the attributes rules call: one scorer on one faces shard, the streamed merge of
every scorer into ``results/{ds}/attributes.parquet``, and the trainer of the multi-label
attribute head.

Entries (one per rule): :func:`score_shard` (``attributes_score``, in
:mod:`facecast.attributes.scoring`), :func:`merge_attributes` (``attributes_merge``, in
:mod:`facecast.attributes.merge`) and :func:`train_model` (``attribute_model``; torch and
the trainer load when it runs); a ``cast_arrays`` dataset's table comes from its arrays
(:func:`write_cast_attributes`, rule ``cast_attributes``), a BFW dataset read without
its images from its manifest (:func:`write_manifest_attributes`, rule
``manifest_attributes``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from facecast.attributes.cast_arrays import write_cast_attributes
from facecast.attributes.from_manifest import write_manifest_attributes
from facecast.attributes.merge import merge_attributes
from facecast.attributes.targets import head_weights
from facecast.faces.cuda_fp32 import cuda_fp32

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["head_weights", "merge_attributes", "resolve_device", "score_shard", "train_model",
           "write_cast_attributes", "write_manifest_attributes", "write_ofiq_inputs"]


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when available else ``cpu``
    (:func:`facecast.attributes.scoring.resolve_device`)."""
    from facecast.attributes.scoring import resolve_device as resolve

    return resolve(device)


def score_shard(scorer: str, faces_path: str | os.PathLike, out_path: str | os.PathLike,
                cfg: Mapping[str, Any], **kwargs: Any) -> pd.DataFrame:
    """Run ``scorer`` over one faces shard and write its attribute shard
    (:func:`facecast.attributes.scoring.score_shard`: keyword arguments ``embed_paths``,
    ``weights``, ``threads``, ``provenance``). The scorers' modules (torch, ONNX) load
    here, so the merge job does not pay for them."""
    from facecast.attributes.scoring import score_shard as score

    # the torch heads in fp32 on CUDA (no TF32; facecast.faces.cuda_fp32); native and ofiq
    # compute on the CPU
    device = "cpu" if scorer in ("native", "ofiq") else str(cfg.get("device", "auto"))
    with cuda_fp32(device):
        return score(scorer, faces_path, out_path, cfg, **kwargs)


def write_ofiq_inputs(manifest: str | os.PathLike, shard: str, root: str | os.PathLike,
                      folder: str | os.PathLike, map_path: str | os.PathLike) -> pd.DataFrame:
    """The folder of one manifest shard's images that ofiqpy reads and its map to image ids
    (:func:`facecast.attributes.ofiq_real.write_ofiq_inputs`), for the real OFIQ."""
    from facecast.attributes.ofiq_real import write_ofiq_inputs as write
    from facecast.datasets.manifest import read_shard

    rows = read_shard(manifest, shard, columns=["image_id", "path", "status"])
    return write(rows, root, folder, map_path)


def train_model(manifest: str | os.PathLike, faces_files: Sequence[str],
                checkpoint: str | os.PathLike, evaluation: str | os.PathLike,
                report: str | os.PathLike, cfg: Mapping[str, Any], *, seed: int,
                device: str = "auto", provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Train the multi-label ResNet-18 head on the manifest's labels on ``device``
    (``auto``: CUDA when available), writing the checkpoint, the evaluation table and its
    Markdown report (:func:`facecast.attributes.trainer.train_attribute_model`)."""
    from facecast.attributes.trainer import train_attribute_model

    device = resolve_device(device)
    with cuda_fp32(device):  # fp32 on CUDA: no TF32 (facecast.faces.cuda_fp32)
        return train_attribute_model(manifest, faces_files, checkpoint, evaluation, report,
                                     cfg, seed=seed, device=device, provenance=provenance)
