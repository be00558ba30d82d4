"""Speed of the FairFace 2020 bias metric: our grouped rank AUC vs a per-cell sklearn loop.

1M scored pairs, 4 protected groups, ~1,500 legitimate combinations (6,000 cells per sign).
Ours: :func:`facecast.fairness.bias.fairface_bias` (sort once, searchsorted, bincount).
Naive: one ``sklearn.metrics.roc_auc_score`` call per (sign, group, combination) cell on
the cell's pairs plus ALL pairs of the other label. The naive loop is timed on a random
sample of cells and extrapolated to all cells (running it in full takes many minutes);
its AUCs are checked against ours on the sampled cells.

Run: .venv/bin/python benchmarks/bias_metric.py [--pairs 1000000] [--combos 1500]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

from facecast.fairness.bias import fairface_bias
from facecast.fairness.bootstrap import bootstrap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--combos", type=int, default=1500)
    ap.add_argument("--naive-cells", type=int, default=60, help="cells timed for the naive loop")
    ap.add_argument("--boot", type=int, default=16,
                    help="also time this many identity-clustered bootstrap replicates (0 = off)")
    ap.add_argument("--identities", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    n = args.pairs
    labels = rng.integers(0, 2, n).astype(bool)
    group = rng.integers(0, args.groups, n)
    combo = rng.integers(0, args.combos, n)
    scores = np.where(labels, rng.normal(0.5 - 0.05 * group, 0.15), rng.normal(0, 0.1, n))
    scores = np.round(scores, 4)  # ties, as real scores saved with finite precision have
    gnames = np.array([f"g{i}" for i in range(args.groups)], dtype=object)
    cnames = np.array([f"c{i:04d}" for i in range(args.combos)], dtype=object)
    ones = np.ones(n, bool)

    t0 = time.perf_counter()
    res = fairface_bias(scores, labels, gnames[group], cnames[combo], ones, ones, min_pairs=1)
    ours = time.perf_counter() - t0
    n_cells = len(res.cells)
    print(f"pairs {n:,}, groups {args.groups}, combinations {args.combos}, "
          f"cells (both signs) {n_cells:,}")
    print(f"ours : {ours:8.2f} s  (Bias+ {res.bias_pos:.4f}, Bias- {res.bias_neg:.4f}, "
          f"accuracy {res.accuracy:.4f})")

    cells = res.cells.sample(n=min(args.naive_cells, n_cells), random_state=args.seed)
    t0 = time.perf_counter()
    worst = 0.0
    for row in cells.itertuples(index=False):
        g = int(row.group[1:])
        c = int(row.combo[1:])
        in_cell = (group == g) & (combo == c)
        if row.sign == "+":
            m = (in_cell & labels) | ~labels
        else:
            m = labels | (in_cell & ~labels)
        auc = roc_auc_score(labels[m], scores[m])
        worst = max(worst, abs(auc - row.auc))
    naive_sample = time.perf_counter() - t0
    naive = naive_sample / len(cells) * n_cells
    print(f"naive: {naive:8.2f} s  (extrapolated from {len(cells)} cells in "
          f"{naive_sample:.2f} s; max |AUC difference| {worst:.2e})")
    print(f"speed-up: {naive / ours:.0f}x  (goal: ours < 10 s, >= 20x)")
    if args.boot:
        ids = rng.integers(0, args.identities, (n, 2))
        ids[labels, 1] = ids[labels, 0]
        ann = pd.DataFrame({
            "score": scores, "label": labels.astype(int), "group": gnames[group],
            "combo": cnames[combo], "in_cells": True, "in_reference": True, "status": "ok",
            "identity_a": ids[:, 0].astype(str), "identity_b": ids[:, 1].astype(str)})
        t0 = time.perf_counter()
        bootstrap(ann, n_boot=args.boot, seed=args.seed, targets=[1e-3, 1e-4], min_pairs=1)
        dt = time.perf_counter() - t0
        print(f"bootstrap: {args.boot} replicates (+ point estimate) of TAR@FMR, accuracy, "
              f"Bias+/-, FDR, GARBE in {dt:.1f} s ({dt / (args.boot + 1):.2f} s each)")


if __name__ == "__main__":
    main()
