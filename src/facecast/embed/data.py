"""Feeding crops from a faces shard to a model: PNG decoding in threads ahead of the model.

:class:`CropBatches` is a map-style dataset whose items are whole batches: a decode thread
turns batch ``k`` into uint8 ``(B, S, S, 3)`` while the model runs on an earlier one
(Pillow releases the GIL while it decodes, so threads decode in parallel, and no worker
process is ever forked from the job: :mod:`facecast.parallel`). Feeding CUDA, the batch
lands in page-locked memory so the host-to-GPU copy is asynchronous. A crop that does not
decode (or has the wrong size) is flagged, not raised, so its row gets a status and the
rest of the batch goes on.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from facecast.faces.crops import decode_error_text, decode_png
from facecast.parallel import ordered_prefetch

#: one decoded batch: (uint8 crops, row indices, ok mask, error messages)
Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[str]]


class CropBatches:
    """Batches of decoded crops: item ``b`` = (uint8 crops, row indices, ok mask, errors)."""

    def __init__(self, crops: Sequence[bytes | None], rows: np.ndarray, batch_size: int,
                 size: int) -> None:
        self.crops = crops
        self.rows = np.asarray(rows, np.int64)
        self.batch_size = max(1, int(batch_size))
        self.size = int(size)

    def __len__(self) -> int:
        return (len(self.rows) + self.batch_size - 1) // self.batch_size

    def __getitem__(self, b: int) -> Batch:
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
                errors[i] = f"crop does not decode: {decode_error_text(err)}"
        return torch.from_numpy(out), torch.from_numpy(rows), torch.from_numpy(ok), errors


def resolve_workers(num_workers: int, device: torch.device, threads: int) -> int:
    """``-1`` (auto): up to 8 decode threads when feeding a GPU, none on CPU (the model
    needs the cores there)."""
    if num_workers >= 0:
        return int(num_workers)
    return min(8, max(1, threads - 1)) if device.type == "cuda" else 0


def crop_loader(crops: Sequence[bytes | None], rows: np.ndarray, *, batch_size: int,
                size: int, device: torch.device, num_workers: int = 0) -> Iterator[Batch]:
    """The :class:`CropBatches` of ``crops[rows]`` in order, decoded ahead by
    ``num_workers`` threads (0: in the calling thread, when asked for); pinned memory
    when feeding CUDA."""
    ds = CropBatches(crops, rows, batch_size, size)
    pin = device.type == "cuda"

    def load(b: int) -> Batch:
        batch = ds[b]
        return (batch[0].pin_memory(), *batch[1:]) if pin else batch

    return ordered_prefetch(load, range(len(ds)), int(num_workers))
