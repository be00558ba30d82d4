"""Feeding crops from a faces shard to a model: PNG decoding in DataLoader workers.

:class:`CropBatches` is a map-style dataset whose items are whole batches: worker ``k``
decodes batch ``k`` (PNG -> uint8 ``(B, S, S, 3)``) while the model runs on the previous
one; with ``pin_memory`` the batch lands in page-locked memory so the host-to-GPU copy
is asynchronous. A crop that does not decode (or has the wrong size) is flagged, not
raised, so its row gets a status and the rest of the batch goes on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from facecast.faces.crops import decode_png


class CropBatches(Dataset):
    """Batches of decoded crops: item ``b`` = (uint8 crops, row indices, ok mask, errors)."""

    def __init__(self, crops: Sequence[bytes | None], rows: np.ndarray, batch_size: int,
                 size: int) -> None:
        self.crops = crops
        self.rows = np.asarray(rows, np.int64)
        self.batch_size = max(1, int(batch_size))
        self.size = int(size)

    def __len__(self) -> int:
        return (len(self.rows) + self.batch_size - 1) // self.batch_size

    def __getitem__(self, b: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[str]]:
        rows = self.rows[b * self.batch_size:(b + 1) * self.batch_size]
        out = np.zeros((len(rows), self.size, self.size, 3), np.uint8)
        ok = np.ones(len(rows), bool)
        errors = [""] * len(rows)
        for i, r in enumerate(rows):
            try:
                arr = decode_png(self.crops[r])
                if arr.shape != out.shape[1:]:
                    raise ValueError(f"crop is {arr.shape[1]}x{arr.shape[0]}, "
                                     f"expected {self.size}x{self.size}")
                out[i] = arr
            except Exception as err:  # noqa: BLE001 - any bad crop becomes a row status
                ok[i] = False
                errors[i] = f"crop does not decode: {err}"
        return torch.from_numpy(out), torch.from_numpy(rows), torch.from_numpy(ok), errors


def resolve_workers(num_workers: int, device: torch.device, threads: int) -> int:
    """``-1`` (auto): up to 8 decode workers when feeding a GPU, none on CPU (the model
    needs the cores there)."""
    if num_workers >= 0:
        return int(num_workers)
    return min(8, max(1, threads - 1)) if device.type == "cuda" else 0


def crop_loader(crops: Sequence[bytes | None], rows: np.ndarray, *, batch_size: int,
                size: int, device: torch.device, num_workers: int = 0) -> DataLoader:
    """DataLoader over :class:`CropBatches` (in order; pinned memory when feeding CUDA)."""
    ds = CropBatches(crops, rows, batch_size, size)
    return DataLoader(ds, batch_size=None, shuffle=False, num_workers=num_workers,
                      pin_memory=device.type == "cuda", persistent_workers=False,
                      prefetch_factor=4 if num_workers > 0 else None)
