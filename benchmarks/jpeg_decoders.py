"""JPEG crop decoders against Pillow: pixels and crops/s, on real photos.

The real photos of tests/data (every ``*.jpg``) and skimage's astronaut are resized to
112 x 112 (Pillow, bilinear) and re-encoded as JPEG at quality 95 (Pillow), the shape of
a pre-aligned JPEG source (RecordIO ``.rec``, insightface ``.bin``). Each is decoded by

- ``pillow``: ``Image.open(...).convert("RGB")``, what the faces stage reads JPEGs with
  (:mod:`facecast.faces.decode`): the reference,
- ``opencv``: :func:`facecast.faces.crops.decode_crop`, the package's crop decoder,
- ``torchvision``: ``torchvision.io.decode_jpeg`` on the CPU,
- ``nvjpeg``: ``torchvision.io.decode_jpeg(list, device="cuda")`` in batches of
  ``--batch`` (only where CUDA is available),

and the script prints, per decoder, the largest ``|pixel - Pillow's pixel|``, how many
images differ at all, and crops/s (CPU decoders on ``--threads`` threads; nvJPEG from one
thread, batched, synchronised). The last lines are ``<decoder> pixels equal: PASS|FAIL``
(``nvjpeg ...: n/a (no CUDA)`` without a GPU): ``embed.gpu_jpeg`` stays off by default
while nvJPEG's line says FAIL.

    .venv/bin/python benchmarks/jpeg_decoders.py            # CPU decoders; + nvJPEG on CUDA
    python benchmarks/jpeg_decoders.py --n 20000 --threads 12 --batch 512   # GPU figure
"""

from __future__ import annotations

import argparse
import io
import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from skimage.data import astronaut

from facecast.embed.data import nvjpeg_decode
from facecast.faces.crops import decode_crop
from facecast.parallel import ordered_prefetch

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"


def jpeg_crops(size: int = 112, quality: int = 95) -> list[bytes]:
    """The test photos and the astronaut at ``size`` px as JPEG ``quality`` bytes."""
    images = []
    for path in sorted(DATA.rglob("*.jpg")):
        with Image.open(path) as im:
            images.append(im.convert("RGB"))
    images.append(Image.fromarray(astronaut()))
    out = []
    for im in images:
        buf = io.BytesIO()
        im.resize((size, size), Image.BILINEAR).save(buf, format="JPEG", quality=quality)
        out.append(buf.getvalue())
    return out


def pillow(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB"))


def torchvision_cpu(data: bytes) -> np.ndarray:
    from torchvision.io import ImageReadMode, decode_jpeg

    t = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return decode_jpeg(t, mode=ImageReadMode.RGB).permute(1, 2, 0).numpy()


def nvjpeg_batches(blobs: list[bytes], batch: int) -> list[np.ndarray]:
    """nvJPEG's pixels of ``blobs``, decoded in batches of ``batch`` on the GPU by the embed
    stage's own :func:`facecast.embed.data.nvjpeg_decode` (an error string: all 255s)."""
    out: list[np.ndarray] = []
    for i in range(0, len(blobs), batch):
        out += [t.cpu().numpy() if isinstance(t, torch.Tensor) else np.full((1, 1, 3), 255)
                for t in nvjpeg_decode(blobs[i:i + batch], torch.device("cuda"))]
    return out


def cpu_rate(fn: Callable[[bytes], np.ndarray], blobs: list[bytes], threads: int,
             chunk: int = 64) -> float:
    """crops/s of ``fn`` over ``blobs``, chunks of ``chunk`` on ``threads`` threads."""
    chunks = range(0, len(blobs), chunk)
    t = time.perf_counter()
    for _ in ordered_prefetch(lambda i: [fn(b) for b in blobs[i:i + chunk]], chunks, threads):
        pass
    return len(blobs) / (time.perf_counter() - t)


def gpu_rate(blobs: list[bytes], batch: int) -> float:
    """crops/s of the embed stage's :func:`facecast.embed.data.nvjpeg_decode` in batches."""
    cuda = torch.device("cuda")
    nvjpeg_decode(blobs[:batch], cuda)  # warm-up
    torch.cuda.synchronize()
    t = time.perf_counter()
    for i in range(0, len(blobs), batch):
        nvjpeg_decode(blobs[i:i + batch], cuda)
    torch.cuda.synchronize()
    return len(blobs) / (time.perf_counter() - t)


def compare(ref: list[np.ndarray], got: list[np.ndarray]) -> tuple[int, int]:
    """(largest |difference|, images that differ) of ``got`` against ``ref``."""
    diffs = [int(np.abs(a.astype(np.int16) - b.astype(np.int16)).max()) if a.shape == b.shape
             else 255 for a, b in zip(ref, got, strict=True)]
    return max(diffs), sum(d > 0 for d in diffs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024, help="crops per speed figure")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--batch", type=int, default=512, help="nvJPEG batch size")
    args = ap.parse_args()
    blobs = jpeg_crops()
    many = [blobs[i % len(blobs)] for i in range(args.n)]
    ref = [pillow(b) for b in blobs]
    cuda = torch.cuda.is_available()
    print(f"{len(blobs)} real photos as 112 px JPEG q95; speed: {args.n} crops, "
          f"{args.threads} CPU threads" + (f", nvJPEG batches of {args.batch} on "
                                           f"{torch.cuda.get_device_name()}" if cuda else ""))
    rows = {}
    for name, fn in (("pillow", pillow), ("opencv", decode_crop),
                     ("torchvision", torchvision_cpu)):
        cpu_rate(fn, many[:128], 1)  # warm-up
        rows[name] = (*compare(ref, [fn(b) for b in blobs]), cpu_rate(fn, many, args.threads))
    if cuda:
        rows["nvjpeg"] = (*compare(ref, nvjpeg_batches(blobs, args.batch)),
                          gpu_rate(many, args.batch))
    print(f"{'decoder':<13}{'max |diff|':>11}{'differ':>9}{'crops/s':>11}")
    for name, (dmax, ndiff, rate) in rows.items():
        print(f"{name:<13}{dmax:>11}{ndiff:>6}/{len(blobs):<3}{rate:>10.0f}")
    for name in ("opencv", "torchvision", "nvjpeg"):
        if name not in rows:
            print(f"{name} pixels equal: n/a (no CUDA on this machine)")
            continue
        dmax, ndiff = rows[name][:2]
        verdict = "PASS" if dmax == 0 else f"FAIL (max diff {dmax}, {ndiff} images differ)"
        print(f"{name} pixels equal: {verdict}")


if __name__ == "__main__":
    main()
