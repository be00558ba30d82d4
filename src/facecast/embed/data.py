"""Feeding crops from a faces shard to a model: crop decoding in threads ahead of the model.

:class:`CropBatches` is a map-style dataset whose items are batches of decoded crops; the
loader (:func:`crop_loader`) splits every model batch across the decode threads and joins
the parts into uint8 ``(B, S, S, 3)`` while the model runs on an earlier batch. Crops
are decoded by the package's one crop decoder, :func:`facecast.faces.crops.decode_crop`
(OpenCV: it releases the GIL, so the threads decode in parallel, and no worker process is
ever forked from the job: :mod:`facecast.parallel`). Feeding CUDA, the batch lands in
page-locked memory so the host-to-GPU copy is asynchronous. With ``gpu_jpeg`` on and a CUDA
embedder, the JPEG crops of a batch are decoded together on the GPU by nvJPEG
(``torchvision.io.decode_jpeg``); its pixels may differ from libjpeg's, so it is an option
(``embed.gpu_jpeg``, off by default) and :func:`decoder_names` states it in the provenance.
A crop that does not decode (or has the wrong size) is flagged, not raised, so its row gets
a status and the rest of the batch goes on.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from facecast.faces.crops import (
    DECODER_NAMES,
    check_crop_bytes,
    crop_format,
    decode_crop,
    decode_error_text,
)
from facecast.parallel import ordered_prefetch

#: one decoded batch: (uint8 crops, row indices, ok mask, error messages)
Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[str]]
#: the provenance name of GPU JPEG decoding
NVJPEG = "nvjpeg"


def use_nvjpeg(gpu_jpeg: bool, device: torch.device) -> bool:
    """Whether JPEG crops go to nvJPEG: asked for (``embed.gpu_jpeg``) and feeding CUDA."""
    return bool(gpu_jpeg) and device.type == "cuda"


def decoder_names(crops: Sequence[bytes | None], rows: np.ndarray, *, gpu_jpeg: bool = False,
                  device: torch.device | None = None) -> str:
    """The decoders that read ``crops[rows]``, for the provenance: e.g. ``opencv-png``,
    ``opencv-png+nvjpeg`` (sorted, ``+``-joined; ``none`` when no crop is PNG or JPEG)."""
    nv = use_nvjpeg(gpu_jpeg, device or torch.device("cpu"))
    names = set()
    for r in np.asarray(rows, np.int64):
        fmt = crop_format(crops[r])
        if fmt:
            names.add(NVJPEG if fmt == "jpeg" and nv else DECODER_NAMES[fmt])
    return "+".join(sorted(names)) or "none"


def _size_error(arr_shape: tuple[int, ...], size: int) -> str:
    if tuple(arr_shape) == (size, size, 3):
        return ""
    return f"crop does not decode: crop is {arr_shape[1]}x{arr_shape[0]}, expected {size}x{size}"


def nvjpeg_decode(blobs: list[bytes], device: torch.device) -> list[torch.Tensor | str]:
    """HxWx3 uint8 RGB tensors on ``device`` of JPEG ``blobs``, decoded in one nvJPEG batch;
    where the batch fails, image by image, so a bad JPEG is an error message in its place."""
    from torchvision.io import ImageReadMode, decode_jpeg

    data = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in blobs]
    try:
        out = decode_jpeg(data, mode=ImageReadMode.RGB, device=device)
        return [t.permute(1, 2, 0) for t in out]
    except RuntimeError:
        res: list[torch.Tensor | str] = []
        for d in data:
            try:
                res.append(decode_jpeg(d, mode=ImageReadMode.RGB, device=device).permute(1, 2, 0))
            except RuntimeError as err:
                res.append(f"crop does not decode ({NVJPEG}): {decode_error_text(err)}")
        return res


class CropBatches:
    """Batches of decoded crops: item ``b`` = (uint8 crops, row indices, ok mask, errors).

    ``nvjpeg_device`` set (a CUDA device): the batch's JPEG crops are decoded there by
    :func:`nvjpeg_decode` and the item's crops tensor lives on that device.
    """

    def __init__(self, crops: Sequence[bytes | None], rows: np.ndarray, batch_size: int,
                 size: int, nvjpeg_device: torch.device | None = None) -> None:
        self.crops = crops
        self.rows = np.asarray(rows, np.int64)
        self.batch_size = max(1, int(batch_size))
        self.size = int(size)
        self.nvjpeg_device = nvjpeg_device

    def __len__(self) -> int:
        return (len(self.rows) + self.batch_size - 1) // self.batch_size

    def __getitem__(self, b: int) -> Batch:
        return self.decode(b * self.batch_size, (b + 1) * self.batch_size)

    def decode(self, start: int, stop: int) -> Batch:
        """The item of ``rows[start:stop]`` (a batch or a part of one)."""
        rows = self.rows[start:stop]
        out = np.zeros((len(rows), self.size, self.size, 3), np.uint8)
        ok = np.ones(len(rows), bool)
        errors = [""] * len(rows)
        gpu = []
        for i, r in enumerate(rows):
            if self.nvjpeg_device is not None and crop_format(self.crops[r]) == "jpeg":
                try:
                    check_crop_bytes(self.crops[r])
                    gpu.append(i)
                except ValueError as err:
                    errors[i] = f"crop does not decode: {decode_error_text(err)}"
                continue
            try:
                arr = decode_crop(self.crops[r])
                errors[i] = _size_error(arr.shape, self.size)
                if not errors[i]:
                    out[i] = arr
            except Exception as err:  # noqa: BLE001 - any bad crop becomes a row status
                errors[i] = f"crop does not decode: {decode_error_text(err)}"
        ok[:] = [not e for e in errors]
        crops = torch.from_numpy(out)
        if gpu:
            crops = self._nvjpeg_rows(crops, rows, gpu, ok, errors)
        return crops, torch.from_numpy(rows), torch.from_numpy(ok), errors

    def _nvjpeg_rows(self, crops: torch.Tensor, rows: np.ndarray, gpu: list[int],
                     ok: np.ndarray, errors: list[str]) -> torch.Tensor:
        """``crops`` on the nvJPEG device with the JPEG rows ``gpu`` decoded there."""
        dev = self.nvjpeg_device
        crops = crops.to(dev, non_blocking=True)
        for i, res in zip(gpu, nvjpeg_decode([self.crops[rows[i]] for i in gpu], dev),
                          strict=True):
            errors[i] = res if isinstance(res, str) else _size_error(tuple(res.shape), self.size)
            ok[i] = not errors[i]
            if ok[i]:
                crops[i] = res
        return crops


def resolve_workers(num_workers: int, device: torch.device, threads: int) -> int:
    """``-1`` (auto): up to 8 decode threads when feeding a GPU, none on CPU (the model
    needs the cores there)."""
    if num_workers >= 0:
        return int(num_workers)
    return min(8, max(1, threads - 1)) if device.type == "cuda" else 0


#: the smallest share of a batch one decode thread takes (fewer crops cost more in overhead)
MIN_PART = 16
#: batches decoded ahead of the model (each split across every decode thread)
BATCHES_AHEAD = 4


def batch_parts(batch_size: int, workers: int) -> int:
    """Crops per decode task: a batch split evenly across ``workers`` threads (at least
    :data:`MIN_PART` crops each; the whole batch without threads)."""
    batch_size = max(1, int(batch_size))
    if workers <= 1:
        return batch_size
    return max(min(MIN_PART, batch_size), -(-batch_size // int(workers)))


def _joined(parts: list[Batch], pin: bool) -> Batch:
    """One batch from its decoded parts (in order); pinned when ``pin``."""
    if len(parts) == 1:
        crops = parts[0][0]
        crops = crops.pin_memory() if pin and not crops.is_cuda else crops
        return crops, parts[0][1], parts[0][2], parts[0][3]
    crops = torch.empty((sum(len(p[0]) for p in parts), *parts[0][0].shape[1:]),
                        dtype=torch.uint8, pin_memory=pin)
    torch.cat([p[0] for p in parts], out=crops)
    return (crops, torch.cat([p[1] for p in parts]), torch.cat([p[2] for p in parts]),
            [e for p in parts for e in p[3]])


def crop_loader(crops: Sequence[bytes | None], rows: np.ndarray, *, batch_size: int,
                size: int, device: torch.device, num_workers: int = 0,
                gpu_jpeg: bool = False) -> Iterator[Batch]:
    """The batches of ``crops[rows]`` in order, decoded ahead by ``num_workers`` threads
    (0: in the calling thread, when asked for); pinned memory when feeding CUDA; JPEG crops
    by nvJPEG on ``device`` when :func:`use_nvjpeg`.

    Every batch is split across the decode threads (:func:`batch_parts`): with one thread
    per batch the first 1,024-crop batch came after ~1.1 s, longer than an H200 needs for
    8,192 faces (issue 48). :data:`BATCHES_AHEAD` batches are decoded ahead, so the model
    does not wait while the threads keep up. The batches are those of one thread (same
    crops, rows, flags, messages)."""
    nv = device if use_nvjpeg(gpu_jpeg, device) else None
    workers = int(num_workers)
    ds = CropBatches(crops, rows, batch_size, size, nvjpeg_device=nv)
    part = ds.batch_size if nv is not None else batch_parts(ds.batch_size, workers)
    tasks = [(b, lo, min(lo + part, len(ds.rows), (b + 1) * ds.batch_size))
             for b in range(len(ds))
             for lo in range(b * ds.batch_size, min((b + 1) * ds.batch_size, len(ds.rows)),
                             part)]
    per_batch = -(-ds.batch_size // part)
    pin = device.type == "cuda"
    decoded = ordered_prefetch(lambda t: (t[0], ds.decode(t[1], t[2])), tasks, workers,
                               depth=max(1, BATCHES_AHEAD * per_batch // max(1, workers)))
    parts: list[Batch] = []
    current = 0
    for b, item in decoded:
        if b != current:
            yield _joined(parts, pin)
            parts, current = [], b
        parts.append(item)
    if parts:
        yield _joined(parts, pin)
