"""Speed and memory of 1:N search: probes x gallery x dim, CMC + FNIR@FPIR.

Blocked score matrix (torch matmul), running top-k per probe and the mate's rank counted
block by block (:func:`facecast.identification.search.search`): the full probe x gallery
matrix is never held. Goal: 10k probes x 100k gallery x 512-D under 20 s and under 2 GB on
2 CPU cores; ``--device cuda`` prints the GPU figure. Quick by default (the goal size;
``--gallery 20000`` for a smoke run).

Run: .venv/bin/python benchmarks/identification.py [--probes 10000] [--gallery 100000]
     [--dim 512] [--device cpu|cuda] [--threads 2] [--precision float32|bfloat16]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import torch

from facecast.identification.metrics import cmc, fnir_at_fpir
from facecast.identification.search import search


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", type=int, default=10_000)
    ap.add_argument("--gallery", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--nonmated", type=float, default=0.2, help="fraction of non-mated probes")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--probe-block", type=int, default=2048)
    ap.add_argument("--gallery-block", type=int, default=16384)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    gal = rng.standard_normal((args.gallery, args.dim), dtype=np.float32)
    gal /= np.linalg.norm(gal, axis=1, keepdims=True)
    n_nm = int(args.probes * args.nonmated)
    mate = np.full(args.probes, -1, dtype=np.int64)
    mate[n_nm:] = rng.integers(0, args.gallery, args.probes - n_nm)
    probes = rng.standard_normal((args.probes, args.dim), dtype=np.float32)
    probes /= np.linalg.norm(probes, axis=1, keepdims=True)
    m = mate >= 0
    probes[m] = 0.6 * gal[mate[m]] + 0.8 * probes[m]  # cosine ~0.6 with the mate
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if args.device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
        search(probes[:8], gal[:8], mate[:8] * 0, k=2, device=args.device)  # warm-up
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    res = search(probes, gal, mate, k=20, probe_block=args.probe_block,
                 gallery_block=args.gallery_block, device=args.device,
                 precision=args.precision)
    rates = cmc(res.mate_rank, [1, 5, 10, 20])
    fn = fnir_at_fpir(res.mate_rank, res.mate_score, res.top_score[~m, 0], [0.01, 0.1])
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"probes {args.probes:,} ({n_nm:,} non-mated), gallery {args.gallery:,}, "
          f"dim {args.dim}, device {args.device}, threads {args.threads}, "
          f"precision {args.precision}")
    print(f"search + CMC + FNIR@FPIR: {dt:.2f} s; peak RSS {rss:.0f} MiB "
          f"(data alone {base:.0f} MiB)")
    if args.device.startswith("cuda"):
        print(f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
    print("CMC rank 1/5/10/20:", " ".join(f"{r:.4f}" for r in rates))
    print(fn[["target_fpir", "threshold", "fpir", "fnir", "text"]].to_string(index=False))
    goal = args.probes >= 10_000 and args.gallery >= 100_000 and args.dim >= 512
    print("goal: < 20 s and < 2 GB for 10k x 100k x 512 on 2 cores:",
          ("MET" if dt < 20 and rss < 2048 else "MISSED") if goal else "(not the goal size)")


if __name__ == "__main__":
    main()
