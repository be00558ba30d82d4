"""Config checks of the faces stage, run before any job: MTCNN weights in
``faces.weights_dir``, and every crop a configured stage reads is a crop the faces stage
stores.

``faces.crops`` says which aligned crops the faces stage writes (``arcface``, ``facenet``).
Leaving one out is the fast choice for pre-aligned input (the ArcFace crop alone is the
image itself: no resize, one PNG), but a stage that reads the missing crop would then find
null crops in every row. This check names the key that reads it before any job runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from facecast.config.util import module_constant, section
from facecast.faces.config import CROP_KINDS

#: the crop each embedding backend reads (``onnx`` reads its ``crop`` option)
BACKEND_CROPS = {"facenet": "facenet", "dlib_resnet": "arcface", "iresnet": "arcface",
                 "lbp": "arcface"}


def crop_readers(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(crop kind, config key that makes a stage read it)`` for the configured run."""
    readers: list[tuple[str, str]] = []
    for name, mcfg in section(section(config, "embed"), "models").items():
        mcfg = mcfg if isinstance(mcfg, Mapping) else {}
        backend = str(mcfg.get("backend", ""))
        crop = (str(mcfg.get("crop", "arcface")) if backend == "onnx"
                else BACKEND_CROPS.get(backend))
        if crop:
            readers.append((crop, f"embed.models.{name} (backend {backend})"))
    attrs = section(config, "attributes")
    scorers = attrs.get("scorers", ["native", "age_gender"])
    iqa = section(attrs, "pyiqa").get("metrics") or []
    if any(s in ("native", "pyiqa") for s in (scorers or [])) or iqa:
        readers.append((str(attrs.get("crop", "arcface")), "attributes.crop"))
    trainer = section(attrs, "trainer")
    if trainer.get("enabled", False):
        readers.append((str(trainer.get("crop", "arcface")), "attributes.trainer.crop"))
    if section(config, "features").get("enabled", False):
        readers.append(("facenet", "features.enabled (dlib landmarks on the facenet crop)"))
    return readers


def weight_errors(config: Mapping[str, Any]) -> list[str]:
    """``faces.weights_dir`` (when set) holds MTCNN's three networks."""
    wdir = str(section(config, "faces").get("weights_dir") or "")
    if not wdir:
        return []
    files = module_constant("facecast.faces.detect", "MTCNN_FILES")
    missing = [f for f in files.values() if not (Path(wdir) / f).is_file()]
    if not missing:
        return []
    return [f"faces.weights_dir: {wdir!r} lacks MTCNN's {', '.join(missing)}; copy them from "
            "facenet-pytorch's data folder or set faces.weights_dir: \"\" (the bundled ones)"]


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """MTCNN weights, and crops that a configured stage reads but ``faces.crops`` does not
    store."""
    stored = section(config, "faces").get("crops", list(CROP_KINDS))
    stored = [str(c) for c in (stored or [])]
    errors = weight_errors(config)
    for crop, key in crop_readers(config):
        if crop in CROP_KINDS and crop not in stored:
            errors.append(f"faces.crops: {stored} lacks {crop!r}, which {key} reads; add "
                          f"{crop} to faces.crops")
    return errors
