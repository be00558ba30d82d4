"""Speed and memory of slice discovery (facecast.slices) on synthetic scored pairs.

Identities with 40 attribute columns (20 categorical identity traits, 20 continuous
per-image measures), every genuine pair of each identity plus random impostor pairs
(20 % genuine), two planted effects: genuine pairs of identities with ``cat_0 = 1`` and
``cat_1 = 2`` score lower (FNMR), impostor pairs of two images with ``cat_2 = 1`` and
``cat_3 = 0`` score higher (FMR). The default search: FNMR and FMR in one run at one
threshold (FMR 1e-3), depth 2 with SliceLine pruning, the dyadic cluster-robust tests, BH
at 0.05 over one family, findings with their streamed bootstrap intervals. Prints the
time per error type, the slices evaluated / pruned / tested / significant, the findings,
the total time and the peak memory.

Usage: python benchmarks/slices.py            (quick: 100,000 pairs, 200 replicates)
       python benchmarks/slices.py --full     (1,000,000 pairs, 1,000 replicates)
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import pandas as pd

from facecast.slices.discover import find_slices
from facecast.slices.report import p_text


def synthetic(n_pairs: int, n_columns: int = 40, per_id: int = 5, seed: int = 0
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Scored pairs (20 % genuine) and an attribute table; genuine pairs of identities
    with ``cat_0 = 1`` and ``cat_1 = 2`` score lower, impostor pairs of two images with
    ``cat_2 = 1`` and ``cat_3 = 0`` higher."""
    rng = np.random.default_rng(seed)
    n_gen = n_pairs // 5
    pairs_per_id = per_id * (per_id - 1) // 2
    n_ids = max(2, n_gen // pairs_per_id)
    ids = np.repeat(np.arange(n_ids), per_id)
    n_img = len(ids)
    cols: dict[str, np.ndarray] = {"image_id": np.char.add("img", np.arange(n_img).astype(str)),
                                   "identity": ids.astype(str), "status": np.full(n_img, "ok")}
    n_cat = n_columns // 2
    for c in range(n_cat):  # identity-level categorical traits (2..4 values)
        cols[f"cat_{c}"] = rng.integers(0, 2 + c % 3, n_ids)[ids].astype(float)
    for c in range(n_columns - n_cat):  # per-image continuous measures
        cols[f"num_{c}"] = rng.normal(size=n_img)
    attrs = pd.DataFrame(cols)
    ia, ib = np.triu_indices(per_id, 1)
    base = np.arange(n_ids)[:, None] * per_id
    gen = np.stack([(base + ia).ravel(), (base + ib).ravel()], 1)
    n_imp = n_pairs - len(gen)
    a = rng.integers(0, n_img, n_imp)
    b = (a + rng.integers(per_id, n_img - per_id, n_imp)) % n_img  # never the same identity
    pairs_ab = np.vstack([gen, np.stack([a, b], 1)])
    label = np.r_[np.ones(len(gen), int), np.zeros(n_imp, int)]
    score = np.where(label == 1, rng.normal(0.55, 0.12, len(label)),
                     rng.normal(0.1, 0.1, len(label)))
    hard = (cols["cat_0"][pairs_ab[:, 0]] == 1) & (cols["cat_1"][pairs_ab[:, 0]] == 2)
    score[hard & (label == 1)] -= 0.15
    group = (cols["cat_2"] == 1) & (cols["cat_3"] == 0)
    score[group[pairs_ab[:, 0]] & group[pairs_ab[:, 1]] & (label == 0)] += 0.1
    pairs = pd.DataFrame({"image_a": cols["image_id"][pairs_ab[:, 0]],
                          "image_b": cols["image_id"][pairs_ab[:, 1]],
                          "identity_a": ids[pairs_ab[:, 0]].astype(str),
                          "identity_b": ids[pairs_ab[:, 1]].astype(str),
                          "label": label, "score": score})
    return pairs, attrs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="1,000,000 pairs")
    parser.add_argument("--pairs", type=int, default=None)
    parser.add_argument("--n-boot", type=int, default=None)
    args = parser.parse_args()
    n = args.pairs or (1_000_000 if args.full else 100_000)
    n_boot = args.n_boot or (1000 if args.full else 200)
    pairs, attrs = synthetic(n)
    cfg = {"max_depth": 2, "n_boot": n_boot, "threshold": {"policy": "fmr", "value": 1e-3}}
    t0 = time.perf_counter()
    res = find_slices(pairs, attrs, cfg, seed=0)
    dt = time.perf_counter() - t0
    info = res.info
    print(f"pairs {len(pairs):,} ({int(pairs['label'].sum()):,} genuine), images "
          f"{len(attrs):,}, identities {attrs['identity'].nunique():,}, "
          f"{len(info['columns'])} columns, {info['n_predicates']} predicates, "
          f"{n_boot} bootstrap replicates per finding")
    print(f"threshold: {info['threshold']['policy']} t = {info['threshold']['threshold']:.4g}"
          f" {info['threshold']['why']}")
    for etype, c in info["by_error"].items():
        print(f"{etype}: {c['seconds']:.1f} s; {c['n_relevant']:,} relevant pairs "
              f"({info['pair'][etype]}), slices {c['evaluated']:,} evaluated, "
              f"{c['pruned']:,} pruned, {c['tested']:,} tested, {c['significant']:,} "
              f"significant, {c['findings']} findings")
    print(f"one family of {info['family']:,} slices; BH cut-off p <= {info['bh_cutoff']:.3g}")
    for f in res.findings.itertuples(index=False):
        print(f"  {f.error_type} finding {f.finding}: {f.slice}: {f.error_rate:.4g} "
              f"[{f.error_lo:.4g}, {f.error_hi:.4g}] vs {f.rest_rate:.4g} (q = {p_text(f.q)}, "
              f"{f.n_members} member slices)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    print(f"time: {dt:.1f} s (search); peak memory {peak:.2f} GB (whole process)")


if __name__ == "__main__":
    main()
