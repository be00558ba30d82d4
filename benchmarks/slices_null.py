"""The level of slice discovery under the null that keeps identities together.

dlib's demo scores (tests/data/slices: the demo's fair_pool protocol, real score
structure, errors clustered by identity) with the attributes permuted by whole identities
(:func:`facecast.slices.null.permute_identities`): no attribute carries information about
the errors, so every discovery is false. Each seed runs the demo config's search (FNMR and
FMR in one family, BH at 0.05, every attribute column but the planted group's indicator,
EER threshold) and counts whether anything was discovered; the same search with the
binomial p alone (pairs treated as independent) is counted beside it.

Prints the probability of any discovery with its exact (Clopper-Pearson) 95% interval -
it must stay <= 0.05 - the naive test's, and the time.

Usage: python benchmarks/slices_null.py [--seeds 100] [--columns 'label_*' ...]
       [--policy fmr]  (FMR 1e-3: rare errors, ~18 false matches in 18,000 impostors)
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
from scipy.stats import beta

from facecast.slices.discover import find_slices
from facecast.slices.null import naive_discoveries, permute_identities

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "slices"


def exact_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Clopper-Pearson interval of a proportion k / n."""
    a = (1 - level) / 2
    lo = float(beta.ppf(a, k, n - k + 1)) if k > 0 else 0.0
    hi = float(beta.ppf(1 - a, k + 1, n - k)) if k < n else 1.0
    return lo, hi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--columns", nargs="*", default=[], help="fnmatch patterns")
    parser.add_argument("--policy", choices=["eer", "fmr"], default="eer",
                        help="the threshold: the demo's EER, or FMR 1e-3 (rare errors)")
    args = parser.parse_args()
    pairs = pd.read_parquet(DATA / "dlib_fair_pool.parquet")
    attrs = pd.read_parquet(DATA / "attributes.parquet")
    cfg = {"exclude": ["label_low_contrast_group"], "threshold": {"policy": args.policy},
           "n_boot": 50, "columns": args.columns}
    runs = any_real = any_naive = 0
    tested = false = naive_false = 0
    t0 = time.perf_counter()
    for seed in range(args.seeds):
        res = find_slices(pairs, permute_identities(attrs, seed), cfg, seed=seed)
        n_sig, n_naive = int(res.table["significant"].sum()), naive_discoveries(res)
        runs += 1
        any_real += n_sig > 0
        any_naive += n_naive > 0
        false += n_sig
        naive_false += n_naive
        tested += res.info["tested"]
        if seed % 10 == 9:
            print(f"  {seed + 1} seeds: {any_real} with a discovery "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    lo, hi = exact_interval(any_real, runs)
    nlo, nhi = exact_interval(any_naive, runs)
    print(f"identity-permutation null, dlib demo scores, threshold "
          f"{res.info['threshold']['policy']}, {runs} seeds, FNMR + FMR in one "
          f"family (family ~{res.info['family']:,} slices, {tested / runs:,.0f} tested per "
          f"run), BH at 0.05:")
    print(f"  P(any discovery) = {any_real}/{runs} = {any_real / runs:.3f} "
          f"[{lo:.3f}, {hi:.3f}] (must stay <= 0.05); {false} false discoveries in all")
    print(f"  binomial p alone (pairs independent): {any_naive}/{runs} = "
          f"{any_naive / runs:.3f} [{nlo:.3f}, {nhi:.3f}], {naive_false / runs:.0f} false "
          "discoveries per run")
    print(f"  time: {time.perf_counter() - t0:.0f} s ({(time.perf_counter() - t0) / runs:.1f}"
          " s per seed)")


if __name__ == "__main__":
    main()
