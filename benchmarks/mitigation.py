"""Speed and memory of the mitigation stage's methods (facecast.mitigation) at scale.

A synthetic world: 512-d embeddings (identity centres plus image noise, four protected
groups with their own offsets and noise levels), 20,000 calibration images (2,000
identities x 10) with every genuine pair and random impostor pairs, and 1,000,000
evaluated pairs among 40,000 other images (every genuine pair of 4,000 identities plus
random impostors); a second model's scores for the fusion. Every method learns on the
calibration pairs and scores the evaluated pairs, exactly as the stage runs them
(:data:`facecast.mitigation.methods.PARTS`, the paper defaults: cohort 1,000 images, top
200, 100 clusters, FMR 1e-3). Prints the seconds of each step, the total and the peak
memory; then the table's bootstrap at this size (``--n-boot`` replicates: one point
estimate of every figure for every method, and the seconds per replicate).

Usage: python benchmarks/mitigation.py              (1,000,000 evaluated pairs)
       python benchmarks/mitigation.py --quick      (100,000 evaluated pairs)
Target (issue 35): every method together < 120 s on 2 CPU cores, < 4 GB.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np
import pandas as pd

from facecast.mitigation.cohort import l2_normalise
from facecast.mitigation.methods import PARTS, Images, Settings, Side, finish, start
from facecast.mitigation.metrics import MethodState
from facecast.mitigation.table import bootstrap_methods
from facecast.mitigation.targets import METHODS

DIM = 512


def _images(n_ids: int, per: int, rng: np.random.Generator, first: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit embeddings, identity codes and group codes of ``n_ids`` x ``per`` images."""
    group = rng.integers(0, 4, n_ids)
    centre = rng.normal(size=(n_ids, DIM)).astype(np.float32)
    centre[:, :4] += 3.0 * np.eye(4, dtype=np.float32)[group]
    noise = (0.9 + 0.15 * group).astype(np.float32)
    ident = np.repeat(np.arange(n_ids), per)
    emb = centre[ident] + rng.normal(size=(len(ident), DIM)).astype(np.float32) * \
        noise[ident, None]
    return l2_normalise(emb), ident + first, group[ident]


def _pairs(ident: np.ndarray, offset: int, per: int, n_total: int,
           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Every genuine pair, then random impostor pairs up to ``n_total`` (image indices)."""
    n_img = len(ident)
    a, b = np.triu_indices(per, 1)
    base = np.arange(n_img // per)[:, None] * per
    gen = np.stack([(base + a).ravel(), (base + b).ravel()], 1)
    n_imp = max(n_total - len(gen), 0)
    ia = rng.integers(0, n_img, n_imp)
    ib = (ia + rng.integers(per, n_img - per, n_imp)) % n_img
    both = np.vstack([gen, np.stack([ia, ib], 1)]) + offset
    label = np.r_[np.ones(len(gen), int), np.zeros(n_imp, int)]
    return both, label


def _side(pairs: np.ndarray, label: np.ndarray, emb: np.ndarray,
          rng: np.random.Generator) -> Side:
    score = np.empty(len(pairs))
    for lo in range(0, len(pairs), 200_000):
        p = pairs[lo:lo + 200_000]
        score[lo:lo + 200_000] = np.einsum("ij,ij->i", emb[p[:, 0]], emb[p[:, 1]])
    other = np.clip(score + rng.normal(0, 0.15, len(score)), -1, 1)
    return Side(pairs[:, 0], pairs[:, 1], score, label, np.column_stack([score, other]))


def world(n_eval: int, seed: int = 0) -> tuple[Images, Side, Side]:
    """The synthetic world of the module docstring (``n_eval`` evaluated pairs)."""
    rng = np.random.default_rng(seed)
    per = 10
    ev_ids = max(50, n_eval // 250)
    e_emb, e_id, e_g = _images(ev_ids, per, rng, 0)
    c_emb, c_id, c_g = _images(2000, per, rng, ev_ids)
    emb = np.vstack([e_emb, c_emb])
    im = Images(np.arange(len(emb)).astype(str), emb, np.r_[e_id, c_id], np.r_[e_g, c_g],
                ["g0", "g1", "g2", "g3"])
    ev_pairs, ev_label = _pairs(e_id, 0, per, n_eval, rng)
    cal_pairs, cal_label = _pairs(c_id - ev_ids, len(e_emb), per, 500_000, rng)
    return im, _side(ev_pairs, ev_label, emb, rng), _side(cal_pairs, cal_label, emb, rng)


def peak_gb() -> float:
    """Peak resident memory of this process, GB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="100,000 evaluated pairs")
    ap.add_argument("--n-boot", type=int, default=16, help="table replicates to time")
    args = ap.parse_args()
    n_eval = 100_000 if args.quick else 1_000_000
    t0 = time.perf_counter()
    im, ev, cal = world(n_eval)
    print(f"world: {len(ev.label):,} evaluated pairs, {len(cal.label):,} calibration pairs, "
          f"{int(np.unique(np.r_[cal.ia, cal.ib]).size):,} calibration images, {DIM}-d "
          f"({time.perf_counter() - t0:.1f} s to build; OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, {os.cpu_count()} CPUs)")
    st = Settings(methods=list(METHODS), fmr=1e-3, cohort_size=1000, top_k=200, clusters=100,
                  seed=0, fusion_models=["a", "b"])
    res, total = start(ev, cal), 0.0
    for what, step in PARTS:
        t = time.perf_counter()
        step(im, ev, cal, st, res)
        dt = time.perf_counter() - t
        total += dt
        print(f"  {what:<52s} {dt:7.1f} s")
    res = finish(res, st)
    print(f"every method together: {total:.1f} s (target < 120 s); peak memory "
          f"{peak_gb():.2f} GB (target < 4 GB)")
    for note in res.notes:
        print(f"  note: {note}")
    t = time.perf_counter()
    group = np.where(im.group[ev.ia] == im.group[ev.ib], im.group[ev.ia], -1)
    ann = pd.DataFrame({"label": ev.label, "group": pd.Series(
        np.where(group >= 0, np.array(im.groups, dtype=object)[np.maximum(group, 0)], None)),
        "combo": "all", "in_cells": group >= 0, "in_reference": True,
        "status": np.where(group >= 0, "ok", "mixed"),
        "eval_fold": (np.arange(len(ev.label)) % 10).astype(str)})
    states = {m: MethodState(ann, res.scores[m], res.probs[m], fars=[1e-3, 1e-4], fmr=1e-3,
                             fairness={}) for m in res.scores}
    prep = time.perf_counter() - t
    t = time.perf_counter()
    ids = im.ident.astype(str)
    bootstrap_methods(states, ids[ev.ia], ids[ev.ib], args.n_boot, seed=3)
    boot = time.perf_counter() - t
    print(f"table: {prep:.1f} s to prepare {len(states)} methods, {boot:.1f} s for the point "
          f"estimates and {args.n_boot} replicates ({boot / max(args.n_boot, 1):.2f} s per "
          f"replicate for all methods); peak memory {peak_gb():.2f} GB")


if __name__ == "__main__":
    main()
