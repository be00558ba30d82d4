"""Torch attribute heads: FairFace (ResNet-34, 18 outputs) and CelebA-style multi-label
ResNet-18 heads (40 sigmoid outputs, or whatever labels a facecast checkpoint names).

Weights are always loaded with ``torch.load(..., weights_only=True)``; a missing file is
one clear error naming the file and where to put it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
import torchvision

from facecast.attributes.age_gender import ModelFilesMissing
from facecast.attributes.align import dlib_chip_template, warp_batch
from facecast.io.atomic import atomic_path
from facecast.io.paths import portable_path

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

FAIRFACE_FILE = "res34_fair_align_multi_7_20190809.pt"
FAIRFACE_RACES = ["white", "black", "latino_hispanic", "east_asian", "southeast_asian",
                  "indian", "middle_eastern"]
FAIRFACE_GENDERS = ["male", "female"]
FAIRFACE_AGES = ["0-2", "3-9", "10-19", "20-29", "30-39", "40-49", "50-59", "60-69", "70+"]
FAIRFACE_COLUMNS = [f"fairface_{n}" for n in FAIRFACE_RACES + FAIRFACE_GENDERS + FAIRFACE_AGES]

# CelebA's 40 attributes in list_attr_celeba.txt order.
CELEBA_ATTRIBUTES = [
    "5_o_Clock_Shadow", "Arched_Eyebrows", "Attractive", "Bags_Under_Eyes", "Bald", "Bangs",
    "Big_Lips", "Big_Nose", "Black_Hair", "Blond_Hair", "Blurry", "Brown_Hair",
    "Bushy_Eyebrows", "Chubby", "Double_Chin", "Eyeglasses", "Goatee", "Gray_Hair",
    "Heavy_Makeup", "High_Cheekbones", "Male", "Mouth_Slightly_Open", "Mustache",
    "Narrow_Eyes", "No_Beard", "Oval_Face", "Pale_Skin", "Pointy_Nose", "Receding_Hairline",
    "Rosy_Cheeks", "Sideburns", "Smiling", "Straight_Hair", "Wavy_Hair", "Wearing_Earrings",
    "Wearing_Hat", "Wearing_Lipstick", "Wearing_Necklace", "Wearing_Necktie", "Young",
]

CHECKPOINT_FORMAT = "facecast.attribute_head"
CHECKPOINT_VERSION = 1


def torch_home() -> Path:
    """``$TORCH_HOME`` (default ``~/.cache/torch``), where hub caches live."""
    return Path(torch.hub.get_dir()).parent


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def to_tensor(images: np.ndarray, size: int, mean=IMAGENET_MEAN, std=IMAGENET_STD,
              ) -> torch.Tensor:
    """(N, H, W, 3) uint8 -> normalised (N, 3, size, size) float tensor (antialiased resize)."""
    x = torch.from_numpy(np.array(images, copy=True)).permute(0, 3, 1, 2).float() / 255.0
    if x.shape[-1] != size or x.shape[-2] != size:
        x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True,
                          align_corners=False)
    m = torch.tensor(mean).view(1, 3, 1, 1)
    s = torch.tensor(std).view(1, 3, 1, 1)
    return (x - m) / s


@torch.inference_mode()
def run_model(model: torch.nn.Module, x: torch.Tensor, batch_size: int,
              device: str = "cpu") -> torch.Tensor:
    """Forward ``x`` through ``model`` in batches; returns CPU float outputs."""
    model.eval().to(device)
    outs = [model(x[i:i + batch_size].to(device)).float().cpu()
            for i in range(0, len(x), batch_size)]
    return torch.cat(outs) if outs else torch.zeros(0)


# --------------------------------------------------------------------------- FairFace


def fairface_model() -> torch.nn.Module:
    """torchvision ResNet-34 with an 18-way fc (the FairFace 7-race checkpoint's shape)."""
    model = torchvision.models.resnet34(weights=None)
    model.fc = torch.nn.Linear(model.fc.in_features, 18)
    return model


def fairface_weights_path(weights: str | os.PathLike | None = None) -> Path:
    """Configured FairFace weights, default ``$TORCH_HOME/hub/checkpoints/<FAIRFACE_FILE>``."""
    return Path(weights) if weights else torch_home() / "hub" / "checkpoints" / FAIRFACE_FILE


def load_fairface(weights: str | os.PathLike | None = None) -> torch.nn.Module:
    """Load the FairFace ResNet-34 (a plain state_dict, ``weights_only=True``)."""
    path = fairface_weights_path(weights)
    if not path.is_file():
        raise ModelFilesMissing(
            f"fairface: weights file {path} not found. Download {FAIRFACE_FILE} from the "
            "FairFace project (github.com/joojs/fairface, 'fair_face_models') and put it "
            f"there, or set attributes.fairface.weights to its path.")
    state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "state_dict" in state:
        state = state["state_dict"]
    state = {k.removeprefix("module."): v for k, v in state.items()}
    model = fairface_model()
    model.load_state_dict(state)
    return model.eval()


class FairFaceHead:
    """FairFace race/gender/age probabilities from dlib-style chips (padding 0.25, 224 px)."""

    CHIP_SIZE = 224
    PADDING = 0.25

    def __init__(self, weights: str | os.PathLike | None = None, device: str = "cpu") -> None:
        self.path = fairface_weights_path(weights)
        self.model = load_fairface(self.path)
        self.device = device

    def provenance(self) -> dict[str, str]:
        return {"fairface_weights": portable_path(self.path),
                "fairface_sha256": sha256_file(self.path)}

    def predict(self, crops: np.ndarray, crop_landmarks: np.ndarray,
                batch_size: int = 64) -> dict[str, np.ndarray]:
        """``fairface_*`` probabilities (softmax within race, gender and age groups)."""
        if len(crops) == 0:
            return {c: np.zeros(0) for c in FAIRFACE_COLUMNS}
        chips = warp_batch(crops, crop_landmarks,
                           dlib_chip_template(self.CHIP_SIZE, self.PADDING), self.CHIP_SIZE)
        logits = run_model(self.model, to_tensor(chips, self.CHIP_SIZE), batch_size, self.device)
        return fairface_probabilities(logits)


def fairface_probabilities(logits: torch.Tensor) -> dict[str, np.ndarray]:
    """Split (N, 18) FairFace logits into softmaxed groups named as ``FAIRFACE_COLUMNS``."""
    probs = torch.cat([logits[:, :7].softmax(1), logits[:, 7:9].softmax(1),
                       logits[:, 9:18].softmax(1)], 1).double().numpy()
    return {c: probs[:, i] for i, c in enumerate(FAIRFACE_COLUMNS)}


# ------------------------------------------------------------- multi-label heads (CelebA)


def resnet18_head(n_outputs: int) -> torch.nn.Module:
    """torchvision ResNet-18 with an ``n_outputs`` fc (logits; sigmoid applied by callers)."""
    model = torchvision.models.resnet18(weights=None)
    model.fc = torch.nn.Linear(model.fc.in_features, n_outputs)
    return model


def save_head_checkpoint(model: torch.nn.Module, labels: list[str], path: str | os.PathLike,
                         *, input_size: int, crop: str = "arcface",
                         extra: dict[str, Any] | None = None) -> Path:
    """Save a multi-label ResNet-18 head in facecast's checkpoint format (tensors + plain
    types only, so it loads with ``weights_only=True``); written atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ckpt = {
        "format": CHECKPOINT_FORMAT,
        "version": CHECKPOINT_VERSION,
        "arch": "resnet18",
        "labels": list(labels),
        "input_size": int(input_size),
        "crop": crop,
        "mean": list(IMAGENET_MEAN),
        "std": list(IMAGENET_STD),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "extra": dict(extra or {}),
    }
    with atomic_path(path) as tmp:
        torch.save(ckpt, tmp)
    return path


def load_head_checkpoint(path: str | os.PathLike) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Load a facecast multi-label head -> (model in eval mode, checkpoint metadata)."""
    path = Path(path)
    if not path.is_file():
        raise ModelFilesMissing(
            f"celeba40: checkpoint {path} not found. Train one with the attribute_model rule "
            "(attributes.trainer) or set attributes.celeba40.weights to a facecast head "
            "checkpoint.")
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a facecast attribute-head checkpoint "
                         f"(expected format {CHECKPOINT_FORMAT!r})")
    if ckpt.get("arch") != "resnet18":
        raise ValueError(f"{path}: unsupported arch {ckpt.get('arch')!r}")
    labels = list(ckpt.get("labels") or CELEBA_ATTRIBUTES)
    model = resnet18_head(len(labels))
    model.load_state_dict(ckpt["state_dict"])
    meta = {k: v for k, v in ckpt.items() if k != "state_dict"}
    meta["labels"] = labels
    return model.eval(), meta


class MultiLabelHead:
    """Sigmoid probabilities of a facecast ResNet-18 head on the faces stage's crops."""

    def __init__(self, weights: str | os.PathLike, device: str = "cpu") -> None:
        self.path = Path(weights)
        self.model, self.meta = load_head_checkpoint(self.path)
        self.device = device

    @property
    def columns(self) -> list[str]:
        return list(self.meta["labels"])

    @property
    def crop(self) -> str:
        return str(self.meta.get("crop", "arcface"))

    def provenance(self) -> dict[str, str]:
        return {"celeba40_weights": portable_path(self.path),
                "celeba40_sha256": sha256_file(self.path)}

    def predict(self, crops: np.ndarray, batch_size: int = 128) -> dict[str, np.ndarray]:
        """One probability column per checkpoint label for (N, H, W, 3) uint8 crops."""
        if len(crops) == 0:
            return {c: np.zeros(0) for c in self.columns}
        x = to_tensor(crops, int(self.meta["input_size"]), tuple(self.meta["mean"]),
                      tuple(self.meta["std"]))
        probs = run_model(self.model, x, batch_size, self.device).sigmoid().double().numpy()
        return {c: probs[:, i] for i, c in enumerate(self.columns)}
