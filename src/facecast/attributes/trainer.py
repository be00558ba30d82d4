"""Train a multi-label ResNet-18 attribute head on a manifest's binary ``label_*`` columns.

Recipe (CelebA-style): SGD momentum 0.9, weight decay 1e-4, lr 0.1 decayed x0.9 per
epoch, BCE on the logits (NaN labels masked), augmentation = horizontal flip + small
scale/translation + small rotation (one batched affine warp), ImageNet-pretrained start
when torchvision's ``resnet18-f37072fd.pth`` is in ``$TORCH_HOME/hub/checkpoints``.
Train on ``split == "train"``, evaluate on every other row that has a crop. The
checkpoint (facecast format) loads in the ``celeba40`` scorer.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm import tqdm

from facecast.attributes.heads import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    resnet18_head,
    save_head_checkpoint,
    sha256_file,
    to_tensor,
    torch_home,
)
from facecast.attributes.inputs import iter_faces
from facecast.datasets.manifest import read_shard, read_shard_ids
from facecast.io.atomic import write_text
from facecast.io.parquet_io import write_parquet

log = logging.getLogger("facecast.attributes")

RESNET18_IMAGENET = "resnet18-f37072fd.pth"
METRIC_COLUMNS = ["f1", "accuracy", "balanced_accuracy", "precision", "recall",
                  "pct_positive", "n_eval", "n_train_positive", "n_train"]


def binary_label_columns(frame: pd.DataFrame, wanted: Sequence[str] = ()) -> list[str]:
    """``label_*`` columns whose known values are all 0/1 (or bool); ``wanted`` (names with
    or without the ``label_`` prefix) restricts and must all be binary."""
    cols = [c for c in frame.columns if c.startswith("label_")]
    binary = []
    for c in cols:
        v = pd.to_numeric(frame[c].astype(object), errors="coerce").dropna()
        if len(v) and v.isin([0, 1]).all():
            binary.append(c)
    if wanted:
        names = [w if w.startswith("label_") else f"label_{w}" for w in wanted]
        bad = [w for w in names if w not in binary]
        if bad:
            raise ValueError(f"attributes.trainer.labels: {bad} are not binary label columns "
                             f"of the manifest (binary ones: {binary})")
        return names
    return binary


def load_training_data(manifest: str | os.PathLike, faces_files: Sequence[str], *,
                       crop: str, input_size: int, labels: Sequence[str] = (),
                       chunk_rows: int = 1024) -> dict[str, Any]:
    """Crops (resized to ``input_size``, uint8 NHWC), label matrix (NaN = unknown) and
    split of every manifest row that has a crop; label columns chosen by
    :func:`binary_label_columns`."""
    shard_ids = read_shard_ids(manifest)
    if len(faces_files) != len(shard_ids):
        raise ValueError(f"{len(faces_files)} faces shards for {len(shard_ids)} manifest shards")
    images, ys, splits, ids, cols = [], [], [], [], None
    for shard, faces in zip(shard_ids, faces_files, strict=True):
        m = read_shard(manifest, shard)
        if cols is None:
            cols = binary_label_columns(m, labels)
            if not cols:
                raise ValueError(f"{manifest} has no binary label_* columns to train on")
        m = m.set_index(m["image_id"].astype(str))
        for batch in iter_faces(faces, crop, chunk_rows=chunk_rows):
            keep = batch.has_crop & np.isin(batch.image_id, m.index)
            if not keep.any():
                continue
            sel = m.loc[batch.image_id[keep]]
            x = torch.from_numpy(batch.crops[keep]).permute(0, 3, 1, 2).float()
            if x.shape[-1] != input_size:
                x = F.interpolate(x, size=(input_size, input_size), mode="bilinear",
                                  antialias=True, align_corners=False)
            images.append(x.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy())
            ys.append(sel[cols].apply(pd.to_numeric, errors="coerce").to_numpy(np.float32))
            splits.append(sel["split"].astype(str).to_numpy())
            ids.append(batch.image_id[keep])
    if not images:
        raise ValueError("no manifest row has a face crop to train on")
    return {"images": np.concatenate(images), "y": np.concatenate(ys),
            "split": np.concatenate(splits), "image_id": np.concatenate(ids),
            "columns": list(cols)}


def augment(x: torch.Tensor, gen: torch.Generator, *, max_rotation: float = 10.0,
            scale: tuple[float, float] = (0.9, 1.1), max_shift: float = 0.05) -> torch.Tensor:
    """Random flip + scale + shift + rotation of a normalised NCHW batch (one affine warp)."""
    n = x.shape[0]
    flip = torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0)
    ang = (torch.rand(n, generator=gen) * 2 - 1) * math.radians(max_rotation)
    s = scale[0] + torch.rand(n, generator=gen) * (scale[1] - scale[0])
    t = (torch.rand(n, 2, generator=gen) * 2 - 1) * max_shift * 2
    cos, sin = torch.cos(ang) / s, torch.sin(ang) / s
    theta = torch.stack([torch.stack([cos * flip, -sin, t[:, 0]], 1),
                         torch.stack([sin * flip, cos, t[:, 1]], 1)], 1)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def evaluation_table(y_true: np.ndarray, prob: np.ndarray, names: Sequence[str],
                     y_train: np.ndarray | None = None, threshold: float = 0.5) -> pd.DataFrame:
    """Per-attribute metrics at ``threshold`` (NaN labels ignored): F1 first, then accuracy,
    balanced accuracy, precision, recall, % positive in the evaluated rows and counts.
    Undefined ratios (no predicted / no true positives) are 0, as scikit-learn's
    ``zero_division=0``."""
    rows = []
    for j, name in enumerate(names):
        known = ~np.isnan(y_true[:, j])
        t = y_true[known, j] > 0.5
        p = prob[known, j] >= threshold
        tp, fp = int((t & p).sum()), int((~t & p).sum())
        fn, tn = int((t & ~p).sum()), int((~t & ~p).sum())
        n = tp + fp + fn + tn
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        spec = tn / (tn + fp) if tn + fp else 0.0
        f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
        if tp + fn and tn + fp:
            bacc = 0.5 * (rec + spec)
        else:  # one class only: balanced accuracy is the recall of the class present
            bacc = rec if tp + fn else spec
        ytr = y_train[:, j] if y_train is not None else np.array([])
        ytr = ytr[~np.isnan(ytr)]
        rows.append({"attribute": name, "f1": f1, "accuracy": (tp + tn) / n if n else np.nan,
                     "balanced_accuracy": bacc, "precision": prec, "recall": rec,
                     "pct_positive": 100.0 * (tp + fn) / n if n else np.nan, "n_eval": n,
                     "n_train_positive": int((ytr > 0.5).sum()), "n_train": int(len(ytr))})
    return pd.DataFrame(rows, columns=["attribute", *METRIC_COLUMNS])


def evaluation_markdown(table: pd.DataFrame, note: str = "") -> str:
    """The evaluation as Markdown: mean per-attribute F1 first, then one row per attribute."""
    lines = ["# Attribute model evaluation", "",
             f"**Mean per-attribute F1: {table['f1'].mean():.4f}** "
             f"({len(table)} attributes, threshold 0.5)", ""]
    if note:
        lines += [note, ""]
    lines += ["| attribute | F1 | accuracy | balanced acc. | precision | recall | % positive "
              "| n eval |", "|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples():
        lines.append(f"| {r.attribute} | {r.f1:.4f} | {r.accuracy:.4f} | "
                     f"{r.balanced_accuracy:.4f} | {r.precision:.4f} | {r.recall:.4f} | "
                     f"{r.pct_positive:.1f} | {r.n_eval} |")
    return "\n".join(lines) + "\n"


def _predict(model: torch.nn.Module, images: np.ndarray, size: int, batch_size: int,
             device: str) -> np.ndarray:
    model.eval()
    out = []
    with torch.inference_mode():
        for i in range(0, len(images), batch_size):
            x = to_tensor(images[i:i + batch_size], size).to(device)
            out.append(model(x).sigmoid().float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, model.fc.out_features), np.float32)


def train_attribute_model(manifest: str | os.PathLike, faces_files: Sequence[str],
                          checkpoint: str | os.PathLike, evaluation: str | os.PathLike,
                          report: str | os.PathLike, cfg: Mapping[str, Any], *, seed: int,
                          device: str = "cpu",
                          provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Train per ``cfg`` (the ``attributes.trainer`` section); write the checkpoint, the
    evaluation Parquet and Markdown; return the evaluation table."""
    size = int(cfg.get("input_size", 64))
    crop = str(cfg.get("crop", "arcface"))
    data = load_training_data(manifest, faces_files, crop=crop, input_size=size,
                              labels=cfg.get("labels", []))
    names = [c.removeprefix("label_") for c in data["columns"]]
    train = data["split"] == "train"
    if not train.any():
        raise ValueError("the manifest has no rows with split == 'train' (and a face crop)")
    held = ~train
    note = ""
    if not held.any():
        held = train
        note = "No held-out rows (every row is split 'train'): evaluated on the training set."
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = resnet18_head(len(names))
    pretrained = False
    weights = torch_home() / "hub" / "checkpoints" / RESNET18_IMAGENET
    if cfg.get("pretrained", True) and weights.is_file():
        state = torch.load(weights, map_location="cpu", weights_only=True)
        state = {k: v for k, v in state.items() if not k.startswith("fc.")}
        model.load_state_dict(state, strict=False)
        pretrained = True
    log.info("training %d labels on %d images (%d held out), pretrained=%s", len(names),
             int(train.sum()), int(held.sum()), pretrained)
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=float(cfg.get("lr", 0.1)),
                          momentum=float(cfg.get("momentum", 0.9)),
                          weight_decay=float(cfg.get("weight_decay", 1e-4)))
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=float(cfg.get("lr_decay", 0.9)))
    x_train, y_train = data["images"][train], torch.from_numpy(data["y"][train])
    bs = int(cfg.get("batch_size", 64))
    epochs = int(cfg.get("epochs", 5))
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(x_train), generator=gen).numpy()
        total, seen = 0.0, 0
        for i in tqdm(range(0, len(order), bs), desc=f"epoch {epoch + 1}/{epochs}",
                      mininterval=10):
            idx = order[i:i + bs]
            if len(idx) < 2:  # BatchNorm needs two samples
                continue
            x = augment(to_tensor(x_train[idx], size), gen).to(device)
            y = y_train[idx].to(device)
            known = ~torch.isnan(y)
            logits = model(x)
            loss = F.binary_cross_entropy_with_logits(logits[known], y[known])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
            seen += len(idx)
        sched.step()
        log.info("epoch %d: train BCE %.4f, lr now %.4g", epoch + 1, total / max(seen, 1),
                 sched.get_last_lr()[0])
    prob = _predict(model, data["images"][held], size, bs, device)
    table = evaluation_table(data["y"][held], prob, names, data["y"][train])
    save_head_checkpoint(model.cpu(), names, checkpoint, input_size=size, crop=crop,
                         extra={"epochs": epochs, "seed": int(seed), "pretrained": pretrained,
                                "mean_f1": float(table["f1"].mean()),
                                "n_train": int(train.sum())})
    prov = dict(provenance or {}) | {"stage": "attribute_model", "checkpoint": str(checkpoint),
                                     "checkpoint_sha256": sha256_file(checkpoint),
                                     "pretrained": pretrained}
    write_parquet(table, evaluation, provenance=prov,
                  metadata={"facecast.mean_f1": f"{table['f1'].mean():.6f}"})
    write_text(report, evaluation_markdown(table, note))
    log.info("mean per-attribute F1 %.4f", table["f1"].mean())
    return table


__all__ = ["IMAGENET_MEAN", "IMAGENET_STD", "augment", "binary_label_columns",
           "evaluation_markdown", "evaluation_table", "load_training_data",
           "train_attribute_model"]
