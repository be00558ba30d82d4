"""Settings of the faces stage (config section ``faces``), with the schema's defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

SELECT_POLICIES = ("largest", "central", "score")
CROP_KINDS = ("arcface", "facenet")
FALLBACKS = ("none", "center_crop")
DETECTORS = ("mtcnn", "yunet", "none")
#: What pre-aligned input images already are (``faces.detector: none``); see faces.aligned.
ALIGNED_AS = ("arcface112", "facenet160", "center")


@dataclass(frozen=True)
class YuNetOptions:
    """``faces.yunet``: settings of the YuNet detector (``faces.detector: yunet``)."""

    score_threshold: float = 0.9
    nms_threshold: float = 0.3
    top_k: int = 5000
    model: str = ""
    #: images whose shorter side is below this are enlarged to it (within max_side); 0 = off
    min_side: int = 224

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any] | YuNetOptions | None) -> YuNetOptions:
        """Build from a (possibly partial) mapping; unknown keys raise ValueError."""
        if isinstance(cfg, YuNetOptions):
            return cfg
        cfg = dict(cfg or {})
        unknown = sorted(set(cfg) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown faces.yunet config keys: {unknown}")
        return cls(**cfg)


@dataclass(frozen=True)
class FacesConfig:
    """Typed view of ``config["faces"]``; defaults equal those in the config schema."""

    detector: str = "mtcnn"
    aligned_as: str = "arcface112"
    device: str = "auto"
    threads: int = 2
    batch_size: int = 32
    max_side: int = 640
    min_face_size: int = 20
    thresholds: tuple[float, float, float] = (0.6, 0.7, 0.7)
    scale_factor: float = 0.709
    select: str = "largest"
    crops: tuple[str, ...] = CROP_KINDS
    facenet_margin: float = 14.0
    fallback: str = "none"
    center_crop_fraction: float = 0.7
    max_pixels: int = 100_000_000
    decode_max_side: int = 0
    png_compress_level: int = 1
    keep_jpeg: bool = False
    weights_dir: str = ""
    yunet: YuNetOptions = field(default_factory=YuNetOptions)

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any] | FacesConfig | None) -> FacesConfig:
        """Build from a (possibly partial) mapping; unknown keys and bad values raise ValueError."""
        if isinstance(cfg, FacesConfig):
            return cfg
        cfg = dict(cfg or {})
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(cfg) - names)
        if unknown:
            raise ValueError(f"unknown faces config keys: {unknown}")
        if "thresholds" in cfg:
            cfg["thresholds"] = tuple(float(t) for t in cfg["thresholds"])
        if "crops" in cfg:
            cfg["crops"] = tuple(str(c) for c in cfg["crops"])
        if "yunet" in cfg:
            cfg["yunet"] = YuNetOptions.from_mapping(cfg["yunet"])
        out = cls(**cfg)
        out.validate()
        return out

    def validate(self) -> None:
        """Raise ValueError naming the first bad setting."""
        if self.detector not in DETECTORS:
            raise ValueError(f"faces.detector must be one of {DETECTORS}, got {self.detector!r}")
        if self.aligned_as not in ALIGNED_AS:
            raise ValueError(f"faces.aligned_as must be one of {ALIGNED_AS}, "
                             f"got {self.aligned_as!r}")
        if self.select not in SELECT_POLICIES:
            raise ValueError(f"faces.select must be one of {SELECT_POLICIES}, got {self.select!r}")
        if self.fallback not in FALLBACKS:
            raise ValueError(f"faces.fallback must be one of {FALLBACKS}, got {self.fallback!r}")
        bad = [c for c in self.crops if c not in CROP_KINDS]
        if bad:
            raise ValueError(f"faces.crops entries must be in {CROP_KINDS}, got {bad}")
        if len(self.thresholds) != 3 or not all(0.0 <= t <= 1.0 for t in self.thresholds):
            raise ValueError(f"faces.thresholds must be 3 values in [0, 1], got {self.thresholds}")
        if not 0.0 < self.scale_factor < 1.0:
            raise ValueError(f"faces.scale_factor must be in (0, 1), got {self.scale_factor}")
        if self.min_face_size < 4 or self.max_side < self.min_face_size:
            raise ValueError("faces.min_face_size must be >= 4 and <= faces.max_side")
        if not 0.0 < self.center_crop_fraction <= 1.0:
            raise ValueError("faces.center_crop_fraction must be in (0, 1]")
        if not 0.0 <= self.facenet_margin < 160:
            raise ValueError("faces.facenet_margin must be in [0, 160)")
        if self.batch_size < 1 or self.max_pixels < 1 or not 0 <= self.png_compress_level <= 9:
            raise ValueError("faces.batch_size, max_pixels must be >= 1; png_compress_level 0..9")
        y = self.yunet
        if not (0.0 <= y.score_threshold <= 1.0 and 0.0 <= y.nms_threshold <= 1.0
                and y.top_k >= 1 and y.min_side >= 0):
            raise ValueError("faces.yunet: score_threshold and nms_threshold must be in "
                             "[0, 1], top_k >= 1, min_side >= 0")
        if not (self.device in ("auto", "cpu", "cuda") or self.device.startswith("cuda:")):
            raise ValueError(f"faces.device must be auto, cpu, cuda or cuda:N, got {self.device!r}")

    def as_dict(self) -> dict[str, Any]:
        """Plain dict (lists, not tuples) for provenance."""
        d = asdict(self)
        d["thresholds"] = list(self.thresholds)
        d["crops"] = list(self.crops)
        return d
