"""C11 mining's parameters and outcome types: what a mining run is asked and what it returns.

:class:`MiningConfig` (config section ``mining``, optionally overridden per benchmark),
:class:`MiningResult` (the pairs, columns :data:`PAIR_COLUMNS`, and the report),
:class:`MiningShortfall` (raised when a subset cannot supply the pairs) and
:func:`resolve_device` (the ``mining.device`` setting as a torch device).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    import torch

#: the columns of a mined ``pairs.parquet``
PAIR_COLUMNS = ["image_a", "image_b", "identity_a", "identity_b", "label", "fold", "ref_score"]


class MiningShortfall(RuntimeError):
    """The subset could not supply the requested pairs; ``report`` says what was achieved."""

    def __init__(self, message: str, report: dict[str, Any]) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class MiningConfig:
    """Mining parameters (config section ``mining``, optionally overridden per benchmark)."""

    mode: str = "band"
    band: tuple[float, float] = (0.15, 0.30)
    band_mode: str = "absolute"
    n_folds: int = 10
    n_genuine: int = 500
    n_impostor: int = 500
    val_fold: bool = True
    max_image_uses: int = 7
    on_shortfall: str = "fail"
    block_size: int = 4096
    max_candidates: int = 2_000_000_000
    quantile_sample: int = 100_000
    genuine_oversample: float = 4.0
    genuine_chunk_rows: int = 16_384
    max_pool_images: int = 1_000_000
    device: str = "auto"
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> MiningConfig:
        """Build from a config mapping; unknown keys (e.g. ``reference_model``) go to extra."""
        names = {f for f in cls.__dataclass_fields__ if f != "extra"}
        kw = {k: v for k, v in cfg.items() if k in names}
        if "band" in kw:
            kw["band"] = tuple(float(b) for b in kw["band"])
        out = cls(**kw, extra={k: v for k, v in cfg.items() if k not in names})
        out.check()
        return out

    def check(self) -> None:
        """Raise ``ValueError`` on an unknown mode, band mode or shortfall policy, or a bad band."""
        if self.mode not in ("band", "all", "cast_random"):
            raise ValueError(f"mining mode {self.mode!r}: band | all | cast_random")
        lo, hi = self.band
        if lo > hi:
            raise ValueError(f"mining band {self.band}: low > high")
        if self.band_mode not in ("absolute", "impostor_quantile", "genuine_quantile"):
            raise ValueError(f"band_mode {self.band_mode!r}: absolute | impostor_quantile | "
                             "genuine_quantile")
        if self.band_mode != "absolute" and not (0 <= lo <= 1 and 0 <= hi <= 1):
            raise ValueError(f"quantile band {self.band} must be fractions in [0, 1]")
        if self.on_shortfall not in ("fail", "write"):
            raise ValueError(f"on_shortfall {self.on_shortfall!r}: fail | write")

    @property
    def fold_names(self) -> list[str]:
        """``0``..``n_folds-1``, then ``val`` when ``val_fold``."""
        return [str(k) for k in range(self.n_folds)] + (["val"] if self.val_fold else [])


@dataclass
class MiningResult:
    """The mined pairs (columns :data:`PAIR_COLUMNS`) and the report of how it went."""

    pairs: pd.DataFrame
    report: dict[str, Any]


def resolve_device(device: str) -> torch.device:
    """``auto`` -> cuda when available, else cpu."""
    import torch  # here, not at the top: config and subset jobs need no torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not (device == "cpu" or str(device).startswith("cuda")):
        raise ValueError(f"mining.device: {device!r} is not a device; use auto, cpu, cuda or "
                         "cuda:N")
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"mining.device is {device!r} but torch sees no CUDA device on "
                           "this host; set mining.device: auto or cpu")
    return torch.device(device)
