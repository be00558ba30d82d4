"""Speed of the EDC (ISO/IEC 29794-1:2024): quality columns x comparisons, FNM and FM.

Per quality column: one sort of the images' qualities (dense levels), pair quality
min(q_a, q_b) as the min of two levels, a counting sort (bincount) per error type (mated /
non-mated), cumulative sums, stepwise pAUC to the discard limit - no per-step loop
(:func:`facecast.quality.edc.edc_from_levels`, :func:`facecast.quality.edc.pauc`).
Goal: 20 columns x 1M comparisons under 5 s on 2 CPU cores. Quick by default (the full
goal size takes a few seconds); ``--pairs 100000`` for a smoke run.

Run: .venv/bin/python benchmarks/edc.py [--pairs 1000000] [--columns 20] [--images 200000]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from facecast.quality.edc import (
    edc_from_levels,
    errors,
    image_levels,
    pauc,
    theoretical_best,
    threshold_from_fmr,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--columns", type=int, default=20)
    ap.add_argument("--images", type=int, default=200_000)
    ap.add_argument("--limit", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    n = args.pairs
    ia = rng.integers(0, args.images, n)
    ib = rng.integers(0, args.images, n)
    quality = np.round(rng.random((args.columns, args.images)), 3)  # ties, as real measures
    labels = rng.random(n) < 0.5
    scores = np.where(labels, 0.3 + 0.5 * quality[0, ia] * quality[0, ib], 0.0)
    scores = scores + 0.1 * rng.standard_normal(n)
    t0 = time.perf_counter()
    tau = threshold_from_fmr(scores[~labels], 1e-3)
    err = errors(scores, labels, tau)
    results = []
    split = [(ia[labels == m], ib[labels == m], err[labels == m]) for m in (True, False)]
    for c in range(args.columns):
        lv, k = image_levels(quality[c])  # the one sort: images, not comparisons
        for a, b, e in split:              # mated, then non-mated comparisons
            curve = edc_from_levels(np.minimum(lv[a], lv[b]), e, k)  # min(q_a, q_b) level
            area = pauc(curve.discard, curve.error, args.limit)
            results.append(area - theoretical_best(curve.start_error, args.limit))
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"comparisons {n:,}, quality columns {args.columns}, images {args.images:,}")
    print(f"EDC (FNM + FM) + pAUC for all columns: {dt:.2f} s "
          f"({dt / args.columns * 1000:.0f} ms per column), peak RSS {rss:.0f} MiB")
    print(f"column 0 (drives the scores) FNM pAUC - best: {results[0]:.4f}; "
          f"column 1 (noise): {results[2]:.4f}")
    print("goal: < 5 s for 20 columns x 1M comparisons on 2 cores:",
          "MET" if (n >= 1_000_000 and args.columns >= 20 and dt < 5) else
          "(not the goal size)" if n < 1_000_000 or args.columns < 20 else "MISSED")


if __name__ == "__main__":
    main()
