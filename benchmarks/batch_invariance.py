"""Batch invariance of arcface_torch embeddings on this machine, under the stage's settings.

Embeds the same face crops (the RFW photos of tests/data aligned to the ArcFace template:
``face_crops.rfw_crops``; faces, not noise) at batch sizes 1, 7, 64 and 256, in forward
and reversed order, and compares each crop's L2-normalised embedding with its batch-1
value: the max |difference| per batch size and order, and for fp32 (``amp: none``)
``PASS``/``FAIL`` against 1e-6, the tolerance the provenance states.

Everything runs as ``facecast.embed.stage.embed_shard`` runs it (issue 48 item 3): the
model as the embed config builds it (``inference: auto``), inside the stage's one CUDA
context (:func:`facecast.faces.cuda_fp32.cuda_fp32`: TF32 as ``--tf32``, cuDNN's
autotuner as :func:`facecast.embed.cuda_numerics.cudnn_benchmark` sets it for that amp),
and on CPU through the stage's micro-batch runner (``embed.cpu_micro_batch`` 8). The first
line says which settings ran. Then fp16 and bf16 on CUDA: their spread, no goal (the
provenance says ``batch_invariant: false`` for them).

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
from face_crops import rfw_crops

from facecast.embed.arcface.weights import build_backbone
from facecast.embed.base import active_amp, resolve_device
from facecast.embed.cuda_numerics import INVARIANT_TOLERANCE, cudnn_benchmark
from facecast.embed.registry import build_embedder
from facecast.embed.stage import EMBED_DEFAULTS, micro_batch_runner
from facecast.faces.cuda_fp32 import cuda_fp32, cuda_numerics_state


def normalised(f: np.ndarray) -> np.ndarray:
    f = f.astype(np.float64)
    return f / np.linalg.norm(f, axis=1, keepdims=True)


def spread(forward, crops: torch.Tensor, batch_sizes: list[int]) -> dict[str, float]:
    """Max |normalised embedding - its batch-1 value| per batch size and order."""
    n = len(crops)
    ref = normalised(np.concatenate([forward(crops[i:i + 1]) for i in range(n)]))
    out = {}
    for bs in batch_sizes:
        for name, order in (("forward", np.arange(n)), ("reversed", np.arange(n)[::-1].copy())):
            feats = np.concatenate([forward(crops[order[i:i + bs]])
                                    for i in range(0, n, bs)])
            out[f"batch {bs} {name}"] = float(np.abs(normalised(feats) - ref[order]).max())
    return out


def measure(cfg: dict, device: torch.device, amp: str, tf32: bool, crops: torch.Tensor,
            sizes: list[int]) -> tuple[dict[str, float], str]:
    """The spread of one amp under the stage's settings, and a line naming them."""
    micro = int(EMBED_DEFAULTS["cpu_micro_batch"])
    with cuda_fp32(device, tf32=tf32) as on_gpu:  # as embed_shard: the model built inside
        emb = build_embedder("m", cfg, device=str(device), amp=amp)
        if on_gpu:  # the stage's autotuner rule, restored by cuda_fp32
            torch.backends.cudnn.benchmark = cudnn_benchmark(
                active_amp(emb.device, emb.amp), tf32, bool(getattr(emb, "compiled", False)))
        state = cuda_numerics_state() if on_gpu else {}
        with micro_batch_runner(emb, micro, 1) as forward:
            figures = spread(forward, crops, sizes)
    if on_gpu:
        how = (f"inference {emb.inference}, TF32 matmul {state['tf32_matmul']} conv "
               f"{state['tf32_conv']}, cudnn.benchmark {state['cudnn_benchmark']}")
    else:
        how = f"inference {emb.inference}, every CPU forward {micro} crops (cpu_micro_batch)"
    return figures, how


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
    crops = torch.from_numpy(rfw_crops(args.n))
    print(f"batch invariance: {args.arch}, {device} "
          f"({torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}), "
          f"{args.n} RFW face crops (tests/data), TF32 {'on' if args.tf32 else 'off'}",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "backbone.pth")
        torch.manual_seed(0)
        torch.save(build_backbone(args.arch).eval().state_dict(), path)
        cfg = {"backend": "arcface_torch", "weights": path, "arch": args.arch,
               "inference": "auto"}
        for amp in ["none"] + (["fp16", "bf16"] if device.type == "cuda" else []):
            figures, how = measure(cfg, device, amp, args.tf32, crops, sizes)
            print(f"  amp {amp}: the stage's settings: {how}", flush=True)
            for what, diff in figures.items():
                print(f"  amp {amp:<5}{what:<22}max |diff| {diff:.2e}", flush=True)
            worst = max(figures.values())
            if amp == "none":
                verdict = "PASS" if worst <= INVARIANT_TOLERANCE else "FAIL"
                print(f"{verdict}: fp32 ({device.type}, {how}) max |diff| vs batch 1 = "
                      f"{worst:.2e} (goal <= {INVARIANT_TOLERANCE:g})")
            else:
                print(f"{amp} spread: max |diff| vs batch 1 = {worst:.2e} (no goal: "
                      "batch_invariant false)")


if __name__ == "__main__":
    main()
