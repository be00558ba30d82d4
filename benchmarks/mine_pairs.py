"""Benchmark C11 hard-pair mining: vectorised miner vs a naive per-pair loop.

Synthetic embeddings (default 1M images, 512-D, 100k identities; impostor cosine ~N(0, 0.08),
genuine ~0.47 +/- 0.13, like a trained model) are cut into 11 benchmark subsets (each a
random ``--subset-fraction`` of the identities, as a top/bottom-20 % CAST filter would give).
Each benchmark is mined to 10 folds x (500 + 500) + val = 11,000 pairs in the band
[0.15, 0.30]. The naive loop (draw a random pair, score it with one dot product, keep it if
in band and new) runs on one subset until ``--naive-pairs`` pairs are found; its time is
extrapolated to the same 121,000 pairs. Prints both times and the ratio.

    .venv/bin/python benchmarks/mine_pairs.py            # full size (~3 GB RAM)
    .venv/bin/python benchmarks/mine_pairs.py --images 200000 --identities 20000
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np
import pandas as pd

from facecast.analysis.mining import MiningConfig, mine_pairs
from facecast.analysis.simulate import synthetic_embeddings


def naive_index(ident: np.ndarray) -> dict[int, np.ndarray]:
    """The naive loop's set-up, once per benchmark: identity -> its images."""
    members: dict[int, np.ndarray] = {}
    order = np.argsort(ident, kind="mergesort")
    starts = np.flatnonzero(np.r_[True, ident[order][1:] != ident[order][:-1]])
    for s, e in zip(starts, np.r_[starts[1:], len(order)], strict=True):
        members[int(ident[order[s]])] = order[s:e]
    return members


def naive_mining(emb: np.ndarray, ident: np.ndarray, members: dict[int, np.ndarray],
                 lo: float, hi: float, n_genuine: int, n_impostor: int, seed: int,
                 cap: int = 7) -> tuple[int, int, int]:
    """The per-pair loop: draw a pair, score it, keep it if in band, new and under the
    image-use cap (what CAST's subset tool does, plus the band). Returns counts."""
    rng = np.random.default_rng(seed)
    keys = np.array(list(members))
    seen: set[tuple[int, int]] = set()
    uses = np.zeros(len(emb), np.int64)
    g = i = tries = 0
    while g < n_genuine:
        tries += 1
        imgs = members[int(keys[rng.integers(len(keys))])]
        if len(imgs) < 2:
            continue
        a, b = rng.choice(imgs, 2, replace=False)
        s = float(emb[a] @ emb[b])
        if lo <= s <= hi and (min(a, b), max(a, b)) not in seen and max(uses[a], uses[b]) < cap:
            seen.add((min(a, b), max(a, b)))
            uses[a] += 1
            uses[b] += 1
            g += 1
    while i < n_impostor:
        tries += 1
        a, b = rng.integers(0, len(emb), 2)
        if ident[a] == ident[b]:
            continue
        s = float(emb[a] @ emb[b])
        if lo <= s <= hi and (min(a, b), max(a, b)) not in seen and max(uses[a], uses[b]) < cap:
            seen.add((min(a, b), max(a, b)))
            uses[a] += 1
            uses[b] += 1
            i += 1
    return g, i, tries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=1_000_000)
    ap.add_argument("--identities", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--benchmarks", type=int, default=11)
    ap.add_argument("--subset-fraction", type=float, default=0.2)
    ap.add_argument("--naive-pairs", type=int, default=2000)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--resident", action="store_true",
                    help="keep the embeddings on the device between benchmarks (as a GPU "
                         "pipeline holding them would); default: each benchmark's subset "
                         "comes from host memory, as the pipeline's mining job reads it")
    ap.add_argument("--genuine-oversample", type=float, default=4.0,
                    help="mining.genuine_oversample (lower: faster, pairs from fewer people)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads (0 = torch's default); on a shared, oversubscribed "
                         "machine 1 avoids OpenMP spin-wait stalls")
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)

    t = time.perf_counter()
    emb, ident = synthetic_embeddings(args.identities, args.images // args.identities, args.dim,
                                      seed=0)
    print(f"synthetic embeddings: {emb.shape[0]:,} x {emb.shape[1]}, "
          f"{args.identities:,} identities ({time.perf_counter() - t:.1f} s)")
    rng = np.random.default_rng(1)
    s = rng.integers(0, len(emb), (200_000, 2))
    s = s[ident[s[:, 0]] != ident[s[:, 1]]]
    imp = np.einsum("ij,ij->i", emb[s[:, 0]], emb[s[:, 1]])
    per = args.images // args.identities
    gen = np.einsum("ij,ij->i", emb[0::per][:100_000], emb[1::per][:100_000])
    print(f"impostor cosine {imp.mean():+.3f} +/- {imp.std():.3f}; genuine {gen.mean():.3f} "
          f"+/- {gen.std():.3f}; in band [0.15, 0.30]: impostor {np.mean((imp >= .15) & (imp <= .3)):.2%}"
          f", genuine {np.mean((gen >= .15) & (gen <= .3)):.2%}")

    cfg = MiningConfig(band=(0.15, 0.30), n_folds=10, n_genuine=500, n_impostor=500,
                       val_fold=True, max_image_uses=7, device=args.device,
                       genuine_oversample=args.genuine_oversample)
    if args.resident:
        import torch

        from facecast.analysis.mining_config import resolve_device

        emb_dev = torch.as_tensor(emb).to(resolve_device(args.device))
    subsets = []
    for _ in range(args.benchmarks):
        ids = rng.permutation(args.identities)[: int(args.identities * args.subset_fraction)]
        subsets.append(np.flatnonzero(np.isin(ident, ids)))
    names = np.arange(len(emb)).astype(str)
    # warm-up, not timed: starts torch's thread pool (and CUDA, on a GPU)
    warm = replace(cfg, on_shortfall="write", n_genuine=5, n_impostor=5)
    mine_pairs(emb[:5000], pd.Categorical(ident[:5000]), names[:5000], warm, seed=0)
    total_pairs, t_mine = 0, 0.0
    for b, rows in enumerate(subsets):
        # identities as the pipeline passes them (read dictionary-encoded from Parquet)
        sub_names = names[rows]
        sub_emb = emb_dev[torch.as_tensor(rows, device=emb_dev.device)] if args.resident \
            else emb[rows]
        sub_ident = pd.Categorical(ident[rows].astype(str))
        t = time.perf_counter()
        res = mine_pairs(sub_emb, sub_ident, sub_names, cfg, seed=[7, b])
        dt = time.perf_counter() - t
        t_mine += dt
        total_pairs += len(res.pairs)
        r = res.report
        print(f"  benchmark {b:2d}: {len(rows):,} images -> {len(res.pairs):,} pairs in {dt:.2f} s "
              f"(impostor acceptance {r['impostor']['acceptance_rate']:.2%}, "
              f"{r['impostor']['candidates_scored']:,} candidates; genuine "
              f"{r['genuine']['in_band']:,}/{r['genuine']['candidates']:,} in band)")
    print(f"vectorised: {args.benchmarks} benchmarks, {total_pairs:,} pairs in {t_mine:.2f} s "
          f"on {res.report['device']}{' (embeddings resident there)' if args.resident else ''}"
          f" (goal < 30 s on 2 CPU cores)")

    rows = subsets[0]
    half = args.naive_pairs // 2
    t = time.perf_counter()
    members = naive_index(ident[rows])
    t_setup = time.perf_counter() - t
    t = time.perf_counter()
    g, i, tries = naive_mining(emb[rows], ident[rows], members, 0.15, 0.30, half, half, seed=3)
    dt = time.perf_counter() - t
    naive_total = args.benchmarks * t_setup + dt / (g + i) * total_pairs
    print(f"naive loop: {g + i} pairs from {tries:,} candidates in {dt:.2f} s "
          f"({dt / (g + i) * 1e3:.3f} ms per pair; set-up {t_setup:.2f} s per benchmark) -> "
          f"{naive_total:.0f} s for {total_pairs:,} pairs (extrapolated)")
    print(f"speed-up: {naive_total / t_mine:.0f}x (goal >= 100x)")


if __name__ == "__main__":
    main()
