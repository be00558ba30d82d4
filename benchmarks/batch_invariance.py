"""Batch invariance of arcface_torch embeddings on this machine (issue 40 item 3).

Embeds the same crops at batch sizes 1, 7, 64 and 256, in forward and reversed order,
through ``ArcfaceTorchEmbedder.embed`` with ``amp: none`` inside the stage's TF32 setting
(:func:`facecast.embed.cuda_numerics.tf32_mode`, ``--tf32`` to turn it on), and compares
each crop's L2-normalised embedding with its batch-1 value: prints the max |difference| per
batch size and ``PASS``/``FAIL`` against 1e-6 (the tolerance the provenance states for
fp32 on CUDA with TF32 off). Then the spread of fp16 and bf16 (the same comparison; no
goal: the provenance says false for them). On CPU (``--device cpu``, a smoke run) the
forward is the literal eager module, whole batches, so it shows oneDNN's spread.

    python benchmarks/batch_invariance.py --device cuda --arch r100 --n 256   # GPU check
    .venv/bin/python benchmarks/batch_invariance.py --device cpu --arch r18 --n 16 \\
        --batch-sizes 1,7,16                                                   # CPU smoke
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import torch

from facecast.embed.arcface.weights import build_backbone
from facecast.embed.base import resolve_device
from facecast.embed.cuda_numerics import INVARIANT_TOLERANCE, tf32_mode
from facecast.embed.registry import build_embedder


def crops_of(n: int, seed: int = 0) -> torch.Tensor:
    """``n`` distinct structured uint8 crops (smooth blob + noise)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:112, 0:112] / 112
    out = []
    for k in range(n):
        blob = 255 * np.exp(-((xx - 0.5) ** 2 + (yy - 0.4 - 0.2 * k / n) ** 2) / 0.08)
        img = blob[..., None] * rng.uniform(0.4, 1.0, 3) + rng.normal(0, 25, (112, 112, 3))
        out.append(np.clip(img, 0, 255).astype(np.uint8))
    return torch.from_numpy(np.stack(out))


def normalised(f: np.ndarray) -> np.ndarray:
    f = f.astype(np.float64)
    return f / np.linalg.norm(f, axis=1, keepdims=True)


def spread(emb, crops: torch.Tensor, batch_sizes: list[int]) -> dict[str, float]:
    """Max |normalised embedding - its batch-1 value| per batch size and order."""
    n = len(crops)
    ref = normalised(np.concatenate([emb.embed(crops[i:i + 1]) for i in range(n)]))
    out = {}
    for bs in batch_sizes:
        for name, order in (("forward", np.arange(n)), ("reversed", np.arange(n)[::-1].copy())):
            feats = np.concatenate([emb.embed(crops[order[i:i + bs]])
                                    for i in range(0, n, bs)])
            out[f"batch {bs} {name}"] = float(np.abs(normalised(feats) - ref[order]).max())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--arch", default="r100")
    ap.add_argument("--n", type=int, default=256, help="crops (>= the largest batch size)")
    ap.add_argument("--batch-sizes", default="1,7,64,256")
    ap.add_argument("--tf32", action="store_true", help="TF32 on (embed.tf32: true)")
    args = ap.parse_args()
    device = resolve_device(args.device)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    crops = crops_of(args.n)
    print(f"batch invariance: {args.arch}, {device} "
          f"({torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}), "
          f"{args.n} crops, TF32 {'on' if args.tf32 else 'off'}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "backbone.pth")
        torch.manual_seed(0)
        torch.save(build_backbone(args.arch).eval().state_dict(), path)
        cfg = {"backend": "arcface_torch", "weights": path, "arch": args.arch,
               "inference": "eager"}
        amps = ["none"] + (["fp16", "bf16"] if device.type == "cuda" else [])
        with tf32_mode(device, args.tf32):
            for amp in amps:
                emb = build_embedder("m", cfg, device=str(device), amp=amp)
                figures = spread(emb, crops, sizes)
                for what, diff in figures.items():
                    print(f"  amp {amp:<5}{what:<22}max |diff| {diff:.2e}", flush=True)
                worst = max(figures.values())
                if amp == "none":
                    verdict = "PASS" if worst <= INVARIANT_TOLERANCE else "FAIL"
                    print(f"{verdict}: fp32 ({device.type}, TF32 {'on' if args.tf32 else 'off'})"
                          f" max |diff| vs batch 1 = {worst:.2e} (goal <= "
                          f"{INVARIANT_TOLERANCE:g})")
                else:
                    print(f"{amp} spread: max |diff| vs batch 1 = {worst:.2e} (no goal: "
                          "batch_invariant false)")
                del emb


if __name__ == "__main__":
    main()
