"""On a CUDA machine: do the GPU paths give the CPU's answers, and how much faster are they?

No unit test can run these paths on a machine without a GPU, so this script checks them
where one exists, on the same inputs:

- faces: MTCNN detection (batched, padded to shared sizes on the GPU) of real photos and
  synthetic demo faces, each device inside the faces stage's CUDA settings (fp32, TF32 off:
  :func:`facecast.faces.cuda_fp32.cuda_fp32`): detection agreement (images with the same
  number of faces) and the distribution of the best face's landmark distance in pixels
  (median, 90th percentile, max). This is the faces comparison of the GPU check: its
  pipeline step runs faces once, on one device, for both runs (issue 48), so this line is
  the only place where GPU faces meet CPU faces;
- embed: an iResNet-50 (random weights saved and loaded in insightface's format) in fp32
  and fp16 autocast on the GPU against fp32 on the CPU: cosine of the embeddings;
- mining: the C11 miner on synthetic embeddings on the GPU and the CPU: every pair in band,
  same counts, the time of each.

Prints one line per check with PASS/FAIL and exits 1 if any fails.

    python benchmarks/gpu_consistency.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from facecast.faces.cuda_fp32 import cuda_fp32

FAILED: list[str] = []


def check(name: str, ok: bool, detail: str) -> None:
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)
    if not ok:
        FAILED.append(name)


def photos() -> list[np.ndarray]:
    """Real photos from packages plus rendered synthetic demo faces (RGB uint8)."""
    from matplotlib import cbook
    from PIL import Image
    from skimage.data import astronaut

    from facecast.datasets.synthetic.render import render_image
    from facecast.datasets.synthetic.sampling import sample_covariates, sample_identity

    with cbook.get_sample_data("grace_hopper.jpg") as fh:
        hopper = np.asarray(Image.open(fh).convert("RGB"))
    rng = np.random.default_rng(3)
    demo = []
    for _ in range(30):
        traits = sample_identity(rng)
        demo.append(render_image(traits, sample_covariates(rng, traits), 224, rng))
    return [astronaut(), hopper, *demo]


def faces_check() -> None:
    from facecast.faces.detect import FaceDetector

    images = photos()
    out = {}
    for device, bucket in (("cpu", None), ("cuda", None), ("cuda", 1)):
        det = FaceDetector({"device": device, "batch_size": 16})
        if bucket is not None:
            det.bucket = bucket                                   # no shared padded sizes
        with cuda_fp32(device):                                   # as the faces stage runs
            det.detect(images[:2])                                # warm-up
            t = time.perf_counter()
            out[(device, bucket)] = det.detect(images)
        print(f"      faces on {device} (bucket {det.bucket}): {len(images)} images in "
              f"{time.perf_counter() - t:.2f} s", flush=True)
    ref = out[("cpu", None)]
    for key in (("cuda", 1), ("cuda", None)):
        got = out[key]
        agree = sum(len(a) == len(b) for a, b in zip(ref, got, strict=True))
        rel, px = [], []                   # best face: landmark shift / inter-eye distance
        for a, b in zip(ref, got, strict=True):
            if len(a) and len(b):
                eyes = float(np.linalg.norm(a.landmarks[0][0] - a.landmarks[0][1]))
                dist = np.linalg.norm(a.landmarks[0] - b.landmarks[0], axis=1)
                px.extend(dist.tolist())
                rel.append(float(dist.max()) / eyes)
        worst = max(rel, default=0.0)
        q = np.percentile(px, [50, 90, 100]) if px else np.full(3, np.nan)
        check(f"faces cuda {'unpadded' if key[1] == 1 else 'padded to shared sizes'}",
              agree >= len(images) - 1 and worst < 0.05,
              f"detection agrees on {agree}/{len(images)} images; landmark distance GPU vs "
              f"CPU over {len(px)} points: median {q[0]:.3f} px, p90 {q[1]:.3f} px, max "
              f"{q[2]:.3f} px; worst face {worst:.1%} of its inter-eye distance (goal < 5%)")


def embed_check() -> None:
    from facecast.embed.iresnet import build_iresnet
    from facecast.embed.registry import build_embedder

    torch.manual_seed(0)
    model = build_iresnet("r50").eval()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "backbone.pth"
        torch.save(model.state_dict(), path)
        crops = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (256, 112, 112, 3),
                                                                    dtype=np.uint8))
        feats = {}
        for device, amp in (("cpu", "none"), ("cuda", "none"), ("cuda", "fp16")):
            emb = build_embedder("r50", {"backend": "iresnet", "arch": "r50",
                                         "weights": str(path)}, device=device, amp=amp)
            with cuda_fp32(device, benchmark=amp != "none"):       # as embed_shard runs it
                emb.embed(crops[:8])
                t = time.perf_counter()
                feats[(device, amp)] = emb.embed(crops)
            print(f"      iresnet r50 {device} {amp}: 256 crops in "
                  f"{time.perf_counter() - t:.3f} s", flush=True)
    ref = feats[("cpu", "none")]
    for key in (("cuda", "none"), ("cuda", "fp16")):
        cos = (ref * feats[key]).sum(1) / (np.linalg.norm(ref, axis=1)
                                           * np.linalg.norm(feats[key], axis=1))
        check(f"embed iresnet {key[0]} {key[1]}", float(cos.min()) > 0.999,
              f"cosine to CPU fp32 >= {cos.min():.5f}")


def mining_check() -> None:
    from facecast.analysis.mining import MiningConfig, mine_pairs
    from facecast.analysis.simulate import synthetic_embeddings

    emb, ident = synthetic_embeddings(20_000, 10, 512, seed=0)
    names = np.arange(len(emb)).astype(str)
    ident = pd.Categorical(ident.astype(str))
    res = {}
    for device in ("cpu", "cuda"):
        cfg = MiningConfig(band=(0.15, 0.30), device=device)
        with cuda_fp32(device):                                   # as the mining stage runs
            mine_pairs(emb, ident, names, cfg, seed=1)            # warm-up
            t = time.perf_counter()
            res[device] = mine_pairs(emb, ident, names, cfg, seed=[7, 1])
        print(f"      mining on {device}: {len(res[device].pairs):,} pairs from 200,000 "
              f"images in {time.perf_counter() - t:.3f} s", flush=True)
    ok = all(len(r.pairs) == 11_000 and r.pairs.ref_score.between(0.15, 0.30).all()
             for r in res.values())
    same = (res["cpu"].pairs[["image_a", "image_b"]].values
            == res["cuda"].pairs[["image_a", "image_b"]].values).all(1).mean()
    check("mining", ok, f"11,000 in-band pairs on both; {same:.1%} of the pairs identical "
                        "(scores near the band edges may round differently)")


def main() -> None:
    if not torch.cuda.is_available():
        print("no CUDA device here: nothing to compare (run this on a GPU machine)")
        return
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for fn in (faces_check, embed_check, mining_check):
        try:
            fn()
        except Exception as exc:  # report every check, then fail
            check(fn.__name__, False, f"{type(exc).__name__}: {exc}")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
